//! Times FA_s3_upload_file / FA_s3_download_file and the Azure Blob pair through the files
//! server's registry (as the protocol layer calls them), for bench/storage_bench.py to print
//! beside boto3, azure-storage-blob and automation-file on the same servers.
//!
//! `storage_bench DIR FILE RUNS S3_URL AZURE_URL`: FILE lies in DIR (the root); prints one
//! `backend op seconds` line per run. `storage_bench gcs DIR FILE RUNS BASE_URL KEY_FILE` times
//! FA_gcs_upload_file / FA_gcs_download_file the same way (bench/gcs_bench.py).

use std::{path::Path, time::Instant};

use maljan_files::{FilesConfig, StorageConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

async fn call(server: &std::sync::Arc<ToolServer>, tool: &str, args: Value) {
    let Value::Object(map) = args else {
        unreachable!()
    };
    let out = server
        .call(tool, map, CancellationToken::new(), None)
        .await
        .expect("tool served");
    assert!(!out.is_error, "{tool}: {}", out.value);
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if let [gcs_mode, dir, file, runs, base, key] = a.as_slice()
        && gcs_mode == "gcs"
    {
        return gcs(dir, file, runs.parse().unwrap(), base, key).await;
    }
    let [dir, file, runs, s3, azure] = a.as_slice() else {
        panic!("usage: storage_bench DIR FILE RUNS S3_URL AZURE_URL");
    };
    let runs: usize = runs.parse().unwrap();
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{s3}\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_private_endpoint = true\n\
         [azure_blob.default]\naccount = \"devstoreaccount1\"\naccount_url = \"{azure}/devstoreaccount1\"\naccess_key = \"{AZURITE_KEY}\"\nallow_private_endpoint = true\n"
    );
    let server = server(dir, &toml);
    let back = format!("{dir}/maljan-back.bin");
    for _ in 0..runs {
        let t = Instant::now();
        call(
            &server,
            "FA_s3_upload_file",
            json!({"file_path": file, "bucket": "bench", "key": "maljan.bin"}),
        )
        .await;
        println!("s3 upload {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        call(
            &server,
            "FA_s3_download_file",
            json!({"bucket": "bench", "key": "maljan.bin", "target_path": back}),
        )
        .await;
        println!("s3 download {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        call(
            &server,
            "FA_azure_blob_upload_file",
            json!({"file_path": file, "container": "bench", "blob_name": "maljan.bin"}),
        )
        .await;
        println!("azure upload {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        call(
            &server,
            "FA_azure_blob_download_file",
            json!({"container": "bench", "blob_name": "maljan.bin", "target_path": back}),
        )
        .await;
        println!("azure download {:.4}", t.elapsed().as_secs_f64());
    }
}

fn server(dir: &str, toml: &str) -> std::sync::Arc<ToolServer> {
    let storage = StorageConfig::parse(toml, Path::new("/"), &|_| None).unwrap();
    let reg = registry(FilesConfig {
        storage,
        ..FilesConfig::rooted(Roots::new([dir]).unwrap())
    });
    ToolServer::new("bench", "0", reg)
}

async fn gcs(dir: &str, file: &str, runs: usize, base: &str, key: &str) {
    let toml = format!(
        "[gcs.default]\nbase_url = \"{base}\"\nservice_account_key_file = \"{key}\"\nallow_private_endpoint = true\n"
    );
    let server = server(dir, &toml);
    let back = format!("{dir}/maljan-back.bin");
    for _ in 0..runs {
        let t = Instant::now();
        let up = json!({"file_path": file, "bucket": "bench", "key": "maljan.bin"});
        call(&server, "FA_gcs_upload_file", up).await;
        println!("gcs upload {:.4}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let down = json!({"bucket": "bench", "key": "maljan.bin", "target_path": back});
        call(&server, "FA_gcs_download_file", down).await;
        println!("gcs download {:.4}", t.elapsed().as_secs_f64());
    }
}
