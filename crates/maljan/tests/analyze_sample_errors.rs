//! `maljan analyze` on a sample it cannot analyse says why in one line: an unreadable file is
//! "permission denied" (not "no sample at"), a missing one "no sample at", an empty one "empty";
//! each exits 1 and writes no report. A bad command line (`--format pdf`, an `--index` that is not
//! md/json/csv/html, `--jobs 0`) exits 2. Among several samples, such a file is listed in the
//! index with its reason while the others are analysed.

mod common;

use std::{
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::{maljan, run};

/// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: what lets root read through permissions.
const READ_OVERRIDES: [libc::c_ulong; 2] = [1, 2];

/// Runs `cmd` with the read overrides dropped from its bounding set, so a 0000 file is
/// unreadable for root too (a no-op for another user, who has none of them).
fn without_read_override(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe and only changes this child's own capability set.
    unsafe {
        cmd.pre_exec(|| {
            if libc::geteuid() == 0 {
                for cap in READ_OVERRIDES {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        });
    }
}

fn analyze(home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(maljan());
    cmd.arg("analyze")
        .arg("--no-agent")
        .args(args)
        .current_dir(home.parent().unwrap())
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .env("MALJAN_LOG", "warn")
        .stdin(Stdio::null());
    without_read_override(&mut cmd);
    run(&mut cmd, Duration::from_secs(180))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The files of `dir` whose names start with `maljan-report`.
fn reports_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("maljan-report")
        })
        .count()
}

#[test]
fn an_unreadable_sample_says_permission_denied() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = tmp.path().join("secret.bin");
    std::fs::copy("/usr/bin/true", &sample).unwrap();
    std::fs::set_permissions(&sample, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cat = Command::new("cat");
    cat.arg(&sample).stdout(Stdio::null()).stderr(Stdio::null());
    without_read_override(&mut cat);
    assert!(
        !cat.status().unwrap().success(),
        "a 0000 file is readable here even without CAP_DAC_READ_SEARCH"
    );

    let out = analyze(&home, &[sample.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot read the sample {}: permission denied",
            sample.display()
        )),
        "{err}"
    );
    assert!(!err.contains("no sample at"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_eq!(reports_in(tmp.path()), 0);

    // In a folder that cannot be listed, the same words.
    let closed = tmp.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::copy("/usr/bin/true", closed.join("inner.bin")).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = analyze(&home, &[closed.join("inner.bin").to_str().unwrap()]);
    let err = stderr(&out);
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("permission denied") && !err.contains("no sample at"),
        "{err}"
    );
}

#[test]
fn a_missing_sample_says_no_sample_at_and_an_empty_one_gets_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let missing = tmp.path().join("gone.exe");
    let out = analyze(&home, &[missing.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!("maljan: no sample at {}", missing.display())
    );

    let empty = tmp.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let out = analyze(&home, &[empty.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "maljan: {} is empty (0 bytes): nothing to analyse",
            empty.display()
        ),
        "one clear line"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(reports_in(tmp.path()), 0);
}

#[test]
fn a_bad_command_line_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = tmp.path().join("s.bin");
    std::fs::copy("/usr/bin/true", &sample).unwrap();
    let s = sample.to_str().unwrap();
    for (args, says) in [
        (vec![s, "--format", "pdf"], "'pdf'"),
        (vec![s, s, "--index", "index.pdf"], "index.pdf"),
        (vec![s, "--index", "index"], "extension"),
        (vec![s, s, "--jobs", "0"], "--jobs"),
        (vec![], "SAMPLE"),
    ] {
        let out = analyze(&home, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(reports_in(tmp.path()), 0, "{args:?}");
    }
}

#[test]
fn among_several_samples_an_unreadable_or_empty_one_is_listed_and_the_others_analysed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = tmp.path().join("samples");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy("/usr/bin/true", dir.join("a.bin")).unwrap();
    std::fs::write(dir.join("b.empty"), b"").unwrap();
    std::fs::copy("/usr/bin/false", dir.join("c.locked")).unwrap();
    std::fs::set_permissions(dir.join("c.locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let index = tmp.path().join("index.json");
    let out = analyze(
        &home,
        &[dir.to_str().unwrap(), "--index", index.to_str().unwrap()],
    );
    let err = stderr(&out);
    // A sample with no report makes the run's status 1; the index is still written.
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    let rows = v["samples"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v:#}");
    assert_eq!(rows[0]["status"], "complete");
    assert_eq!(rows[1]["status"], "not analysed");
    assert!(
        rows[1]["error"]
            .as_str()
            .unwrap()
            .contains("empty (0 bytes)")
    );
    assert_eq!(rows[2]["status"], "not analysed");
    assert!(
        rows[2]["error"]
            .as_str()
            .unwrap()
            .ends_with("c.locked: permission denied"),
        "{v:#}"
    );
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(reports_in(tmp.path()), 1);
}
