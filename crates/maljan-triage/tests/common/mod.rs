//! Shared by the triage tests: a corpus the tests write themselves (a PE and an ELF by hand, text
//! full of indicators), runtimes over real `maljan serve analysis` servers, and small helpers.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use maljan_client::{BreakerConfig, Config, Ledger, Runtime, ServerConfig, TransportKind};
use sha2::Digest;

pub use maljan_triage::corpus::*;

pub fn maljan() -> PathBuf {
    maljan_testkit::package_bin("maljan", "maljan")
}

pub fn sha256(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// The built-in analysis server over stdio, confined to `root`.
pub fn stdio_analysis(root: &Path) -> ServerConfig {
    ServerConfig {
        command: maljan().to_string_lossy().into_owned(),
        args: vec![
            "serve".into(),
            "analysis".into(),
            "--root".into(),
            root.to_string_lossy().into_owned(),
        ],
        env: [("MALJAN_LOG".to_string(), "warn".to_string())].into(),
        enabled: true,
        ..Default::default()
    }
}

pub fn http_server(url: String) -> ServerConfig {
    ServerConfig {
        transport: TransportKind::StreamableHttp,
        url,
        enabled: true,
        ..Default::default()
    }
}

/// A runtime over `servers`, with an in-memory ledger and its data in `data`.
pub fn runtime(
    data: &Path,
    servers: Vec<(&str, ServerConfig)>,
    breaker: BreakerConfig,
) -> Arc<Runtime> {
    let mut config = Config {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
        ..Default::default()
    };
    config.core.mcp.breaker = breaker;
    config.data_dir = data.to_path_buf();
    config.path = data.join("config.toml");
    Runtime::new(config, Ledger::open_in_memory())
}

/// The answer of a step as compact JSON text, for "does it mention X" checks.
pub fn text_of(v: &Option<serde_json::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}
