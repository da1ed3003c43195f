//! Issue 4 item 9, one run side by side:
//! 1. the runtime's own cost per call (breaker, cap, manifest lookup, ledger) over the bare
//!    transport: the same stdio fixture called through `Connection::call_tool` (bare) and through
//!    `ServerHandle::call` (runtime, which returns once the call's row is committed: "returned
//!    means ledgered, even if killed right after"), interleaved so machine load hits both alike
//!    (issue 17: no more than 2x what it was before the journal went);
//! 2. 1000 concurrent calls across 4 servers: none lost, every one ledgered;
//! 3. ledger writes per second: one sequential writer, 64 concurrent writers and eight threads
//!    (target ≥ 20k/s).
//!
//! `cargo bench -p maljan-client --bench runtime_overhead` (MALJAN_BENCH_CALLS to change N).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use maljan_client::{
    BreakerConfig, Config, JobSpec, Ledger, LedgerEntry, Runtime, ServerConfig, TransportKind,
    transport::{self, ConnectOptions},
};
use serde_json::json;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn pct(v: &[f64], p: f64) -> f64 {
    v[((v.len() - 1) as f64 * p) as usize]
}

fn fixture() -> ServerConfig {
    ServerConfig {
        transport: TransportKind::Stdio,
        command: maljan_testkit::bin_path("fixture-echo")
            .display()
            .to_string(),
        enabled: true,
        ..Default::default()
    }
}

fn runtime(dir: &std::path::Path, servers: usize) -> Arc<Runtime> {
    let mut c = Config::default();
    c.core.mcp.breaker = BreakerConfig {
        call_timeout_seconds: 30.0,
        ..Default::default()
    };
    c.data_dir = dir.to_path_buf();
    c.path = dir.join("config.toml");
    for i in 0..servers {
        c.servers.insert(format!("s{i}"), fixture());
    }
    let ledger = Ledger::open(&dir.join("ledger.sqlite3"), 256 * 1024).unwrap();
    Runtime::new(c, ledger)
}

fn entry(i: usize) -> LedgerEntry {
    LedgerEntry {
        job_id: "bench".into(),
        ev_id: format!("ev_{i:06}"),
        server: "s".into(),
        tool: "work".into(),
        args: r#"{"path":"/tmp/sample.bin"}"#.into(),
        result: Some(r#"{"content":[{"type":"text","text":"done"}],"isError":false}"#.into()),
        result_truncated: false,
        ok: true,
        error_code: None,
        message: None,
        remediation: None,
        started_at: String::new(),
        started_at_ms: 0,
        wait_ms: 0.0,
        duration_ms: 0.1,
        trial: false,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("MALJAN_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let dir = tempfile::tempdir().unwrap();
    let load_before = load();

    // 1. Per-call overhead.
    let rt_c = runtime(dir.path(), 1);
    let job_c = rt_c.new_job(JobSpec::labelled("bench")).unwrap();
    let hc = job_c.server("s0").unwrap();
    hc.view().await.unwrap();
    let opts = ConnectOptions {
        name: "bare".into(),
        timeout: Duration::from_secs(30),
        max_answer_bytes: 16 << 20,
        auth: None,
        oauth: None,
        base_dir: dir.path().to_path_buf(),
        stderr_file: None,
        input_policy: Default::default(),
    };
    let bare = transport::connect(&fixture(), &opts).await.unwrap();
    let args = json!({"path": "/tmp/sample.bin", "n": 1});
    let bare_args = args.as_object().cloned();
    for _ in 0..200 {
        bare.call_tool("work", bare_args.clone(), Duration::from_secs(30))
            .await
            .0
            .unwrap();
        hc.call("work", args.clone()).await;
    }
    let mut bare_us = Vec::with_capacity(n);
    let mut c_us = Vec::with_capacity(n);
    for _ in 0..n {
        // Interleaved, so machine load hits both alike. The bare call gets its arguments
        // already as a map (the runtime's conversion is part of its cost).
        let t = Instant::now();
        bare.call_tool("work", bare_args.clone(), Duration::from_secs(30))
            .await
            .0
            .unwrap();
        bare_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        let rec = hc.call("work", args.clone()).await;
        c_us.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(rec.ok && rec.ledger_error.is_none());
    }
    let (mb, mc) = (median(&mut bare_us), median(&mut c_us));
    println!("load before: {load_before}");
    println!("per-call, {n} sequential calls to a stdio fixture (interleaved):");
    println!(
        "  bare transport                       median {mb:8.1} µs   p90 {:8.1} µs",
        pct(&bare_us, 0.9)
    );
    println!(
        "  runtime, awaiting the SQLite commit  median {mc:8.1} µs   p90 {:8.1} µs",
        pct(&c_us, 0.9)
    );
    println!("  runtime cost (difference of medians): {:6.1} µs", mc - mb);
    bare.close().await;
    assert_eq!(
        rt_c.ledger().count(Some(job_c.id())).unwrap() as usize,
        n + 200
    );
    job_c.finish();
    rt_c.shutdown().await;

    // 2. 1000 concurrent calls across 4 servers.
    let dir2 = tempfile::tempdir().unwrap();
    let rt = runtime(dir2.path(), 4);
    let job = rt.new_job(JobSpec::labelled("bench-concurrent")).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| job.server(&format!("s{i}")).unwrap())
        .collect();
    for h in &handles {
        h.view().await.unwrap();
    }
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(1000);
    for i in 0..1000 {
        let h = handles[i % 4].clone();
        tasks.push(tokio::spawn(async move {
            h.call("work", json!({ "i": i })).await
        }));
    }
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap().ok {
            ok += 1;
        }
    }
    let wall = t.elapsed();
    let ledgered = rt.ledger().count(Some(job.id())).unwrap();
    println!("1000 concurrent calls across 4 stdio servers (cap 4 each):");
    println!(
        "  answered {ok}/1000, ledgered {ledgered}, wall {:.1} ms, {:.0} calls/s",
        wall.as_secs_f64() * 1e3,
        1000.0 / wall.as_secs_f64()
    );
    assert_eq!((ok, ledgered), (1000, 1000), "a call was lost");
    job.finish();
    rt.shutdown().await;

    // 3. Ledger writes per second, every write acknowledged only after its commit.
    let dir3 = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir3.path().join("l.sqlite3"), 256 * 1024).unwrap();
    let writes = 20_000;
    // One writer, each append awaited before the next: a commit per row, nothing to share.
    let t = Instant::now();
    for i in 0..writes {
        ledger.append(entry(i)).await.unwrap();
    }
    let one = writes as f64 / t.elapsed().as_secs_f64();
    // Many concurrent writers (tasks, as calls are): they share commits.
    let (many, commits) = concurrent(&ledger, 1_000_000).await;
    // Eight OS threads through the blocking `record`.
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..8 {
            let l = ledger.clone();
            s.spawn(move || {
                for i in 0..writes / 8 {
                    l.record(entry(2_000_000 + w * writes + i)).unwrap();
                }
            });
        }
    });
    let threads = writes as f64 / t.elapsed().as_secs_f64();
    assert_eq!(
        ledger.count(Some("bench")).unwrap() as usize,
        2 * writes + MANY_WRITES / WRITERS * WRITERS
    );
    println!("ledger writes (SQLite WAL, synchronous=NORMAL, each awaited until committed):");
    println!("  one writer, sequential         {one:10.0} writes/s (a commit per row)");
    println!(
        "  {WRITERS} concurrent writers           {many:10.0} writes/s ({:.0} rows per commit; target >= 20000)",
        MANY_WRITES as f64 / commits as f64
    );
    println!("  8 threads, blocking record     {threads:10.0} writes/s");
    println!("load after: {}", load());
}

const WRITERS: usize = 64;
const MANY_WRITES: usize = 100_000;

/// MANY_WRITES appends from WRITERS tasks; writes/s and the commits they took.
async fn concurrent(ledger: &Ledger, base: usize) -> (f64, u64) {
    let commits = ledger.commits();
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let l = ledger.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..MANY_WRITES / WRITERS {
                l.append(entry(base + w * MANY_WRITES + i)).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let rate = (MANY_WRITES / WRITERS * WRITERS) as f64 / t.elapsed().as_secs_f64();
    (rate, ledger.commits() - commits)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
