//! The HTTP intake (staging/intake.rs) in front of rmcp's streamable HTTP service, driven
//! in-process through the router: a chunked upload whose chunks go through the intake lands
//! whole; a chunk that rmcp refuses (an unknown session) leaves nothing behind; a chunk whose
//! content is not base64 gets the tool's own error; other calls pass through untouched.

use std::sync::Arc;

use axum::{body::Body, http::Request};
use base64::Engine as _;
use http_body_util::BodyExt;
use maljan_server::{HttpOptions, Registry, StagingOptions, StagingStore, ToolServer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tower::ServiceExt;

struct Session {
    router: axum::Router,
    id: String,
    next_id: u64,
}

async fn post(router: &axum::Router, session: Option<&str>, body: Vec<u8>) -> (u16, String, Value) {
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("content-length", body.len().to_string());
    if let Some(id) = session {
        request = request
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let sid = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    // SSE or JSON: the JSON-RPC answer is the data line (or the body) with an id.
    let text = String::from_utf8_lossy(&bytes);
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_ref()))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null);
    (status, sid, answer)
}

impl Session {
    async fn open(router: axum::Router) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "intake-test", "version": "0"}}});
        let (status, id, answer) = post(&router, None, init.to_string().into_bytes()).await;
        assert_eq!(status, 200, "{answer}");
        assert!(!id.is_empty(), "a session id");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = post(&router, Some(&id), note.to_string().into_bytes()).await;
        assert_eq!(status, 202);
        Self {
            router,
            id,
            next_id: 1,
        }
    }

    fn body(&mut self, tool: &str, arguments: Value) -> Vec<u8> {
        self.next_id += 1;
        let call = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        call.to_string().into_bytes()
    }

    /// The call's structured result, or its error JSON when isError.
    async fn call(&mut self, tool: &str, arguments: Value) -> (bool, Value) {
        let body = self.body(tool, arguments);
        let (status, _, answer) = post(&self.router, Some(&self.id), body).await;
        assert_eq!(status, 200, "{answer}");
        let result = &answer["result"];
        let is_error = result["isError"].as_bool().unwrap_or(false);
        let text = result["content"][0]["text"].as_str().unwrap_or("null");
        (is_error, serde_json::from_str(text).unwrap_or(Value::Null))
    }
}

fn server() -> (tempfile::TempDir, Arc<StagingStore>, axum::Router) {
    let dir = tempfile::tempdir().unwrap();
    let store = StagingStore::open(StagingOptions::new(dir.path().join("staging"))).unwrap();
    let mut registry = Registry::new();
    maljan_server::staging::register(&mut registry, store.clone());
    let server = ToolServer::new("intake-test", "0", registry);
    let mut options = HttpOptions::new(([127, 0, 0, 1], 0).into());
    options.staging = Some(store.clone());
    let router = maljan_server::router(server, &options, Default::default());
    (dir, store, router)
}

fn sample(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 255) as u8).collect()
}

#[tokio::test]
async fn chunks_through_the_intake_land_whole_and_leave_nothing_behind() {
    let (_dir, store, router) = server();
    let mut s = Session::open(router).await;
    let data = sample(600 * 1024);
    let sha = hex::encode(Sha256::digest(&data));
    let (err, begun) = s
        .call(
            "put_sample_begin",
            json!({"filename": "s.bin", "sha256": sha, "size": data.len()}),
        )
        .await;
    assert!(!err, "{begun}");
    let upload_id = begun["upload_id"].as_str().unwrap().to_string();
    for (seq, part) in data.chunks(256 * 1024).enumerate() {
        let content = base64::engine::general_purpose::STANDARD.encode(part);
        let (err, ack) = s
            .call(
                "put_sample_chunk",
                json!({"upload_id": upload_id, "seq": seq, "content_b64": content}),
            )
            .await;
        assert!(!err, "{ack}");
        assert_eq!(ack["seq"], seq);
        assert_eq!(store.intake_cuts(), seq as u64 + 1, "the intake took it");
        assert_eq!(store.stashed(), 0, "the ticket was redeemed");
        assert_eq!(
            store.spare_buffers(),
            1,
            "the body's buffer is kept for the next"
        );
    }
    let (err, done) = s
        .call("put_sample_finish", json!({"upload_id": upload_id}))
        .await;
    assert!(!err, "{done}");
    assert_eq!(
        store.spare_buffers(),
        0,
        "nothing is kept once no upload is open"
    );
    let staged = std::fs::read(done["path"].as_str().unwrap()).unwrap();
    assert_eq!(staged, data);
}

#[tokio::test]
async fn a_chunk_rmcp_refuses_leaves_no_stash_and_bad_base64_is_the_tools_error() {
    let (_dir, store, router) = server();
    let mut s = Session::open(router).await;
    let content = "QUJD".repeat(40 * 1024);
    let body = s.body(
        "put_sample_chunk",
        json!({"upload_id": "u", "seq": 0, "content_b64": content}),
    );
    let (status, _, _) = post(&s.router, Some("no-such-session"), body).await;
    assert_eq!(status, 404, "rmcp still checks the session");
    assert_eq!(
        store.intake_cuts(),
        1,
        "the intake took it before rmcp refused it"
    );
    assert_eq!(
        store.stashed(),
        0,
        "the refused request's content went with it"
    );

    let (err, answer) = s
        .call(
            "put_sample",
            json!({"filename": "x", "content_b64": format!("{}!", "QUJD".repeat(40 * 1024))}),
        )
        .await;
    assert!(err);
    assert_eq!(
        store.intake_cuts(),
        1,
        "content that is not plain base64 goes on to rmcp as it came"
    );
    assert_eq!(answer["error"]["code"], "bad_argument", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid base64"),
        "{answer}"
    );
    // A client cannot make up a ticket of its own.
    let (err, answer) = s
        .call(
            "put_sample",
            json!({"filename": "x", "content_b64": "@stashed:0123456789abcdef"}),
        )
        .await;
    assert!(err);
    assert_eq!(answer["error"]["code"], "bad_argument", "{answer}");
    assert_eq!(store.stashed(), 0);
}
