//! FA_drive_* against the drive fixture (maljan-testkit's fixture-drives, itself checked by
//! googleapiclient in drive_fixture_speaks_the_sdks.rs): later_init from an expired token file
//! (refreshed), a 100 MiB round trip (a resumable upload) with its SHA-256 checked, a folder,
//! uploads into it and the directory uploads, the searches (paged), the folder download, the
//! shares, delete, a download cut and resumed, a refused private endpoint and confinement of
//! the local side.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::{collections::BTreeMap, path::Path};

use common::Harness;
use maljan_files::StorageConfig;
use maljan_testkit::DriveFixture;
use peers::{big_file, sha256_of};
use serde_json::json;

const TOKEN: &str = "google-secret-token-55";

fn harness(fx: &DriveFixture) -> Harness {
    let table = |name: &str, extra: &str| {
        format!(
            "[drive.{name}]\napi_url = \"{0}/www.googleapis.com/drive/v3\"\n\
             upload_url = \"{0}/www.googleapis.com/upload/drive/v3\"\n\
             auth_url = \"{0}/oauth2.googleapis.com\"\n{extra}\n",
            fx.url
        )
    };
    let toml = [
        table("default", "allow_private_endpoint = true"),
        table("closed", &format!("access_token = \"{TOKEN}\"")),
    ]
    .concat();
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

async fn found(h: &Harness, tool: &str, args: serde_json::Value) -> BTreeMap<String, String> {
    serde_json::from_value(h.call(tool, args).await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_drive_against_the_fixture() {
    let fx = DriveFixture::start(TOKEN);
    let h = harness(&fx);

    // An expired token file (as automation-file writes it) is refreshed at the profile's host,
    // never at the token_uri the file names.
    h.write(
        "token.json",
        json!({"token": "expired-one", "refresh_token": "fixture-google-refresh",
               "client_id": "cid", "client_secret": "csecret",
               "token_uri": "https://attacker.example/token", "expiry": "2020-01-01T00:00:00Z"})
        .to_string(),
    );
    let loaded = h
        .call(
            "FA_drive_later_init",
            json!({"token_path": h.p("token.json"), "credentials_path": h.p("credentials.json")}),
        )
        .await
        .unwrap();
    assert_eq!(loaded["refreshed"], true, "{loaded}");
    assert!(!loaded.to_string().contains("csecret") && !loaded.to_string().contains(TOKEN));
    h.write(
        "bad-token.json",
        json!({"token": "x", "expiry": "2020-01-01T00:00:00Z"}).to_string(),
    );
    assert_eq!(
        h.call(
            "FA_drive_later_init",
            json!({"token_path": h.p("bad-token.json"), "profile": "other"})
        )
        .await,
        Err("not_configured".into())
    );

    // A 100 MiB round trip through a resumable upload.
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call(
            "FA_drive_upload_to_drive",
            json!({"file_path": h.p("big.bin"), "file_name": "Big.bin"}),
        )
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    assert_eq!(up["remote_path"], "Big.bin");
    let pieces = fx
        .log()
        .iter()
        .filter(|r| {
            r["method"] == "PUT" && r["path"] == "/www.googleapis.com/upload/drive/v3/files"
        })
        .count();
    assert_eq!(pieces, 13, "100 MiB in 8 MiB pieces");
    let big = up["id"].as_str().unwrap().to_string();
    fx.cut_downloads(20 << 20, 1);
    let back = h
        .call(
            "FA_drive_download_file",
            json!({"file_id": big, "file_name": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(back["bytes"], size as u64);
    assert_eq!(
        sha256_of(&h.path("back.bin")),
        sha,
        "the resumed download differs"
    );
    assert!(
        fx.log().iter().any(|r| r["range"].is_string()),
        "resumed with a Range"
    );

    // A folder; uploads into it; the directory uploads (not recursive).
    let folder = h
        .call("FA_drive_add_folder", json!({"folder_name": "reports"}))
        .await
        .unwrap();
    let folder = folder.as_str().unwrap().to_string();
    h.write("one.txt", "one");
    h.call(
        "FA_drive_upload_to_folder",
        json!({"folder_id": folder, "file_path": h.p("one.txt")}),
    )
    .await
    .unwrap();
    for i in 0..3 {
        h.write(&format!("dir/f{i}.txt"), format!("file {i}"));
    }
    h.write("dir/nested/skipped.txt", "not uploaded");
    let to_folder = h
        .call(
            "FA_drive_upload_dir_to_folder",
            json!({"folder_id": folder, "dir_path": h.p("dir")}),
        )
        .await
        .unwrap();
    assert_eq!(to_folder.as_array().unwrap().len(), 3, "{to_folder}");
    let to_root = h
        .call(
            "FA_drive_upload_dir_to_drive",
            json!({"dir_path": h.p("dir/nested")}),
        )
        .await
        .unwrap();
    assert_eq!(to_root[0]["remote_path"], "skipped.txt");

    // The searches follow every page (the fixture pages every 3).
    let all = found(&h, "FA_drive_search_all_file", json!({})).await;
    assert_eq!(
        all.keys().collect::<Vec<_>>(),
        [
            "Big.bin",
            "f0.txt",
            "f1.txt",
            "f2.txt",
            "one.txt",
            "reports",
            "skipped.txt"
        ]
    );
    assert_eq!(all["reports"], folder);
    let folders = found(
        &h,
        "FA_drive_search_file_mimetype",
        json!({"mime_type": "application/vnd.google-apps.folder"}),
    )
    .await;
    assert_eq!(folders.keys().collect::<Vec<_>>(), ["reports"]);
    let fields = found(
        &h,
        "FA_drive_search_field",
        json!({"field_pattern": "nextPageToken, files(id, name)"}),
    )
    .await;
    assert_eq!(fields, all);

    // The folder download: each file to a local file of its name, relative to the root.
    let got = found(
        &h,
        "FA_drive_download_file_from_folder",
        json!({"folder_name": "reports"}),
    )
    .await;
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        ["f0.txt", "f1.txt", "f2.txt", "one.txt"]
    );
    assert_eq!(std::fs::read_to_string(h.path("f1.txt")).unwrap(), "file 1");
    assert_eq!(
        h.call(
            "FA_drive_download_file_from_folder",
            json!({"folder_name": "nothing"})
        )
        .await,
        Err("no_such_file".into())
    );

    // Shares.
    let p = h
        .call(
            "FA_drive_share_file_to_user",
            json!({"file_id": big, "user": "a@example.com"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (p["type"].as_str(), p["role"].as_str()),
        (Some("user"), Some("writer"))
    );
    let p = h
        .call("FA_drive_share_file_to_anyone", json!({"file_id": big}))
        .await
        .unwrap();
    assert_eq!(p["role"], "reader");
    let p = h
        .call(
            "FA_drive_share_file_to_domain",
            json!({"file_id": big, "domain": "example.com", "domain_role": "commenter"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (p["type"].as_str(), p["role"].as_str()),
        (Some("domain"), Some("commenter"))
    );
    assert_eq!(
        h.call(
            "FA_drive_share_file_to_anyone",
            json!({"file_id": big, "share_role": "god"})
        )
        .await,
        Err("bad_argument".into())
    );

    // Delete.
    assert_eq!(
        h.call("FA_drive_delete_file", json!({"file_id": big}))
            .await
            .unwrap(),
        json!(true)
    );
    assert_eq!(
        h.call(
            "FA_drive_download_file",
            json!({"file_id": big, "file_name": h.p("gone.bin")})
        )
        .await,
        Err("no_such_file".into())
    );
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());
    assert_eq!(
        h.call("FA_drive_delete_file", json!({"file_id": "a/b"}))
            .await,
        Err("bad_argument".into())
    );

    // The private endpoint the operator did not allow.
    let (code, message) = h
        .error("FA_drive_search_all_file", json!({"profile": "closed"}))
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");

    // Confinement of the local side (the token file too).
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours").unwrap();
    let secret = outside
        .path()
        .join("secret.txt")
        .to_string_lossy()
        .into_owned();
    for (tool, args) in [
        ("FA_drive_upload_to_drive", json!({"file_path": secret})),
        (
            "FA_drive_later_init",
            json!({"token_path": secret, "credentials_path": ""}),
        ),
        (
            "FA_drive_download_file",
            json!({"file_id": folder, "file_name": outside.path().join("w.bin").to_string_lossy()}),
        ),
        (
            "FA_drive_upload_dir_to_drive",
            json!({"dir_path": outside.path().to_string_lossy()}),
        ),
    ] {
        let (code, _) = h.error(tool, args).await;
        assert_eq!(code, "path_outside_roots", "{tool}");
    }
    assert!(!outside.path().join("w.bin").exists());
}
