//! FA_azure_blob_* against a real Azure Blob service (Azurite, started here on 127.0.0.1): a
//! 100 MiB round trip with its SHA-256 checked, listing, delete, upload_dir, overwrite=false, a
//! refused private endpoint, confinement of the local side, transfers cut halfway (for good:
//! nothing left; once: resumed from where they were), and
//! FA_azure_blob_later_init with a connection string.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/object_scenarios.rs"]
mod scenarios;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use peers::{AZURITE_ACCOUNT, AZURITE_KEY};
use scenarios::{AZURE, interrupt_relays, profiles, resume_profiles, resume_relays};
use serde_json::json;

fn azure_profile(endpoint: &str) -> String {
    format!(
        "account = \"{AZURITE_ACCOUNT}\"\naccount_url = \"{endpoint}/{AZURITE_ACCOUNT}\"\naccess_key = \"{AZURITE_KEY}\"\n"
    )
}

fn harness(toml: &str) -> Harness {
    let config = StorageConfig::parse(toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_blob_against_azurite() {
    let server = peers::azurite();
    let (down, up) = interrupt_relays(server.port);
    let (resume_down, resume_up) = resume_relays(server.port);
    let h = harness(&format!(
        "{}{}",
        profiles("azure_blob", &azure_profile, &server.url(), &down, &up),
        resume_profiles("azure_blob", &azure_profile, &resume_down, &resume_up)
    ));
    peers::azure_container(&server.url(), "maljan");

    scenarios::round_trip(&h, &AZURE, "maljan").await;
    scenarios::confinement(&h, &AZURE, "maljan").await;
    scenarios::refused_private_endpoint(&h, &AZURE, "maljan").await;
    scenarios::interrupted(&h, &AZURE, "maljan", &down, &up).await;
    scenarios::resumed(&h, &AZURE, "maljan", &resume_down, &resume_up).await;

    // overwrite=false keeps an existing blob.
    h.write("one.txt", "one");
    h.write("two.txt", "two");
    let up_args = |file: &str, overwrite: bool| json!({"file_path": h.p(file), "container": "maljan", "blob_name": "kept.txt", "overwrite": overwrite});
    h.call("FA_azure_blob_upload_file", up_args("one.txt", true))
        .await
        .unwrap();
    let r = h
        .call("FA_azure_blob_upload_file", up_args("two.txt", false))
        .await;
    assert_eq!(r, Err("bad_argument".into()));
    h.call(
        "FA_azure_blob_download_file",
        json!({"container": "maljan", "blob_name": "kept.txt", "target_path": h.p("kept.txt")}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(h.path("kept.txt")).unwrap(), "one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_init_takes_a_connection_string_without_echoing_it() {
    let server = peers::azurite();
    peers::azure_container(&server.url(), "late");
    let h = harness("[azure_blob.late]\nallow_private_endpoint = true\n");
    let cs = format!(
        "DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={}/{AZURITE_ACCOUNT};",
        server.url()
    );
    let answer = h
        .call(
            "FA_azure_blob_later_init",
            json!({"connection_string": cs, "profile": "late"}),
        )
        .await
        .unwrap();
    assert!(!answer.to_string().contains(AZURITE_KEY), "{answer}");
    let listed = h
        .call(
            "FA_azure_blob_list_container",
            json!({"container": "late", "profile": "late"}),
        )
        .await
        .unwrap();
    assert_eq!(listed, json!([]));
    // Without the operator's permission the same string is refused.
    let (code, message) = h
        .error(
            "FA_azure_blob_later_init",
            json!({"connection_string": cs, "profile": "other"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(
        message.contains("allow_private_endpoint") && !message.contains(AZURITE_KEY),
        "{message}"
    );
    let (code, message) = h
        .error(
            "FA_azure_blob_later_init",
            json!({"connection_string": "AccountKey=SECRETSECRET;Nonsense=1"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(!message.contains("SECRETSECRET"), "{message}");
}
