//! Shared by the integration tests: a runtime over a scratch data directory with short timings.
#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc};

pub mod oauth;

use maljan_client::{BreakerConfig, Config, Ledger, Runtime, ServerConfig, TransportKind};

pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("fixture.log");
        Self { dir, log }
    }

    /// Lines of the fixture's event log that start with `prefix`.
    pub fn events(&self, prefix: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }

    /// A stdio entry for a testkit fixture binary, logging to this scratch's event log.
    pub fn fixture(&self, bin: &str, env: &[(&str, &str)]) -> ServerConfig {
        let mut e: std::collections::BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        e.insert(
            "FIXTURE_LOG".into(),
            self.log.to_string_lossy().into_owned(),
        );
        ServerConfig {
            transport: TransportKind::Stdio,
            command: maljan_testkit::bin_path(bin).to_string_lossy().into_owned(),
            env: e,
            enabled: true,
            ..Default::default()
        }
    }

    pub fn config(&self, servers: Vec<(&str, ServerConfig)>, breaker: BreakerConfig) -> Config {
        let mut c = Config::default();
        c.core.mcp.breaker = breaker;
        c.path = self.dir.path().join("config.toml");
        c.data_dir = self.dir.path().to_path_buf();
        c.from_file = true;
        c.servers = servers
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect();
        c
    }

    pub fn runtime(
        &self,
        servers: Vec<(&str, ServerConfig)>,
        breaker: BreakerConfig,
    ) -> Arc<Runtime> {
        let c = self.config(servers, breaker);
        let ledger = Ledger::open(&self.dir.path().join("ledger.sqlite3"), 64 * 1024).unwrap();
        Runtime::new(c, ledger)
    }
}

/// Short timings: 0.3 s default timeout, 0.4 s cooldown.
pub fn quick() -> BreakerConfig {
    BreakerConfig {
        failures_to_open: 3,
        cooldown_seconds: 0.4,
        max_concurrent_calls: 4,
        call_timeout_seconds: 0.3,
        timeout_margin_seconds: 0.1,
        connect_timeout_seconds: 10.0,
    }
}

/// A peer server process, killed when dropped.
pub struct Peer(pub std::process::Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The shared peer scripts (py_server.py): beside the repository, or MALJAN_SHARED_PEERS.
pub fn peers_dir() -> PathBuf {
    if let Ok(d) = std::env::var("MALJAN_SHARED_PEERS") {
        return d.into();
    }
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers");
    if beside.join("py_server.py").exists() {
        beside
    } else {
        "/work/shared/peers".into()
    }
}

/// This repository's own peer scripts (tests/peers).
pub fn repo_peers_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers")
}

/// A stdio entry for tests/peers/py_2026_server.py (the Python SDK) with `args`.
pub fn py_2026_stdio(args: &[&str]) -> ServerConfig {
    let mut all = vec![
        repo_peers_dir()
            .join("py_2026_server.py")
            .to_string_lossy()
            .into_owned(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    ServerConfig {
        transport: TransportKind::Stdio,
        command: maljan_testkit::peer_env("MALJAN_PY"),
        args: all,
        enabled: true,
        ..Default::default()
    }
}
