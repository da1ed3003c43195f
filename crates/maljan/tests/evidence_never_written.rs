//! The evidence is never written to (issue 40, item 5): `maljan analyze` of a zip carrying an
//! executable leaves the sample's folder byte for byte as it was (what it extracts goes to the
//! analysis server's own work directory), and a sample in a read-only folder — read-only for root
//! too: the run has no CAP_DAC_OVERRIDE — is analysed completely, its children included.

mod common;

use common::evidence::{analyze, make_read_only, make_writable, snapshot, zip_of};
use maljan_triage::corpus;
use serde_json::Value;

fn child_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no child {name}: {}", report["children"]))
}

/// The executable child was written out and analysed: every step of it answered.
fn assert_analysed(exe: &Value) {
    assert_eq!(exe["kind"], "pe", "{exe}");
    let steps = exe["steps"].as_array().unwrap();
    for tool in ["pe_info", "iocs_from_file", "yara_scan"] {
        let step = steps
            .iter()
            .find(|s| s["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} step: {exe}"));
        assert_eq!(step["status"], "ok", "{step}");
    }
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let samples = tmp.path().join("evidence");
    std::fs::create_dir_all(&samples).unwrap();
    let zip = zip_of(
        &[
            ("invoice.exe", &corpus::pe_bytes(4096)),
            ("readme.txt", b"see the attached invoice"),
        ],
        None,
    );
    let sample = samples.join("invoice.zip");
    std::fs::write(&sample, zip).unwrap();
    (tmp, home, sample)
}

#[test]
fn analysing_a_zip_with_an_exe_leaves_its_folder_byte_for_byte_untouched() {
    let (_tmp, home, sample) = setup();
    let folder = sample.parent().unwrap();
    let before = snapshot(folder);
    let (report, _) = analyze(&home, &sample, false);
    assert_eq!(snapshot(folder), before, "the evidence folder changed");
    assert_analysed(child_named(&report, "invoice.exe"));
    assert_eq!(report["status"], "complete", "{}", report["degradations"]);
}

#[test]
fn a_sample_in_a_read_only_folder_is_analysed_completely_with_its_children() {
    let (_tmp, home, sample) = setup();
    let folder = sample.parent().unwrap().to_path_buf();
    let enforced = make_read_only(&folder);
    let before = snapshot(&folder);
    let (report, out) = analyze(&home, &sample, enforced);
    let after = snapshot(&folder);
    make_writable(&folder);
    assert_eq!(after, before, "the evidence folder changed");
    assert_analysed(child_named(&report, "invoice.exe"));
    assert_eq!(
        report["status"],
        "complete",
        "{}\n{}",
        report["degradations"],
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["degradations"], serde_json::json!([]));
}
