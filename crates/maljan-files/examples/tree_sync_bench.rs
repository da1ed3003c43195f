//! Times FA_storage_copy_tree and FA_storage_sync through the files server's registry (as the
//! protocol layer calls them), for bench/tree_sync_bench.py to print beside automation-file's
//! storage_copy_tree and storage_sync on the same S3 server.
//!
//! `tree_sync_bench ROOT SOURCE_DIR RUNS S3_URL`: SOURCE_DIR lies in ROOT; each run copies it to
//! `s3://bench/maljan-RUN`, mirrors that into a fresh local directory, and mirrors it again
//! with nothing changed. Prints one `step seconds` line per step and run.

use std::{path::Path, time::Instant};

use maljan_files::{FilesConfig, StorageConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn call(server: &std::sync::Arc<ToolServer>, tool: &str, args: Value) -> Value {
    let Value::Object(map) = args else {
        unreachable!()
    };
    let out = server
        .call(tool, map, CancellationToken::new(), None)
        .await
        .expect("tool served");
    assert!(!out.is_error, "{tool}: {}", out.value);
    assert_eq!(out.value["errors"], json!({}), "{tool}: {}", out.value);
    out.value
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [root, source, runs, s3] = a.as_slice() else {
        panic!("usage: tree_sync_bench ROOT SOURCE_DIR RUNS S3_URL");
    };
    let runs: usize = runs.parse().unwrap();
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{s3}\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_private_endpoint = true\n"
    );
    let storage = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let reg = registry(FilesConfig {
        storage,
        ..FilesConfig::rooted(Roots::new([root]).unwrap())
    });
    let server = ToolServer::new("bench", "0", reg);
    for run in 0..runs {
        let uri = format!("s3://bench/maljan-{run}");
        let back = format!("{root}/maljan-back-{run}");
        let t = Instant::now();
        call(
            &server,
            "FA_storage_copy_tree",
            json!({"source": source, "target": uri}),
        )
        .await;
        println!("copy_tree {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        call(
            &server,
            "FA_storage_sync",
            json!({"source": uri, "target": back}),
        )
        .await;
        println!("sync {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let same = call(
            &server,
            "FA_storage_sync",
            json!({"source": uri, "target": back}),
        )
        .await;
        assert_eq!(same["copied"], json!([]), "nothing changed: {same}");
        println!("sync_unchanged {:.4}", t.elapsed().as_secs_f64());
    }
}
