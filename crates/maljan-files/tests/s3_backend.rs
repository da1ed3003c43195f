//! FA_s3_* against a real S3-compatible server (moto, started here on 127.0.0.1): a 100 MiB
//! round trip with its SHA-256 checked, listing, delete, upload_dir, a refused private
//! endpoint, confinement of the local side, transfers cut halfway (for good: nothing left; once:
//! resumed from where they were), an upload the store refuses,
//! and FA_s3_later_init.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/object_scenarios.rs"]
mod scenarios;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use scenarios::{S3, interrupt_relays, profiles, resume_profiles, resume_relays};
use serde_json::json;

fn s3_profile(endpoint: &str) -> String {
    format!(
        "endpoint_url = \"{endpoint}\"\nregion = \"us-east-1\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\n"
    )
}

fn harness(toml: &str) -> Harness {
    let config = StorageConfig::parse(toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_against_moto() {
    let server = peers::moto();
    let (down, up) = interrupt_relays(server.port);
    let (resume_down, resume_up) = resume_relays(server.port);
    let h = harness(&format!(
        "{}{}",
        profiles("s3", &s3_profile, &server.url(), &down, &up),
        resume_profiles("s3", &s3_profile, &resume_down, &resume_up)
    ));
    peers::s3_bucket(&server.url(), "maljan");

    scenarios::round_trip(&h, &S3, "maljan").await;
    scenarios::confinement(&h, &S3, "maljan").await;
    scenarios::refused_private_endpoint(&h, &S3, "maljan").await;
    scenarios::interrupted(&h, &S3, "maljan", &down, &up).await;
    scenarios::resumed(&h, &S3, "maljan", &resume_down, &resume_up).await;

    let missing = h
        .call("FA_s3_list_bucket", json!({"bucket": "no-such-bucket"}))
        .await;
    assert_eq!(missing, Err("tool_failed".into()));

    // An upload the store refuses at its end (the bucket is missing) fails with the store's
    // reason, small (one PUT) and multipart alike; it used to answer "the tool panicked".
    for (name, size) in [("small.bin", 10usize), ("large.bin", 12 << 20)] {
        let local = h.write(name, vec![7u8; size]);
        let (code, message) = h
            .error(
                "FA_s3_upload_file",
                json!({"file_path": local, "bucket": "no-such-bucket", "key": name}),
            )
            .await;
        assert_eq!(code, "tool_failed", "{name}: {message}");
        assert!(
            message.contains("uploading") && !message.contains("panicked"),
            "{name}: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_init_sets_credentials_without_echoing_them() {
    let server = peers::moto();
    peers::s3_bucket(&server.url(), "late");
    // The operator allows the private endpoint for profile "late"; the call brings the keys.
    let h = harness(&format!(
        "[s3.late]\nendpoint_url = \"{}\"\nallow_private_endpoint = true\n",
        server.url()
    ));
    let before = h
        .call(
            "FA_s3_list_bucket",
            json!({"bucket": "late", "profile": "late"}),
        )
        .await;
    assert_eq!(before, Err("not_configured".into()));
    let answer = h
        .call(
            "FA_s3_later_init",
            json!({"aws_access_key_id": "AKIAEXAMPLEID", "aws_secret_access_key": "VERYSECRETVALUE",
                   "region_name": "us-east-1", "profile": "late"}),
        )
        .await
        .unwrap();
    let shown = answer.to_string();
    assert!(
        !shown.contains("VERYSECRETVALUE") && !shown.contains("AKIAEXAMPLEID"),
        "{shown}"
    );
    assert_eq!(
        answer["set"],
        json!(["aws_access_key_id", "aws_secret_access_key", "region_name"])
    );
    let listed = h
        .call(
            "FA_s3_list_bucket",
            json!({"bucket": "late", "profile": "late"}),
        )
        .await
        .unwrap();
    assert_eq!(listed, json!([]));

    // A call cannot open a private endpoint the operator did not: a profile unknown to the
    // file gets no permission.
    let (code, message) = h
        .error(
            "FA_s3_later_init",
            json!({"aws_access_key_id": "a", "aws_secret_access_key": "b",
                   "endpoint_url": server.url(), "profile": "mine"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");
    for bad in [
        json!({"aws_access_key_id": "only-one"}),
        json!({"endpoint_url": "file:///etc/passwd"}),
        json!({"endpoint_url": "not a url"}),
    ] {
        assert_eq!(
            h.call("FA_s3_later_init", bad).await,
            Err("bad_argument".into())
        );
    }
}
