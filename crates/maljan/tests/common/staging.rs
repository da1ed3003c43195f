//! Helpers for the staging tests: real `maljan serve files --http` servers, a runtime over them,
//! samples, and reading the server's staging directory.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use maljan_client::{BreakerConfig, Config, Ledger, Runtime, ServerConfig, TransportKind};
use sha2::Digest;

use super::{Running, free_port, maljan, spawn, wait_answering};

/// One `maljan serve files --http` on loopback.
pub struct Served {
    pub run: Running,
    pub port: u16,
    /// Its staging directory (whether or not put_sample is on).
    pub staging: PathBuf,
}

impl Served {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Starts a files server whose roots are `roots`, with `extra` flags.
pub fn serve_files(scratch: &Path, roots: &[&Path], extra: &[&str]) -> Served {
    let port = free_port();
    let staging = scratch.join(format!("staging-{port}"));
    let mut cmd = Command::new(maljan());
    cmd.args(["serve", "files", "--http", &format!("127.0.0.1:{port}")]);
    for r in roots {
        cmd.arg("--root").arg(r);
    }
    cmd.arg("--staging-dir").arg(&staging).args(extra);
    let run = spawn(&mut cmd);
    wait_answering(port);
    Served { run, port, staging }
}

pub fn http_server(url: &str) -> ServerConfig {
    ServerConfig {
        transport: TransportKind::StreamableHttp,
        url: url.to_string(),
        enabled: true,
        ..Default::default()
    }
}

/// A runtime over `servers`, its data (ledger) in `scratch`; timeouts short enough for tests,
/// long enough for a debug build moving 4 MiB chunks.
pub fn runtime(scratch: &Path, servers: Vec<(&str, ServerConfig)>) -> Arc<Runtime> {
    runtime_capped(
        scratch,
        servers,
        BreakerConfig::default().max_concurrent_calls,
    )
}

/// [`runtime`], with at most `cap` calls in flight per server.
pub fn runtime_capped(
    scratch: &Path,
    servers: Vec<(&str, ServerConfig)>,
    cap: usize,
) -> Arc<Runtime> {
    let mut c = Config::default();
    c.core.mcp.breaker = BreakerConfig {
        call_timeout_seconds: 20.0,
        connect_timeout_seconds: 10.0,
        max_concurrent_calls: cap,
        ..Default::default()
    };
    c.path = scratch.join("config.toml");
    c.data_dir = scratch.to_path_buf();
    c.from_file = true;
    c.servers = servers
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect();
    let ledger = Ledger::open(&scratch.join("ledger.sqlite3"), 64 * 1024).unwrap();
    Runtime::new(c, ledger)
}

/// Writes `size` pseudo-random bytes (xorshift: no two chunks alike) and returns the sha256.
pub fn write_sample(path: &Path, size: usize, seed: u64) -> String {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(size + 8);
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(size);
    std::fs::write(path, &data).unwrap();
    hex::encode(sha2::Sha256::digest(&data))
}

/// Every regular file under `dir` (recursively), hidden part files included.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The digest FA_file_checksum reported, from the call's JSON.
pub fn digest_of(rec: &maljan_client::CallRecord) -> String {
    let v = rec
        .json()
        .unwrap_or_else(|| panic!("no JSON: {:?} {:?}", rec.error, rec.result));
    v["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no digest in {v}"))
        .to_string()
}
