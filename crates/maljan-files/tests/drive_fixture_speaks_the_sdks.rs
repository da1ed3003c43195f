//! maljan-testkit's `fixture-drives` (the stand-in for the SaaS drives, which have no emulator)
//! is checked by the drives' official Python SDKs (dropbox; msal with Graph over requests;
//! box_sdk_gen from boxsdk 10; googleapiclient with its bundled Drive v3 discovery document): they call it through a transport that sends
//! their real hosts' requests to the fixture, and parse its answers with their own code — uploads
//! (one request and an upload session), downloads (with a Range), paged listings, deletes, the
//! routes' error unions and a refused token — so the fixture the actions are tested against
//! cannot drift from the real APIs.

#[path = "common/peers.rs"]
mod peers;

use maljan_testkit::DriveFixture;
use serde_json::{Value, json};

fn sdk_check(fixture: &DriveFixture, drives: &[&str]) -> Value {
    sdk_check_with(fixture, drives, &[])
}

/// `drive_sdk_check.py` for `drives`, with `env` set for it (GCS reads its service-account key
/// from MALJAN_GCS_KEY_FILE); its one JSON line, by drive.
fn sdk_check_with(
    fixture: &DriveFixture,
    drives: &[&str],
    env: &[(&str, &std::path::Path)],
) -> Value {
    let py = peers::peer("MALJAN_PY");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/drive_sdk_check.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .arg(&fixture.url)
        .arg(&fixture.token)
        .args(drives)
        .envs(env.iter().copied())
        .output()
        .expect("run the SDK check");
    assert!(
        out.status.success(),
        "the SDKs could not use the fixture (scripts/peers.sh installs them):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[test]
fn the_dropbox_sdk_reads_the_fixture() {
    let fixture = DriveFixture::start("sdk-token");
    let got = &sdk_check(&fixture, &["dropbox"])["dropbox"];
    assert_eq!(got["upload"], json!(["/sdk/Small.txt", 28, "Small.txt"]));
    assert_eq!(got["download"][0], "/sdk/Small.txt");
    assert_eq!(got["download"][1], got["small_sha256"]);
    assert_eq!(got["session"][0], "/sdk/deep/Big.bin");
    assert_eq!(got["session"][1], 2500);
    assert_eq!(got["session"][2], got["session_expected_hash"]);
    assert_eq!(
        got["listed"],
        json!([
            "/sdk/Small.txt",
            "/sdk/deep",
            "/sdk/deep/Big.bin",
            "/sdk/many",
            "/sdk/many/f0.txt",
            "/sdk/many/f1.txt",
            "/sdk/many/f2.txt",
            "/sdk/many/f3.txt"
        ])
    );
    assert!(
        got["pages"].as_u64().unwrap() > 1,
        "paged: {}",
        got["pages"]
    );
    assert_eq!(got["kinds"], json!(["FileMetadata", "FolderMetadata"]));
    assert_eq!(got["deleted"], json!(["FolderMetadata", "/sdk/many"]));
    assert_eq!(got["missing"], json!([true, true]));
    assert_eq!(got["missing_delete"], json!([true, true]));
    assert_eq!(got["range"], json!([206, "from the official SDK\n"]));
    assert_eq!(got["bad_token"], true);
}

#[test]
fn msal_and_graph_read_the_fixture() {
    let fixture = DriveFixture::start("sdk-token");
    let got = &sdk_check(&fixture, &["onedrive"])["onedrive"];
    assert_eq!(got["flow"], json!(["FIXTURE1", true]));
    assert_eq!(
        got["token"], true,
        "msal's device flow got the fixture's token"
    );
    assert_eq!(got["put"], json!([201, "Small note.txt", 29]));
    assert_eq!(got["session"], json!([202, ["327680-"], 201, 328680]));
    assert_eq!(got["download"], json!([true, [302]]));
    assert_eq!(
        got["listed"],
        json!([["f0.txt", "f1.txt", "f2.txt", "f3.txt"], 2])
    );
    assert_eq!(got["delete"], 204);
    assert_eq!(got["missing"], json!([404, "itemNotFound"]));
    assert_eq!(got["bad_token"], 401);
    assert_eq!(got["declined"], "authorization_declined");
}

#[test]
fn the_box_sdk_reads_the_fixture() {
    let fixture = DriveFixture::start("sdk-token");
    let got = &sdk_check(&fixture, &["box"])["box"];
    assert_eq!(got["folder"], json!(["sdk", "0"]));
    assert_eq!(got["upload"], json!(["Small.txt", 23, true]));
    assert_eq!(got["download"], true);
    assert_eq!(got["preflight"], json!([409, "item_name_in_use", true]));
    assert_eq!(
        got["chunked"],
        json!(["Big.bin", 20_999_936, true]),
        "the SDK's chunked upload"
    );
    assert_eq!(got["listed"], json!(["Big.bin", "Small.txt"]));
    assert_eq!(got["missing"], json!([404, "not_found"]));
    assert_eq!(got["not_empty"], "folder_not_empty");
    assert_eq!(got["deleted"], json!([]));
    assert_eq!(got["bad_token"], true);
}

#[test]
fn googleapiclient_reads_the_fixture() {
    let fixture = DriveFixture::start("sdk-token");
    let got = &sdk_check(&fixture, &["google"])["google"];
    assert_eq!(got["upload"], json!(["Big.bin", "1048580"]), "resumable");
    assert_eq!(
        got["download"],
        json!([true, 4]),
        "media in 4 ranged chunks"
    );
    assert_eq!(
        got["listed"],
        json!([["Big.bin", "f0.txt", "f1.txt", "f2.txt", "f3.txt"], 2])
    );
    assert_eq!(got["folder_query"], true);
    assert_eq!(got["permission"], true);
    assert_eq!(got["missing"], json!([404, "notFound"]));
    assert_eq!(got["bad_token"], 401);
}

/// google-cloud-storage against the fixture's GCS XML API (see `check_gcs` in drive_sdk_check.py).
#[test]
fn google_cloud_storage_reads_the_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let key = peers::gcs_service_account(dir.path());
    let fixture = DriveFixture::start_gcs("sdk-token", &key);
    let all = sdk_check_with(&fixture, &["gcs"], &[("MALJAN_GCS_KEY_FILE", &key)]);
    let got = &all["gcs"];
    assert_eq!(got["bucket"], "sdk-bucket");
    assert_eq!(got["again"], 409);
    assert_eq!(
        got["download"],
        json!([200, true, true, true, true]),
        "the SDK's XML multipart upload, 4 parts, read back through a signed URL"
    );
    assert_eq!(got["range"], json!([206, true, "bytes 100-199/16780416"]));
    assert_eq!(got["past_end"], json!([416, "InvalidRange"]));
    assert_eq!(got["head"], json!([200, true, true, true]));
    assert_eq!(got["put"], json!([200, true, true]));
    assert_eq!(got["create_only"], json!([412, "PreconditionFailed"]));
    assert_eq!(got["bad_digest"], json!([400, "BadDigest"]));
    assert_eq!(got["tampered"], json!([403, "SignatureDoesNotMatch"]));
    assert_eq!(got["delete"], 204);
    assert_eq!(got["missing"], json!([404, "NoSuchKey"]));
    assert_eq!(got["missing_delete"], json!([404, "NoSuchKey"]));
    assert_eq!(got["cancelled"], true);
    assert_eq!(got["no_bucket"], json!([404, "NoSuchBucket"]));
    assert_eq!(got["bad_token"], json!([401, "AuthenticationRequired"]));

    // No SDK parses the XML listing (google-cloud-storage lists over JSON), so its answer is held
    // to the shape Google documents for GET Bucket (list-type=2): ListBucketResult with Name,
    // Prefix, KeyCount, MaxKeys, IsTruncated, and per object Contents with Key, Generation,
    // MetaGeneration, LastModified (ISO 8601), ETag and Size.
    let list = got["list_xml"].as_str().unwrap();
    assert!(
        list.starts_with("<?xml version='1.0' encoding='UTF-8'?><ListBucketResult xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\"><Name>sdk-bucket</Name><Prefix>d</Prefix><KeyCount>1</KeyCount>"),
        "{list}"
    );
    let contents = list
        .split("<Contents>")
        .nth(1)
        .and_then(|c| c.split("</Contents>").next())
        .expect("one Contents");
    for element in [
        "<Key>dir/big file+1.bin</Key>",
        "<MetaGeneration>1</MetaGeneration>",
        "<Size>16780416</Size>",
        "<Generation>",
        "<LastModified>20",
        "Z</LastModified>",
        "<ETag>&quot;",
    ] {
        assert!(contents.contains(element), "{element} in {contents}");
    }
    assert!(list.contains("<IsTruncated>false</IsTruncated>"), "{list}");
    assert!(list.ends_with("</ListBucketResult>"), "{list}");
}
