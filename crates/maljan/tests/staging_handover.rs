//! Handing the sample over, against real `maljan serve files --http` servers on loopback: one
//! with put_sample, one with a mirror_dir (and --no-put-sample), one with neither, in one job.
//! The 20 MiB sample goes through the chunked calls (the put_sample server refuses bodies over
//! 8 MiB, so a single put_sample could not have carried it) and the server's own checksum of the
//! staged path matches; a second job is served from the cache, proven on the server's disk.

mod common;

use std::{
    os::unix::fs::MetadataExt,
    sync::{Arc, Mutex},
};

use common::staging::*;
use maljan_client::{Handover, JobSpec, JobStatus, ServerConfig};
use serde_json::json;
use sha2::Digest;

const MIB: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_mirror_and_local_path_in_one_job_and_a_cached_second_job() {
    let scratch = tempfile::tempdir().unwrap();
    let samples = scratch.path().join("samples");
    let elsewhere = scratch.path().join("elsewhere");
    let mirror = scratch.path().join("mirror");
    for d in [&samples, &elsewhere, &mirror] {
        std::fs::create_dir_all(d).unwrap();
    }
    let sample = samples.join("big sample.bin");
    let sha = write_sample(&sample, 20 * MIB, 7);

    // The uploading server cannot read the sample where it is (its root is elsewhere), and takes
    // no message over 8 MiB: only the chunked path can reach it.
    let up = serve_files(
        scratch.path(),
        &[&elsewhere],
        &["--max-message-bytes", &(8 * MIB).to_string()],
    );
    let mirrored = serve_files(scratch.path(), &[&mirror], &["--no-put-sample"]);
    let plain = serve_files(scratch.path(), &[&samples], &["--no-put-sample"]);
    let rt = runtime(
        scratch.path(),
        vec![
            ("up", http_server(&up.url())),
            (
                "mirrored",
                ServerConfig {
                    mirror_dir: mirror.to_string_lossy().into_owned(),
                    ..http_server(&mirrored.url())
                },
            ),
            ("plain", http_server(&plain.url())),
        ],
    );

    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    job.events().subscribe(move |e| {
        if let maljan_client::Event::Upload(p) = e {
            s.lock().unwrap().push((p.server.clone(), p.sent, p.total));
        }
    });
    let local = sample
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for name in ["up", "mirrored", "plain"] {
        let server = job.server(name).unwrap();
        let view = server.view().await.unwrap();
        assert!(
            view.tools.iter().all(|t| !t.name.starts_with("put_sample")),
            "staging primitives are never shown as tools"
        );
        let rec = server
            .call("FA_file_checksum", json!({"path": local}))
            .await;
        assert!(rec.ok, "{name}: {:?}", rec.error);
        assert_eq!(
            digest_of(&rec),
            sha,
            "{name}: the server hashed another file"
        );
        assert_eq!(
            rec.args["path"], local,
            "the ledger keeps the caller's arguments"
        );
    }
    let staged = match job.server("up").unwrap().handover().await.unwrap() {
        Handover::Uploaded { path, cached } => {
            assert!(!cached);
            std::path::PathBuf::from(path)
        }
        other => panic!("expected an upload, got {other:?}"),
    };
    assert!(staged.starts_with(up.staging.canonicalize().unwrap()));
    assert_eq!(staged.metadata().unwrap().len(), 20 * MIB as u64);
    let mirror_copy = match job.server("mirrored").unwrap().handover().await.unwrap() {
        Handover::Mirrored { path } => std::path::PathBuf::from(path),
        other => panic!("expected a mirror copy, got {other:?}"),
    };
    assert_eq!(
        mirror_copy.metadata().unwrap().mode() & 0o777,
        0o600,
        "the mirror copy is private"
    );
    assert!(matches!(
        job.server("plain").unwrap().handover().await.unwrap(),
        Handover::Local { .. }
    ));
    assert!(job.degradations().is_empty(), "{:?}", job.degradations());

    // Progress: 0, then each of the five 4 MiB chunks.
    let progress: Vec<u64> = seen.lock().unwrap().iter().map(|(_, s, _)| *s).collect();
    assert_eq!(
        progress,
        (0..=5).map(|i| i * 4 * MIB as u64).collect::<Vec<_>>()
    );
    // The ledger holds summaries of the upload calls, never the content.
    let calls = rt.ledger().calls(Some(job.id()), 100).unwrap();
    let chunks: Vec<_> = calls
        .iter()
        .filter(|c| c.tool == "put_sample_chunk")
        .collect();
    assert_eq!(chunks.len(), 5);
    assert!(calls.iter().any(|c| c.tool == "put_sample_begin" && c.ok));
    assert!(calls.iter().any(|c| c.tool == "put_sample_finish" && c.ok));
    for c in calls.iter().filter(|c| c.tool.starts_with("put_sample")) {
        assert!(
            c.args.len() < 400,
            "{}: {} bytes of arguments",
            c.tool,
            c.args.len()
        );
        assert!(!c.args.contains("content_b64"), "{}", c.args);
    }
    assert_eq!(job.finish(), JobStatus::Complete);
    assert!(
        !mirror_copy.exists(),
        "the mirror copy is removed when the job ends"
    );

    // A second job with the same sample: nothing is sent, and the server's staged file is the
    // very same one (same inode and mtime; a re-upload would have renamed a new file over it).
    let before = std::fs::metadata(&staged).unwrap();
    let files_before = files_under(&up.staging);
    let job2 = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let server = job2.server("up").unwrap();
    let rec = server
        .call("FA_file_checksum", json!({"path": local}))
        .await;
    assert!(rec.ok, "{:?}", rec.error);
    assert_eq!(digest_of(&rec), sha);
    assert_eq!(
        server.handover().await.unwrap(),
        Handover::Uploaded {
            path: staged.to_string_lossy().into_owned(),
            cached: true
        }
    );
    let after = std::fs::metadata(&staged).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec())
    );
    assert_eq!(
        files_under(&up.staging),
        files_before,
        "no part file, no new file"
    );
    let calls = rt.ledger().calls(Some(job2.id()), 100).unwrap();
    assert!(
        calls.iter().all(|c| !c.tool.starts_with("put_sample")),
        "the second job sent no upload call"
    );
    assert_eq!(job2.finish(), JobStatus::Complete);
    drop((up, mirrored, plain));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_jobs_with_the_same_sample_upload_once() {
    let scratch = tempfile::tempdir().unwrap();
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let sample = scratch.path().join("s.bin");
    let sha = write_sample(&sample, 3 * MIB, 11);
    let up = serve_files(scratch.path(), &[&elsewhere], &[]);
    let rt = runtime(scratch.path(), vec![("up", http_server(&up.url()))]);
    let path = sample.to_string_lossy().into_owned();
    let run = |rt: Arc<maljan_client::Runtime>, path: String| async move {
        let job = rt.new_job(JobSpec::for_sample(&path)).unwrap();
        let rec = job
            .server("up")
            .unwrap()
            .call("FA_file_checksum", json!({"path": path}))
            .await;
        let calls = rt.ledger().calls(Some(job.id()), 100).unwrap();
        let uploads = calls.iter().filter(|c| c.tool == "put_sample").count();
        (digest_of(&rec), uploads)
    };
    let (a, b) = tokio::join!(run(rt.clone(), path.clone()), run(rt.clone(), path.clone()));
    assert_eq!((a.0.as_str(), b.0.as_str()), (sha.as_str(), sha.as_str()));
    assert_eq!(a.1 + b.1, 1, "one upload between the two jobs");
    // Server side: one staged file, nothing half-written.
    let files = files_under(&up.staging);
    assert_eq!(files.len(), 1, "{files:?}");
}

/// A server capped at one call at a time still gets its chunks in order, each once: were more
/// chunks in flight than the cap lets through, a later one could take the slot first and wait on
/// the server for a predecessor that cannot be sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_capped_at_one_call_takes_every_chunk_once_in_order() {
    let scratch = tempfile::tempdir().unwrap();
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let sample = scratch.path().join("s.bin");
    let sha = write_sample(&sample, 20 * MIB, 13);
    let up = serve_files(scratch.path(), &[&elsewhere], &[]);
    let rt = runtime_capped(scratch.path(), vec![("up", http_server(&up.url()))], 1);
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let staged = match job.server("up").unwrap().handover().await.unwrap() {
        Handover::Uploaded { path, .. } => std::path::PathBuf::from(path),
        other => panic!(
            "expected an upload, got {other:?}; {:?}",
            job.degradations()
        ),
    };
    let staged_sha = hex::encode(sha2::Sha256::digest(std::fs::read(&staged).unwrap()));
    assert_eq!(staged_sha, sha, "the staged file is the sample");
    let calls = rt.ledger().calls(Some(job.id()), 100).unwrap();
    let chunks: Vec<_> = calls
        .iter()
        .filter(|c| c.tool == "put_sample_chunk")
        .collect();
    assert_eq!(chunks.len(), 5, "each chunk sent once");
    assert!(chunks.iter().all(|c| c.ok), "{chunks:?}");
    assert_eq!(job.finish(), JobStatus::Complete);
}
