//! OpenAI Chat Completions, in the subset every compatible server accepts: `model`, `messages`,
//! `tools` (type function, declared by `dialect`: `strict` where the schema allows it, which a
//! server that does not know it ignores), `max_tokens`, `temperature`. Nothing vendor-only is
//! required, and answers are read leniently (arguments as a string or an object, usage absent).

use serde_json::{Value, json};

use super::{Endpoint, Message, Parsed, ToolCall, Wire};

pub(super) const WIRE: Wire = Wire {
    path: "/chat/completions",
    request,
    headers: |req, key| match key {
        Some(k) => req.bearer_auth(k),
        None => req,
    },
    parse,
};

fn request(ep: &Endpoint, messages: &[Message], tools: &[Value]) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| match m {
            Message::System { content } => json!({"role": "system", "content": content}),
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut v = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                v
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        })
        .collect();
    let mut body = json!({
        "model": ep.model,
        "messages": messages,
        "max_tokens": ep.max_output_tokens,
        "temperature": 0,
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools.to_vec());
    }
    body
}

fn parse(v: &Value) -> Result<Parsed, String> {
    let message = v
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .ok_or("no choices[0].message in the answer")?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let mut tool_calls = Vec::new();
    for (i, c) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let f = c.get("function").ok_or("a tool call without `function`")?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a tool call without a name")?;
        let arguments = match f.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "{}".into(),
            Some(other) => other.to_string(),
        };
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| format!("call_{i}"));
        tool_calls.push(ToolCall {
            id,
            name: name.to_string(),
            arguments,
        });
    }
    let (model, usage) = Parsed::common(v, "prompt_tokens", "completion_tokens");
    Ok(Parsed {
        text,
        tool_calls,
        usage,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;

    #[test]
    fn answers_with_object_arguments_and_no_usage_are_read() {
        let p = parse(
            &json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "a", "function": {"name": "hashes", "arguments": {"path": "x"}}}]}}]}),
        )
        .unwrap();
        assert_eq!(p.tool_calls[0].arguments, r#"{"path":"x"}"#);
        assert_eq!(p.usage, Usage::default());
        assert!(parse(&json!({"choices": []})).is_err());
    }
}
