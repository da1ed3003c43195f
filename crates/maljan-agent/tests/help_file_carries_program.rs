//! End to end, as `maljan analyze` runs it: a Compiled HTML Help file (compiled here by Free
//! Pascal's chmcmd, MALJAN_CHMCMD) carrying a Windows program (compiled here by mingw-w64) is at
//! least suspicious on that fact alone — a help file is a document-like carrier, not an archive
//! (issue 40 item 3) — and the program is analysed as its child. Needs `eval "$(scripts/peers.sh)"`
//! (chmcmd and x86_64-w64-mingw32-gcc): without them the test fails, it does not skip.

use std::{path::PathBuf, process::Command};

use serde_json::Value;

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what} does not run ({e}): run `eval \"$(scripts/peers.sh)\"`")
    });
    assert!(out.status.success(), "{what}: {out:?}");
}

#[test]
fn a_help_file_carrying_a_program_is_suspicious_with_the_program_as_its_child() {
    let chmcmd = PathBuf::from(
        std::env::var_os("MALJAN_CHMCMD")
            .expect("MALJAN_CHMCMD is not set: run `eval \"$(scripts/peers.sh)\"`"),
    );
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("bin")).unwrap();
    std::fs::write(project.join("hello.c"), "int main(void) { return 0; }\n").unwrap();
    run(
        Command::new("x86_64-w64-mingw32-gcc")
            .args(["-O2", "-s", "-o", "bin/setup.exe", "hello.c"])
            .current_dir(&project),
        "x86_64-w64-mingw32-gcc",
    );
    std::fs::write(
        project.join("index.html"),
        "<html><head><title>Help</title></head><body><a href=\"bin/setup.exe\">Install the viewer</a></body></html>",
    )
    .unwrap();
    std::fs::write(
        project.join("help.hhp"),
        "[OPTIONS]\nCompiled file=manual.chm\nDefault topic=index.html\nTitle=Manual\n\n[FILES]\nindex.html\nbin\\setup.exe\n",
    )
    .unwrap();
    run(
        Command::new(&chmcmd).arg("help.hhp").current_dir(&project),
        "chmcmd",
    );
    let sample = project.join("manual.chm");

    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let report = dir.path().join("report.json");
    let out = Command::new(maljan)
        .args(["analyze", "--no-agent", "--format", "json", "--report"])
        .arg(&report)
        .arg(&sample)
        .env("MALJAN_HOME", dir.path().join("home"))
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .output()
        .expect("run maljan analyze");
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let r: Value = serde_json::from_str(&text).unwrap();

    let child = r["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "bin/setup.exe")
        .unwrap_or_else(|| panic!("no program child: {}", r["children"]));
    assert_eq!(child["kind"], "pe", "{child}");
    assert_eq!(child["source"], "chm", "{child}");

    let verdict = &r["verdict"];
    assert!(
        matches!(
            verdict["verdict"].as_str(),
            Some("suspicious" | "malicious")
        ),
        "{}",
        verdict["summary"]
    );
    let carries = verdict["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "carries_executable")
        .unwrap_or_else(|| panic!("{:#}", verdict["facts"]));
    assert_eq!(carries["strong"], true, "{carries}");
    assert!(
        carries.to_string().contains("bin/setup.exe"),
        "the fact names the program: {carries}"
    );
}
