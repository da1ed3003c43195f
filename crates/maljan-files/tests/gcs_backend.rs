//! FA_gcs_* against Google Cloud Storage's XML API as maljan-testkit's fixture-drives serves it
//! (no GCS emulator here speaks the XML API object_store uses; the fixture is held to Google's
//! own google-cloud-storage SDK in drive_fixture_speaks_the_sdks.rs), signed by a real service
//! account whose RSA key the test makes: a 100 MiB round trip with its SHA-256 checked, listing,
//! delete, upload_dir, a refused private endpoint, confinement of the local side, transfers cut
//! halfway (for good: nothing left; once: resumed from where they were), a missing bucket.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/object_scenarios.rs"]
mod scenarios;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use maljan_testkit::DriveFixture;
use scenarios::{GCS, interrupt_relays, profiles, resume_profiles, resume_relays};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_against_the_xml_api_fixture() {
    let keys = tempfile::tempdir().unwrap();
    let key = peers::gcs_service_account(keys.path());
    let fixture = DriveFixture::start_gcs("unused", &key);
    let gcs_profile = |endpoint: &str| {
        format!(
            "base_url = \"{endpoint}/storage.googleapis.com\"\nservice_account_key_file = \"{}\"\n",
            key.display()
        )
    };
    let (down, up) = interrupt_relays(fixture.port);
    let (resume_down, resume_up) = resume_relays(fixture.port);
    let toml = format!(
        "{}{}",
        profiles("gcs", &gcs_profile, &fixture.url, &down, &up),
        resume_profiles("gcs", &gcs_profile, &resume_down, &resume_up)
    );
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    peers::gcs_bucket(&fixture.host("storage.googleapis.com"), &key, "maljan");

    scenarios::round_trip(&h, &GCS, "maljan").await;
    scenarios::confinement(&h, &GCS, "maljan").await;
    scenarios::refused_private_endpoint(&h, &GCS, "maljan").await;
    scenarios::interrupted(&h, &GCS, "maljan", &down, &up).await;
    scenarios::resumed(&h, &GCS, "maljan", &resume_down, &resume_up).await;

    // The 100 MiB went up as an XML multipart upload, and came down resumed with a Range.
    let log = fixture.log();
    let went = |method: &str, tail: &str| {
        log.iter()
            .any(|r| r["method"] == method && r["path"].as_str().unwrap().ends_with(tail))
    };
    assert!(
        went("POST", "/maljan/samples%2Fbig%2Ebin"),
        "no multipart upload"
    );
    assert!(
        log.iter().any(|r| r["method"] == "GET"
            && r["path"]
                .as_str()
                .unwrap()
                .ends_with("/maljan/resume%2Ebin")
            && r["range"]
                .as_str()
                .is_some_and(|v| !v.starts_with("bytes=0-"))),
        "no resumed ranged GET"
    );

    let missing = h
        .call("FA_gcs_list_bucket", json!({"bucket": "no-such-bucket"}))
        .await;
    assert_eq!(missing, Err("tool_failed".into()));
    h.write("small.bin", "small");
    let (code, message) = h
        .error(
            "FA_gcs_upload_file",
            json!({"file_path": h.p("small.bin"), "bucket": "no-such-bucket", "key": "small.bin"}),
        )
        .await;
    assert_eq!(code, "tool_failed", "{message}");
    assert!(
        message.contains("uploading") && !message.contains("panicked"),
        "{message}"
    );

    // A key the fixture does not trust is refused, not served.
    let other_dir = tempfile::tempdir().unwrap();
    let other = peers::gcs_service_account(other_dir.path());
    let toml = format!(
        "[gcs.default]\nbase_url = \"{}\"\nservice_account_key_file = \"{}\"\nallow_private_endpoint = true\n",
        fixture.host("storage.googleapis.com"),
        other.display()
    );
    let stranger = Harness::with_storage(
        StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap(),
        |_| {},
    );
    let (code, message) = stranger
        .error("FA_gcs_list_bucket", json!({"bucket": "maljan"}))
        .await;
    assert_eq!(code, "tool_failed", "{message}");
    assert!(message.contains("401"), "{message}");
}
