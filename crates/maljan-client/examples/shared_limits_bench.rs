//! What sharing a remote server's limits across workers costs and does, against the Python SDK's
//! streamable HTTP server (tests/peers/py_counting_server.py, which counts calls in flight):
//!
//! 1. One call's latency, sequential (`work(0)`), on PostgreSQL with the shared cap (a slot
//!    taken and given back: two round trips) against PostgreSQL without a cap: p50/p99.
//! 2. Four workers (runtimes with their own connections) each sending 8 calls of `work(50)` at
//!    once to a server capped at 4: the most the server had in flight and the wall time, workers
//!    on one PostgreSQL (shared) against workers on their own SQLite (each its own cap).
//!
//! `cargo run -p maljan-client --example shared_limits_bench` (MALJAN_PY from scripts/peers.sh).
//! Figures: bench/scale.md.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Instant,
};

use maljan_client::{BreakerConfig, Config, JobSpec, Ledger, Runtime, ServerConfig, TransportKind};
use serde_json::{Value, json};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn counting_server() -> (Server, ServerConfig) {
    let port = maljan_testkit::free_port();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/py_counting_server.py");
    let child = Command::new(maljan_testkit::peer_env("MALJAN_PY"))
        .arg(script)
        .args(["--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start py_counting_server.py");
    let server = Server(child);
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");
    let cfg = ServerConfig {
        transport: TransportKind::StreamableHttp,
        url: format!("http://127.0.0.1:{port}/mcp"),
        enabled: true,
        ..Default::default()
    };
    (server, cfg)
}

fn runtime(dir: &Path, server: &ServerConfig, cap: usize, ledger: Ledger) -> Arc<Runtime> {
    let mut c = Config::default();
    c.core.mcp.breaker = BreakerConfig {
        max_concurrent_calls: cap,
        call_timeout_seconds: 30.0,
        ..Default::default()
    };
    c.path = dir.join("config.toml");
    c.data_dir = dir.to_path_buf();
    c.from_file = true;
    c.servers.insert("remote".into(), server.clone());
    Runtime::new(c, ledger)
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn sequential(rt: &Arc<Runtime>, calls: usize) -> (f64, f64) {
    let job = rt.new_job(JobSpec::labelled("seq")).unwrap();
    let h = job.server("remote").unwrap();
    assert!(h.call("work", json!({"ms": 0})).await.ok);
    let mut took = Vec::new();
    for _ in 0..calls {
        let t = Instant::now();
        let rec = h.call("work", json!({"ms": 0})).await;
        assert!(rec.ok, "{rec:?}");
        took.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (pct(took.clone(), 0.5), pct(took, 0.99))
}

async fn together(runtimes: &[Arc<Runtime>]) -> (Value, f64) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for rt in runtimes {
        let job = rt.new_job(JobSpec::labelled("load")).unwrap();
        let h = job.server("remote").unwrap();
        for _ in 0..8 {
            let h = h.clone();
            tasks.push(tokio::spawn(async move {
                h.call("work", json!({"ms": 50})).await
            }));
        }
    }
    for t in tasks {
        assert!(t.await.unwrap().ok);
    }
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    let job = runtimes[0].new_job(JobSpec::labelled("stats")).unwrap();
    let stats = job.server("remote").unwrap().call("stats", json!({})).await;
    (serde_json::from_str(&stats.text()).unwrap(), wall)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pg = maljan_testkit::postgres::fresh_database();
    Ledger::migrate(&pg).unwrap();
    let dir = tempfile::tempdir().unwrap();

    let (_s, server) = counting_server();
    println!("| one call, sequential, 300 calls | p50 | p99 |");
    println!("| --- | --- | --- |");
    for (label, cap) in [
        ("PostgreSQL, no cap", 0),
        ("PostgreSQL, shared cap of 4", 4),
    ] {
        let rt = runtime(
            dir.path(),
            &server,
            cap,
            Ledger::connect(&pg, 65536).unwrap(),
        );
        let (p50, p99) = sequential(&rt, 300).await;
        println!("| {label} | {p50:.2} ms | {p99:.2} ms |");
        rt.shutdown().await;
    }

    println!();
    println!("| 4 workers x 8 calls of 50 ms, cap 4 | most in flight at the server | wall |");
    println!("| --- | --- | --- |");
    for shared in [true, false] {
        let (_s, server) = counting_server();
        let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let runtimes: Vec<_> = dirs
            .iter()
            .map(|d| {
                let ledger = if shared {
                    Ledger::connect(&pg, 65536).unwrap()
                } else {
                    Ledger::open(&d.path().join("ledger.sqlite3"), 65536).unwrap()
                };
                runtime(d.path(), &server, 4, ledger)
            })
            .collect();
        let (stats, wall) = together(&runtimes).await;
        let label = if shared {
            "one PostgreSQL (shared)"
        } else {
            "own SQLite each (per process)"
        };
        println!("| {label} | {} | {wall:.0} ms |", stats["max_in_flight"]);
        for rt in &runtimes {
            rt.shutdown().await;
        }
    }
}
