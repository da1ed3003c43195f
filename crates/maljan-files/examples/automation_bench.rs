//! Scheduler precision and watch latency of the files server's automation (bench/automation.md).
//!
//! `automation_bench [FIRES] [WATCH_EVENTS]` (defaults 200 and 30), in release mode:
//! - precision: a `* * * * *` job on a clock that runs 1200 times faster than the wall (one cron
//!   minute every 50 ms of real time; the scheduler's sleeps are real tokio sleeps, scaled), so
//!   200 fires take 10 s instead of 200 minutes. For each fire, (start time − due time) from
//!   FA_schedule_history, scaled back to real milliseconds: the scheduler's wake-up and dispatch
//!   lag. Prints p50 and p99.
//! - watch latency: a watch with the smallest debounce (0.05 s) whose action list calls a tool
//!   that notes the time; from the write to that call, median and p99, and the same less the
//!   debounce window (what the watcher and the dispatch add).

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use maljan_files::{Clock, FilesConfig, registry_with_clock};
use maljan_server::{Roots, ToolError, ToolMeta, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const FACTOR: f64 = 1200.0;

/// Wall time, sped up FACTOR times from the moment it is made.
struct FastClock {
    origin: DateTime<Utc>,
    started: Instant,
}

impl Clock for FastClock {
    fn now(&self) -> DateTime<Utc> {
        let real = self.started.elapsed().as_secs_f64() * FACTOR;
        self.origin + chrono::Duration::microseconds((real * 1e6) as i64)
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let ahead = (at - self.now()).to_std().unwrap_or_default();
        Box::pin(tokio::time::sleep(ahead.div_f64(FACTOR)))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

async fn call(server: &Arc<ToolServer>, tool: &str, args: Value) -> Value {
    let Value::Object(map) = args else {
        unreachable!()
    };
    let out = server
        .call(tool, map, CancellationToken::new(), None)
        .await
        .expect("served");
    assert!(!out.is_error, "{tool}: {}", out.value);
    out.value
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a count"))
        .collect();
    let fires = args.first().copied().unwrap_or(200);
    let events = args.get(1).copied().unwrap_or(30);
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let marks: Arc<Mutex<Vec<Instant>>> = Default::default();
    let m = marks.clone();
    let clock = Arc::new(FastClock {
        origin: Utc::now(),
        started: Instant::now(),
    });
    let mut reg = registry_with_clock(
        FilesConfig {
            state_dir: Some(root.join(".state")),
            ..FilesConfig::rooted(Roots::new([&root]).unwrap())
        },
        clock,
    );
    reg.add(
        ToolMeta::new("bench_mark", "Notes the time"),
        move |_ctx, _a: NoArgs| {
            let m = m.clone();
            async move {
                m.lock().unwrap().push(Instant::now());
                Ok::<_, ToolError>(json!({}))
            }
        },
    );
    let server = ToolServer::new("bench", "0", reg);
    server.start();

    // Scheduler precision.
    call(&server, "FA_schedule_add", json!({"name": "every", "cron_expression": "* * * * *", "action_list": [["bench_mark", {}]], "allow_overlap": true})).await;
    let runs = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let runs = call(
            &server,
            "FA_schedule_history",
            json!({"job": "every", "limit": fires}),
        )
        .await;
        if runs.as_array().unwrap().len() >= fires {
            break runs;
        }
    };
    call(&server, "FA_schedule_remove", json!({"name": "every"})).await;
    let parse = |v: &Value| DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let mut lag: Vec<f64> = (runs.as_array().unwrap().iter())
        .map(|r| {
            (parse(&r["started_at"]) - parse(&r["scheduled_at"]))
                .num_microseconds()
                .unwrap() as f64
                / 1000.0
                / FACTOR
        })
        .collect();
    lag.sort_by(f64::total_cmp);
    println!(
        "scheduler precision over {} fires (fire - due, real ms): p50 {:.3} p99 {:.3} max {:.3}",
        lag.len(),
        percentile(&lag, 0.5),
        percentile(&lag, 0.99),
        lag[lag.len() - 1]
    );

    // Watch latency.
    let dir = root.join("watched");
    std::fs::create_dir(&dir).unwrap();
    call(&server, "FA_watch_start", json!({"name": "w", "path": dir.to_string_lossy(), "action_list": [["bench_mark", {}]], "debounce": 0.05})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    marks.lock().unwrap().clear();
    let mut latency = Vec::new();
    for i in 0..events {
        let before = marks.lock().unwrap().len();
        let t0 = Instant::now();
        std::fs::write(dir.join(format!("f{i}")), b"x").unwrap();
        let fired = loop {
            if let Some(&t) = marks.lock().unwrap().get(before) {
                break t;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        latency.push((fired - t0).as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    latency.sort_by(f64::total_cmp);
    let p50 = percentile(&latency, 0.5);
    println!(
        "watch latency over {} events (write -> action, ms): p50 {:.1} p99 {:.1}; less the 50 ms debounce: p50 {:.1}",
        latency.len(),
        p50,
        percentile(&latency, 0.99),
        p50 - 50.0
    );
}
