//! What the console's tests share: a console over a temp data directory and config file (the
//! fixture echo server and the built-in analysis server of the real `maljan` binary), requests
//! sent through the router in process as the console's owner (an admin session, as the login
//! URL opens), and small readers of the answers.
#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc};

use axum::{
    Router,
    body::{Body, to_bytes},
    http::{Request, Response, StatusCode, header},
};
use maljan_client::{Config, Ledger};
use maljan_console::{AppState, ConsoleOptions, Scope, router};
use serde_json::Value;
use tower::ServiceExt;

/// Where a test console keeps jobs, events and the ledger: the tests of jobs and pages run on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// SQLite in the console's data directory (the embedded default).
    Sqlite,
    /// A fresh database on the PostgreSQL server maljan-testkit starts.
    Postgres,
}

pub struct Console {
    pub state: Arc<AppState>,
    pub app: Router,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub host: String,
    /// The owner's admin session (the id in its cookie), as the login URL opens one.
    pub sid: String,
}

pub fn echo_bin() -> String {
    maljan_testkit::bin_path("fixture-echo")
        .to_string_lossy()
        .into_owned()
}

pub fn maljan_bin() -> String {
    maljan_testkit::package_bin("maljan", "maljan")
        .to_string_lossy()
        .into_owned()
}

/// A console listening (in name) on `listen`, with `echo` configured, and `analysis` (the
/// real `maljan serve analysis`) when jobs are to find something.
pub fn console_with(listen: &str, max_sample_bytes: u64, analysis: bool) -> Console {
    console_configured(listen, max_sample_bytes, analysis, "")
}

/// [`console_with`] on loopback with the analysis server and `extra` appended to config.toml
/// (an `[llm]` table, say).
pub fn console_with_config(extra: &str) -> Console {
    console_configured("127.0.0.1:8700", 1 << 20, true, extra)
}

fn console_configured(listen: &str, max_sample_bytes: u64, analysis: bool, extra: &str) -> Console {
    console_stored(listen, max_sample_bytes, analysis, extra, Store::Sqlite)
}

fn console_stored(
    listen: &str,
    max_sample_bytes: u64,
    analysis: bool,
    extra: &str,
    store: Store,
) -> Console {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("config.toml");
    let mut text = format!(
        "[servers.echo]\ncommand = {:?}\nlabel = \"fixture echo\"\n",
        echo_bin()
    );
    if analysis {
        text.push_str(&format!(
            "\n[servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\"]\n",
            maljan_bin()
        ));
    }
    text.push_str(extra);
    std::fs::write(&config_path, text).unwrap();
    let mut config = Config::load(Some(&config_path)).unwrap();
    config.data_dir = dir.path().join("data");
    let ledger = match store {
        Store::Sqlite => Ledger::open(&config.data_dir.join("ledger.sqlite3"), 256 * 1024),
        Store::Postgres => Ledger::connect(&maljan_testkit::postgres::fresh_database(), 256 * 1024),
    }
    .unwrap();
    let opts = ConsoleOptions {
        listen: listen.parse().unwrap(),
        config: Some(config_path.clone()),
        max_sample_bytes,
        metrics: true,
        ..Default::default()
    };
    if !opts.listen.ip().is_loopback() {
        maljan_console::AuthStore::load(&config.data_dir)
            .unwrap()
            .set_password("correct horse battery")
            .unwrap();
    }
    let state = AppState::with_ledger(opts.clone(), config, ledger).unwrap();
    let sid = state.auth.new_session(Scope::Admin, None);
    Console {
        app: router(state.clone()),
        sid,
        state,
        dir,
        config_path,
        host: opts.listen.to_string(),
    }
}

pub fn console_on(listen: &str, max_sample_bytes: u64) -> Console {
    console_with(listen, max_sample_bytes, false)
}

pub fn console() -> Console {
    console_on("127.0.0.1:8700", 1 << 20)
}

/// With the analysis server too: jobs that find something.
pub fn console_analysis() -> Console {
    console_with("127.0.0.1:8700", 1 << 20, true)
}

/// [`console`] (`analysis`: [`console_analysis`]) over `store`.
pub fn console_over(store: Store, analysis: bool) -> Console {
    console_stored("127.0.0.1:8700", 1 << 20, analysis, "", store)
}

impl Console {
    pub async fn send(&self, req: Request<Body>) -> Response<Body> {
        self.app.clone().oneshot(req).await.unwrap()
    }

    /// The CSRF token of the owner's session.
    pub fn csrf(&self) -> String {
        self.state.auth.csrf_for(&self.sid)
    }

    /// The Cookie header of the owner's session.
    pub fn cookie(&self) -> String {
        format!("maljan_session={}", self.sid)
    }

    /// A request of the owner's session with the right Host and no CSRF header (a form that
    /// carries its token in a field, or one that is meant to be refused).
    pub fn req_bare(&self, method: &str, uri: &str) -> axum::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, &self.host)
            .header(header::COOKIE, self.cookie())
    }

    /// A request with a bearer token (no cookie, no CSRF token).
    pub fn req_token(&self, method: &str, uri: &str, token: &str) -> axum::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, &self.host)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
    }

    /// A new API token with `scope`.
    pub fn token(&self, scope: Scope) -> String {
        self.state.auth.create_token("test", scope).unwrap().1
    }

    /// A request from this console's own pages, in the owner's session: right Host, its
    /// cookie, and the CSRF header on a change.
    pub fn req(&self, method: &str, uri: &str) -> axum::http::request::Builder {
        let b = self.req_bare(method, uri);
        if method == "GET" {
            b
        } else {
            b.header("x-csrf-token", self.csrf())
        }
    }

    pub async fn json(&self, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let b = self.req(method, uri);
        let req = match body {
            Some(v) => b
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        }
        .unwrap();
        read_json(self.send(req).await).await
    }

    /// A page (or any GET) in the owner's session: its status and text.
    pub async fn page(&self, uri: &str) -> (StatusCode, String) {
        read_text(
            self.send(self.req("GET", uri).body(Body::empty()).unwrap())
                .await,
        )
        .await
    }

    /// Posts a page's urlencoded form (`body`, with its `_csrf` field) in the owner's session:
    /// the status, the text and where it redirects.
    pub async fn post_form(&self, uri: &str, body: &str) -> (StatusCode, String, Option<String>) {
        let req = self
            .req_bare("POST", uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = self.send(req).await;
        let location = resp
            .headers()
            .get(header::LOCATION)
            .map(|l| l.to_str().unwrap().to_string());
        let (s, text) = read_text(resp).await;
        (s, text, location)
    }

    /// Submits a sample as the API's multipart form; extra fields as (name, value).
    pub async fn submit(
        &self,
        name: &str,
        content: &[u8],
        fields: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let (ctype, body) = multipart(name, content, fields);
        let req = self
            .req("POST", "/api/v1/jobs")
            .header(header::CONTENT_TYPE, ctype)
            .body(Body::from(body))
            .unwrap();
        read_json(self.send(req).await).await
    }

    /// Submits the test sample as `dropper.bin` with `fields`, expects 202, and waits for the
    /// job to end: its id and its final state.
    pub async fn run_job(&self, fields: &[(&str, &str)]) -> (String, Value) {
        let (s, v) = self.submit("dropper.bin", &sample_bytes(), fields).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{v}");
        let id = v["job_id"].as_str().unwrap().to_string();
        let job = self.wait_done(&id).await;
        (id, job)
    }

    /// Waits until the job's report is kept (the job has ended).
    pub async fn wait_done(&self, id: &str) -> Value {
        for _ in 0..600 {
            let (status, v) = self.json("GET", &format!("/api/v1/jobs/{id}"), None).await;
            assert_eq!(status, StatusCode::OK, "{v}");
            if v["live"] == false && !v["report_status"].is_null() {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("job {id} did not end within 60 s");
    }
}

pub fn multipart(name: &str, content: &[u8], fields: &[(&str, &str)]) -> (String, Vec<u8>) {
    let boundary = "maljanTestBoundary7d1f";
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"sample\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
    body.extend(content);
    body.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

pub async fn read_text(resp: Response<Body>) -> (StatusCode, String) {
    let status = resp.status();
    let bytes = to_bytes(resp.into_body(), 64 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

pub async fn read_json(resp: Response<Body>) -> (StatusCode, Value) {
    let (status, text) = read_text(resp).await;
    let v = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"))
    };
    (status, v)
}

/// A small ELF-looking sample with strings and an IOC in it.
pub fn sample_bytes() -> Vec<u8> {
    let mut b = b"\x7fELF\x02\x01\x01\x00".to_vec();
    b.resize(64, 0);
    b.extend_from_slice(b"connect to http://evil.example.com/payload and 10.1.2.3 now\0");
    b.extend(std::iter::repeat_n(b'A', 200));
    b
}

/// A real `maljan console` process (the binary, served by maljan-server's accept loop), on a
/// free loopback port with its own data directory; killed when dropped.
pub struct RunningConsole {
    child: std::process::Child,
    pub addr: String,
    pub data: PathBuf,
    /// The login URL it printed on stderr.
    pub login_url: String,
    /// Everything else it printed on stderr, as it comes.
    pub stderr: std::sync::mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Drop for RunningConsole {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `maljan console` with `args` after `--listen`/`--config`, and waits for its login URL.
pub fn spawn_console(args: &[&str]) -> RunningConsole {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[servers.echo]\ncommand = {:?}\n", echo_bin()),
    )
    .unwrap();
    let data = dir.path().join("data");
    let addr = format!("127.0.0.1:{}", maljan_testkit::free_port());
    let mut child = std::process::Command::new(maljan_bin())
        .args(["console", "--listen", &addr, "--config"])
        .arg(&config)
        .args(args)
        .env("MALJAN_HOME", &data)
        .env_remove("MALJAN_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start maljan console");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let login_url = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(at) = line.find("http://")
                    && line.contains("/login?token=")
                {
                    break line[at..].trim().to_string();
                }
                seen.push(line);
            }
            Err(_) => panic!(
                "maljan console printed no login URL; stderr:\n{}",
                seen.join("\n")
            ),
        }
    };
    RunningConsole {
        child,
        addr,
        data,
        login_url,
        stderr: rx,
        _dir: dir,
    }
}

impl RunningConsole {
    /// Sends `request` (a whole HTTP/1.1 request) on a new connection and reads the answer's
    /// head (status line and headers), within `within`.
    pub fn exchange(&self, request: &str, within: std::time::Duration) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(within)).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// The owner's login token (from the printed URL).
    pub fn owner_token(&self) -> String {
        self.login_url.split("token=").nth(1).unwrap().to_string()
    }
}
