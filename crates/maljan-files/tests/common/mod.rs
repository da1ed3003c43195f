//! A files server over a temporary root, called the way the protocol layer calls it.
#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc};

use maljan_files::{FilesConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub server: Arc<ToolServer>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with(|_| {}, false)
    }

    /// `narrow` may remove tools (to mimic --read-only / --allowed-actions).
    pub fn with(narrow: impl FnOnce(&mut maljan_server::Registry), loopback: bool) -> Self {
        Self::configured(narrow, loopback, Default::default())
    }

    /// A server whose zip extraction is bounded by `extraction`.
    pub fn with_extraction(extraction: maljan_files::ExtractionLimits) -> Self {
        Self::configured(|_| {}, false, extraction)
    }

    fn configured(
        narrow: impl FnOnce(&mut maljan_server::Registry),
        loopback: bool,
        extraction: maljan_files::ExtractionLimits,
    ) -> Self {
        Self::full(narrow, loopback, extraction, Default::default())
    }

    /// A server with these remote storage profiles.
    pub fn with_storage(
        storage: maljan_files::StorageConfig,
        narrow: impl FnOnce(&mut maljan_server::Registry),
    ) -> Self {
        Self::full(narrow, false, Default::default(), storage)
    }

    fn full(
        narrow: impl FnOnce(&mut maljan_server::Registry),
        loopback: bool,
        extraction: maljan_files::ExtractionLimits,
        storage: maljan_files::StorageConfig,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::new([dir.path()]).unwrap();
        let mut reg = registry(FilesConfig {
            allow_loopback_downloads: loopback,
            extraction,
            storage,
            ..FilesConfig::rooted(roots)
        });
        narrow(&mut reg);
        let server = ToolServer::new("files-test", "0", reg);
        Self { dir, server }
    }

    /// The canonical root (tempdirs may sit behind a symlink such as /tmp on macOS).
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn p(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Ok(result) or Err(error code) — the error JSON's shape is checked on every error.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, String> {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        self.call_map(tool, map).await
    }

    pub async fn call_map(&self, tool: &str, args: Map<String, Value>) -> Result<Value, String> {
        let outcome = self
            .server
            .call(tool, args, CancellationToken::new(), None)
            .await
            .unwrap_or_else(|| panic!("tool {tool} is not served"));
        if outcome.is_error {
            let v = outcome.value;
            assert_eq!(v["tool"], tool, "{v}");
            assert!(v["error"]["message"].is_string(), "{v}");
            assert!(
                !v["error"]["remediation"]
                    .as_str()
                    .unwrap_or_default()
                    .is_empty(),
                "{v}"
            );
            Err(v["error"]["code"].as_str().unwrap().to_string())
        } else {
            Ok(outcome.value)
        }
    }

    /// The error message of a call expected to fail.
    pub async fn error(&self, tool: &str, args: Value) -> (String, String) {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        let outcome = self
            .server
            .call(tool, map, CancellationToken::new(), None)
            .await
            .unwrap();
        assert!(outcome.is_error, "{tool} succeeded: {}", outcome.value);
        (
            outcome.value["error"]["code"].as_str().unwrap().to_string(),
            outcome.value["error"]["message"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    }
}
