//! Times FA_sftp_upload_file / FA_sftp_download_file and the FA_ftp_* pair through the files
//! server's registry (as the protocol layer calls them), for bench/tree_bench.py to print beside
//! automation-file (paramiko, ftplib) on the same servers.
//!
//! `tree_bench DIR FILE RUNS SSH_PORT SSH_USER KEY_FILE KNOWN_HOSTS REMOTE_DIR FTP_PORT FTP_PASSWORD`:
//! FILE lies in DIR (the root); prints one `backend op seconds` line per run.

use std::{path::Path, time::Instant};

use maljan_files::{FilesConfig, StorageConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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
    let [
        dir,
        file,
        runs,
        ssh_port,
        user,
        key,
        known_hosts,
        remote,
        ftp_port,
        ftp_password,
    ] = a.as_slice()
    else {
        panic!(
            "usage: tree_bench DIR FILE RUNS SSH_PORT SSH_USER KEY_FILE KNOWN_HOSTS REMOTE_DIR FTP_PORT FTP_PASSWORD"
        );
    };
    let runs: usize = runs.parse().unwrap();
    let toml = format!(
        "[sftp.default]\nhost = \"127.0.0.1\"\nport = {ssh_port}\nusername = \"{user}\"\nprivate_key_file = \"{key}\"\n\
         known_hosts = \"{known_hosts}\"\nallow_private_endpoint = true\n\
         [ftp.default]\nhost = \"127.0.0.1\"\nport = {ftp_port}\nusername = \"maljan\"\npassword = \"{ftp_password}\"\n\
         allow_private_endpoint = true\n"
    );
    let storage = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let reg = registry(FilesConfig {
        storage,
        ..FilesConfig::rooted(Roots::new([dir]).unwrap())
    });
    let server = ToolServer::new("bench", "0", reg);
    let back = format!("{dir}/maljan-back.bin");
    for _ in 0..runs {
        for (fa, remote_path) in [
            ("FA_sftp", format!("{remote}/maljan.bin")),
            ("FA_ftp", "/maljan.bin".to_string()),
        ] {
            let name = fa.trim_start_matches("FA_");
            let t = Instant::now();
            call(
                &server,
                &format!("{fa}_upload_file"),
                json!({"file_path": file, "remote_path": remote_path}),
            )
            .await;
            println!("{name} upload {:.4}", t.elapsed().as_secs_f64());
            let t = Instant::now();
            call(
                &server,
                &format!("{fa}_download_file"),
                json!({"remote_path": remote_path, "target_path": back}),
            )
            .await;
            println!("{name} download {:.4}", t.elapsed().as_secs_f64());
        }
    }
}
