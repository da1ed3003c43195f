//! webdav:// storage URIs against wsgidav started here on 127.0.0.1 (basic auth): a 100 MiB
//! round trip with its SHA-256 checked, listing, stat, delete, FA_copy_between from a local
//! file, a wrong password, a refused private endpoint, confinement of the local side, and
//! transfers interrupted halfway.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/tree_scenarios.rs"]
mod scenarios;
#[path = "common/tree_servers.rs"]
mod servers;

use common::Harness;
use maljan_files::StorageConfig;
use peers::{big_file, sha256_of};
use scenarios::{cancelled_at, files_under};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webdav_against_wsgidav() {
    let server = servers::wsgidav();
    let port = server.port;
    let on_disk = server.dir.path().join("root");
    let body = format!(
        "url = \"http://127.0.0.1:{port}/dav/\"\nusername = \"maljan\"\npassword = \"{}\"\n",
        servers::USER_PASSWORD
    );
    let toml = format!(
        "[webdav.default]\n{body}allow_private_endpoint = true\n[webdav.closed]\n{body}\
         [webdav.wrong]\nurl = \"http://127.0.0.1:{port}/dav/\"\nusername = \"maljan\"\npassword = \"nope\"\nallow_private_endpoint = true\n"
    );
    let config = StorageConfig::parse(&toml, server.dir.path(), &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let uri = |p: &str| format!("webdav://127.0.0.1:{port}/dav/{p}");

    // 100 MiB up and down.
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call(
            "FA_storage_upload",
            json!({"local_path": h.p("big.bin"), "uri": uri("samples/big.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(up["size"], size as u64, "{up}");
    assert_eq!(sha256_of(&on_disk.join("samples/big.bin")), sha);
    h.call(
        "FA_storage_download",
        json!({"uri": uri("samples/big.bin"), "local_path": h.p("back.bin")}),
    )
    .await
    .unwrap();
    assert_eq!(
        sha256_of(&h.path("back.bin")),
        sha,
        "the downloaded file differs"
    );
    assert!(!h.path("back.bin.part").exists());

    // Listing, stat, exists, delete.
    h.write("t.txt", "tiny");
    h.call(
        "FA_copy_between",
        json!({"source": h.p("t.txt"), "target": uri("docs/deep/t.txt")}),
    )
    .await
    .unwrap();
    let top = h
        .call("FA_storage_list", json!({"uri": uri("")}))
        .await
        .unwrap();
    let mut names: Vec<&str> = top
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["docs", "samples"], "{top}");
    let all = h
        .call(
            "FA_storage_list",
            json!({"uri": uri("docs"), "recursive": true}),
        )
        .await
        .unwrap();
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    assert_eq!(all[0]["path"], "deep/t.txt");
    assert_eq!(all[0]["size"], 4);
    let stat = h
        .call("FA_storage_stat", json!({"uri": uri("samples/big.bin")}))
        .await
        .unwrap();
    assert_eq!(stat["size"], size as u64);
    assert_eq!(
        h.call("FA_storage_exists", json!({"uri": uri("nope.txt")}))
            .await,
        Ok(json!(false))
    );
    let text = h
        .call(
            "FA_storage_read_text",
            json!({"uri": "webdav:///dav/docs/deep/t.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(text, json!("tiny"));
    h.call("FA_storage_delete", json!({"uri": uri("samples/big.bin")}))
        .await
        .unwrap();
    assert!(!on_disk.join("samples/big.bin").exists());
    assert_eq!(
        h.call("FA_storage_exists", json!({"uri": uri("samples/big.bin")}))
            .await,
        Ok(json!(false))
    );
    let r = h
        .call(
            "FA_storage_download",
            json!({"uri": uri("samples/big.bin"), "local_path": h.p("gone.bin")}),
        )
        .await;
    assert_eq!(r, Err("no_such_file".into()));
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());

    // A wrong password and a refused private endpoint.
    let r = h
        .call(
            "FA_storage_list",
            json!({"uri": uri(""), "profile": "wrong"}),
        )
        .await;
    assert_eq!(r, Err("tool_failed".into()));
    let (code, message) = h
        .error(
            "FA_storage_upload",
            json!({"local_path": h.p("t.txt"), "uri": uri("closed.txt"), "profile": "closed"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");
    assert!(!on_disk.join("closed.txt").exists());
    let r = h
        .call(
            "FA_storage_list",
            json!({"uri": "webdav://example.org/dav/"}),
        )
        .await;
    assert_eq!(r, Err("bad_argument".into()));

    // Confinement of the local side.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours").unwrap();
    let r = h
        .call(
            "FA_storage_upload",
            json!({"local_path": outside.path().join("secret.txt"), "uri": uri("leak.txt")}),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    let r = h
        .call(
            "FA_storage_download",
            json!({"uri": uri("docs/deep/t.txt"), "local_path": outside.path().join("x.txt")}),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(!on_disk.join("leak.txt").exists() && !outside.path().join("x.txt").exists());

    // Interrupted halfway: nothing half-written on either side.
    let mid = 48u64 << 20;
    big_file(&h.path("mid.bin"), mid as usize);
    h.call(
        "FA_storage_upload",
        json!({"local_path": h.p("mid.bin"), "uri": uri("mid.bin")}),
    )
    .await
    .unwrap();
    let (failed, seen) = cancelled_at(
        &h,
        "FA_storage_download",
        json!({"uri": uri("mid.bin"), "local_path": h.p("cut.bin")}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed && seen.iter().all(|p| *p < mid as f64), "{seen:?}");
    assert!(!h.path("cut.bin").exists() && !h.path("cut.bin.part").exists());
    let (failed, _) = cancelled_at(
        &h,
        "FA_storage_upload",
        json!({"local_path": h.p("mid.bin"), "uri": uri("cut-up/mid.bin")}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed, "the cancelled upload succeeded");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !files_under(&on_disk.join("cut-up")).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(files_under(&on_disk.join("cut-up")), Vec::<String>::new());
}
