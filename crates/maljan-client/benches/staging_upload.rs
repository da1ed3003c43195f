//! Issue 5 item 5: staging a 100 MiB sample over loopback through put_sample chunks (4 MiB raw,
//! base64, begin/chunk/finish, through the runtime's call path and ledger, and so through rmcp's
//! streamable HTTP client) to `maljan serve files --http`, side by side with `curl` POSTing the
//! same file to a plain HTTP sink in this process that writes the body to disk (the staging
//! server writes it too). Runs interleaved so machine load hits both alike; reports medians,
//! MB/s and the ratio (target: staging within 4x of curl), and the load average before and after.
//!
//! The server is the real binary: MALJAN_BIN when it names one, else this target dir's release
//! `maljan`, built here first without default features (`cargo build --release -p maljan
//! --no-default-features`: the files server is all the bench needs, and yara-x is by far the
//! longest part of a release build). The client runtime does not depend on the server framework,
//! so the bench does not run it in process.
//!
//! `cargo bench -p maljan-client --bench staging_upload`; MALJAN_BENCH_RUNS (default 5) and
//! MALJAN_BENCH_MIB (default 100) change the runs and the sample size.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use maljan_client::{
    BreakerConfig, Config, Handover, JobSpec, Ledger, Runtime, ServerConfig, TransportKind,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The `maljan` binary to serve with: MALJAN_BIN, or this target dir's release build, brought up
/// to date first (see the module doc).
fn maljan_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MALJAN_BIN") {
        return p.into();
    }
    // Benches run from <target>/release/deps/<bench>-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the bench runs from <target>/release/deps");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "maljan"])
        .args(["--no-default-features", "--bin", "maljan"])
        .env(
            "CARGO_TARGET_DIR",
            profile_dir.parent().expect("target dir"),
        )
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build -p maljan failed");
    let bin = profile_dir.join("maljan");
    assert!(bin.exists(), "{} was not built", bin.display());
    bin
}

/// `maljan serve files --http` on `port`, staging under `dir`.
struct Server(std::process::Child);

impl Server {
    fn start(dir: &Path, port: u16) -> (Self, String) {
        let bin = maljan_bin();
        let child = Command::new(&bin)
            .args(["serve", "files", "--http", &format!("127.0.0.1:{port}")])
            .arg("--root")
            .arg(dir)
            .arg("--staging-dir")
            .arg(dir.join("staging"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("maljan serve");
        (Self(child), format!("{} serve files --http", bin.display()))
    }

    /// The server's process (its CPU time is read from /proc).
    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn stop(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_sample(path: &Path, size: usize) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0;
    while written < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f.write_all(&x.to_le_bytes()).unwrap();
        written += 8;
    }
    f.flush().unwrap();
}

/// A plain HTTP sink: reads a request with Content-Length, writes the body to a new file
/// (`sink-N.bin`, N from 0: overwriting one file would make each upload wait for the last one's
/// pages to be dropped), answers 204. One connection at a time (curl makes one).
async fn sink(listener: tokio::net::TcpListener, dir: PathBuf) {
    for n in 0.. {
        let out = sink_file(&dir, n);
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let mut head = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let (len, mut body_start) = loop {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                break (0, Vec::new());
            }
            head.extend_from_slice(&buf[..n]);
            if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&head[..i]).to_ascii_lowercase();
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse().unwrap())
                    .unwrap_or(0);
                break (len, head[i + 4..].to_vec());
            }
        };
        let mut file = tokio::fs::File::create(&out).await.unwrap();
        let mut got = body_start.len();
        file.write_all(&body_start).await.unwrap();
        body_start.clear();
        while got < len {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            file.write_all(&buf[..n]).await.unwrap();
            got += n;
        }
        file.flush().await.unwrap();
        let _ = sock
            .write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            .await;
    }
}

fn sink_file(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("sink-{n}.bin"))
}

/// Checks that the sink's `n`th upload is whole, then removes it (outside any timing).
fn sunk(dir: &Path, n: usize, size: usize) {
    remove_whole(
        &sink_file(dir, n),
        size as u64,
        "the sink got the whole file",
    );
}

/// Checks that an uploaded file is `size` bytes, then removes it, so the next upload writes a
/// new file instead of replacing this one.
fn remove_whole(file: &Path, size: u64, what: &str) {
    let len = std::fs::metadata(file).unwrap().len();
    assert_eq!(len, size, "{what}");
    std::fs::remove_file(file).unwrap();
}

/// User plus system CPU time of a process so far, in seconds (Linux /proc).
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf only reads a configuration value.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / per_sec.max(1.0)
}

/// Minor page faults of this process so far: fresh buffers show here.
fn minor_faults() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_minflt
}

fn curl_once(port: u16, sample: &Path) -> Duration {
    let started = Instant::now();
    let status = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-X", "POST", "-H", "Expect:"])
        .args(["-H", "Content-Type: application/octet-stream", "-T"])
        .arg(sample)
        .arg(format!("http://127.0.0.1:{port}/upload"))
        .status()
        .expect("curl");
    assert!(status.success(), "curl failed");
    started.elapsed()
}

fn runtime(dir: &Path, url: &str) -> Arc<Runtime> {
    let mut c = Config::default();
    c.core.mcp.breaker = BreakerConfig {
        call_timeout_seconds: 120.0,
        ..Default::default()
    };
    c.data_dir = dir.to_path_buf();
    c.path = dir.join("config.toml");
    c.servers.insert(
        "up".into(),
        ServerConfig {
            transport: TransportKind::StreamableHttp,
            url: url.to_string(),
            enabled: true,
            ..Default::default()
        },
    );
    let ledger = Ledger::open(&dir.join("ledger.sqlite3"), 64 * 1024).unwrap();
    Runtime::new(c, ledger)
}

/// One staged upload, timed from the first put_sample call to the path (the connection and
/// tools/list happen before; the sample's sha256 is the job's, taken at its start).
async fn stage_once(rt: &Arc<Runtime>, sample: &Path) -> (Duration, Duration) {
    rt.uploads().clear();
    let hashed = Instant::now();
    let job = rt.new_job(JobSpec::for_sample(sample)).unwrap();
    let hash_time = hashed.elapsed();
    let server = job.server("up").unwrap();
    server.view().await.expect("the server answers");
    let started = Instant::now();
    let h = server.handover().await.unwrap();
    let took = started.elapsed();
    assert!(
        matches!(h, Handover::Uploaded { cached: false, .. }),
        "{h:?} {:?}",
        job.degradations()
    );
    job.finish();
    // Like the sink's file, the staged one is checked and removed outside the timing.
    let size = std::fs::metadata(sample).unwrap().len();
    remove_whole(Path::new(h.path()), size, "staged whole");
    (took, hash_time)
}

fn main() {
    let runs = env_num("MALJAN_BENCH_RUNS", 5);
    let mib = env_num("MALJAN_BENCH_MIB", 100);
    let size = mib * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let sample = dir.path().join("sample.bin");
    write_sample(&sample, size);
    let port = maljan_testkit::free_port();
    let (server, server_kind) = Server::start(dir.path(), port);
    let rt_tokio = tokio::runtime::Runtime::new().unwrap();
    let load_before = loadavg();
    let server_pid = server.pid().to_string();
    let (stage, curl, hashes, cpu) = rt_tokio.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sink_port = listener.local_addr().unwrap().port();
        tokio::spawn(sink(listener, dir.path().to_path_buf()));
        let rt = runtime(dir.path(), &format!("http://127.0.0.1:{port}/mcp"));
        let (mut stage, mut curl, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
        let mut cpu = (Vec::new(), Vec::new(), Vec::new());
        // One warm-up of each, not counted.
        stage_once(&rt, &sample).await;
        let s = sample.clone();
        tokio::task::spawn_blocking(move || curl_once(sink_port, &s))
            .await
            .unwrap();
        sunk(dir.path(), 0, size);
        for run in 1..=runs {
            let cpu_before = (cpu_secs(&server_pid), cpu_secs("self"));
            let faults_before = minor_faults();
            let (t, h) = stage_once(&rt, &sample).await;
            cpu.0.push(cpu_secs(&server_pid) - cpu_before.0);
            cpu.1.push(cpu_secs("self") - cpu_before.1);
            cpu.2.push((minor_faults() - faults_before) as f64);
            stage.push(t.as_secs_f64());
            hashes.push(h.as_secs_f64());
            let s = sample.clone();
            let t = tokio::task::spawn_blocking(move || curl_once(sink_port, &s))
                .await
                .unwrap();
            curl.push(t.as_secs_f64());
            sunk(dir.path(), run, size);
        }
        rt.shutdown().await;
        (stage, curl, hashes, cpu)
    });
    let floor: Vec<f64> = (0..runs.max(1))
        .map(|_| protocol_floor(&sample, true).as_secs_f64())
        .collect();
    let codec: Vec<f64> = (0..runs.max(1))
        .map(|_| protocol_floor(&sample, false).as_secs_f64())
        .collect();
    let load_after = loadavg();
    server.stop();
    let mb = size as f64 / 1e6;
    let (s, c, h) = (median(stage.clone()), median(curl.clone()), median(hashes));
    println!("staging_upload: {mib} MiB sample, {runs} runs each (interleaved), medians");
    println!("  server: {server_kind}");
    println!(
        "  put_sample chunks (4 MiB, base64): {:.3} s  {:.0} MB/s   runs: {:?}",
        s,
        mb / s,
        stage.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>()
    );
    println!(
        "  curl POST to a plain sink:         {:.3} s  {:.0} MB/s   runs: {:?}",
        c,
        mb / c,
        curl.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>()
    );
    println!(
        "  ratio staging/curl: {:.2}x (target <= 4x)   job start (sha256 of the sample, once): {:.3} s",
        s / c,
        h
    );
    println!(
        "  CPU per staged upload (job start included on the client): server {:.3} s, client {:.3} s",
        median(cpu.0),
        median(cpu.1)
    );
    println!(
        "  page faults in the client per staged upload (job start included): {:.0}",
        median(cpu.2)
    );
    let f = median(floor);
    let cores = num_cpus() as f64;
    println!(
        "  floor through serde_json both ways (rmcp's own path, one core, no I/O): {f:.3} s; \
         perfectly spread over {cores} cores {:.3} s = {:.2}x curl",
        f / cores,
        f / cores / c
    );
    let k = median(codec);
    println!(
        "  codec floor (base64 both ways and sha256, as if the chunk bytes skipped serde_json on \
         both sides): {k:.3} s; perfectly spread over {cores} cores {:.3} s = {:.2}x curl; with \
         curl's own work beside it {:.2}x",
        k / cores,
        k / cores / c,
        (k / cores + c) / c
    );
    println!(
        "  load average before: {load_before}   after: {load_after}   cores: {}   cpu: {}",
        num_cpus(),
        cpu_model()
    );
}

/// What the put_sample convention costs before any I/O, on one core: per 4 MiB chunk, base64
/// encode, serialise the JSON-RPC request, parse it, decode, and the server's sha256. No
/// implementation of the convention can go under this CPU time; against curl it bounds the ratio.
/// Without `json`, the request is neither serialised nor parsed: the bound for an implementation
/// whose chunk bytes skipped serde_json on both sides (the server's HTTP intake does on its side;
/// the client sends every message through rmcp's serde_json).
fn protocol_floor(sample: &Path, json: bool) -> Duration {
    use sha2::Digest;
    let bytes = std::fs::read(sample).unwrap();
    let b64 = base64_simd::STANDARD;
    let t = Instant::now();
    let mut hasher = sha2::Sha256::new();
    for (seq, chunk) in bytes.chunks(4 * 1024 * 1024).enumerate() {
        let encoded = b64.encode_to_string(chunk);
        let raw = if json {
            let request = serde_json::json!({"jsonrpc": "2.0", "id": seq, "method": "tools/call",
                "params": {"name": "put_sample_chunk", "arguments": {
                    "upload_id": "u", "seq": seq, "content_b64": encoded}}});
            let wire = serde_json::to_vec(&request).unwrap();
            let parsed: serde_json::Value = serde_json::from_slice(&wire).unwrap();
            let text = parsed["params"]["arguments"]["content_b64"]
                .as_str()
                .unwrap();
            b64.decode_to_vec(text).unwrap()
        } else {
            b64.decode_to_vec(&encoded).unwrap()
        };
        hasher.update(&raw);
    }
    std::hint::black_box(hasher.finalize());
    t.elapsed()
}

/// The processor's name: figures from one machine are not those of another (sha256 alone ran at
/// 0.93 GB/s on one of this project's machines and 1.3 GB/s on the next).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
