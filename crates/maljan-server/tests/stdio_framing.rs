//! What only stdio has: lines. A malformed line, invalid UTF-8, an oversize line, a batch, a
//! stray notification or a blank line never stops the server, and each line that needs an
//! answer gets exactly one, at every version; input that ends with calls still running gets
//! their answers before the server stops, and a call that would run on is stopped within a
//! second.

mod common;

use common::*;
use serde_json::{Value, json};

/// Sends `line` as it is and returns the one answer it gets.
async fn answer_to(c: &mut Client, line: &[u8]) -> Value {
    let stdio = c.stdio();
    stdio.send_raw(line).await;
    stdio.recv().await
}

#[tokio::test]
async fn bad_lines_get_json_rpc_errors_and_the_server_keeps_serving() {
    for version in VERSIONS {
        let mut c = Client::connect_with(Transport::Stdio, version, 4096).await;
        // Before the handshake, and after it.
        for handshake_done in [false, true] {
            let v = answer_to(&mut c, b"{this is not json").await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&Value::Null, &json!(-32700)),
                "{c}: {v}"
            );
            let v = answer_to(&mut c, b"\xff\xfe\xfd").await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&Value::Null, &json!(-32700)),
                "{c}: {v}"
            );
            assert!(
                v["error"]["message"].as_str().unwrap().contains("UTF-8"),
                "{c}: {v}"
            );
            let v = answer_to(&mut c, "x".repeat(10_000).as_bytes()).await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&Value::Null, &json!(-32600)),
                "{c}: {v}"
            );
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("10000 bytes") && message.contains("4096"),
                "{c}: {v}"
            );
            // A request over the bound that names its id first gets its answer by that id.
            let big = format!(
                r#"{{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{{"name":"add","arguments":{{"pad":"{}"}}}}}}"#,
                "y".repeat(10_000)
            );
            let v = answer_to(&mut c, big.as_bytes()).await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&json!(77), &json!(-32600)),
                "{c}: {v}"
            );
            let v = answer_to(&mut c, b"[]").await;
            assert_eq!(v["error"]["code"], -32600, "{c}: {v}");
            let v = answer_to(
                &mut c,
                br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#,
            )
            .await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&Value::Null, &json!(-32600)),
                "{c}: {v}"
            );
            let v = answer_to(
                &mut c,
                br#"{"jsonrpc":"1.0","id":"old","method":"tools/list"}"#,
            )
            .await;
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&json!("old"), &json!(-32600)),
                "{c}: {v}"
            );
            if !handshake_done {
                c.handshake().await;
            }
        }
        let v = c.request("no/such/method", json!({})).await.response;
        assert_eq!(v["error"]["code"], -32601, "{c}: {v}");
        // Still serving, and nothing stray is waiting: the answer is the very next line.
        c.quick_request().await;
        assert!(c.stdio().nothing_else_read(), "{c}");
    }
}

/// rmcp ends a session whose first message is not a request: notifications and responses
/// that come first are dropped unanswered, and so are blank lines, wherever they come.
#[tokio::test]
async fn stray_notifications_responses_and_blank_lines_are_passed_over() {
    for version in VERSIONS {
        let mut c = Client::connect(Transport::Stdio, version).await;
        let stdio = c.stdio();
        stdio
            .send_raw(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        stdio
            .send_raw(br#"{"jsonrpc":"2.0","id":77,"result":{}}"#)
            .await;
        stdio
            .send_raw(br#"{"jsonrpc":"2.0","method":"notifications/made_up","params":5}"#)
            .await;
        stdio.send_raw(b"").await;
        stdio.send_raw(b"   \r").await;
        c.handshake().await;
        c.stdio().send_raw(b"").await;
        let list = c.request("tools/list", json!({})).await.response;
        assert!(list["result"]["tools"].is_array(), "{c}: {list}");
        assert!(c.stdio().nothing_else_read(), "{c}");
    }
}

/// Line endings from Windows tools, and a UTF-8 byte order mark, are read as the line.
#[tokio::test]
async fn crlf_and_a_byte_order_mark_are_read() {
    let mut c = Client::open(Transport::Stdio, "2025-06-18").await;
    let v = answer_to(
        &mut c,
        b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r",
    )
    .await;
    assert_eq!(v, json!({"jsonrpc": "2.0", "id": 5, "result": {}}));
}

/// `printf '…' | server`: an initialize with `{}` params, a list and a call without waiting or
/// sending notifications/initialized, then the end of input. Each gets its real answer, the
/// initialize's first, and the server stops once they are out.
#[tokio::test]
async fn a_printf_pipe_gets_every_answer_before_the_server_stops() {
    let mut c = Client::connect(Transport::Stdio, "2025-11-25").await;
    let stdio = c.stdio();
    for line in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}}),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}),
    ] {
        stdio.send_raw(line.to_string().as_bytes()).await;
    }
    stdio.end_input().await;
    let first = stdio.recv().await;
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["protocolVersion"], "2025-11-25", "{first}");
    assert_eq!(first["result"]["serverInfo"]["name"], "test-server");
    let mut rest = Vec::new();
    while let Some(answer) = stdio.next().await {
        rest.push(answer);
    }
    rest.sort_by_key(|a| a["id"].as_i64());
    let ids: Vec<i64> = rest.iter().filter_map(|a| a["id"].as_i64()).collect();
    assert_eq!(ids, [2, 3, 4], "{rest:?}");
    assert_eq!(
        rest[0]["result"]["tools"].as_array().map(Vec::len),
        Some(TOOL_COUNT)
    );
    assert_eq!(
        tool_json(&rest[1]),
        "slept 300 ms",
        "answered after the input ended"
    );
    assert_eq!(rest[2]["result"]["structuredContent"]["sum"], 3);
    stdio.served().await.expect("a clean stop");
}

/// A call that would run for a minute is cancelled soon after the input ends, and the server
/// stops: nobody is left to read its answer.
#[tokio::test]
async fn input_that_ends_stops_a_long_call_within_a_second() {
    let mut c = Client::connect(Transport::Stdio, "2025-11-25").await;
    c.handshake().await;
    let probe = c.probe.clone();
    let stdio = c.stdio();
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{}}});
    stdio.send_raw(call.to_string().as_bytes()).await;
    probe.started.notified().await;
    let ended = std::time::Instant::now();
    stdio.end_input().await;
    probe.stopped.notified().await;
    stdio.served().await.expect("a clean stop");
    let took = ended.elapsed();
    assert!(
        took < std::time::Duration::from_secs(2),
        "the server stopped {took:?} after its input ended"
    );
    let answer = stdio.next().await.expect("the cancelled call is answered");
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(stdio.next().await.is_none());
}
