//! FA_box_* against the drive fixture (maljan-testkit's fixture-drives, itself checked by
//! box_sdk_gen in drive_fixture_speaks_the_sdks.rs): a 100 MiB round trip (a chunked upload
//! session, every part and the whole checked by SHA-1) with its SHA-256 checked, a small
//! multipart upload and a new version of it, upload_dir with its folders mirrored, listing,
//! deleting a file and a folder, a refused private endpoint, confinement of the local side and
//! later_init.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use maljan_testkit::DriveFixture;
use peers::{big_file, sha256_of};
use serde_json::{Value, json};

const TOKEN: &str = "box-secret-token-31";

fn harness(fx: &DriveFixture) -> Harness {
    let table = |name: &str, extra: &str| {
        format!(
            "[box.{name}]\napi_url = \"{0}/api.box.com/2.0\"\n\
             upload_url = \"{0}/upload.box.com/api/2.0\"\n{extra}\n",
            fx.url
        )
    };
    let toml = [
        table(
            "default",
            &format!("access_token = \"{TOKEN}\"\nallow_private_endpoint = true"),
        ),
        table("closed", &format!("access_token = \"{TOKEN}\"")),
        table("late", "allow_private_endpoint = true"),
    ]
    .concat();
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

async fn entries(h: &Harness, folder: &str) -> Vec<(String, String, String)> {
    let listed = h
        .call("FA_box_list_folder", json!({"folder_id": folder}))
        .await
        .unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("name"), s("type"), s("id"))
        })
        .collect()
}

fn id_of(list: &[(String, String, String)], name: &str) -> String {
    list.iter()
        .find(|e| e.0 == name)
        .unwrap_or_else(|| panic!("{name} in {list:?}"))
        .2
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn box_against_the_fixture() {
    let fx = DriveFixture::start(TOKEN);
    let h = harness(&fx);

    // A 100 MiB round trip through a chunked upload session.
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call("FA_box_upload_file", json!({"file_path": h.p("big.bin")}))
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    assert_eq!(up["remote_path"], "big.bin");
    assert!(up["content_hash"].is_string(), "Box's SHA-1: {up}");
    let parts = fx
        .log()
        .iter()
        .filter(|r| r["method"] == "PUT" && r["path"].as_str().unwrap().contains("upload_sessions"))
        .count();
    assert_eq!(parts, 13, "100 MiB in 8 MiB parts");
    let id = up["id"].as_str().unwrap().to_string();
    let back = h
        .call(
            "FA_box_download_file",
            json!({"file_id": id, "target_path": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(back["bytes"], size as u64);
    assert_eq!(sha256_of(&h.path("back.bin")), sha, "the download differs");

    // A small file in one multipart request; again under the same name: a new version.
    h.write("note.txt", "first");
    let first = h
        .call(
            "FA_box_upload_file",
            json!({"file_path": h.p("note.txt"), "name": "Note.txt"}),
        )
        .await
        .unwrap();
    h.write("note.txt", "second version");
    let second = h
        .call(
            "FA_box_upload_file",
            json!({"file_path": h.p("note.txt"), "name": "Note.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(first["id"], second["id"], "a new version of the same file");
    h.call(
        "FA_box_download_file",
        json!({"file_id": second["id"], "target_path": h.p("note-back.txt")}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("note-back.txt")).unwrap(),
        "second version"
    );

    // upload_dir mirrors the folders.
    h.write("tree/a.txt", "a");
    h.write("tree/sub/deeper/b.txt", "bb");
    h.write("tree/sub/c.txt", "c");
    let uploaded = h
        .call("FA_box_upload_dir", json!({"dir_path": h.p("tree")}))
        .await
        .unwrap();
    assert_eq!(uploaded, json!(["a.txt", "sub/c.txt", "sub/deeper/b.txt"]));
    let top = entries(&h, "0").await;
    let names: Vec<&str> = top.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["a.txt", "big.bin", "Note.txt", "sub"]);
    let sub = id_of(&top, "sub");
    let inside = entries(&h, &sub).await;
    assert_eq!(
        inside
            .iter()
            .map(|e| (e.0.as_str(), e.1.as_str()))
            .collect::<Vec<_>>(),
        [("c.txt", "file"), ("deeper", "folder")]
    );
    let limited = h
        .call("FA_box_list_folder", json!({"folder_id": "0", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(limited.as_array().unwrap().len(), 2);

    // Delete a file, then a folder (not empty: only with recursive).
    let big = id_of(&top, "big.bin");
    assert_eq!(
        h.call("FA_box_delete_file", json!({"file_id": big}))
            .await
            .unwrap(),
        json!(true)
    );
    assert_eq!(
        h.call(
            "FA_box_download_file",
            json!({"file_id": big, "target_path": h.p("gone.bin")})
        )
        .await,
        Err("no_such_file".into())
    );
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());
    assert_eq!(
        h.call("FA_box_delete_folder", json!({"folder_id": sub}))
            .await,
        Err("tool_failed".into()),
        "not empty"
    );
    assert_eq!(
        h.call(
            "FA_box_delete_folder",
            json!({"folder_id": sub, "recursive": true})
        )
        .await
        .unwrap(),
        json!(true)
    );
    assert_eq!(entries(&h, "0").await.len(), 2);
    for bad in [json!({"file_id": "../x"}), json!({"file_id": "1?fields=x"})] {
        assert_eq!(
            h.call("FA_box_delete_file", bad).await,
            Err("bad_argument".into())
        );
    }
    assert_eq!(
        h.call(
            "FA_box_delete_folder",
            json!({"folder_id": "0", "recursive": true})
        )
        .await,
        Err("bad_argument".into())
    );

    // The private endpoint the operator did not allow.
    let (code, message) = h
        .error("FA_box_list_folder", json!({"profile": "closed"}))
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");

    // Confinement of the local side.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours").unwrap();
    let (code, _) = h
        .error(
            "FA_box_upload_file",
            json!({"file_path": outside.path().join("secret.txt").to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    let target = outside.path().join("written.txt");
    let (code, _) = h
        .error(
            "FA_box_download_file",
            json!({"file_id": second["id"], "target_path": target.to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(!target.exists());
    let (code, _) = h
        .error(
            "FA_box_upload_dir",
            json!({"dir_path": outside.path().to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");

    // later_init: the token and the secret are never echoed.
    assert_eq!(
        h.call("FA_box_list_folder", json!({"profile": "late"}))
            .await,
        Err("not_configured".into())
    );
    let set = h
        .call(
            "FA_box_later_init",
            json!({"access_token": TOKEN, "client_secret": "app-secret-9", "profile": "late"}),
        )
        .await
        .unwrap();
    assert!(!set.to_string().contains(TOKEN) && !set.to_string().contains("app-secret-9"));
    assert_eq!(set["set"], json!(["access_token", "client_secret"]));
    let listed: Value = h
        .call("FA_box_list_folder", json!({"profile": "late"}))
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
}
