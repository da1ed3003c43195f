//! Samples in an S3-compatible bucket (moto's S3 server, a real peer from scripts/peers.sh):
//! `submit --samples s3://…` uploads once by sha256, a worker fetches the sample into its private
//! job directory, and a worker that cannot reach the store tries the job again by its retry
//! policy, then fails it with the reason.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use maljan_client::Ledger;

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn moto() -> (Moto, String) {
    let bin = maljan_testkit::peer_env("MALJAN_MOTO_SERVER");
    let port = maljan_testkit::free_port();
    let child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let endpoint = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (Moto(child), endpoint)
}

/// Runs boto3 (the peers' venv) against moto; returns its stdout.
fn boto(endpoint: &str, code: &str) -> String {
    let py = maljan_testkit::peer_env("MALJAN_PY");
    let script = format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{code}"
    );
    let out = Command::new(py).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn maljan(home: &Path, db: &str, endpoint: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_maljan"));
    cmd.args(args)
        .env("MALJAN_HOME", home)
        .env("MALJAN_DATABASE_URL", db)
        .env("MALJAN_SAMPLES_URL", "s3://maljan-samples/team")
        .env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .current_dir(home);
    cmd
}

#[test]
fn samples_go_through_the_bucket_once_and_an_unreachable_store_fails_the_job() {
    let (_moto, endpoint) = moto();
    boto(&endpoint, "s3.create_bucket(Bucket='maljan-samples')");
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let db = maljan_testkit::postgres::fresh_database();
    let sample = home.join("a.bin");
    std::fs::write(&sample, b"MZ bucket sample http://evil.example.com/").unwrap();
    let submit = |endpoint: &str| {
        let out = maljan(home, &db, endpoint, &["submit", sample.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let first = submit(&endpoint);
    let second = submit(&endpoint);
    let keys = boto(
        &endpoint,
        "print('\\n'.join(o['Key'] for o in s3.list_objects_v2(Bucket='maljan-samples').get('Contents', [])))",
    );
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 1, "uploaded once: {keys:?}");
    assert!(keys[0].starts_with("team/") && keys[0].len() == "team/".len() + 3 + 64);
    assert!(
        !home.join("samples").exists(),
        "nothing in the local folder"
    );

    // A worker whose store is unreachable: each job is tried again once (the retry policy: one
    // retry, after a second), then fails, saying why.
    let dead = format!("http://127.0.0.1:{}", maljan_testkit::free_port());
    let out = maljan(
        home,
        &db,
        &dead,
        &[
            "worker",
            "--exit-when-idle",
            "--concurrency",
            "2",
            "--retries",
            "1",
            "--retry-after-s",
            "1",
        ],
    )
    .stderr(Stdio::null())
    .status()
    .unwrap();
    assert!(out.success());
    let ledger = Ledger::connect(&db, 1 << 20).unwrap();
    for id in [&first, &second] {
        let q = ledger.queued_job(id).unwrap().unwrap();
        assert_eq!((q.state.as_str(), q.attempts), ("failed", 2), "{q:?}");
        let err = q.error.unwrap_or_default();
        assert!(err.contains("fetching the sample"), "{err}");
        let degraded = ledger.degradations(id).unwrap();
        assert!(
            degraded
                .iter()
                .any(|d| d.contains("attempt 1 failed: fetching the sample")),
            "{degraded:?}"
        );
        let kinds: Vec<String> = ledger
            .job_events(id, 0)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["retry", "done"], "{id}");
    }

    // A reachable store: a third submission runs, its sample fetched from the bucket.
    let third = submit(&endpoint);
    let out = maljan(home, &db, &endpoint, &["worker", "--exit-when-idle"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(out.success());
    let q = ledger.queued_job(&third).unwrap().unwrap();
    assert!(matches!(q.state.as_str(), "complete" | "degraded"), "{q:?}");
    assert!(ledger.count(Some(&third)).unwrap() > 0);
    // The job's private directory (<data dir>/work/<job id>) is gone with the job.
    let job_dir = home.join("work").join(&third);
    assert!(!job_dir.exists(), "{} was left behind", job_dir.display());
    assert!(home.join("work").is_dir(), "the work folder the job ran in");
}
