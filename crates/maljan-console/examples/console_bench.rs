//! The console's page and API latency over a big ledger: 10,000 jobs and 1,000,000 call rows
//! (100 per job), written through the ledger's own group-committed `append`. Then p50/p99 of
//! the jobs list, one job's evidence page and the servers page, each as the JSON API and as the
//! HTML page, every request through the whole router (guard, handler, template) in process.
//!
//! `cargo run --release -p maljan-console --example console_bench [-- JOBS ROWS_PER_JOB REQUESTS]`
//! Results: bench/console.md.

use std::{sync::Arc, time::Instant};

use axum::{body::Body, http::Request};
use maljan_client::{Config, Ledger, LedgerEntry};
use maljan_console::{AppState, ConsoleOptions, router};
use tower::ServiceExt;

fn entry(job: &str, i: usize) -> LedgerEntry {
    let ok = !i.is_multiple_of(7);
    LedgerEntry {
        job_id: job.to_string(),
        ev_id: format!("ev_{:04}", i + 1),
        server: "analysis".into(),
        tool: [
            "identify_file",
            "hashes",
            "strings",
            "iocs_from_file",
            "yara_scan",
        ][i % 5]
            .into(),
        args: r#"{"file_path":"/samples/a.bin"}"#.into(),
        result: Some(format!(
            r#"{{"structuredContent":{{"n":{i},"note":"{}"}}}}"#,
            "x".repeat(200)
        )),
        result_truncated: false,
        ok,
        error_code: (!ok).then(|| "timeout".to_string()),
        message: (!ok).then(|| "the server did not answer in time".to_string()),
        remediation: (!ok).then(|| "raise timeout_s".to_string()),
        started_at: String::new(),
        started_at_ms: 1_700_000_000_000 + i as i64,
        wait_ms: 0.0,
        duration_ms: 3.5,
        trial: false,
    }
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let jobs = args.first().copied().unwrap_or(10_000);
    let per_job = args.get(1).copied().unwrap_or(100);
    let requests = args.get(2).copied().unwrap_or(200);
    let dir = tempfile::tempdir()?;
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite3"), 256 * 1024)?;

    let fill = Instant::now();
    for j in 0..jobs {
        ledger.create_job(
            &format!("j-{j:06}"),
            &format!("sample {j}"),
            Some(("/samples/a.bin", "ab".repeat(32).as_str(), 4096)),
        )?;
        if j.is_multiple_of(3) {
            ledger.finish_job(
                &format!("j-{j:06}"),
                ["complete", "degraded", "failed"][(j / 3) % 3],
            )?;
        }
    }
    let mut tasks = Vec::new();
    let lanes = 64;
    for lane in 0..lanes {
        let l = ledger.clone();
        tasks.push(tokio::spawn(async move {
            for j in (lane..jobs).step_by(lanes) {
                let id = format!("j-{j:06}");
                for i in 0..per_job {
                    l.append(entry(&id, i)).await.expect("append");
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let rows = ledger.count(None)?;
    println!(
        "filled {jobs} jobs, {rows} rows in {:.1} s ({} commits)",
        fill.elapsed().as_secs_f64(),
        ledger.commits()
    );

    let echo = maljan_testkit::bin_path("fixture-echo");
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        format!(
            "[servers.echo]\ncommand = {:?}\n[servers.echo2]\ncommand = {:?}\n",
            echo, echo
        ),
    )?;
    let mut config = Config::load(Some(&config_path))?;
    config.data_dir = dir.path().join("data");
    let opts = ConsoleOptions {
        config: Some(config_path),
        ..Default::default()
    };
    let state = AppState::with_ledger(opts, config, ledger)?;
    state.test_all_servers_in_background();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let app = router(Arc::clone(&state));
    let job = format!("j-{:06}", jobs / 2);
    let cases = [
        ("jobs list (API, page 1)", "/api/v1/jobs?page=1".to_string()),
        (
            "jobs list (API, page 20, status=degraded)",
            "/api/v1/jobs?page=20&status=degraded".to_string(),
        ),
        ("jobs list (page)", "/jobs".to_string()),
        (
            "evidence (API, 50 rows)",
            format!("/api/v1/jobs/{job}/evidence"),
        ),
        (
            "evidence (API, tool+ok filter)",
            format!("/api/v1/jobs/{job}/evidence?tool=hashes&ok=true"),
        ),
        (
            "evidence (ledger page, 50 rows)",
            format!("/jobs/{job}/ledger"),
        ),
        (
            "evidence (ledger page, ?ev= jump)",
            format!("/jobs/{job}/ledger?ev=ev_0077"),
        ),
        ("servers (API)", "/api/v1/servers".to_string()),
        ("servers (page)", "/servers".to_string()),
        ("dashboard (page)", "/".to_string()),
    ];
    println!("| request | p50 ms | p99 ms | bytes |");
    println!("|---|---:|---:|---:|");
    for (name, uri) in cases {
        let mut times = Vec::with_capacity(requests);
        let mut size = 0;
        for _ in 0..requests {
            let req = Request::builder()
                .uri(&uri)
                .header("host", "127.0.0.1:8700")
                .body(Body::empty())?;
            let t = Instant::now();
            let resp = app.clone().oneshot(req).await?;
            assert!(resp.status().is_success(), "{uri}: {}", resp.status());
            size = axum::body::to_bytes(resp.into_body(), 64 << 20)
                .await?
                .len();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "| {name} | {:.2} | {:.2} | {size} |",
            pct(times.clone(), 0.5),
            pct(times, 0.99)
        );
    }
    Ok(())
}
