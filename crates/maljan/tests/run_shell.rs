//! FA_run_shell over a real server: hidden unless the operator names it, never under
//! --read-only, argv only with an operator-allowed environment, cwd inside the roots, a
//! timeout that kills the program; and FA_progress_list / _cancel on a long call.

mod common;

use std::time::{Duration, Instant};

use common::session::Session;
use serde_json::json;

fn root() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn run_shell_is_opt_in_and_never_read_only() {
    let dir = root();
    let r = dir.path().to_str().unwrap();
    let mut plain = Session::start(&["--root", r], &[]);
    assert!(!plain.tool_names().iter().any(|n| n == "FA_run_shell"));
    assert!(plain.tool_names().iter().any(|n| n == "FA_list_dir"));
    let refused = plain.call("FA_run_shell", json!({"argv": ["true"]}));
    assert!(refused.is_error, "{}", refused.value);
    // Nor through an action list.
    let nested = plain.call(
        "FA_execute_action",
        json!({"action_list": [["FA_run_shell", {"argv": ["true"]}]]}),
    );
    assert!(
        !nested.value.to_string().contains("\"returncode\""),
        "{}",
        nested.value
    );

    let mut read_only = Session::start(
        &[
            "--root",
            r,
            "--read-only",
            "--allowed-actions",
            "FA_run_shell,FA_list_dir",
        ],
        &[],
    );
    assert!(!read_only.tool_names().iter().any(|n| n == "FA_run_shell"));
    assert!(
        read_only
            .call("FA_run_shell", json!({"argv": ["true"]}))
            .is_error
    );
}

#[test]
fn run_shell_runs_argv_with_the_allowed_environment_only() {
    let dir = root();
    let r = dir.path().to_str().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut s = Session::start(
        &[
            "--root",
            r,
            "--allowed-actions",
            "FA_run_shell",
            "--shell-env",
            "MALJAN_T_ALLOWED",
        ],
        &[("MALJAN_T_ALLOWED", "yes"), ("MALJAN_T_HIDDEN", "leak")],
    );
    assert_eq!(s.tool_names(), vec!["FA_run_shell", "capabilities"]);
    let out = s.ok(
        "FA_run_shell",
        json!({"argv": ["sh", "-c", "pwd; env | sort; echo 'a;b' >&2", "ignored"],
               "cwd": dir.path().join("sub").to_str().unwrap()}),
    );
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.contains("/sub\n"), "{stdout}");
    assert!(
        stdout.contains("MALJAN_T_ALLOWED=yes") && stdout.contains("PATH="),
        "{stdout}"
    );
    assert!(
        !stdout.contains("MALJAN_T_HIDDEN") && !stdout.contains("HOME="),
        "{stdout}"
    );
    assert_eq!(out["stderr"], "a;b\n");
    assert_eq!(out["returncode"], 0);

    // A shell string is one argv element: the program "echo hi; id" does not exist.
    let one = s.call("FA_run_shell", json!({"argv": ["echo hi; id"]}));
    assert!(
        one.is_error && one.value.to_string().contains("not found"),
        "{}",
        one.value
    );
    // Setting a variable the operator did not allow is refused.
    let env = s.call(
        "FA_run_shell",
        json!({"argv": ["true"], "env": {"LD_PRELOAD": "x"}}),
    );
    assert!(
        env.is_error && env.value.to_string().contains("LD_PRELOAD"),
        "{}",
        env.value
    );
    let set = s.ok(
        "FA_run_shell",
        json!({"argv": ["sh", "-c", "echo $MALJAN_T_ALLOWED"], "env": {"MALJAN_T_ALLOWED": "set"}}),
    );
    assert_eq!(set["stdout"], "set\n");
    // cwd outside the roots.
    let outside = s.call("FA_run_shell", json!({"argv": ["true"], "cwd": "/etc"}));
    assert!(outside.is_error, "{}", outside.value);
    assert_eq!(outside.value["error"]["code"], "path_outside_roots");
    // check: a non-zero exit fails, unless check is false.
    let failed = s.call("FA_run_shell", json!({"argv": ["sh", "-c", "exit 3"]}));
    assert!(
        failed.is_error && failed.value.to_string().contains("exit 3"),
        "{}",
        failed.value
    );
    let unchecked = s.ok(
        "FA_run_shell",
        json!({"argv": ["sh", "-c", "exit 3"], "check": false}),
    );
    assert_eq!(unchecked["returncode"], 3);
    // Output is bounded.
    let big = s.ok(
        "FA_run_shell",
        json!({"argv": ["head", "-c", "3000000", "/dev/zero"]}),
    );
    assert_eq!(big["stdout"].as_str().unwrap().len(), 1 << 20);
    assert_eq!(big["truncated"], true);
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn wait_gone(pidfile: &std::path::Path) {
    let pid: i32 = std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while alive(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the program's child {pid} outlived its call");
}

#[test]
fn a_timeout_or_a_cancel_kills_the_whole_process_group() {
    let dir = root();
    let r = dir.path().to_str().unwrap();
    let mut s = Session::start(
        &[
            "--root",
            r,
            "--allowed-actions",
            "FA_run_shell,FA_progress_list,FA_progress_cancel,FA_progress_clear",
        ],
        &[],
    );
    // The program starts a grandchild and records its pid; the timeout must kill both.
    let script = "sleep 300 & echo $! > grandchild.pid; wait";
    let t = s.call(
        "FA_run_shell",
        json!({"argv": ["sh", "-c", script], "timeout": 1}),
    );
    assert!(t.is_error, "{}", t.value);
    assert_eq!(t.value["error"]["code"], "timeout");
    wait_gone(&dir.path().join("grandchild.pid"));

    // A long call is listed while it runs, and FA_progress_cancel stops it.
    std::fs::remove_file(dir.path().join("grandchild.pid")).unwrap();
    let long = s.send(
        "FA_run_shell",
        json!({"argv": ["sh", "-c", script], "timeout": 300}),
    );
    let name = loop {
        let list = s.ok("FA_progress_list", json!({}));
        let running = list
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["tool"] == "FA_run_shell" && e["status"] == "running")
            .cloned();
        if let Some(e) = running
            && dir.path().join("grandchild.pid").exists()
        {
            break e["name"].as_str().unwrap().to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(s.ok("FA_progress_cancel", json!({"name": name})), true);
    let cancelled = s.wait(long);
    assert!(cancelled.is_error, "{}", cancelled.value);
    assert!(
        cancelled.value.to_string().contains("cancelled"),
        "{}",
        cancelled.value
    );
    wait_gone(&dir.path().join("grandchild.pid"));
    let list = s.ok("FA_progress_list", json!({}));
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name.as_str())
        .cloned()
        .expect("kept after it ended");
    assert_eq!(entry["status"], "cancelled");
    assert!(entry["finished_at"].is_number());
    assert_eq!(
        s.ok("FA_progress_cancel", json!({"name": name})),
        false,
        "not running any more"
    );
    assert!(s.ok("FA_progress_clear", json!({})).as_u64().unwrap() >= 1);
    assert!(
        !s.ok("FA_progress_list", json!({}))
            .to_string()
            .contains(&name)
    );
}
