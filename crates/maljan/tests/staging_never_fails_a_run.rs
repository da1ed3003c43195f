//! Staging never fails a run: a bad sha256 (the sample changed after the job hashed it), a
//! hostile filename and a hostile answer, a server killed mid-upload, and a staging bound smaller
//! than the sample each end in a degradation reason on the job, in memory and in the ledger; the
//! failing server is called with the local path, the other servers are still called, and the
//! job completes.

mod common;

use std::{
    path::Path,
    process::Command,
    sync::{Arc, Mutex},
};

use common::{staging::*, *};
use maljan_client::{Handover, Job, JobSpec, JobStatus, Runtime};
use serde_json::json;

const MIB: usize = 1024 * 1024;

/// Calls FA_file_checksum on each server; returns whether each call succeeded.
async fn checksum_everywhere(job: &Arc<Job>, path: &str, servers: &[&str]) -> Vec<bool> {
    let mut out = Vec::new();
    for name in servers {
        let rec = job
            .server(name)
            .unwrap()
            .call("FA_file_checksum", json!({"path": path}))
            .await;
        out.push(rec.ok);
    }
    out
}

/// The job's staging reason for `server`, also present in the ledger.
fn staging_reason(rt: &Runtime, job: &Job, server: &str) -> String {
    let prefix = format!("sample staging failed for '{server}': ");
    let reason = job
        .degradations()
        .into_iter()
        .find(|d| d.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no staging reason for {server}: {:?}", job.degradations()));
    let in_ledger = rt.ledger().degradations(job.id()).unwrap();
    assert!(in_ledger.contains(&reason), "{in_ledger:?}");
    reason
}

fn local_path(p: &Path) -> String {
    p.canonicalize().unwrap().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_changed_after_hashing_is_refused_by_sha256_and_the_run_goes_on() {
    let scratch = tempfile::tempdir().unwrap();
    let samples = scratch.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    let sample = samples.join("s.bin");
    write_sample(&sample, 64 * 1024, 3);
    let up = serve_files(scratch.path(), &[&samples], &[]);
    let plain = serve_files(scratch.path(), &[&samples], &["--no-put-sample"]);
    let rt = runtime(
        scratch.path(),
        vec![
            ("up", http_server(&up.url())),
            ("plain", http_server(&plain.url())),
        ],
    );
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    // Same size, other bytes: the digest the job took no longer matches what is sent.
    let new_sha = write_sample(&sample, 64 * 1024, 4);
    let path = local_path(&sample);
    let ok = checksum_everywhere(&job, &path, &["up", "plain"]).await;
    assert_eq!(
        ok,
        [true, true],
        "both servers were called (up with the local path)"
    );
    let reason = staging_reason(&rt, &job, "up");
    assert!(
        reason.contains("bad_argument") && reason.contains("sha256"),
        "{reason}"
    );
    assert_eq!(
        job.server("up").unwrap().handover().await.unwrap(),
        Handover::Local { path: path.clone() }
    );
    assert!(
        files_under(&up.staging).is_empty(),
        "nothing was staged: {:?}",
        files_under(&up.staging)
    );
    let rec = job
        .server("plain")
        .unwrap()
        .call("FA_file_checksum", json!({"path": path}))
        .await;
    assert_eq!(digest_of(&rec), new_sha);
    assert_eq!(job.finish(), JobStatus::Degraded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_cleaned_and_a_hostile_answer_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let samples = scratch.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    // A legal Linux file name with an escape sequence, a newline and leading dots.
    let sample = samples.join("..\u{1b}[31mevil\nname.exe");
    let sha = write_sample(&sample, 1000, 5);
    let path = local_path(&sample);

    // A maljan server: the name it stored is a clean base name inside its staging directory.
    let up = serve_files(scratch.path(), &[&samples], &[]);
    // A hostile peer (Python SDK): logs the filename it was sent, answers "../../etc/passwd".
    let hostile_port = free_port();
    let wire_log = scratch.path().join("wire.log");
    let _hostile = spawn(
        Command::new(peer("MALJAN_PY"))
            .arg(repo_root().join("tests/peers/hostile_staging_server.py"))
            .args(["--port", &hostile_port.to_string(), "--log"])
            .arg(&wire_log),
    );
    wait_answering(hostile_port);
    let rt = runtime(
        scratch.path(),
        vec![
            ("up", http_server(&up.url())),
            (
                "hostile",
                http_server(&format!("http://127.0.0.1:{hostile_port}/mcp")),
            ),
        ],
    );
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let rec = job
        .server("up")
        .unwrap()
        .call("FA_file_checksum", json!({"path": path}))
        .await;
    assert_eq!(digest_of(&rec), sha);
    let staged = files_under(&up.staging);
    assert_eq!(staged.len(), 1, "{staged:?}");
    let stored = staged[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(stored, "_[31mevil_name.exe");

    let rec = job
        .server("hostile")
        .unwrap()
        .call("echo", json!({"message": "still called"}))
        .await;
    assert!(
        rec.ok && rec.text().contains("still called"),
        "{:?}",
        rec.error
    );
    let reason = staging_reason(&rt, &job, "hostile");
    assert!(reason.contains("unusable path"), "{reason}");
    assert!(matches!(
        job.server("hostile").unwrap().handover().await.unwrap(),
        Handover::Local { .. }
    ));
    // What went on the wire was already clean (the server's own record of it).
    let wire = std::fs::read_to_string(&wire_log).unwrap();
    assert_eq!(wire.trim(), "'_[31mevil_name.exe'");
    assert_eq!(job.finish(), JobStatus::Degraded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_upload_degrades_the_job_and_the_others_are_still_called() {
    let scratch = tempfile::tempdir().unwrap();
    let samples = scratch.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    let sample = samples.join("big.bin");
    let sha = write_sample(&sample, 20 * MIB, 9);
    let up = serve_files(scratch.path(), &[&samples], &[]);
    let plain = serve_files(scratch.path(), &[&samples], &["--no-put-sample"]);
    let rt = runtime(
        scratch.path(),
        vec![
            ("up", http_server(&up.url())),
            ("plain", http_server(&plain.url())),
        ],
    );
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    // Kill the server as soon as its first chunk is acknowledged: the next chunk finds it gone.
    let victim = Arc::new(Mutex::new(Some(up.run)));
    let v = victim.clone();
    let killed_at = Arc::new(Mutex::new(None));
    let k = killed_at.clone();
    job.events().subscribe(move |e| {
        if let maljan_client::Event::Upload(p) = e
            && p.sent > 0
            && let Some(mut running) = v.lock().unwrap().take()
        {
            running.0.kill().unwrap();
            running.0.wait().unwrap();
            *k.lock().unwrap() = Some(p.sent);
        }
    });
    let path = local_path(&sample);
    let ok = checksum_everywhere(&job, &path, &["up", "plain"]).await;
    assert_eq!(*killed_at.lock().unwrap(), Some(4 * MIB as u64));
    assert_eq!(ok, [false, true], "up is gone; plain still answers");
    let reason = staging_reason(&rt, &job, "up");
    assert!(reason.contains("put_sample_chunk"), "{reason}");
    let rec = job
        .server("plain")
        .unwrap()
        .call("FA_file_checksum", json!({"path": path}))
        .await;
    assert_eq!(digest_of(&rec), sha);
    assert_eq!(job.finish(), JobStatus::Degraded);
    let row = rt.ledger().job(job.id()).unwrap().unwrap();
    assert_eq!(row.status, "degraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_bound_smaller_than_the_sample_degrades_and_the_local_path_is_used() {
    let scratch = tempfile::tempdir().unwrap();
    let samples = scratch.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    let sample = samples.join("big.bin");
    let sha = write_sample(&sample, 9 * MIB, 2);
    // "Full disk": the server takes at most 1 MiB; it shares the sample's directory, so the
    // local path still works once staging gave up.
    let up = serve_files(
        scratch.path(),
        &[&samples],
        &["--max-sample-bytes", &MIB.to_string()],
    );
    let plain = serve_files(scratch.path(), &[&samples], &["--no-put-sample"]);
    let rt = runtime(
        scratch.path(),
        vec![
            ("up", http_server(&up.url())),
            ("plain", http_server(&plain.url())),
        ],
    );
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let path = local_path(&sample);
    let ok = checksum_everywhere(&job, &path, &["up", "plain"]).await;
    assert_eq!(ok, [true, true]);
    let reason = staging_reason(&rt, &job, "up");
    assert!(
        reason.contains("put_sample_begin") && reason.contains("at most 1048576 bytes"),
        "{reason}"
    );
    let rec = job
        .server("up")
        .unwrap()
        .call("FA_file_checksum", json!({"path": path}))
        .await;
    assert_eq!(digest_of(&rec), sha, "called with the local path");
    assert!(files_under(&up.staging).is_empty());
    assert_eq!(job.finish(), JobStatus::Degraded);
}
