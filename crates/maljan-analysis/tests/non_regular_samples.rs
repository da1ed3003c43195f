//! A FIFO given as the sample is refused at once (issue 18 item 4): the open does not wait for
//! a writer, and only a regular file is mapped.

use std::time::Duration;

use maljan_analysis::{AnalysisConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_sample_is_refused_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("sample.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let server = ToolServer::new(
        "analysis",
        "test",
        registry(AnalysisConfig {
            roots: Roots::new([dir.path()]).unwrap(),
            work_dir: maljan_analysis::WorkDir::private_under(dir.path()).unwrap(),
            rules_dir: None,
            builtin_rules: true,
        }),
    );
    for tool in ["identify_file", "hashes", "strings", "entropy"] {
        let args = json!({"path": fifo.display().to_string()});
        let call = server.call(
            tool,
            serde_json::from_value(args).unwrap(),
            CancellationToken::new(),
            None,
        );
        let Ok(outcome) = tokio::time::timeout(Duration::from_secs(1), call).await else {
            // Let a thread stuck opening the FIFO go, so the failing test ends.
            for _ in 0..50 {
                let writer = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&fifo)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(20));
                drop(writer);
            }
            panic!("{tool} did not answer within a second on a FIFO");
        };
        let outcome = outcome.unwrap();
        assert!(outcome.is_error, "{tool}: {}", outcome.value);
        let error = &outcome.value["error"];
        assert_eq!(error["code"], "bad_argument", "{tool}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("is not a regular file"),
            "{tool}: {error}"
        );
    }
}
