//! A started files server (schedules and watches running) over a root and a state directory.
#![allow(dead_code)]

use std::{future::Future, path::Path, sync::Arc, time::Duration};

use maljan_files::{Clock, FilesConfig, registry_with_clock};
use maljan_server::{Registry, Roots, ToolServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Builds and starts a server; `extra` may add test-only tools to the registry.
pub fn serve(
    root: &Path,
    state: Option<&Path>,
    clock: Arc<dyn Clock>,
    extra: impl FnOnce(&mut Registry),
) -> Arc<ToolServer> {
    let mut reg = registry_with_clock(
        FilesConfig {
            state_dir: state.map(Path::to_path_buf),
            ..FilesConfig::rooted(Roots::new([root]).unwrap())
        },
        clock,
    );
    extra(&mut reg);
    let server = ToolServer::new("files-test", "0", reg);
    server.start();
    server
}

/// Calls a tool: Ok(result) or Err(the error object).
pub async fn call(server: &Arc<ToolServer>, tool: &str, args: Value) -> Result<Value, Value> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let out = server
        .call(tool, args, CancellationToken::new(), None)
        .await
        .unwrap_or_else(|| panic!("{tool} is not served"));
    if out.is_error {
        Err(out.value["error"].clone())
    } else {
        Ok(out.value)
    }
}

/// Polls `probe` until it answers Some (background work finishing); gives up after 30 s.
pub async fn until<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
