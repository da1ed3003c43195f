//! `maljan analyze --report`: a report into a missing folder is an error that names the folder,
//! which is never created; a report path that cannot be written (a read-only folder, a folder in
//! the report's place) is found before the analysis runs — no job is started — and the error
//! names the user's path, never a temporary file. The same holds for several samples (`--report
//! DIR`, `--index FILE`).

mod common;

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::{evidence::without_write_override, maljan, run};

fn analyze(home: &Path, args: &[&str], read_only: bool) -> Output {
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
    if read_only {
        without_write_override(&mut cmd);
    }
    run(&mut cmd, Duration::from_secs(180))
}

/// The jobs recorded in `home`'s ledger (`maljan jobs list --json`).
fn jobs(home: &Path) -> usize {
    let out = run(
        Command::new(maljan())
            .args(["jobs", "list", "--json"])
            .env("MALJAN_HOME", home)
            .env_remove("MALJAN_CONFIG"),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().len()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether `err` names a temporary file (`.r.json.tmp123`, `.maljan-probe.tmp123`), the test's
/// own temporary folder aside.
fn named_temp(err: &str, tmp: &Path) -> bool {
    err.replace(&tmp.display().to_string(), "").contains(".tmp")
}

/// A sample to analyse: a copy of a real program.
fn sample_in(dir: &Path) -> String {
    let p = dir.join("sample.bin");
    std::fs::copy("/usr/bin/true", &p).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_report_into_a_missing_folder_is_an_error_naming_it_and_the_folder_is_never_made() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = sample_in(tmp.path());
    let missing = tmp.path().join("no/such");
    let report = missing.join("r.md");
    let out = analyze(
        &home,
        &[&sample, "--report", report.to_str().unwrap()],
        false,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("the folder {} does not exist", missing.display())),
        "{err}"
    );
    assert!(!tmp.path().join("no").exists(), "the folder was created");
    assert!(out.stdout.is_empty());
    assert_eq!(jobs(&home), 0, "no job may start: {err}");

    // With several samples, --report names a folder, which must exist too.
    let out = analyze(
        &home,
        &[&sample, &sample, "--report", missing.to_str().unwrap()],
        false,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("does not exist") && err.contains(&missing.display().to_string()));
    assert!(!tmp.path().join("no").exists(), "the folder was created");
    // And so must the index's.
    let index = missing.join("index.json");
    let out = analyze(&home, &[&sample, "--index", index.to_str().unwrap()], false);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!tmp.path().join("no").exists(), "the folder was created");
    assert_eq!(jobs(&home), 0);
}

#[test]
fn an_unwritable_report_path_is_found_before_the_analysis_and_named_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = sample_in(tmp.path());
    let locked = tmp.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let report = locked.join("r.json");
    // A probe: this host must refuse the write, or the test proves nothing.
    let mut touch = Command::new("touch");
    touch.arg(locked.join("probe")).stderr(Stdio::null());
    without_write_override(&mut touch);
    assert!(
        !touch.status().unwrap().success(),
        "a 0555 folder is writable here even without CAP_DAC_OVERRIDE"
    );

    let out = analyze(
        &home,
        &[&sample, "--report", report.to_str().unwrap()],
        true,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot write the report {}", report.display()))
            && err.contains("permission denied"),
        "{err}"
    );
    assert!(
        !named_temp(&err, tmp.path()),
        "a temporary file is named: {err}"
    );
    // Before the analysis: no step ran, no verdict, no job.
    assert!(!err.contains("verdict") && !err.contains("steps"), "{err}");
    assert_eq!(jobs(&home), 0, "the analysis ran first: {err}");

    // Several samples into the read-only folder: refused before any job too.
    let out = analyze(
        &home,
        &[&sample, &sample, "--report", locked.to_str().unwrap()],
        true,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&locked.display().to_string()) && err.contains("permission denied"));
    assert!(!named_temp(&err, tmp.path()), "{err}");
    assert_eq!(jobs(&home), 0, "the analysis ran first: {err}");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_folder_in_the_report_s_place_is_refused_before_the_analysis() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = sample_in(tmp.path());
    let folder = tmp.path().join("r.md");
    std::fs::create_dir(&folder).unwrap();
    let out = analyze(
        &home,
        &[&sample, "--report", folder.to_str().unwrap()],
        false,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write the report {}: it is a folder",
            folder.display()
        )),
        "{err}"
    );
    assert_eq!(jobs(&home), 0);

    // With one sample --report is a file: a folder's path given for several is named.
    let file = tmp.path().join("plain.md");
    std::fs::write(&file, "x").unwrap();
    let out = analyze(
        &home,
        &[&sample, &sample, "--report", file.to_str().unwrap()],
        false,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("names a folder"), "{err}");
}

#[test]
fn a_writable_report_is_written_whole_with_no_temporary_file_left() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let sample = sample_in(tmp.path());
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let report = out_dir.join("r.json");
    let out = analyze(
        &home,
        &[&sample, "--report", report.to_str().unwrap()],
        false,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        report.display().to_string()
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["sample"]["name"], "sample.bin");
    let names: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["r.json"]);
    assert_eq!(jobs(&home), 1);
}
