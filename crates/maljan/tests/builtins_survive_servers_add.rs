//! The built-in servers cannot be broken by configuration, and `maljan analyze` is a job like any
//! other: after `maljan servers add echo …` in a fresh home, config.toml holds only what the user
//! added, the built-in analysis server still reaches a sample outside the working directory (it
//! failed with path_outside_roots before), the evidence folder — read-only here — is never
//! written to, `--keep-artifacts DIR` keeps each extracted child named by its sha256, and
//! `maljan jobs list` shows the job.

mod common;

use std::{
    io::Write,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::maljan;
use sha2::Digest;

fn run_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(maljan())
        .args(args)
        .current_dir(cwd)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .env_remove("MALJAN_LLM_MODEL")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            all.push(p);
        }
    }
    all.sort();
    all
}

/// A zip holding one text member.
fn zip_with_member(member: &[u8]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.start_file("invoice.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    w.write_all(member).unwrap();
    w.finish().unwrap().into_inner()
}

#[test]
fn builtins_survive_servers_add_and_the_evidence_is_never_written_to() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, cwd, evidence) = (
        tmp.path().join("home"),
        tmp.path().join("cwd"),
        tmp.path().join("evidence"),
    );
    for d in [&home, &cwd, &evidence] {
        std::fs::create_dir_all(d).unwrap();
    }

    let echo = maljan_testkit::bin_path("fixture-echo");
    ok(
        &run_in(
            &home,
            &cwd,
            &[
                "servers",
                "add",
                "echo",
                "--command",
                echo.to_str().unwrap(),
            ],
        ),
        "servers add",
    );
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains("[servers.echo]"), "{config}");
    for builtin in ["[servers.analysis]", "[servers.files]"] {
        assert!(!config.contains(builtin), "{builtin} written: {config}");
    }
    let list = ok(&run_in(&home, &cwd, &["servers", "list"]), "servers list");
    assert!(
        list.contains("analysis") && list.contains("files") && list.contains("echo"),
        "{list}"
    );

    // The evidence: a zip carrying a member, in a folder nobody may write to.
    let member = b"Invoice 2291: pay to the account in the attached form by Friday.\n".repeat(20);
    let member_sha = hex::encode(sha2::Sha256::digest(&member));
    std::fs::write(evidence.join("parcel.zip"), zip_with_member(&member)).unwrap();
    std::fs::set_permissions(&evidence, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = listing(&evidence);

    let kept = tmp.path().join("kept");
    let report = cwd.join("r.json");
    let sample = evidence.join("parcel.zip");
    let out = run_in(
        &home,
        &cwd,
        &[
            "analyze",
            sample.to_str().unwrap(),
            "--servers",
            "analysis",
            "--no-agent",
            "--report",
            report.to_str().unwrap(),
            "--keep-artifacts",
            kept.to_str().unwrap(),
        ],
    );
    std::fs::set_permissions(&evidence, std::fs::Permissions::from_mode(0o755)).unwrap();
    ok(&out, "analyze after servers add");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["status"], "complete", "{}", r["degradations"]);
    assert!(r["degradations"].as_array().unwrap().is_empty());
    let text = r.to_string();
    assert!(!text.contains("path_outside_roots"), "{text}");
    assert_eq!(
        r["sample"]["path"],
        sample.to_str().unwrap(),
        "the report names the evidence, not the job's copy"
    );
    assert!(
        !r["children"].as_array().unwrap().is_empty(),
        "the member was analysed: {}",
        r["children"]
    );

    assert_eq!(
        listing(&evidence),
        before,
        "the evidence folder was written to"
    );
    assert!(
        kept.join(&member_sha).is_file(),
        "the member kept by sha256 in {}: {:?}",
        kept.display(),
        listing(&kept)
    );
    // The job's private directory is gone.
    let work: Vec<_> = std::fs::read_dir(home.join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(work.is_empty(), "left in the work directory: {work:?}");

    // The run is a queue job like a submitted one.
    let jobs: serde_json::Value = serde_json::from_str(&ok(
        &run_in(&home, &cwd, &["jobs", "list", "--json"]),
        "jobs list",
    ))
    .unwrap();
    let job = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == r["job_id"])
        .unwrap_or_else(|| panic!("{} not listed: {jobs}", r["job_id"]));
    assert_eq!(job["state"], "complete", "{job}");
    assert_eq!(job["sample_name"], "parcel.zip");

    // Removing a built-in turns it off (it would come back otherwise), and says so.
    let said = ok(
        &run_in(&home, &cwd, &["servers", "remove", "analysis"]),
        "servers remove analysis",
    );
    assert!(said.contains("disabled"), "{said}");
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(
        config.contains("[servers.analysis]") && config.contains("enabled = false"),
        "{config}"
    );
}
