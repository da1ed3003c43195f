//! The analysis server over a temporary sample directory, as the tests drive it.
#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc, time::Duration};

use maljan_analysis::{AnalysisConfig, WorkDir, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct Server {
    _dir: tempfile::TempDir,
    pub samples: PathBuf,
    /// The server's work directory: where what it carves or extracts goes.
    pub work: PathBuf,
    pub server: Arc<ToolServer>,
}

impl Server {
    pub fn new(files: &[(&str, Vec<u8>)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let samples = dir.path().join("samples");
        std::fs::create_dir(&samples).unwrap();
        for (name, data) in files {
            std::fs::write(samples.join(name), data).unwrap();
        }
        std::fs::write(samples.join("small.txt"), b"hello http://example.com/x").unwrap();
        let work_dir = WorkDir::private_under(&dir.path().join("work")).unwrap();
        let work = work_dir.path().to_path_buf();
        let config = AnalysisConfig {
            roots: Roots::new([&samples]).unwrap(),
            work_dir,
            rules_dir: None,
            builtin_rules: true,
        };
        let server = ToolServer::new("analysis", "test", registry(config));
        Self {
            _dir: dir,
            samples,
            work,
            server,
        }
    }

    pub fn path(&self, name: &str) -> String {
        self.samples.join(name).display().to_string()
    }

    /// Calls `tool`; a ceiling of 20 s only catches unbounded work, it times nothing.
    pub async fn call(&self, tool: &str, args: Value) -> (Value, bool) {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        let call = self.server.call(tool, map, CancellationToken::new(), None);
        let out = tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .unwrap_or_else(|_| panic!("{tool} did not answer within 20 s"))
            .expect("tool exists");
        (out.value, out.is_error)
    }

    /// The server still answers an ordinary call.
    pub async fn still_answers(&self) {
        let (v, is_error) = self
            .call("identify_file", json!({"path": self.path("small.txt")}))
            .await;
        assert!(!is_error, "{v}");
        assert_eq!(v["kind"], "text", "{v}");
    }
}

pub fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}
