//! What one HTTP client can send or hold, authenticated or not, is bounded and refused as the
//! specifications say: a malformed id gets a JSON-RPC Invalid Request with `"id": null`, two
//! Host headers 400, a Content-Length over the bound 413 before any body is read, a chunked
//! body 413 at the bound; a client that trickles its head or idles is disconnected, the server
//! serves at most so many connections and keeps at most so many sessions at once, and an idle
//! session expires.

mod common;

use std::{sync::Arc, time::Duration};

use maljan_server::HttpOptions;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_util::sync::CancellationToken;

/// A server on a free loopback port, with these options changed; stopped when dropped.
struct Served {
    addr: std::net::SocketAddr,
    stop: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(change: impl FnOnce(&mut HttpOptions)) -> Served {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut options = HttpOptions::new(addr);
    change(&mut options);
    let stop = CancellationToken::new();
    let server = common::server(Arc::new(common::Probe::default()));
    tokio::spawn(maljan_server::serve_http(server, options, stop.clone()));
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_ok() {
            return Served { addr, stop };
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server did not listen on {addr}");
}

/// Writes `head` (and `body`) on a fresh connection and reads the whole answer, which the
/// server ends by closing (every request here says `Connection: close`).
async fn exchange(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    // The server may answer and close before the body is all sent: that is the point of some
    // of these requests, so a failed write is not a failure.
    let _ = tcp.write_all(body).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer));
    let _ = read.await.expect("an answer within 10 s");
    String::from_utf8_lossy(&answer).into_owned()
}

fn post_head(addr: std::net::SocketAddr, extra: &str, length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n{extra}\
         Content-Length: {length}\r\n\r\n"
    )
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

/// The JSON of a JSON answer's body.
fn json_body(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
}

/// A session id, from an initialize on its own connection.
async fn open_session(addr: std::net::SocketAddr) -> String {
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":common::init_params("2025-11-25")});
    let body = init.to_string();
    let answer = exchange(addr, &post_head(addr, "", body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 200, "{answer}");
    answer
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .unwrap_or_else(|| panic!("no session in {answer}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn a_message_whose_id_is_not_a_string_or_an_integer_gets_invalid_request_with_id_null() {
    let served = serve(|_| {}).await;
    let addr = served.addr;
    let session = open_session(addr).await;
    let extra = format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n");
    for id in ["null", r#"{"a":1}"#, "[1]", "true", "1.5"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
        let answer = exchange(addr, &post_head(addr, &extra, body.len()), body.as_bytes()).await;
        assert_eq!(status(&answer), 400, "{id}: {answer}");
        let error = json_body(&answer);
        assert_eq!(error["id"], Value::Null, "{id}: {error}");
        assert_eq!(error["error"]["code"], -32600, "{id}: {error}");
    }
    // Not JSON at all is a parse error, with id null too; and the session still serves.
    let body = "{not json";
    let answer = exchange(addr, &post_head(addr, &extra, body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 400, "{answer}");
    assert_eq!(json_body(&answer)["error"]["code"], -32700, "{answer}");
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let answer = exchange(addr, &post_head(addr, &extra, body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn two_host_headers_are_refused() {
    let served = serve(|_| {}).await;
    let addr = served.addr;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let head = post_head(addr, "Host: evil.example\r\n", body.len());
    let answer = exchange(addr, &head, body.as_bytes()).await;
    assert_eq!(status(&answer), 400, "{answer}");
    assert!(answer.contains("one Host header"), "{answer}");
}

#[tokio::test]
async fn a_body_over_the_bound_is_refused_from_its_length_or_at_the_bound() {
    let served = serve(|o| o.max_body_bytes = 1 << 20).await;
    let addr = served.addr;
    // Told up front: refused before a byte of the body is sent.
    let head = post_head(addr, "", 10_000_000_000);
    let answer = exchange(addr, &head, b"").await;
    assert_eq!(status(&answer), 413, "{answer}");
    assert!(answer.contains("10000000000 bytes"), "{answer}");
    // Chunked: refused once the bound is passed, long before the 8 MiB are all sent.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "x".repeat(64 * 1024));
    let body = chunk.repeat(128);
    let answer = exchange(addr, &head, body.as_bytes()).await;
    assert_eq!(status(&answer), 413, "{answer}");
}

#[tokio::test]
async fn a_client_that_trickles_its_head_or_idles_is_disconnected() {
    let served = serve(|o| o.header_timeout = Duration::from_millis(500)).await;
    let addr = served.addr;
    let closed_within = |mut tcp: TcpStream, trickle: bool| async move {
        let started = std::time::Instant::now();
        let mut buf = [0u8; 512];
        loop {
            if trickle {
                // One byte of a head every 100 ms never completes it.
                let _ = tcp.write_all(b"X").await;
            }
            match tokio::time::timeout(Duration::from_millis(100), tcp.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
                Ok(Ok(_)) => {}
                Err(_) if started.elapsed() > Duration::from_secs(10) => {
                    panic!("still open after 10 s")
                }
                Err(_) => {}
            }
        }
    };
    let trickling = TcpStream::connect(addr).await.unwrap();
    let mut trickling_head = trickling;
    trickling_head
        .write_all(format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .await
        .unwrap();
    let idle = TcpStream::connect(addr).await.unwrap();
    let (trickled, idled) = tokio::join!(
        closed_within(trickling_head, true),
        closed_within(idle, false)
    );
    // Generous: the point is that they are closed at all, not how fast.
    assert!(trickled < Duration::from_secs(5), "{trickled:?}");
    assert!(idled < Duration::from_secs(5), "{idled:?}");
}

#[tokio::test]
async fn no_more_connections_than_the_cap_are_served_at_once() {
    let served = serve(|o| {
        o.max_connections = 2;
        o.header_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = served.addr;
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    // Both slots are taken by connections that send nothing: a third is not served...
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let third = tokio::spawn(async move {
        exchange(addr, &post_head(addr, "", body.len()), body.as_bytes()).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!third.is_finished(), "served beyond the cap");
    // ...until one of them closes.
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert_ne!(status(&answer), 0, "{answer}");
}

#[tokio::test]
async fn no_more_sessions_than_the_cap_are_opened() {
    let served = serve(|o| o.max_sessions = 3).await;
    let addr = served.addr;
    for _ in 0..3 {
        open_session(addr).await;
    }
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":common::init_params("2025-11-25")});
    let body = init.to_string();
    let answer = exchange(addr, &post_head(addr, "", body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 503, "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 30"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_idle_session_expires() {
    let served = serve(|o| o.session_idle = Duration::from_millis(500)).await;
    let addr = served.addr;
    let session = open_session(addr).await;
    let extra = format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n");
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let answer = exchange(addr, &post_head(addr, &extra, body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 200, "served while fresh: {answer}");
    // Any request would keep it alive: nothing is sent for four times the idle time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answer = exchange(addr, &post_head(addr, &extra, body.len()), body.as_bytes()).await;
    assert_eq!(status(&answer), 404, "an expired session: {answer}");
}
