//! A child that could not be extracted or analysed is a degradation reason, and the job's status
//! is `degraded`, never `complete` (issue 40, item 5): here a zip whose executable is encrypted
//! with a password none of the usual ones opens.

mod common;

use common::evidence::{analyze, zip_of};
use maljan_triage::corpus;

#[test]
fn a_member_that_cannot_be_extracted_makes_the_job_degraded() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let samples = tmp.path().join("evidence");
    std::fs::create_dir_all(&samples).unwrap();
    let sample = samples.join("locked.zip");
    let zip = zip_of(
        &[("payload.exe", &corpus::pe_bytes(4096))],
        Some("not-one-of-the-usual-passwords"),
    );
    std::fs::write(&sample, zip).unwrap();
    let (report, out) = analyze(&home, &sample, false);
    assert_eq!(report["status"], "degraded", "{report}");
    let reasons: Vec<&str> = report["degradations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("payload.exe") && r.contains("could not be extracted")),
        "{reasons:?}"
    );
    // The command says so too, not "complete … 0 degradation reasons".
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("complete"), "{stderr}");
}
