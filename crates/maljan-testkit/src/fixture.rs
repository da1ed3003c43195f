//! A tiny hand-written MCP server over stdio (newline-delimited JSON-RPC), with one misbehaviour
//! per fixture binary. It needs nothing but std and serde_json, so what it does is exactly what
//! this file says.
//!
//! Environment:
//! - `FIXTURE_LOG`: a file each notable event is appended to (`call work`, `cancelled <id>`,
//!   `start <pid>`), so tests can prove from the server's side what happened.
//! - `FIXTURE_DELAY_MS`: how long `work` takes in the slow fixture (default 200).
//! - `FIXTURE_TIMEOUT_S`: the `timeout_s` the manifest declares for `work` (default none).
//! - `FIXTURE_FLOOD_BYTES`: how much the flood fixture writes to stderr (default 32 MiB).
//! - `FIXTURE_GARBLE`: what the garble fixture sends for `work`: `huge` (an answer of
//!   `FIXTURE_HUGE_BYTES`, default 100 MB), `malformed` (a broken line that names the call's
//!   id), `junk` (a line that is not JSON at all) or `wrong-id` (an answer to another id).

use std::{
    io::{BufRead, Write},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};

/// What the `work` tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Never answers `work`.
    Hang,
    /// Exits (status 3) on `work`, after reading the request.
    Crash,
    /// Answers `work` after `FIXTURE_DELAY_MS`.
    Slow,
    /// Floods stderr while serving; `work` answers at once.
    Flood,
    /// Answers at once.
    Echo,
    /// Answers `work` with something a client cannot take (`FIXTURE_GARBLE`).
    Garble,
}

struct State {
    out: Mutex<std::io::Stdout>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: AtomicUsize,
}

fn log(event: &str) {
    let Ok(path) = std::env::var("FIXTURE_LOG") else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{event}");
    }
}

fn send(state: &State, msg: &Value) {
    let mut out = state.out.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(out, "{msg}");
    let _ = out.flush();
}

fn text_result(text: &str) -> Value {
    json!({"content":[{"type":"text","text":text}],"isError":false})
}

fn tools() -> Value {
    let obj = |props: Value| json!({"type":"object","properties":props});
    json!([
        {"name":"echo","description":"Echoes message","inputSchema":obj(json!({"message":{"type":"string"}}))},
        {"name":"work","description":"Does the fixture's work","inputSchema":obj(json!({}))},
        {"name":"fail","description":"Returns a maljan-shaped tool error","inputSchema":obj(json!({}))},
        {"name":"stats","description":"Calls seen and the most in flight at once","inputSchema":obj(json!({}))},
        {"name":"capabilities","description":"The capability manifest","inputSchema":obj(json!({}))},
        {"name":"env","description":"Names of the environment variables it was started with","inputSchema":obj(json!({}))},
    ])
}

fn manifest() -> Value {
    let timeout = std::env::var("FIXTURE_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok());
    json!({"server":"fixture","version":"0.1.0","tools":[
        {"name":"echo","available":true,"timeout_s":null},
        {"name":"work","available":true,"timeout_s":timeout},
        {"name":"fail","available":true},
        {"name":"stats","available":true},
        {"name":"missing","available":false,"optional_dependency":"frobnicator","reason":"frobnicator not found on PATH","remediation":"install frobnicator","timeout_s":null},
    ]})
}

/// Sends, for the call `id`, what `FIXTURE_GARBLE` names.
fn garble(state: &State, id: Value) {
    let raw = |line: String| {
        let mut out = state.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    match std::env::var("FIXTURE_GARBLE").unwrap_or_default().as_str() {
        "huge" => {
            let bytes = std::env::var("FIXTURE_HUGE_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(100_000_000usize);
            let text = "x".repeat(bytes);
            send(
                state,
                &json!({"jsonrpc":"2.0","id":id,"result":text_result(&text)}),
            );
        }
        "malformed" => raw(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"#
        )),
        "junk" => raw("this is not JSON-RPC".to_string()),
        _ => {
            let other = id.as_i64().map_or(json!("nobody"), |n| json!(n + 1000));
            send(
                state,
                &json!({"jsonrpc":"2.0","id":other,"result":text_result("done")}),
            );
        }
    }
}

/// Serves stdin/stdout until stdin closes.
pub fn run(behaviour: Behaviour) {
    log(&format!("start {}", std::process::id()));
    let state = Arc::new(State {
        out: Mutex::new(std::io::stdout()),
        in_flight: AtomicUsize::new(0),
        max_in_flight: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    });
    if behaviour == Behaviour::Flood {
        std::thread::spawn(|| {
            let total: usize = std::env::var("FIXTURE_FLOOD_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(32 << 20);
            let line =
                "flood flood flood flood flood flood flood flood flood flood flood flood flood\n"
                    .repeat(64);
            let mut err = std::io::stderr();
            let mut written = 0;
            while written < total {
                if err.write_all(line.as_bytes()).is_err() {
                    break;
                }
                written += line.len();
            }
        });
    }
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let reply = |result: Value| json!({"jsonrpc":"2.0","id":id,"result":result});
        match method {
            "initialize" => {
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("2025-06-18");
                let version = match asked {
                    "2024-11-05" | "2025-03-26" | "2025-06-18" | "2025-11-25" => asked,
                    _ => "2025-06-18",
                };
                send(
                    &state,
                    &reply(
                        json!({"protocolVersion":version,"capabilities":{"tools":{}},
                        "serverInfo":{"name":"fixture","version":"0.1.0"}}),
                    ),
                );
            }
            "ping" => send(&state, &reply(json!({}))),
            "tools/list" => send(&state, &reply(json!({"tools":tools()}))),
            "notifications/cancelled" => {
                let rid = params
                    .get("requestId")
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                let reason = params.get("reason").and_then(Value::as_str).unwrap_or("");
                log(&format!("cancelled {rid} {reason}"));
            }
            "tools/call" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                match name.as_str() {
                    "echo" => {
                        let m = args.get("message").and_then(Value::as_str).unwrap_or("");
                        send(&state, &reply(text_result(m)));
                    }
                    "capabilities" => send(&state, &reply(text_result(&manifest().to_string()))),
                    "env" => {
                        let mut names: Vec<String> = std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
                        names.sort();
                        send(&state, &reply(text_result(&json!(names).to_string())));
                    }
                    "fail" => send(
                        &state,
                        &reply(json!({"content":[{"type":"text","text":json!({"error":{"code":"bad_argument","message":"fixture says no","remediation":"ask nicely"},"tool":"fail"}).to_string()}],"isError":true})),
                    ),
                    "stats" => send(
                        &state,
                        &reply(text_result(
                            &json!({"calls":state.calls.load(Ordering::SeqCst),"max_in_flight":state.max_in_flight.load(Ordering::SeqCst)})
                                .to_string(),
                        )),
                    ),
                    "work" => {
                        state.calls.fetch_add(1, Ordering::SeqCst);
                        log("call work");
                        match behaviour {
                            Behaviour::Hang => {}
                            Behaviour::Crash => std::process::exit(3),
                            Behaviour::Echo | Behaviour::Flood => send(&state, &reply(text_result("done"))),
                            Behaviour::Garble => garble(&state, id.clone().unwrap_or(Value::Null)),
                            Behaviour::Slow => {
                                let st = state.clone();
                                let delay = std::env::var("FIXTURE_DELAY_MS")
                                    .ok()
                                    .and_then(|v| v.parse().ok())
                                    .unwrap_or(200u64);
                                let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                                st.max_in_flight.fetch_max(now, Ordering::SeqCst);
                                let msg = reply(text_result("done"));
                                std::thread::spawn(move || {
                                    std::thread::sleep(Duration::from_millis(delay));
                                    st.in_flight.fetch_sub(1, Ordering::SeqCst);
                                    send(&st, &msg);
                                });
                            }
                        }
                    }
                    other => send(
                        &state,
                        &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":format!("unknown tool: {other}")}}),
                    ),
                }
            }
            _ => {
                if id.is_some() {
                    send(
                        &state,
                        &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"method not found"}}),
                    );
                }
            }
        }
    }
}
