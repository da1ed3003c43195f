//! Anthropic Messages: `system` apart, assistant turns as text and tool_use blocks, tool answers
//! as tool_result blocks in the user turn that follows (consecutive user content merged into one
//! turn, since the roles must alternate).

use serde_json::{Value, json};

use super::{Endpoint, Message, Parsed, ToolCall, Wire};

pub(super) const WIRE: Wire = Wire {
    path: "/messages",
    request,
    headers: |req, key| {
        let req = req.header("anthropic-version", "2023-06-01");
        match key {
            Some(k) => req.header("x-api-key", k),
            None => req,
        }
    },
    parse,
};

fn request(ep: &Endpoint, messages: &[Message], tools: &[Value]) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    let mut push = |role: &str, block: Value| match turns.last_mut() {
        Some((r, blocks)) if r == role => blocks.push(block),
        _ => turns.push((role.to_string(), vec![block])),
    };
    for m in messages {
        match m {
            Message::System { content } => system.push(content.clone()),
            Message::User { content } => push("user", json!({"type": "text", "text": content})),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(t) = content.as_ref().filter(|t| !t.is_empty()) {
                    push("assistant", json!({"type": "text", "text": t}));
                }
                for c in tool_calls {
                    // tool_use carries an object; arguments that are not one were refused before
                    // the call, so the object sent back is empty.
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
            }
            Message::Tool {
                call_id, content, ..
            } => push(
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": content}),
            ),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": ep.model,
        "max_tokens": ep.max_output_tokens,
        "messages": messages,
        "temperature": 0,
    });
    if !system.is_empty() {
        body["system"] = Value::String(system.join("\n\n"));
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools.to_vec());
    }
    body
}

fn parse(v: &Value) -> Result<Parsed, String> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no `content` array in the answer")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => tool_calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("toolu")
                    .to_string(),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a tool_use block without a name")?
                    .to_string(),
                arguments: block.get("input").cloned().unwrap_or(json!({})).to_string(),
            }),
            _ => {}
        }
    }
    let (model, usage) = Parsed::common(v, "input_tokens", "output_tokens");
    Ok(Parsed {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tool_results_and_a_following_note_share_one_user_turn() {
        let ep = Endpoint {
            provider: super::super::ProviderKind::Anthropic,
            base_url: String::new(),
            model: "m".into(),
            key: None,
            context_window: 8192,
            max_output_tokens: 100,
            timeout: Duration::from_secs(1),
        };
        let msgs = [
            Message::System {
                content: "s".into(),
            },
            Message::User {
                content: "u".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "t1".into(),
                    name: "hashes".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: "t1".into(),
                name: "hashes".into(),
                content: "r".into(),
            },
            Message::User {
                content: "write up".into(),
            },
        ];
        let body = request(&ep, &msgs, &[]);
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2]["content"][0]["type"], "tool_result");
        assert_eq!(turns[2]["content"][1]["text"], "write up");
        assert_eq!(body["system"], "s");
    }
}
