//! The storage-URI layer (FA_storage_*) and FA_copy_between across real backends started here
//! (moto for s3://, Azurite for azure://) plus memory:// and confined file:// paths: a file
//! copied local -> S3 -> Azure -> memory -> local keeps its SHA-256, listings, stat, checksum,
//! verify, move, recursive delete, text, and the refusals.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use peers::{AZURITE_ACCOUNT, AZURITE_KEY};
use serde_json::{Value, json};

fn names(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_cross_every_backend_intact() {
    let s3 = peers::moto();
    let az = peers::azurite();
    peers::s3_bucket(&s3.url(), "bkt");
    peers::azure_container(&az.url(), "ctr");
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{}\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_private_endpoint = true\n\
         [azure_blob.default]\naccount = \"{AZURITE_ACCOUNT}\"\naccount_url = \"{}/{AZURITE_ACCOUNT}\"\naccess_key = \"{AZURITE_KEY}\"\nallow_private_endpoint = true\n",
        s3.url(),
        az.url()
    );
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let sha = peers::big_file(&h.path("src.bin"), 20 << 20);

    let up = h
        .call(
            "FA_storage_upload",
            json!({"local_path": h.p("src.bin"), "uri": "s3://bkt/in/src.bin"}),
        )
        .await
        .unwrap();
    assert_eq!(up["size"], 20 << 20, "{up}");
    assert_eq!(up["uri"], "s3://bkt/in/src.bin");
    assert_eq!(
        h.call(
            "FA_copy_between",
            json!({"source": "s3://bkt/in/src.bin", "target": "azure:ctr/copied.bin"})
        )
        .await
        .unwrap(),
        json!(true)
    );
    h.call(
        "FA_storage_copy",
        json!({"source": "azure://ctr/copied.bin", "target": "memory://m/x.bin"}),
    )
    .await
    .unwrap();
    let local = h
        .call(
            "FA_storage_download",
            json!({"uri": "memory://m/x.bin", "local_path": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(local, json!(h.p("back.bin")));
    assert_eq!(peers::sha256_of(&h.path("back.bin")), sha);
    for uri in [
        "s3://bkt/in/src.bin",
        "azure://ctr/copied.bin",
        "memory://m/x.bin",
        &format!("file://{}", h.p("back.bin")),
    ] {
        let sum = h
            .call("FA_storage_checksum", json!({"uri": uri}))
            .await
            .unwrap();
        assert_eq!(sum, json!({"algorithm": "sha256", "value": sha}), "{uri}");
        assert_eq!(
            h.call(
                "FA_storage_verify",
                json!({"uri": uri, "expected": format!("sha256:{sha}")})
            )
            .await
            .unwrap(),
            json!(true)
        );
    }
    assert_eq!(
        h.call(
            "FA_storage_verify",
            json!({"uri": "s3://bkt/in/src.bin", "expected": "00"})
        )
        .await
        .unwrap(),
        json!(false)
    );
    assert_eq!(
        h.call(
            "FA_storage_verify",
            json!({"uri": "s3://bkt/in/src.bin", "expected": "00", "strict": true})
        )
        .await,
        Err("tool_failed".into())
    );

    // Inside one bucket the store copies; move removes the source.
    h.call(
        "FA_storage_copy",
        json!({"source": "s3://bkt/in/src.bin", "target": "s3://bkt/in/sub/dup.bin"}),
    )
    .await
    .unwrap();
    assert_eq!(
        h.call("FA_storage_copy", json!({"source": "s3://bkt/in/src.bin", "target": "s3://bkt/in/sub/dup.bin", "overwrite": false}))
            .await,
        Err("bad_argument".into())
    );
    h.call(
        "FA_storage_move",
        json!({"source": "s3://bkt/in/sub/dup.bin", "target": "s3://bkt/in/sub/moved.bin"}),
    )
    .await
    .unwrap();
    let flat = h
        .call("FA_storage_list", json!({"uri": "s3://bkt/in"}))
        .await
        .unwrap();
    assert_eq!(names(&flat), ["src.bin", "sub"], "{flat}");
    let deep = h
        .call(
            "FA_storage_list",
            json!({"uri": "s3://bkt/in", "recursive": true}),
        )
        .await
        .unwrap();
    assert_eq!(names(&deep), ["src.bin", "sub/moved.bin"]);
    let stat = h
        .call("FA_storage_stat", json!({"uri": "s3://bkt/in/sub"}))
        .await
        .unwrap();
    assert_eq!(stat["is_dir"], true);
    assert_eq!(
        h.call(
            "FA_storage_exists",
            json!({"uri": "s3://bkt/in/sub/dup.bin"})
        )
        .await
        .unwrap(),
        json!(false)
    );

    // A directory with entries needs recursive.
    assert_eq!(
        h.call("FA_storage_delete", json!({"uri": "s3://bkt/in"}))
            .await,
        Err("bad_argument".into())
    );
    h.call(
        "FA_storage_delete",
        json!({"uri": "s3://bkt/in", "recursive": true}),
    )
    .await
    .unwrap();
    assert_eq!(
        h.call(
            "FA_storage_list",
            json!({"uri": "s3://bkt", "recursive": true})
        )
        .await
        .unwrap(),
        json!([])
    );
    assert_eq!(
        h.call("FA_storage_delete", json!({"uri": "s3://bkt/in"}))
            .await,
        Err("no_such_file".into())
    );
    assert_eq!(
        h.call(
            "FA_storage_delete",
            json!({"uri": "s3://bkt/in", "missing_ok": true})
        )
        .await
        .unwrap(),
        json!(true)
    );
}

#[tokio::test]
async fn memory_and_local_uris_without_a_server() {
    let h = Harness::new();
    let w = h
        .call(
            "FA_storage_write_text",
            json!({"uri": "memory://notes/a/b.txt", "text": "héllo"}),
        )
        .await
        .unwrap();
    assert_eq!(w["size"], 6);
    assert_eq!(
        h.call(
            "FA_storage_read_text",
            json!({"uri": "memory://notes/a/b.txt"})
        )
        .await
        .unwrap(),
        json!("héllo")
    );
    h.call(
        "FA_storage_write_text",
        json!({"uri": "memory://notes/a/c.txt", "text": "x", "encoding": "latin-1"}),
    )
    .await
    .unwrap();
    assert_eq!(
        names(
            &h.call(
                "FA_storage_list",
                json!({"uri": "memory://notes", "recursive": true})
            )
            .await
            .unwrap()
        ),
        ["a/b.txt", "a/c.txt"]
    );
    assert_eq!(
        h.call(
            "FA_storage_write_text",
            json!({"uri": "memory://notes/a/b.txt", "text": "y", "overwrite": false})
        )
        .await,
        Err("bad_argument".into())
    );
    assert_eq!(
        h.call(
            "FA_storage_write_text",
            json!({"uri": "memory://n/x", "text": "y", "encoding": "klingon"})
        )
        .await,
        Err("bad_argument".into())
    );

    // file:// and bare paths are confined to the roots.
    let outside = tempfile::tempdir().unwrap();
    let out_uri = format!("file://{}/x.txt", outside.path().display());
    assert_eq!(
        h.call(
            "FA_storage_write_text",
            json!({"uri": out_uri, "text": "no"})
        )
        .await,
        Err("path_outside_roots".into())
    );
    assert!(!outside.path().join("x.txt").exists());
    assert_eq!(
        h.call(
            "FA_copy_between",
            json!({"source": "/etc/passwd", "target": "memory://leak/p"})
        )
        .await,
        Err("path_outside_roots".into())
    );
    assert_eq!(
        h.call("FA_storage_download", json!({"uri": "memory://notes/a/b.txt", "local_path": outside.path().join("y").to_str().unwrap()})).await,
        Err("path_outside_roots".into())
    );
    let local = format!("file://{}", h.p("sub/t.txt"));
    h.call(
        "FA_storage_mkdir",
        json!({"uri": format!("file://{}", h.p("sub"))}),
    )
    .await
    .unwrap();
    h.call(
        "FA_storage_copy",
        json!({"source": "memory://notes/a/b.txt", "target": local}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("sub/t.txt")).unwrap(),
        "héllo"
    );
    assert_eq!(
        h.call(
            "FA_storage_delete",
            json!({"uri": format!("file://{}", h.p("sub"))})
        )
        .await,
        Err("bad_argument".into())
    );
    h.call(
        "FA_storage_delete",
        json!({"uri": format!("file://{}", h.p("sub")), "recursive": true}),
    )
    .await
    .unwrap();
    assert!(!h.path("sub").exists());

    // memory:// is bounded; schemes not served yet say so.
    h.write("big.bin", vec![0u8; (64 << 20) + 1]);
    assert_eq!(
        h.call(
            "FA_storage_upload",
            json!({"local_path": h.p("big.bin"), "uri": "memory://m/big"})
        )
        .await,
        Err("bad_argument".into())
    );
    assert_eq!(
        h.call("FA_storage_exists", json!({"uri": "dropbox:///x"}))
            .await,
        Err("unsupported_format".into())
    );
    let schemes = h.call("FA_storage_schemes", json!({})).await.unwrap();
    assert_eq!(
        schemes,
        json!([
            "azure", "file", "ftp", "gs", "local", "memory", "s3", "sftp", "webdav"
        ])
    );
}
