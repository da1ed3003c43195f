//! End to end, as `maljan analyze` runs it: a UPX-packed malicious-like program (the corpus's
//! low-level keylogger, packed with UPX) shows only the stub's imports, but its unpacked image is
//! analysed as a child ("unpacked from" it), whose real imports and code give the keylogging fact,
//! and that fact reaches the packed program's verdict through the child. Needs MALJAN_CORPUS and
//! MALJAN_UPX (`eval "$(scripts/peers.sh)"`): without them the test fails, it does not skip.

use std::{path::PathBuf, process::Command};

use serde_json::Value;

#[test]
fn a_packed_keylogger_is_suspicious_through_its_unpacked_image() {
    let corpus = PathBuf::from(
        std::env::var_os("MALJAN_CORPUS")
            .expect("MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"`"),
    );
    let upx = PathBuf::from(
        std::env::var_os("MALJAN_UPX")
            .expect("MALJAN_UPX is not set: run `eval \"$(scripts/peers.sh)\"`"),
    );
    let sample = corpus.join("files/malicious/upx/keylogger_ll-upx.exe");
    assert!(sample.is_file(), "{} is missing", sample.display());
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    // The analysis server gets PATH from maljan (not MALJAN_UPX): upx's directory goes in front.
    let path = std::env::join_paths(std::iter::once(upx.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = Command::new(maljan)
        .args(["analyze", "--no-agent", "--format", "json", "--report"])
        .arg(&report)
        .arg(&sample)
        .env("MALJAN_HOME", dir.path().join("home"))
        .env("PATH", path)
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
        .find(|c| c["source"] == "unpacked")
        .unwrap_or_else(|| panic!("no unpacked child: {}", r["children"]));
    assert_eq!(child["kind"], "pe");
    let capabilities = child["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tool"] == "code_capabilities")
        .expect("the child's code_capabilities step");
    assert!(
        capabilities["result"]
            .to_string()
            .contains("SetWindowsHookEx"),
        "the real imports are read: {}",
        capabilities["result"]
    );
    let child_facts = child["verdict"]["facts"].as_array().expect("child facts");
    assert!(
        child_facts.iter().any(|f| f["id"] == "keylogging"),
        "{child_facts:#?}"
    );

    let verdict = &r["verdict"];
    assert_eq!(verdict["verdict"], "suspicious", "{}", verdict["summary"]);
    let up = verdict["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "child_suspicious")
        .unwrap_or_else(|| panic!("{:#}", verdict["facts"]));
    assert_eq!(up["child"], "upx-unpacked.exe");
    assert!(
        up["observations"].to_string().contains("keystrokes"),
        "{}",
        up["observations"]
    );
    assert!(
        !verdict["facts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "carries_executable"),
        "the unpacked image is the sample, not a program it carries"
    );
}
