//! Protocol behaviour on newline-delimited JSON-RPC, driven with raw lines like a real client.

use std::time::Duration;

use maljan_server::{Registry, StdioOptions, ToolError, ToolMeta, ToolServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

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

fn registry() -> Registry {
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
        ToolMeta::new("missing", "Fails as no_such_file"),
        |_ctx, _a: Nothing| async move {
            Err::<String, _>(ToolError::no_such_file("no such file or directory: x"))
        },
    );
    r.add(
        ToolMeta::new("boom", "Panics"),
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
    r
}

type Reader = Lines<BufReader<ReadHalf<DuplexStream>>>;

struct Peer {
    tx: WriteHalf<DuplexStream>,
    rx: Reader,
}

impl Peer {
    fn start(max_line_bytes: usize) -> Self {
        let (client, server) = tokio::io::duplex(1 << 22);
        let (server_rx, server_tx) = tokio::io::split(server);
        let server = ToolServer::new("test-server", "9.9.9", registry());
        tokio::spawn(maljan_server::serve_io(
            server,
            server_rx,
            server_tx,
            StdioOptions { max_line_bytes },
        ));
        let (client_rx, client_tx) = tokio::io::split(client);
        Self {
            tx: client_tx,
            rx: BufReader::new(client_rx).lines(),
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.tx.write_all(bytes).await.unwrap();
        self.tx.write_all(b"\n").await.unwrap();
    }

    async fn send(&mut self, v: Value) {
        self.send_raw(v.to_string().as_bytes()).await;
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.rx.next_line())
            .await
            .expect("no message from the server within 10 s")
            .unwrap()
            .expect("the server closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Reads until the response with this id, returning it and any notifications seen before.
    async fn response(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let v = self.recv().await;
            if v.get("id") == Some(&json!(id)) {
                return (v, notes);
            }
            assert!(v.get("id").is_none(), "unexpected response {v}");
            notes.push(v);
        }
    }

    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        self.response(id).await.0
    }

    async fn initialized(version: &str) -> Self {
        let mut p = Self::start(1 << 20);
        let init = p.request(0, "initialize", init_params(version)).await;
        assert_eq!(init["result"]["protocolVersion"], version);
        p.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        p
    }

    async fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
            .await
    }

    /// Proves no stray message is waiting: a ping's answer must be the very next line.
    async fn assert_quiet(&mut self) {
        self.send(json!({"jsonrpc":"2.0","id":999,"method":"ping"}))
            .await;
        let v = self.recv().await;
        assert_eq!(v["id"], 999, "expected the ping's reply next, got {v}");
    }
}

fn init_params(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
}

fn tool_json(response: &Value) -> Value {
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .expect("text content");
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

#[tokio::test]
async fn initialize_answers_the_clients_version_and_the_newest_otherwise() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut p = Peer::start(1 << 20);
        let r = p.request(1, "initialize", init_params(version)).await;
        assert_eq!(r["result"]["protocolVersion"], version);
        assert_eq!(r["result"]["serverInfo"]["name"], "test-server");
        assert_eq!(r["result"]["serverInfo"]["version"], "9.9.9");
        assert!(r["result"]["capabilities"]["tools"].is_object());
    }
    let mut p = Peer::start(1 << 20);
    let r = p.request(1, "initialize", init_params("1999-01-01")).await;
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn ping_answers_empty_and_notifications_get_nothing() {
    let mut p = Peer::initialized("2025-06-18").await;
    let r = p.request(1, "ping", json!({})).await;
    assert_eq!(r["result"], json!({}));
    p.send(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}),
    )
    .await;
    p.send(json!({"jsonrpc":"2.0","method":"notifications/made_up"}))
        .await;
    p.assert_quiet().await;
}

#[tokio::test]
async fn bad_lines_get_errors_and_the_server_keeps_serving() {
    let mut p = Peer::start(4096);
    p.send_raw(b"{this is not json").await;
    let v = p.recv().await;
    assert_eq!(v["error"]["code"], -32700);
    assert_eq!(v["id"], Value::Null);
    p.send_raw(b"\xff\xfe\xfd").await;
    assert_eq!(p.recv().await["error"]["code"], -32700);
    p.send_raw("x".repeat(10_000).as_bytes()).await;
    let v = p.recv().await;
    assert_eq!(v["error"]["code"], -32600);
    assert!(v["error"]["message"].as_str().unwrap().contains("limit"));
    // Still serving: the handshake works after all that.
    let r = p.request(1, "initialize", init_params("2025-06-18")).await;
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    p.send_raw(b"[]").await;
    assert_eq!(p.recv().await["error"]["code"], -32600);
    let r = p.request(2, "no/such/method", json!({})).await;
    assert_eq!(r["error"]["code"], -32601);
    p.assert_quiet().await;
}

#[tokio::test]
async fn unknown_tools_are_named_in_the_error() {
    let mut p = Peer::initialized("2025-06-18").await;
    let r = p.call(1, "FA_nope", json!({})).await;
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
    assert!(msg.contains("FA_nope"), "{r}");
}

#[tokio::test]
async fn arguments_are_validated_before_the_tool_runs() {
    let mut p = Peer::initialized("2025-06-18").await;
    let ok = p.call(1, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(ok["result"]["structuredContent"], json!({"sum": 5}));
    assert_eq!(ok["result"]["isError"], false);
    for (id, args, field) in [
        (2, json!({"a": "two", "b": 3}), "a"),
        (3, json!({"a": 1}), "b"),
        (4, json!({"a": 1, "b": 2, "c": 3}), "c"),
    ] {
        let r = p.call(id, "add", args).await;
        assert_eq!(r["result"]["isError"], true, "{r}");
        let e = tool_json(&r);
        assert_eq!(e["error"]["code"], "bad_argument");
        assert_eq!(e["tool"], "add");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(field),
            "{e}"
        );
        assert!(!e["error"]["remediation"].as_str().unwrap().is_empty());
    }
}

#[tokio::test]
async fn tool_failures_and_panics_are_error_results_and_the_server_lives() {
    let mut p = Peer::initialized("2025-11-25").await;
    let r = p.call(1, "missing", json!({})).await;
    assert_eq!(tool_json(&r)["error"]["code"], "no_such_file");
    let r = p.call(2, "boom", json!({})).await;
    assert_eq!(r["result"]["isError"], true);
    let e = tool_json(&r);
    assert_eq!(e["error"]["code"], "tool_failed");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deliberate")
    );
    let r = p.call(3, "add", json!({"a": 1, "b": 1})).await;
    assert_eq!(r["result"]["structuredContent"]["sum"], 2);
}

#[tokio::test]
async fn a_slow_tool_never_delays_ping_or_list() {
    let mut p = Peer::initialized("2025-06-18").await;
    p.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":3000}}})).await;
    // Both answers must come before the slow call's; order of arrival proves it.
    p.send(json!({"jsonrpc":"2.0","id":2,"method":"ping"}))
        .await;
    p.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}))
        .await;
    let mut order = Vec::new();
    while order.len() < 3 {
        let v = p.recv().await;
        if let Some(id) = v.get("id").and_then(Value::as_i64) {
            order.push(id);
            if id == 3 {
                let names: Vec<&str> = v["result"]["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["name"].as_str().unwrap())
                    .collect();
                assert!(
                    names.contains(&"capabilities") && names.contains(&"add"),
                    "{names:?}"
                );
            }
        }
    }
    assert_eq!(
        order.last(),
        Some(&1),
        "the slow call finished first: {order:?}"
    );
}

#[tokio::test]
async fn cancellation_stops_the_named_call() {
    let mut p = Peer::initialized("2025-06-18").await;
    p.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    p.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}})).await;
    // A cancelled request gets no response (spec); the server keeps answering promptly.
    let started = std::time::Instant::now();
    p.assert_quiet().await;
    let r = p.call(2, "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"]["sum"], 3);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn long_work_sends_progress_when_asked() {
    let mut p = Peer::initialized("2025-06-18").await;
    p.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":200},"_meta":{"progressToken":"tok-1"}}})).await;
    let (r, notes) = p.response(1).await;
    assert_eq!(tool_json(&r), json!("slept 200 ms"));
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 5, "{notes:?}");
    assert!(
        progress
            .iter()
            .all(|n| n["params"]["progressToken"] == "tok-1" && n["params"]["total"] == 10.0)
    );
    // Without a token: no notifications at all.
    p.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":50}}})).await;
    let (_, notes) = p.response(2).await;
    assert!(notes.is_empty(), "{notes:?}");
}

#[tokio::test]
async fn a_tool_past_its_timeout_answers_timeout() {
    let mut p = Peer::initialized("2025-06-18").await;
    let r = p.call(1, "slow_timeout", json!({})).await;
    assert_eq!(tool_json(&r)["error"]["code"], "timeout");
}

#[tokio::test]
async fn capabilities_lists_every_tool_with_its_timeout() {
    let mut p = Peer::initialized("2025-06-18").await;
    let r = p.call(1, "capabilities", json!({})).await;
    let m = &r["result"]["structuredContent"];
    assert_eq!(m["server"], "test-server");
    let tools = m["tools"].as_array().unwrap();
    let slow = tools.iter().find(|t| t["name"] == "slow_timeout").unwrap();
    assert_eq!(slow["timeout_s"], 1.0);
    assert_eq!(slow["available"], true);
    assert_eq!(tools.len(), 5);
}

#[tokio::test]
async fn stateless_discover_is_answered() {
    let mut p = Peer::start(1 << 20);
    let r = p
        .request(
            1,
            "server/discover",
            json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    // Either a discover result or a clean JSON-RPC error a client can fall back from.
    assert!(
        r.get("result").is_some() || r["error"]["code"].is_i64(),
        "{r}"
    );
    let init = p.request(2, "initialize", init_params("2025-06-18")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
}

/// A plain call is answered beside rmcp; one that asks for progress goes through rmcp. Both must
/// answer the same bytes, results and errors alike.
#[tokio::test]
async fn direct_calls_answer_exactly_as_rmcp_does() {
    let mut p = Peer::initialized("2025-06-18").await;
    let cases = [
        ("add", json!({"a": 2, "b": 40})),
        ("add", json!({"a": "two"})),
        ("missing", json!({})),
        ("boom", json!({})),
        ("capabilities", json!({})),
    ];
    let mut id = 100;
    for (tool, args) in cases {
        id += 2;
        let direct = p.call(id, tool, args.clone()).await;
        let params = json!({"name": tool, "arguments": args, "_meta": {"progressToken": id}});
        let (via_rmcp, notes) = {
            p.send(json!({"jsonrpc":"2.0","id":id + 1,"method":"tools/call","params":params}))
                .await;
            p.response(id + 1).await
        };
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(direct["id"], id);
        assert_eq!(direct["result"], via_rmcp["result"], "{tool}");
    }
    p.assert_quiet().await;
}

#[tokio::test]
async fn a_call_still_running_at_end_of_input_is_answered() {
    let mut p = Peer::initialized("2025-06-18").await;
    p.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}})).await;
    p.tx.shutdown().await.unwrap();
    let (r, _) = p.response(1).await;
    assert_eq!(tool_json(&r), "slept 300 ms");
}
