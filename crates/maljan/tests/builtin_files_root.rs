//! With no config file, the built-in files server reaches only maljan's own work directory
//! (`<data dir>/work`, 0700): not the directory the command runs in, not the temp dir.
//! `maljan analyze` narrows it to the run's own directory, removed when the run leaves it empty.

mod common;

use std::{os::unix::fs::PermissionsExt, path::Path, process::Command};

use common::maljan;

/// `maljan call files TOOL --args ARGS --json` with a fresh home, run from `cwd`.
fn call_files(home: &Path, cwd: &Path, tool: &str, args: serde_json::Value) -> serde_json::Value {
    let out = Command::new(maljan())
        .args(["call", "files", tool, "--json", "--args", &args.to_string()])
        .current_dir(cwd)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not a call record ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn the_default_files_root_is_the_work_directory_and_nothing_broader() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let cwd = scratch.path().join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("secret.txt"), b"not for the model").unwrap();

    // The current directory and the temp dir are outside its roots.
    for outside in [cwd.join("secret.txt"), std::env::temp_dir()] {
        let record = call_files(
            &home,
            &cwd,
            "FA_file_checksum",
            serde_json::json!({"path": outside}),
        );
        assert_eq!(
            record["error"]["code"],
            "path_outside_roots",
            "{}: {record}",
            outside.display()
        );
    }
    // The work directory is its root, and private.
    let work = home.join("work");
    std::fs::write(work.join("inside.txt"), b"ok").unwrap();
    let record = call_files(
        &home,
        &cwd,
        "FA_file_checksum",
        serde_json::json!({"path": work.join("inside.txt")}),
    );
    assert_eq!(record["ok"], true, "{record}");
    let mode = std::fs::metadata(&work).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn analyze_gives_the_files_server_a_directory_of_its_own_and_removes_it_empty() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let sample = scratch.path().join("sample.txt");
    std::fs::write(&sample, b"just text\n").unwrap();
    let out = Command::new(maljan())
        .args(["analyze", sample.to_str().unwrap(), "--report"])
        .arg(scratch.path().join("report.md"))
        .current_dir(scratch.path())
        .env("MALJAN_HOME", &home)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(home.join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the run's directory was left: {left:?}");
}
