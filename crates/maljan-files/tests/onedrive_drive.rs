//! FA_onedrive_* against the drive fixture (maljan-testkit's fixture-drives, itself checked by
//! msal and Graph requests in drive_fixture_speaks_the_sdks.rs): the device-code login, a 100
//! MiB round trip (an upload session) with its SHA-256 checked, a small one-request upload,
//! paged listings, upload_dir, delete, a download cut and resumed, a refused private endpoint,
//! confinement of the local side, close, and what --read-only hides.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use maljan_testkit::DriveFixture;
use peers::{big_file, sha256_of};
use serde_json::{Value, json};

const TOKEN: &str = "graph-secret-token-77";

fn harness(fx: &DriveFixture) -> Harness {
    let table = |name: &str, extra: &str| {
        format!(
            "[onedrive.{name}]\napi_url = \"{0}/graph.microsoft.com/v1.0\"\n\
             auth_url = \"{0}/login.microsoftonline.com\"\n{extra}\n",
            fx.url
        )
    };
    let toml = [
        table(
            "default",
            "allow_private_endpoint = true\ntenant_id = \"organizations\"",
        ),
        table("closed", &format!("access_token = \"{TOKEN}\"")),
        table(
            "given",
            &format!("access_token = \"{TOKEN}\"\nallow_private_endpoint = true"),
        ),
    ]
    .concat();
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

async fn names(h: &Harness, path: &str) -> Vec<String> {
    let listed = h
        .call("FA_onedrive_list_folder", json!({"remote_path": path}))
        .await
        .unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onedrive_against_the_fixture() {
    let fx = DriveFixture::start(TOKEN);
    let h = harness(&fx);

    // No token yet: the device-code login gets one (the fixture approves on the second poll).
    assert_eq!(
        h.call("FA_onedrive_list_folder", json!({})).await,
        Err("not_configured".into())
    );
    let login = h
        .call(
            "FA_onedrive_device_code_login",
            json!({"client_id": "fixture-client", "timeout": 30}),
        )
        .await
        .unwrap();
    assert!(!login.to_string().contains(TOKEN), "{login}");
    assert_eq!(login["token_type"], "Bearer", "{login}");
    assert!(
        fx.log()
            .iter()
            .any(|r| r["path"] == "/login.microsoftonline.com/organizations/oauth2/v2.0/devicecode"),
        "the profile's tenant"
    );

    // A 100 MiB round trip through an upload session.
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call(
            "FA_onedrive_upload_file",
            json!({"file_path": h.p("big.bin"), "remote_path": "/Samples/Big file.bin"}),
        )
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    assert_eq!(up["remote_path"], "Samples/Big file.bin");
    let pieces = fx
        .log()
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap()
                .starts_with("/public.onedrive.fixture/up/")
        })
        .count();
    assert_eq!(pieces, 10, "100 MiB in 10 MiB pieces");
    let back = h
        .call(
            "FA_onedrive_download_file",
            json!({"remote_path": "samples/big file.bin", "target_path": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(back["bytes"], size as u64);
    assert_eq!(sha256_of(&h.path("back.bin")), sha, "the download differs");

    // Cut once: resumed with a Range to the download link, whole again.
    fx.cut_downloads(10 << 20, 1);
    h.call(
        "FA_onedrive_download_file",
        json!({"remote_path": "Samples/Big file.bin", "target_path": h.p("resumed.bin")}),
    )
    .await
    .unwrap();
    assert_eq!(sha256_of(&h.path("resumed.bin")), sha);
    assert!(fx.log().iter().any(|r| r["range"].is_string()));

    // Small files in one PUT; upload_dir; listings page every 3 entries.
    for i in 0..4 {
        h.write(&format!("tree/many/{i}.txt"), format!("{i}"));
    }
    h.write("tree/top.txt", "top");
    let uploaded = h
        .call(
            "FA_onedrive_upload_dir",
            json!({"dir_path": h.p("tree"), "remote_prefix": "Up/"}),
        )
        .await
        .unwrap();
    assert_eq!(
        uploaded,
        json!([
            "Up/many/0.txt",
            "Up/many/1.txt",
            "Up/many/2.txt",
            "Up/many/3.txt",
            "Up/top.txt"
        ])
    );
    assert!(
        fx.log()
            .iter()
            .any(|r| r["path"] == "/graph.microsoft.com/v1.0/me/drive/root:/Up/top.txt:/content")
    );
    assert_eq!(names(&h, "").await, ["Samples", "Up"]);
    assert_eq!(
        names(&h, "Up/many").await,
        ["0.txt", "1.txt", "2.txt", "3.txt"]
    );
    let entries = h
        .call("FA_onedrive_list_folder", json!({"remote_path": "Up"}))
        .await
        .unwrap();
    assert_eq!(
        entries,
        json!([{"name": "many", "type": "folder", "size": 0}, {"name": "top.txt", "type": "file", "size": 3}])
    );

    // Delete.
    assert_eq!(
        h.call("FA_onedrive_delete_item", json!({"remote_path": "Up/many"}))
            .await
            .unwrap(),
        json!(true)
    );
    assert_eq!(names(&h, "Up").await, ["top.txt"]);
    assert_eq!(
        h.call("FA_onedrive_delete_item", json!({"remote_path": "Up/many"}))
            .await,
        Err("no_such_file".into())
    );
    for bad in [
        json!({"remote_path": "/"}),
        json!({"remote_path": "a/../b"}),
    ] {
        assert_eq!(
            h.call("FA_onedrive_delete_item", bad).await,
            Err("bad_argument".into())
        );
    }

    // The private endpoint the operator did not allow.
    let (code, message) = h
        .error("FA_onedrive_list_folder", json!({"profile": "closed"}))
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");

    // Confinement of the local side.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours").unwrap();
    let (code, _) = h
        .error(
            "FA_onedrive_upload_file",
            json!({"file_path": outside.path().join("secret.txt").to_string_lossy(), "remote_path": "x.txt"}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    let target = outside.path().join("written.bin");
    let (code, _) = h
        .error(
            "FA_onedrive_download_file",
            json!({"remote_path": "Up/top.txt", "target_path": target.to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(!target.exists());

    // close forgets the session's token; later_init sets one, never echoed.
    assert_eq!(
        h.call("FA_onedrive_close", json!({})).await.unwrap(),
        json!(true)
    );
    assert_eq!(
        h.call("FA_onedrive_list_folder", json!({})).await,
        Err("not_configured".into())
    );
    let set = h
        .call("FA_onedrive_later_init", json!({"access_token": TOKEN}))
        .await
        .unwrap();
    assert!(!set.to_string().contains(TOKEN));
    assert_eq!(names(&h, "").await, ["Samples", "Up"]);
    assert_eq!(
        h.call("FA_onedrive_list_folder", json!({"profile": "given"}))
            .await
            .map(|v| v.as_array().map(Vec::len)),
        Ok(Some(2))
    );

    read_only_hides_the_writers(&h);
}

fn read_only_hides_the_writers(h: &Harness) {
    let reg = maljan_files::registry(maljan_files::FilesConfig::rooted(
        maljan_server::Roots::new([h.root()]).unwrap(),
    ));
    let mut drives: Vec<(String, bool)> = reg
        .tools()
        .iter()
        .filter(|t| {
            ["FA_onedrive_", "FA_box_", "FA_drive_", "FA_dropbox_"]
                .iter()
                .any(|p| t.meta.name.starts_with(p))
        })
        .map(|t| (t.meta.name.clone(), t.meta.read_only))
        .collect();
    drives.sort();
    assert_eq!(drives.len(), 36, "automation-file's 36 drive actions");
    let kept: Vec<&str> = drives
        .iter()
        .filter(|(_, ro)| *ro)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        kept,
        [
            "FA_box_later_init",
            "FA_box_list_folder",
            "FA_drive_later_init",
            "FA_drive_search_all_file",
            "FA_drive_search_field",
            "FA_drive_search_file_mimetype",
            "FA_dropbox_later_init",
            "FA_dropbox_list_folder",
            "FA_onedrive_close",
            "FA_onedrive_device_code_login",
            "FA_onedrive_later_init",
            "FA_onedrive_list_folder"
        ],
        "--read-only keeps the listings, searches and sign-ins (they write nothing)"
    );
    let schema = Value::Object(
        reg.get("FA_onedrive_later_init")
            .unwrap()
            .input_schema
            .clone(),
    );
    assert_eq!(schema["properties"]["access_token"]["writeOnly"], true);
}
