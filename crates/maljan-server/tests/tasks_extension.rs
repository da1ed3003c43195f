//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as the framework serves
//! it, over stdio and streamable HTTP, with a session (2025-11-25) and stateless (2026-07-28): a
//! long tool's call from a client that declares the extension is a task polled to its result,
//! the same call from one that does not is an ordinary call, a tool that requires tasks is refused
//! to it, `tasks/cancel` reaches the tool's cancellation token, and a task is its HTTP session's
//! alone.

mod common;

use std::{sync::Arc, time::Duration};

use common::*;
use maljan_server::{Registry, TaskSupport, ToolError, ToolMeta, ToolServer};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";
const WIRES: [(Transport, &str); 4] = [
    (Transport::Stdio, "2025-11-25"),
    (Transport::Stdio, STATELESS),
    (Transport::Http, "2025-11-25"),
    (Transport::Http, STATELESS),
];

#[derive(Deserialize, JsonSchema)]
struct Work {
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

fn task_server(probe: Arc<Probe>) -> Arc<ToolServer> {
    let mut r = Registry::new();
    r.add(
        ToolMeta::new("quick", "Answers at once (no timeout: never a task)"),
        |_ctx, _a: Nothing| async move { Ok::<_, ToolError>("quick".to_string()) },
    );
    // A two-minute timeout makes a tool long: it allows tasks without saying so.
    r.add(
        ToolMeta::new("long", "Works for `ms`").timeout_s(120),
        |_ctx, a: Work| async move {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            Ok::<_, ToolError>(format!("worked {} ms", a.ms))
        },
    );
    r.add(
        ToolMeta::new("fails", "Fails as no_such_file").timeout_s(120),
        |_ctx, _a: Nothing| async move {
            Err::<String, _>(ToolError::no_such_file("no such file or directory: x"))
        },
    );
    r.add(
        ToolMeta::new("wait", "Waits until its call is stopped").timeout_s(120),
        move |ctx, _a: Nothing| {
            let probe = probe.clone();
            async move {
                let token = ctx.cancellation().clone();
                let watcher = probe.clone();
                tokio::spawn(async move {
                    token.cancelled().await;
                    watcher.stopped.notify_one();
                });
                probe.started.notify_one();
                tokio::time::sleep(Duration::from_secs(100)).await;
                Ok::<_, ToolError>("waited".to_string())
            }
        },
    );
    r.add(
        ToolMeta::new("only_task", "Runs only as a task").task_support(TaskSupport::Required),
        |_ctx, _a: Nothing| async move { Ok::<_, ToolError>("a task".to_string()) },
    );
    ToolServer::new("task-server", "1.0.0", r)
}

async fn open(transport: Transport, version: &'static str) -> Client {
    let probe = Arc::new(Probe::default());
    let server = task_server(probe.clone());
    let mut c = Client::connect_to(transport, version, server, probe, 1 << 20);
    c.handshake().await;
    c
}

/// The request `_meta` that declares the extension for this request alone.
fn declaring() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}})
}

/// tools/call, declaring the extension or not.
async fn call(c: &mut Client, tool: &str, args: Value, tasks: bool) -> Value {
    let mut params = json!({"name": tool, "arguments": args});
    if tasks {
        params["_meta"] = declaring();
    }
    c.request("tools/call", params).await.response
}

/// A tasks/* request, declaring the extension (as a client that holds a task does).
async fn task_request(c: &mut Client, method: &str, task_id: &str) -> Value {
    let params = json!({"taskId": task_id, "_meta": declaring()});
    c.request(method, params).await.response
}

/// Polls tasks/get until the task has ended.
async fn ended(c: &mut Client, task_id: &str) -> Value {
    for _ in 0..200 {
        let got = task_request(c, "tasks/get", task_id).await;
        let status = got["result"]["status"].as_str().unwrap_or_default();
        if ["completed", "failed", "cancelled"].contains(&status) {
            return got["result"].clone();
        }
        assert_eq!(status, "working", "{c}: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{c}: task {task_id} did not end within 10 s");
}

fn task_id(c: &Client, created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{c}: {created}");
    let id = created["result"]["taskId"].as_str();
    id.unwrap_or_else(|| panic!("{c}: no taskId in {created}"))
        .to_string()
}

#[tokio::test]
async fn a_long_tool_declared_for_runs_as_a_task_polled_to_its_inlined_result() {
    for (transport, version) in WIRES {
        let mut c = open(transport, version).await;
        let created = call(&mut c, "long", json!({"ms": 300}), true).await;
        let id = task_id(&c, &created);
        // The TTL outlives the tool's timeout (120 s) by the time a result is kept (300 s).
        assert_eq!(created["result"]["ttlMs"], 420_000, "{c}: {created}");
        assert!(created["result"]["pollIntervalMs"].is_u64(), "{c}");
        let done = ended(&mut c, &id).await;
        assert_eq!(done["status"], "completed", "{c}: {done}");
        assert_eq!(done["result"]["content"][0]["text"], "worked 300 ms", "{c}");
        // A tool's own error is a completed task whose result says so.
        let created = call(&mut c, "fails", json!({}), true).await;
        let id = task_id(&c, &created);
        let done = ended(&mut c, &id).await;
        assert_eq!(done["status"], "completed", "{c}: {done}");
        assert_eq!(done["result"]["isError"], true, "{c}: {done}");
        let error = tool_json(&json!({"result": done["result"]}));
        assert_eq!(error["error"]["code"], "no_such_file", "{c}: {done}");
        // A short tool is an ordinary call, declared or not.
        let quick = call(&mut c, "quick", json!({}), true).await;
        assert_eq!(
            quick["result"]["content"][0]["text"], "quick",
            "{c}: {quick}"
        );
        assert!(quick["result"].get("taskId").is_none(), "{c}: {quick}");
    }
}

#[tokio::test]
async fn the_extension_is_declared_by_a_server_with_a_long_tool() {
    for (transport, version) in WIRES {
        let probe = Arc::new(Probe::default());
        let server = task_server(probe.clone());
        let mut c = Client::connect_to(transport, version, server, probe, 1 << 20);
        let info = if version == STATELESS {
            c.request("server/discover", json!({})).await.response
        } else {
            c.request("initialize", init_params(version)).await.response
        };
        let extensions = &info["result"]["capabilities"]["extensions"];
        assert!(extensions[TASKS].is_object(), "{c}: {info}");
    }
}

#[tokio::test]
async fn without_the_extension_a_long_tool_answers_at_once_and_a_task_only_one_is_refused() {
    for (transport, version) in WIRES {
        let mut c = open(transport, version).await;
        let plain = call(&mut c, "long", json!({"ms": 10}), false).await;
        assert_eq!(
            plain["result"]["content"][0]["text"], "worked 10 ms",
            "{c}: {plain}"
        );
        assert!(plain["result"].get("taskId").is_none(), "{c}: {plain}");
        let refused = call(&mut c, "only_task", json!({}), false).await;
        assert_eq!(refused["error"]["code"], -32021, "{c}: {refused}");
        let needs = &refused["error"]["data"]["requiredCapabilities"]["extensions"];
        assert!(needs[TASKS].is_object(), "{c}: {refused}");
        // Declared, it runs as a task.
        let created = call(&mut c, "only_task", json!({}), true).await;
        let id = task_id(&c, &created);
        assert_eq!(
            ended(&mut c, &id).await["result"]["content"][0]["text"],
            "a task"
        );
        // tasks/get without the extension is refused the same way.
        let params = json!({"taskId": id});
        let got = c.request("tasks/get", params).await.response;
        assert_eq!(got["error"]["code"], -32021, "{c}: {got}");
    }
}

#[tokio::test]
async fn tasks_cancel_reaches_the_tools_cancellation_token() {
    for (transport, version) in WIRES {
        let mut c = open(transport, version).await;
        let created = call(&mut c, "wait", json!({}), true).await;
        let id = task_id(&c, &created);
        tokio::time::timeout(Duration::from_secs(10), c.probe.started.notified())
            .await
            .unwrap_or_else(|_| panic!("{c}: the tool never started"));
        let ack = task_request(&mut c, "tasks/cancel", &id).await;
        assert_eq!(
            ack["result"],
            json!({"resultType": "complete"}),
            "{c}: {ack}"
        );
        tokio::time::timeout(Duration::from_secs(10), c.probe.stopped.notified())
            .await
            .unwrap_or_else(|_| panic!("{c}: the tool's token was not cancelled"));
        assert_eq!(ended(&mut c, &id).await["status"], "cancelled", "{c}");
        // Cancelling it again is acknowledged the same way; an unknown id is invalid params.
        let again = task_request(&mut c, "tasks/cancel", &id).await;
        assert_eq!(again["result"]["resultType"], "complete", "{c}: {again}");
        let unknown = task_request(&mut c, "tasks/get", "no-such-task").await;
        assert_eq!(unknown["error"]["code"], -32602, "{c}: {unknown}");
    }
}

/// With sessions (2025-11-25 over HTTP), another session is told a task does not exist.
#[tokio::test]
async fn a_task_is_its_http_sessions_alone() {
    let mut a = open(Transport::Http, "2025-11-25").await;
    let mut b = a.another_session();
    b.handshake().await;
    let created = call(&mut a, "long", json!({"ms": 10}), true).await;
    let id = task_id(&a, &created);
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = task_request(&mut b, method, &id).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    assert_eq!(ended(&mut a, &id).await["status"], "completed");
}
