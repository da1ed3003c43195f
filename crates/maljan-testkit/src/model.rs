//! The scripted model server behind `fixture-model`: it speaks OpenAI Chat Completions
//! (`POST …/chat/completions`) and Anthropic Messages (`POST …/messages`), non-streaming, and
//! answers each request with the next turn of a JSON script, whichever wire format asked.
//!
//! ```json
//! {"model": "scripted-1", "turns": [
//!   {"tool_calls": [{"name": "hashes", "arguments": "{\"path\": \"x\"}"}]},
//!   {"status": 429, "retry_after": 1},
//!   {"status": 500}, {"drop": true}, {"delay_ms": 3000, "text": "late"},
//!   {"text": "{\"verdict\": \"benign\", …}", "usage": {"input_tokens": 10, "output_tokens": 5}}
//! ]}
//! ```
//!
//! `arguments` may be a string written as a model would (possibly cut short) or an object. When
//! the script runs out, the answer is the text `(script exhausted)`. With `--log FILE` every
//! request is appended as one JSON line `{"path", "auth", "api_key", "body"}`, so a test can read what the
//! agent sent (tool results, evidence ids, delimiters). It is a test fixture: hand-written over
//! std and serde_json, one thread per connection, `Connection: close` after each answer.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

/// What the fixture was started with.
pub struct ModelScript {
    pub model: String,
    pub turns: Vec<Value>,
}

impl ModelScript {
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("script: {e}"))?;
        let turns = v
            .get("turns")
            .and_then(Value::as_array)
            .cloned()
            .ok_or("script: `turns` must be an array")?;
        let model = v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("scripted-model")
            .to_string();
        Ok(Self { model, turns })
    }
}

struct State {
    script: ModelScript,
    next: usize,
    log: Option<PathBuf>,
}

/// Serves `script` on `listener` until the process ends.
pub fn serve(listener: TcpListener, script: ModelScript, log: Option<PathBuf>) {
    let state = Arc::new(Mutex::new(State {
        script,
        next: 0,
        log,
    }));
    for stream in listener.incoming().flatten() {
        let state = state.clone();
        std::thread::spawn(move || {
            let _ = handle(stream, &state);
        });
    }
}

fn handle(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut length = 0usize;
    let (mut auth, mut api_key) = (None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            match name.as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "authorization" => auth = Some(value),
                "x-api-key" => api_key = Some(value),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length.min(64 << 20)];
    reader.read_exact(&mut body)?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let anthropic = path.ends_with("/messages");
    if method != "POST" || !(anthropic || path.ends_with("/chat/completions")) {
        return respond(
            &mut stream,
            404,
            &[],
            &json!({"error": {"message": format!("no route {method} {path}"), "type": "not_found"}}),
        );
    }
    let (turn, model, index) = {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = &s.log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
        {
            let _ = writeln!(
                f,
                "{}",
                json!({"path": path, "auth": auth, "api_key": api_key, "body": body})
            );
        }
        let turn = s.script.turns.get(s.next).cloned();
        s.next += 1;
        (turn, s.script.model.clone(), s.next)
    };
    let turn = turn.unwrap_or_else(|| json!({"text": "(script exhausted)"}));
    if let Some(ms) = turn.get("delay_ms").and_then(Value::as_u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if turn.get("drop").and_then(Value::as_bool) == Some(true) {
        // Close without a byte of answer: the client sees the connection end mid-request.
        return stream.shutdown(std::net::Shutdown::Both);
    }
    let model = turn
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            body.get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(model)
        });
    if let Some(status) = turn.get("status").and_then(Value::as_u64) {
        let message = turn
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("scripted failure")
            .to_string();
        let retry = turn
            .get("retry_after")
            .map(|v| v.to_string())
            .map(|s| ("retry-after", s));
        let kind = match status {
            429 => "rate_limit_error",
            404 => "not_found_error",
            _ => "api_error",
        };
        let err = if anthropic {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        } else {
            let code = (status == 404).then_some("model_not_found");
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        };
        return respond(&mut stream, status as u16, retry.as_slice(), &err);
    }
    let answer = if anthropic {
        anthropic_answer(&turn, &model, index, &body)
    } else {
        openai_answer(&turn, &model, index, &body)
    };
    respond(&mut stream, 200, &[], &answer)
}

fn usage(turn: &Value, body: &Value) -> (u64, u64) {
    let u = turn.get("usage");
    let get = |k: &str| u.and_then(|u| u.get(k)).and_then(Value::as_u64);
    // Without a scripted figure, a rough count: four bytes a token.
    let input = get("input_tokens").unwrap_or(body.to_string().len() as u64 / 4);
    let output = get("output_tokens").unwrap_or(10);
    (input, output)
}

fn calls(turn: &Value) -> Vec<(String, String, Value)> {
    turn.get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{i}"));
            let name = c.get("name").and_then(Value::as_str).unwrap_or("").into();
            (id, name, c.get("arguments").cloned().unwrap_or(json!({})))
        })
        .collect()
}

fn openai_answer(turn: &Value, model: &str, index: usize, body: &Value) -> Value {
    let calls = calls(turn);
    let (input, output) = usage(turn, body);
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            let arguments = match args {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let mut message =
        json!({"role": "assistant", "content": turn.get("text").cloned().unwrap_or(Value::Null)});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    json!({
        "id": format!("chatcmpl-{index}"),
        "object": "chat.completion",
        "created": 1_700_000_000u64 + index as u64,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
        }],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
    })
}

fn anthropic_answer(turn: &Value, model: &str, index: usize, body: &Value) -> Value {
    let calls = calls(turn);
    let (input, output) = usage(turn, body);
    let mut content = Vec::new();
    if let Some(t) = turn.get("text").and_then(Value::as_str) {
        content.push(json!({"type": "text", "text": t}));
    }
    for (id, name, args) in &calls {
        // tool_use carries an object: a string is parsed, and one cut short becomes {}.
        let input = match args {
            Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
            other => other.clone(),
        };
        let id = if id.starts_with("toolu_") {
            id.clone()
        } else {
            format!("toolu_{id}")
        };
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    json!({
        "id": format!("msg_{index}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output},
    })
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &Value,
) -> std::io::Result<()> {
    let text = body.to_string();
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(text.as_bytes())?;
    stream.flush()
}
