//! A test server and a raw JSON-RPC client that speaks to it over stdio (newline-delimited
//! lines on a duplex stream, through `serve_io`, the code `serve_stdio` runs) or over
//! streamable HTTP (requests into the router `serve_http` serves), at any protocol version.
#![allow(dead_code)]

use std::{collections::HashMap, fmt, sync::Arc, time::Duration};

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use maljan_server::{HttpOptions, Registry, StdioOptions, ToolError, ToolMeta, ToolServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf},
    sync::Notify,
    task::JoinHandle,
};
use tower::ServiceExt;

/// The stateless version: no handshake, every request names its version in `_meta`.
pub const STATELESS: &str = "2026-07-28";
/// Every version served: the four with an initialize handshake, oldest first, then stateless.
pub const VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    STATELESS,
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Transport {
    Stdio,
    Http,
}

pub const TRANSPORTS: [Transport; 2] = [Transport::Stdio, Transport::Http];

/// Runs `case` on every transport at every version, all at once.
pub async fn on_every_wire<F, Fut>(case: F)
where
    F: Fn(Transport, &'static str) -> Fut,
    Fut: Future<Output = ()>,
{
    let cases = TRANSPORTS
        .iter()
        .flat_map(|&t| VERSIONS.iter().map(move |&v| (t, v)))
        .map(|(t, v)| case(t, v));
    futures::future::join_all(cases).await;
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    a: i64,
    b: i64,
}
#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    ms: u64,
}
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Nothing {}

/// What the `wait` tool tells the test: it started, and its call was stopped.
#[derive(Default)]
pub struct Probe {
    pub started: Notify,
    pub stopped: Notify,
}

pub fn server(probe: Arc<Probe>) -> Arc<ToolServer> {
    let mut r = Registry::new();
    r.add(
        ToolMeta::new("add", "Adds two integers"),
        |_ctx, a: AddArgs| async move { Ok::<_, ToolError>(Sum { sum: a.a + a.b }) },
    );
    r.add(
        ToolMeta::new("sleep", "Sleeps, reporting progress"),
        |ctx, a: SleepArgs| async move {
            let steps = 10u64;
            for i in 0..steps {
                ctx.progress(i as f64, Some(steps as f64), None);
                tokio::time::sleep(Duration::from_millis(a.ms / steps)).await;
            }
            Ok::<_, ToolError>(format!("slept {} ms", a.ms))
        },
    );
    r.add(
        ToolMeta::new("wait", "Waits a minute unless its call is stopped"),
        move |ctx, _a: Nothing| {
            let probe = probe.clone();
            async move {
                // The server cancels the call's token when it stops the call (or when the call
                // ends, which this one does not do for a minute).
                let token = ctx.cancellation().clone();
                let watcher = probe.clone();
                tokio::spawn(async move {
                    token.cancelled().await;
                    watcher.stopped.notify_one();
                });
                probe.started.notify_one();
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, ToolError>("waited".to_string())
            }
        },
    );
    r.add(
        ToolMeta::new("missing", "Fails as no_such_file"),
        |_ctx, _a: Nothing| async move {
            Err::<String, _>(ToolError::no_such_file("no such file or directory: x"))
        },
    );
    r.add(
        ToolMeta::new("boom", "Panics").destructive(),
        |_ctx, _a: Nothing| async move {
            if true {
                panic!("deliberate");
            }
            Ok::<String, ToolError>(String::new())
        },
    );
    r.add(
        ToolMeta::new("slow_timeout", "Outlives its timeout").timeout_s(1),
        |_ctx, _a: Nothing| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<String, ToolError>(String::new())
        },
    );
    ToolServer::new("test-server", "9.9.9", r)
}

/// The tools `server` lists, capabilities included.
pub const TOOL_COUNT: usize = 7;

pub fn init_params(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
}

/// The `_meta` a stateless request carries.
pub fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// The JSON a tool call's result carries as text.
pub fn tool_json(response: &Value) -> Value {
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {response}"));
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

const WAIT: Duration = Duration::from_secs(10);

/// One client session, on one transport at one version.
pub struct Client {
    pub transport: Transport,
    pub version: &'static str,
    pub probe: Arc<Probe>,
    wire: Wire,
    next_id: i64,
}

enum Wire {
    Stdio(Stdio),
    Http(Http),
}

/// A request sent and not yet answered.
pub enum Pending {
    /// Its answer comes on the stdio output, read by the client.
    Stdio,
    /// Its answer streams on its own HTTP response.
    Http(JoinHandle<Exchange>),
}

/// A request's answer, and the notifications that came before it (on its HTTP stream, or on
/// stdio while it was awaited).
#[derive(Debug)]
pub struct Exchange {
    pub response: Value,
    pub notes: Vec<Value>,
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} at {}", self.transport, self.version)
    }
}

impl Client {
    /// A session with the handshake done (for a version that has one), ready for calls.
    pub async fn open(transport: Transport, version: &'static str) -> Self {
        let mut client = Self::connect(transport, version).await;
        client.handshake().await;
        client
    }

    /// The handshake, for a version that has one.
    pub async fn handshake(&mut self) {
        if self.version != STATELESS {
            let init = self.request("initialize", init_params(self.version)).await;
            assert_eq!(
                init.response["result"]["protocolVersion"], self.version,
                "{self}"
            );
            self.notify("notifications/initialized", json!({})).await;
        }
    }

    /// A quick request that any version answers: ping, which 2026-07-28 removed, or
    /// tools/list.
    pub async fn quick_request(&mut self) -> Exchange {
        let method = if self.version == STATELESS {
            "tools/list"
        } else {
            "ping"
        };
        let exchange = self.request(method, json!({})).await;
        let answered = exchange.response.get("result").is_some();
        assert!(answered, "{self}: {:?}", exchange.response);
        exchange
    }

    /// A connection on which nothing has been sent yet.
    pub async fn connect(transport: Transport, version: &'static str) -> Self {
        Self::connect_with(transport, version, 1 << 20).await
    }

    pub async fn connect_with(
        transport: Transport,
        version: &'static str,
        max_message_bytes: usize,
    ) -> Self {
        let probe = Arc::new(Probe::default());
        let server = server(probe.clone());
        Self::connect_to(transport, version, server, probe, max_message_bytes)
    }

    /// A connection to a server of the test's own making (`probe` is the one its tools use).
    pub fn connect_to(
        transport: Transport,
        version: &'static str,
        server: Arc<ToolServer>,
        probe: Arc<Probe>,
        max_message_bytes: usize,
    ) -> Self {
        let wire = match transport {
            Transport::Stdio => Wire::Stdio(Stdio::start(server, max_message_bytes)),
            Transport::Http => {
                let mut options = HttpOptions::new(([127, 0, 0, 1], 0).into());
                options.max_body_bytes = max_message_bytes;
                let router = maljan_server::router(server, &options, Default::default());
                Wire::Http(Http {
                    router,
                    session: None,
                })
            }
        };
        Self {
            transport,
            version,
            probe,
            wire,
            next_id: 0,
        }
    }

    /// Another session with the same HTTP server (a new handshake is due), sharing its probe.
    pub fn another_session(&self) -> Self {
        let Wire::Http(http) = &self.wire else {
            panic!("sessions are an HTTP thing")
        };
        Self {
            transport: self.transport,
            version: self.version,
            probe: self.probe.clone(),
            wire: Wire::Http(Http {
                router: http.router.clone(),
                session: None,
            }),
            next_id: 0,
        }
    }

    fn message(&mut self, method: &str, mut params: Value, id: Option<i64>) -> Value {
        if self.version == STATELESS && method != "initialize" {
            // Beside whatever `_meta` the request has of its own (a progress token).
            let meta = &mut params["_meta"];
            if meta.is_null() {
                *meta = json!({});
            }
            // A key the request set itself (its own client capabilities) is kept.
            for (key, value) in stateless_meta().as_object().unwrap() {
                if meta.get(key).is_none() {
                    meta[key] = value.clone();
                }
            }
        }
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Some(id) = id {
            message["id"] = id.into();
        }
        message
    }

    /// Sends a request; its answer is awaited with [`Client::finish`].
    pub async fn start(&mut self, method: &str, params: Value) -> (i64, Pending) {
        self.next_id += 1;
        let id = self.next_id;
        let message = self.message(method, params, Some(id));
        let pending = self.send_raw_request(message).await;
        (id, pending)
    }

    /// Sends any JSON as a request with this id, as it is.
    pub async fn send_raw_request(&mut self, message: Value) -> Pending {
        let id = message["id"].clone();
        let version = self.version;
        match &mut self.wire {
            Wire::Stdio(stdio) => {
                stdio.send_raw(message.to_string().as_bytes()).await;
                Pending::Stdio
            }
            Wire::Http(http) => {
                let request = http.post(&message, version);
                let router = http.router.clone();
                let (tx, rx) = tokio::sync::oneshot::channel();
                let task = tokio::spawn(async move {
                    let response = router.oneshot(request).await.unwrap();
                    let _ = tx.send(
                        response
                            .headers()
                            .get("mcp-session-id")
                            .map(|v| v.to_str().unwrap().to_string()),
                    );
                    read_answer(response, &id).await
                });
                // The answer's headers name the session the handshake opened. (A stateless
                // answer's headers come with its result, and it opens none.)
                if http.session.is_none()
                    && version != STATELESS
                    && let Ok(Some(session)) = rx.await
                {
                    http.session = Some(session);
                }
                Pending::Http(task)
            }
        }
    }

    /// The answer to request `id`, within 10 s.
    pub async fn finish(&mut self, id: i64, pending: Pending) -> Exchange {
        let context = self.to_string();
        match (pending, &mut self.wire) {
            (Pending::Stdio, Wire::Stdio(stdio)) => stdio.response(id).await,
            (Pending::Http(task), _) => tokio::time::timeout(WAIT, task)
                .await
                .unwrap_or_else(|_| panic!("{context}: no answer to {id} within {WAIT:?}"))
                .unwrap(),
            _ => unreachable!("a pending request stays on its transport"),
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Exchange {
        let (id, pending) = self.start(method, params).await;
        self.finish(id, pending).await
    }

    pub async fn call(&mut self, tool: &str, args: Value) -> Value {
        let params = json!({"name": tool, "arguments": args});
        self.request("tools/call", params).await.response
    }

    /// Sends a notification; over HTTP its POST must be accepted with nothing to say.
    pub async fn notify(&mut self, method: &str, params: Value) {
        let message = self.message(method, params, None);
        let context = self.to_string();
        let version = self.version;
        match &mut self.wire {
            Wire::Stdio(stdio) => stdio.send_raw(message.to_string().as_bytes()).await,
            Wire::Http(http) => {
                let response = http.router.clone().oneshot(http.post(&message, version));
                let response = response.await.unwrap();
                assert_eq!(response.status(), 202, "{context}: {message}");
            }
        }
    }

    /// Cancels request `id` the way a client of this transport and version does:
    /// notifications/cancelled, or on stateless HTTP (no session to send it on) by dropping
    /// the request's connection. What may still arrive for it, if anything can.
    pub async fn cancel(&mut self, id: i64, pending: Pending) -> Option<Pending> {
        match pending {
            Pending::Http(task) if self.version == STATELESS => {
                task.abort();
                None
            }
            pending => {
                let params = json!({"requestId": id, "reason": "test"});
                self.notify("notifications/cancelled", params).await;
                Some(pending)
            }
        }
    }

    /// The stdio side of this client (for what only stdio has: raw bytes, end of input).
    pub fn stdio(&mut self) -> &mut Stdio {
        match &mut self.wire {
            Wire::Stdio(stdio) => stdio,
            Wire::Http(_) => panic!("not a stdio client"),
        }
    }
}

pub struct Stdio {
    tx: WriteHalf<DuplexStream>,
    rx: Lines<BufReader<ReadHalf<DuplexStream>>>,
    /// Answers read while another was awaited, by id.
    early: HashMap<i64, Value>,
    served: JoinHandle<anyhow::Result<()>>,
}

impl Stdio {
    fn start(server: Arc<ToolServer>, max_line_bytes: usize) -> Self {
        let (client, server_end) = tokio::io::duplex(1 << 22);
        let (server_rx, server_tx) = tokio::io::split(server_end);
        let served = tokio::spawn(maljan_server::serve_io(
            server,
            server_rx,
            server_tx,
            StdioOptions { max_line_bytes },
        ));
        let (client_rx, client_tx) = tokio::io::split(client);
        Self {
            tx: client_tx,
            rx: BufReader::new(client_rx).lines(),
            early: HashMap::new(),
            served,
        }
    }

    /// Writes `bytes` and a newline.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.tx.write_all(bytes).await.unwrap();
        self.tx.write_all(b"\n").await.unwrap();
    }

    /// The next line out, as JSON; None once the server has closed its output.
    pub async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.rx.next_line())
            .await
            .expect("no message from the server within 10 s")
            .unwrap()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    pub async fn recv(&mut self) -> Value {
        self.next().await.expect("the server closed its output")
    }

    /// The answer with this id, and the notifications read while waiting for it.
    pub async fn response(&mut self, id: i64) -> Exchange {
        let mut notes = Vec::new();
        loop {
            if let Some(response) = self.early.remove(&id) {
                return Exchange { response, notes };
            }
            let message = self.recv().await;
            match message.get("id").and_then(Value::as_i64) {
                Some(other) => {
                    let duplicate = self.early.insert(other, message);
                    assert!(duplicate.is_none(), "two answers to {other}");
                }
                None => {
                    assert!(message.get("method").is_some(), "unexpected {message}");
                    notes.push(message);
                }
            }
        }
    }

    /// Whether every line read so far was an answer that was awaited.
    pub fn nothing_else_read(&self) -> bool {
        self.early.is_empty()
    }

    /// Whether an answer to `id` was read while another was awaited.
    pub fn answered_early(&self, id: i64) -> bool {
        self.early.contains_key(&id)
    }

    /// Closes the server's input; the answers still due keep coming.
    pub async fn end_input(&mut self) {
        self.tx.shutdown().await.unwrap();
    }

    /// Waits for the server to finish once its input has ended.
    pub async fn served(&mut self) -> anyhow::Result<()> {
        tokio::time::timeout(WAIT, &mut self.served)
            .await
            .expect("the server did not stop at the end of its input")
            .unwrap()
    }
}

struct Http {
    router: axum::Router,
    session: Option<String>,
}

impl Http {
    fn post(&self, message: &Value, version: &str) -> Request<Body> {
        let body = message.to_string();
        let mut request = Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("content-length", body.len().to_string());
        if version == STATELESS {
            let method = message["method"].as_str().unwrap_or_default();
            request = request
                .header("mcp-protocol-version", version)
                .header("mcp-method", method);
            // The name header mirrors a tool's name, or a task's id (tasks/get|update|cancel).
            let params = &message["params"];
            if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
                request = request.header("mcp-name", name);
            }
        } else if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", version);
        }
        request.body(Body::from(body)).unwrap()
    }
}

/// Reads an HTTP answer to request `id`: a JSON body, or an SSE stream read event by event
/// until the answer (notifications before it are kept).
async fn read_answer(response: axum::response::Response, id: &Value) -> Exchange {
    let status = response.status();
    let mut body = response.into_body();
    let mut text = String::new();
    let mut notes = Vec::new();
    loop {
        // Whole events so far: each ends with a blank line.
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                continue;
            }
            let message: Value = serde_json::from_str(&data).unwrap();
            if message.get("id") == Some(id) {
                return Exchange {
                    response: message,
                    notes,
                };
            }
            notes.push(message);
        }
        match body.frame().await {
            Some(frame) => {
                if let Ok(data) = frame.unwrap().into_data() {
                    text.push_str(std::str::from_utf8(&data).unwrap());
                }
            }
            // A JSON body (or a stream that ended without the answer).
            None => {
                let response = serde_json::from_str(text.trim())
                    .unwrap_or_else(|_| json!({"http_status": status.as_u16(), "body": text}));
                return Exchange { response, notes };
            }
        }
    }
}
