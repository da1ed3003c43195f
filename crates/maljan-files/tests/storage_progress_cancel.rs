//! Long transfers report MCP progress (bytes done of the object's size) and stop when the call
//! is cancelled: a cancelled download leaves no partial file, a cancelled upload no object.
//! Against moto, started here on 127.0.0.1.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use common::Harness;
use maljan_files::StorageConfig;
use maljan_server::ProgressSink;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Records progress and cancels the call once `cancel_at` bytes are reported.
struct Sink {
    seen: Mutex<Vec<(f64, Option<f64>)>>,
    cancel_at: f64,
    token: CancellationToken,
}

impl ProgressSink for Sink {
    fn report(&self, progress: f64, total: Option<f64>, _message: Option<String>) {
        self.seen.lock().unwrap().push((progress, total));
        if progress >= self.cancel_at {
            self.token.cancel();
        }
    }
}

async fn run(
    h: &Harness,
    tool: &str,
    args: Value,
    cancel_at: f64,
) -> (bool, Vec<(f64, Option<f64>)>) {
    let token = CancellationToken::new();
    let sink = Arc::new(Sink {
        seen: Mutex::new(Vec::new()),
        cancel_at,
        token: token.clone(),
    });
    let Value::Object(map) = args else {
        unreachable!()
    };
    let out = h
        .server
        .call(
            tool,
            map,
            token,
            Some(sink.clone() as Arc<dyn ProgressSink>),
        )
        .await
        .unwrap();
    let seen = sink.seen.lock().unwrap().clone();
    (out.is_error, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_reported_and_cancellation_leaves_nothing_half_done() {
    let server = peers::moto();
    peers::s3_bucket(&server.url(), "progress");
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{}\"\naccess_key_id = \"t\"\nsecret_access_key = \"t\"\nallow_private_endpoint = true\n",
        server.url()
    );
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let size = (48u64 << 20) as f64;
    peers::big_file(&h.path("f.bin"), 48 << 20);

    // A whole upload: progress climbs to the file's size, with the size as total.
    let (failed, seen) = run(
        &h,
        "FA_s3_upload_file",
        json!({"file_path": h.p("f.bin"), "bucket": "progress", "key": "f.bin", "progress_name": "up"}),
        f64::INFINITY,
    )
    .await;
    assert!(!failed);
    assert!(
        seen.windows(2).all(|w| w[0].0 <= w[1].0),
        "progress went backwards"
    );
    assert_eq!(seen.last().copied(), Some((size, Some(size))));

    // A download cancelled at 16 MiB: an error, and neither the target nor the .part remains.
    let (failed, seen) = run(
        &h,
        "FA_s3_download_file",
        json!({"bucket": "progress", "key": "f.bin", "target_path": h.p("down.bin")}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed, "the cancelled download succeeded");
    assert!(
        seen.iter().all(|(p, _)| *p < size),
        "it ran to the end: {seen:?}"
    );
    assert!(!h.path("down.bin").exists() && !h.path("down.bin.part").exists());

    // An upload cancelled at 16 MiB: no object appears.
    let (failed, _) = run(
        &h,
        "FA_s3_upload_file",
        json!({"file_path": h.p("f.bin"), "bucket": "progress", "key": "cancelled.bin"}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed, "the cancelled upload succeeded");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let listed = h
        .call(
            "FA_s3_list_bucket",
            json!({"bucket": "progress", "prefix": "cancelled"}),
        )
        .await
        .unwrap();
    assert_eq!(listed, json!([]));
}
