//! maljan-testkit: what maljan's tests start and talk to.
//!
//! - Fixture MCP servers over stdio, as small binaries (`src/bin/fixture-*.rs`), each a few lines
//!   over [`fixture::run`]: `fixture-hang` (the `work` tool never answers), `fixture-crash` (the
//!   process exits in the middle of a `work` call), `fixture-slow` (`work` answers after
//!   `FIXTURE_DELAY_MS`), `fixture-flood` (stderr is flooded while it serves) and `fixture-echo`
//!   (answers at once: the bare-transport baseline for benchmarks). Every fixture also has
//!   `echo`, `fail` (a maljan-shaped tool error), `stats` and `capabilities`.
//! - `fixture-model`, the scripted model server (OpenAI Chat Completions and Anthropic Messages,
//!   driven by a JSON script of turns; [`model`]), and [`ScriptedModel`] to start one from a test.
//! - `fixture-drives`, the SaaS drive fixture (Dropbox's documented endpoints, each drive
//!   under its real host's name; [`drives`]), and [`DriveFixture`] to start one from a test.
//! - The conformance client (`maljan-conformance-client`) for the official suite's client
//!   scenarios, built on maljan-client's runtime, and [`conformance`], which runs a leg of the
//!   suite and reads its scored verdict.
//! - [`postgres`]: a real PostgreSQL server (Debian's, `initdb` in a temp directory, a free port)
//!   for the ledger's PostgreSQL engine; it dies with the test process.
//! - [`rar`]: stored RAR 4 and RAR 5 archives written byte by byte (nothing here writes RAR).
//! - [`bin_path`]: builds this crate's (or another package's) binaries once per test process and
//!   returns the path, so tests in other crates can start them.
//! - [`wait_answering`]: waits for a real HTTP answer from a peer a test started.
//! - [`inspector`]: `mcp-inspector --cli --strict` over a server, its schema findings counted.
//!
//! It is a test helper: nothing in the product depends on it. The fixtures are hand-written over
//! std and serde_json, and the crate must not depend on a server crate: a fixture built from the
//! code under test would share its bugs.

pub mod conformance;
pub mod drives;
pub mod fixture;
pub mod inspector;
pub mod model;
pub mod postgres;
pub mod rar;

use std::{
    path::PathBuf,
    process::Command,
    sync::{Mutex, OnceLock},
};

fn target_profile_dir() -> PathBuf {
    // Tests run from <target>/<profile>/deps/<test>-<hash>, examples (benches) from
    // <target>/<profile>/examples/<name>.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("exe dir");
    if deps
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        deps.parent().expect("profile dir").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// Path of binary `bin` of package `package`, built (once per process) with the same target dir
/// and profile as the running test.
pub fn package_bin(package: &str, bin: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut done = built.lock().unwrap_or_else(|e| e.into_inner());
    let profile_dir = target_profile_dir();
    if !done.iter().any(|p| p == package) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", package, "--bins"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "cargo build -p {package} --bins failed");
        done.push(package.to_string());
    }
    let path = profile_dir.join(bin);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A binary of this crate (fixtures, the conformance client).
pub fn bin_path(bin: &str) -> PathBuf {
    package_bin("maljan-testkit", bin)
}

/// An environment variable a peer test needs; panics with the remedy when it is missing.
pub fn peer_env(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{var} is not set: run `source <(scripts/peers.sh)` (it installs the real MCP peers once and prints the variables), then run the tests again"
        ),
    }
}

/// A free loopback TCP port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Waits until an HTTP server at `addr` (host:port) answers a real request at `path` (a POST of
/// an MCP `ping`), not merely until its port accepts: a peer that has bound its socket may not
/// be serving yet, and a test that starts talking then fails by accident. Any HTTP status line
/// counts as an answer (401 from a server that wants a token, 405 from an SSE endpoint), since
/// the test's own first request says whether the answer is the right one.
pub fn wait_answering(addr: &str, path: &str) {
    use std::{
        io::{Read, Write},
        net::TcpStream,
        time::{Duration, Instant},
    };
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::from("nothing listened");
    while Instant::now() < deadline {
        match TcpStream::connect(addr) {
            Ok(mut stream) => {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = [0u8; 12];
                let answered = stream.write_all(request.as_bytes()).is_ok()
                    && stream.read_exact(&mut head).is_ok()
                    && head.starts_with(b"HTTP/1.");
                if answered {
                    return;
                }
                last = format!(
                    "accepted but gave no HTTP answer ({:?})",
                    String::from_utf8_lossy(&head)
                );
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no HTTP answer from {addr}{path} within 60 s: {last}");
}

/// A running `fixture-model`, killed when dropped. `url` is its base URL (`http://127.0.0.1:P/v1`).
pub struct ScriptedModel {
    pub url: String,
    pub log: PathBuf,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl ScriptedModel {
    /// Starts the fixture with `script` (`{"model", "turns": [...]}`, see [`model`]).
    pub fn start(script: &serde_json::Value) -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("temp dir");
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).expect("write script");
        let log = dir.path().join("requests.jsonl");
        let mut child = Command::new(bin_path("fixture-model"))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start fixture-model");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("fixture-model prints its URL");
        Self {
            url: line.trim().to_string(),
            log,
            child,
            _dir: dir,
        }
    }

    /// The requests it received so far, oldest first: `{"path", "auth", "api_key", "body"}` each.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `fixture-drives` (killed when dropped).
pub struct DriveFixture {
    /// `http://127.0.0.1:PORT`; a drive's host is the first path segment after it.
    pub url: String,
    pub port: u16,
    pub token: String,
    child: std::process::Child,
}

impl DriveFixture {
    /// Starts the fixture; requests must carry `Bearer token`.
    pub fn start(token: &str) -> Self {
        Self::start_with(token, &[])
    }

    /// Starts the fixture with its GCS trusting the service account whose JSON key is at
    /// `key_file` (`host("storage.googleapis.com")` is then a GCS base URL).
    pub fn start_gcs(token: &str, key_file: &std::path::Path) -> Self {
        Self::start_with(token, &["--gcs-key".as_ref(), key_file.as_os_str()])
    }

    fn start_with(token: &str, extra: &[&std::ffi::OsStr]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(bin_path("fixture-drives"))
            .args(["--token", token])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start fixture-drives");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("fixture-drives prints its URL");
        let url = line.trim().to_string();
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in the fixture's URL");
        Self {
            url,
            port,
            token: token.to_string(),
            child,
        }
    }

    /// The base URL of one real host here, e.g. `host("api.dropboxapi.com")`.
    pub fn host(&self, host: &str) -> String {
        format!("{}/{host}", self.url)
    }

    /// Cuts the next `times` downloads after `bytes` bytes.
    pub fn cut_downloads(&self, bytes: u64, times: u32) {
        let body = serde_json::json!({"cut_download_after": bytes, "times": times}).to_string();
        self.control("POST", "/_fixture/faults", &body);
    }

    /// The requests so far: `[{"method", "path", "range"}]`.
    pub fn log(&self) -> Vec<serde_json::Value> {
        let text = self.control("GET", "/_fixture/log", "");
        serde_json::from_str(&text).expect("the fixture's log is JSON")
    }

    fn control(&self, method: &str, path: &str, body: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("reach fixture");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send to fixture");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("read the fixture");
        answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default()
    }
}

impl Drop for DriveFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prometheus's own Python client (in the peers' venv) parses a `/metrics` text, strictly as
/// OpenMetrics, into `[{name, type, samples: [{name, labels, value}]}]`; a text it refuses fails
/// the test with its reason. A family without samples is not in the output.
pub fn parse_openmetrics(text: &str) -> serde_json::Value {
    use std::io::Write as _;
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
print(json.dumps([{"name": f.name, "type": f.type, "samples": [
    {"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]}
    for f in text_string_to_metric_families(sys.stdin.read())]))
"#;
    let mut child = Command::new(peer_env("MALJAN_PY"))
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the peers' python");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).expect("write the text");
    drop(stdin);
    let out = child.wait_with_output().expect("the parser's answer");
    assert!(
        out.status.success(),
        "the parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the parser's JSON")
}
