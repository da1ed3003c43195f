//! Issue 41 item 8: the exit status is what `maljan --help` says, for every command — 0 done,
//! 1 the command could not do its work (with `maljan: …` on stderr), 2 a bad command line (an
//! unknown command, a missing argument, an invalid value: clap's message, before
//! anything runs or is written).

use std::{path::Path, process::Command};

const BIN: &str = env!("CARGO_BIN_EXE_maljan");

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn maljan(home: &Path, args: &[&str]) -> Ran {
    let out = Command::new(BIN)
        .args(args)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_DATABASE_URL")
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .current_dir(home)
        .output()
        .expect("maljan runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn help_documents_the_exit_statuses() {
    let home = tempfile::tempdir().unwrap();
    for flag in ["--help", "-h"] {
        let r = maljan(home.path(), &[flag]);
        assert_eq!(r.code, Some(0), "{flag}: {}", r.stderr);
        for line in [
            "Exit status:",
            "0  done",
            "1  the command could not do its work",
            "2  bad command line",
            "3  `llm test`",
        ] {
            assert!(
                r.stdout.contains(line),
                "{flag} says {line:?}:\n{}",
                r.stdout
            );
        }
    }
    let r = maljan(home.path(), &["--version"]);
    assert_eq!(r.code, Some(0));
}

#[test]
fn a_bad_command_line_is_status_2_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let bad: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &[
            "servers",
            "add",
            "lab",
            "--transport",
            "ftp",
            "--command",
            "x",
        ],
        &["servers", "add", "Bad Name", "--command", "x"],
        &[
            "servers",
            "add",
            "lab",
            "--command",
            "x",
            "--env",
            "NOEQUALS",
        ],
        &["servers", "test"],
        &["call", "files", "FA_list_dir", "--args", "[1]"],
        &["call", "files", "FA_list_dir", "--args", "{"],
        &["jobs", "list", "--status", "done"],
        &["jobs", "show"],
        &["ledger", "--limit", "-1"],
        &["ledger", "--jobs", "--job", "x"],
        &["console", "token", "--scope", "root"],
        &["serve", "nothing"],
        &["worker", "--concurrency", "many"],
    ];
    for args in bad {
        let r = maljan(home.path(), args);
        assert_eq!(
            r.code,
            Some(2),
            "maljan {args:?} is a bad command line:\n{}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stderr.starts_with("error: ") || r.stderr.contains("Usage:"),
            "maljan {args:?} says what is wrong (clap's error, or the usage):\n{}",
            r.stderr
        );
        assert!(
            !r.stderr.starts_with("maljan: "),
            "not a runtime error: {}",
            r.stderr
        );
    }
    // Nothing ran: no config, no ledger, no samples in the data directory.
    let left: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "a bad command line wrote {left:?}");
}

#[test]
fn an_error_while_running_is_status_1_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-such-sample.bin");
    let failing: &[(&[&str], &str)] = &[
        (&["servers", "test", "nope"], "no server named 'nope'"),
        (&["servers", "remove", "nope"], "no server named 'nope'"),
        (&["call", "nope", "echo"], "nope"),
        (&["jobs", "show", "job_nope"], "no queued job job_nope"),
        (&["jobs", "cancel", "job_nope"], "no queued job job_nope"),
        (&["ledger", "--job", "job_nope"], "no job 'job_nope'"),
        (
            &["submit", missing.to_str().unwrap()],
            "cannot read the sample",
        ),
    ];
    for (args, says) in failing {
        let r = maljan(home.path(), args);
        assert_eq!(
            r.code,
            Some(1),
            "maljan {args:?} fails while running:\n{}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stderr.contains("maljan: ") && r.stderr.contains(says),
            "maljan {args:?} says why ({says}):\n{}",
            r.stderr
        );
    }
}

#[test]
fn a_command_that_does_its_work_is_status_0() {
    let home = tempfile::tempdir().unwrap();
    let sample = home.path().join("sample.txt");
    std::fs::write(&sample, "hello").unwrap();
    for args in [
        vec!["servers", "list"],
        vec!["ledger"],
        vec!["submit", sample.to_str().unwrap()],
        vec!["jobs", "list"],
        vec!["jobs", "list", "--status", "queued"],
        vec!["ledger", "--jobs"],
        vec!["tools", "files"],
    ] {
        let r = maljan(home.path(), &args);
        assert_eq!(
            r.code,
            Some(0),
            "maljan {args:?}:\n{}{}",
            r.stdout,
            r.stderr
        );
    }
    let r = maljan(home.path(), &["jobs", "list", "--status", "queued"]);
    assert!(r.stdout.contains("sample.txt"), "{}", r.stdout);
}
