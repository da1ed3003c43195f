//! How soon a console's event stream carries an event another process wrote: a writer with its
//! own ledger connection (a worker on another node) appends a job's events one every 100 ms; the
//! console follows the job's stream through the whole router, in process; the latency is from
//! the append's return to the event's arrival in the stream. PostgreSQL (the console woken by
//! LISTEN/NOTIFY) against SQLite (the console reading the ledger again every 2 s).
//!
//! `cargo run -p maljan-console --example events_latency_bench [-- EVENTS]` (PostgreSQL from
//! maljan-testkit, as the tests start it). Results: bench/scale.md.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{body::Body, http::Request};
use futures::StreamExt;
use maljan_client::{Config, Ledger};
use maljan_console::{AppState, ConsoleOptions, router};
use tower::ServiceExt;

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(url: &str, events: usize) -> anyhow::Result<Vec<f64>> {
    let dir = tempfile::tempdir()?;
    let config = Config {
        data_dir: dir.path().join("data"),
        ..Default::default()
    };
    let console_ledger = Ledger::connect(url, 256 * 1024)?;
    let writer = Ledger::connect(url, 256 * 1024)?;
    writer.create_job("j-follow", "bench", None)?;
    let state = AppState::with_ledger(ConsoleOptions::default(), config, console_ledger)?;
    let app = router(Arc::clone(&state));
    let req = Request::builder()
        .uri("/api/v1/jobs/j-follow/events")
        .header("host", "127.0.0.1:8700")
        .body(Body::empty())?;
    let resp = app.oneshot(req).await?;
    let mut body = resp.into_body().into_data_stream();

    let written: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let log = written.clone();
    let producer = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        for i in 0..events {
            std::thread::sleep(Duration::from_millis(100));
            let kind = if i + 1 == events {
                "done"
            } else {
                "step_started"
            };
            let seq = writer.append_job_event("j-follow", kind, "{}")?;
            log.lock().unwrap().insert(seq, Instant::now());
        }
        Ok(())
    });
    let mut latencies = Vec::new();
    let mut pending = String::new();
    while latencies.len() < events {
        let Some(chunk) = body.next().await else {
            anyhow::bail!("the stream ended after {} events", latencies.len());
        };
        let arrived = Instant::now();
        pending.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = pending.find("\n\n") {
            let block: String = pending.drain(..end + 2).collect();
            let Some(seq) = block
                .lines()
                .find_map(|l| l.strip_prefix("id:"))
                .and_then(|v| v.trim().parse::<i64>().ok())
            else {
                continue;
            };
            // The append returns a moment after the event is visible: wait for its time.
            let at = loop {
                if let Some(t) = written.lock().unwrap().get(&seq).copied() {
                    break t;
                }
                tokio::time::sleep(Duration::from_micros(100)).await;
            };
            latencies.push(arrived.saturating_duration_since(at).as_secs_f64() * 1000.0);
        }
    }
    producer.await??;
    Ok(latencies)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let events: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir()?;
    let engines = [
        (
            "sqlite",
            format!("sqlite:{}", dir.path().join("ledger.sqlite3").display()),
        ),
        ("postgres", maljan_testkit::postgres::fresh_database()),
    ];
    println!("| engine | events | p50 | p99 | max |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, url) in engines {
        let l = measure(&url, events).await?;
        let max = l.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {events} | {:.1} ms | {:.1} ms | {:.1} ms |",
            pct(l.clone(), 0.5),
            pct(l, 0.99),
            max
        );
    }
    Ok(())
}
