//! The storage actions' policy without a server: --read-only hides every one that uploads,
//! downloads (writes a local file) or deletes, and keeps the listings; an action whose profile is
//! not configured answers not_configured with the remedy; the secret arguments of *_later_init
//! are marked writeOnly in the schema.

mod common;

use common::Harness;
use serde_json::json;

#[test]
fn read_only_hides_every_writing_storage_action() {
    let h = Harness::with(
        |reg| {
            reg.retain(|m| m.read_only);
        },
        false,
    );
    let names: Vec<String> = h.server.registry().names().map(String::from).collect();
    for hidden in [
        "FA_s3_upload_file",
        "FA_s3_upload_dir",
        "FA_s3_download_file",
        "FA_s3_delete_object",
        "FA_azure_blob_upload_file",
        "FA_azure_blob_upload_dir",
        "FA_azure_blob_download_file",
        "FA_azure_blob_delete_blob",
        "FA_gcs_upload_file",
        "FA_gcs_upload_dir",
        "FA_gcs_download_file",
        "FA_gcs_delete_object",
        "FA_sftp_upload_file",
        "FA_sftp_upload_dir",
        "FA_sftp_download_file",
        "FA_sftp_delete_path",
        "FA_ftp_upload_file",
        "FA_ftp_upload_dir",
        "FA_ftp_download_file",
        "FA_ftp_delete_path",
    ] {
        assert!(
            !names.iter().any(|n| n == hidden),
            "{hidden} is served read-only"
        );
    }
    for kept in [
        "FA_s3_list_bucket",
        "FA_azure_blob_list_container",
        "FA_gcs_list_bucket",
        "FA_sftp_list_dir",
        "FA_ftp_list_dir",
    ] {
        assert!(names.iter().any(|n| n == kept), "{kept} is missing");
    }
}

#[tokio::test]
async fn an_unconfigured_profile_names_the_remedy() {
    let h = Harness::new();
    let (code, message) = h.error("FA_s3_list_bucket", json!({"bucket": "b"})).await;
    assert_eq!(code, "not_configured");
    assert!(message.contains("[s3.default]"), "{message}");
    let (code, _) = h
        .error(
            "FA_azure_blob_list_container",
            json!({"container": "c", "profile": "x"}),
        )
        .await;
    assert_eq!(code, "not_configured");
    let (code, _) = h.error("FA_gcs_list_bucket", json!({"bucket": "b"})).await;
    assert_eq!(code, "not_configured");
    for tool in ["FA_sftp_list_dir", "FA_ftp_list_dir"] {
        let (code, message) = h.error(tool, json!({})).await;
        assert_eq!(code, "not_configured");
        assert!(message.contains("default] storage profile"), "{message}");
    }
    let (code, _) = h
        .error("FA_storage_list", json!({"uri": "webdav://h/dav/"}))
        .await;
    assert_eq!(code, "not_configured");
    // Bad arguments are answered before any profile is looked at.
    assert_eq!(
        h.call("FA_s3_list_bucket", json!({"bucket": "b", "bogus": 1}))
            .await,
        Err("bad_argument".into())
    );
}

#[test]
fn later_init_secrets_are_write_only_in_the_schema() {
    let h = Harness::new();
    let reg = h.server.registry();
    let s3 = &reg.get("FA_s3_later_init").unwrap().input_schema["properties"];
    assert_eq!(
        s3["aws_secret_access_key"]["writeOnly"],
        json!(true),
        "{s3}"
    );
    assert_eq!(s3["aws_access_key_id"]["writeOnly"], json!(true));
    let az = &reg.get("FA_azure_blob_later_init").unwrap().input_schema["properties"];
    assert_eq!(az["connection_string"]["writeOnly"], json!(true));
    assert_eq!(az["credential"]["writeOnly"], json!(true));
    for tool in ["FA_sftp_later_init", "FA_ftp_later_init"] {
        let p = &reg.get(tool).unwrap().input_schema["properties"];
        assert_eq!(p["password"]["writeOnly"], json!(true), "{tool}: {p}");
    }
}
