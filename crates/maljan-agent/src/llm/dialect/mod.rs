//! Tool schemas in each provider's dialect, converted once per tool set (see `Models`), and the
//! way back: a call the model wrote against a converted schema is turned into arguments of the
//! tool's own contract before it runs.
//!
//! - OpenAI (Chat Completions function calling): strict mode where the schema allows it — every
//!   object closed (`additionalProperties: false`) with every property required, an optional
//!   property nullable (the model's `null` for it is taken out again: absent), `oneOf` read as
//!   `anyOf`, keywords strict mode refuses dropped (a default goes into the description).
//!   A schema strict mode cannot express (a free-form object, an array of anything, `not`, …)
//!   is sent as it is with `strict: false`; see [`openai`].
//! - Anthropic Messages: the schema as it is in `input_schema`, its root an object; see
//!   [`anthropic`].
//! - Gemini through its OpenAI-compatible endpoint (an `openai` provider whose base_url is
//!   Google's `generativelanguage.googleapis.com`): the OpenAPI 3.0 subset of Gemini function
//!   declarations — one `type` per schema, `nullable: true` instead of a null type, no `$ref`,
//!   no `additionalProperties`, only the formats Gemini knows; a value it cannot type (a
//!   free-form object, any JSON) is asked for as JSON text and parsed back; see [`gemini`].
//!
//! Arguments are only ever loosened back (a `null` dropped, JSON text parsed): the server still
//! validates every call against its own schema.

pub mod gemini;
pub mod openai;
mod restore;
mod shape;

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Endpoint, ProviderKind, ToolCall, ToolSpec};

/// The schema dialect a provider takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    Gemini,
}

/// The host of Google's Gemini API, whose OpenAI-compatible endpoint takes only the OpenAPI 3.0
/// subset of JSON Schema.
const GEMINI_HOST: &str = "generativelanguage.googleapis.com";

impl Dialect {
    /// The dialect of an endpoint: its wire format, and for OpenAI's, whether it is Gemini's.
    pub fn of(endpoint: &Endpoint) -> Self {
        match endpoint.provider {
            ProviderKind::Anthropic => Self::Anthropic,
            ProviderKind::OpenAi if is_gemini_url(&endpoint.base_url) => Self::Gemini,
            ProviderKind::OpenAi => Self::OpenAi,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }

    /// The tools as this dialect's request carries them (`tools` of the request body).
    pub fn declare(self, tools: &[ToolSpec]) -> Declared {
        let entries = tools
            .iter()
            .map(|t| match self {
                Self::OpenAi => {
                    let (parameters, strict) = match openai::strict_parameters(&t.parameters) {
                        Ok(p) => (p, true),
                        Err(_) => (openai::lenient_parameters(&t.parameters), false),
                    };
                    json!({"type": "function", "function": {"name": t.name,
                        "description": t.description, "parameters": parameters, "strict": strict}})
                }
                Self::Gemini => {
                    let mut function = json!({"name": t.name, "description": t.description});
                    let parameters = gemini::parameters(&t.parameters);
                    // Gemini refuses an object without properties; a tool that takes none
                    // declares no parameters at all.
                    if parameters["properties"]
                        .as_object()
                        .is_some_and(|p| !p.is_empty())
                    {
                        function["parameters"] = parameters;
                    }
                    json!({"type": "function", "function": function})
                }
                Self::Anthropic => json!({"name": t.name, "description": t.description,
                    "input_schema": anthropic::input_schema(&t.parameters)}),
            })
            .collect();
        Declared {
            dialect: self,
            entries,
            originals: (tools.iter())
                .map(|t| (t.name.clone(), t.parameters.clone()))
                .collect(),
        }
    }
}

fn is_gemini_url(base_url: &str) -> bool {
    let rest = base_url
        .strip_prefix("https://")
        .or_else(|| base_url.strip_prefix("http://"))
        .unwrap_or(base_url);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host);
    host.eq_ignore_ascii_case(GEMINI_HOST)
}

/// A tool set converted to one dialect, with what is needed to read calls back.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub dialect: Dialect,
    /// One entry per tool, as the request's `tools` array holds them.
    pub entries: Vec<Value>,
    /// Each tool's own schema, by name.
    originals: HashMap<String, Value>,
}

impl Declared {
    /// Rewrites a call's arguments from the dialect's schema back to the tool's own: a `null`
    /// the dialect made the model send for an absent optional property is taken out, and (Gemini)
    /// a value asked for as JSON text is parsed. Arguments that are not a JSON object, or a
    /// tool not declared, are left as they are: the tool's own validation answers them.
    pub fn restore(&self, call: &mut ToolCall) {
        if self.dialect == Dialect::Anthropic {
            return;
        }
        let Some(schema) = self.originals.get(&call.name) else {
            return;
        };
        let Ok(mut args) = serde_json::from_str::<Value>(&call.arguments) else {
            return;
        };
        if !args.is_object() {
            return;
        }
        let before = args.clone();
        restore::restore(schema, &mut args, self.dialect == Dialect::Gemini);
        if args != before {
            call.arguments = args.to_string();
        }
    }
}

/// Anthropic's `input_schema`: JSON Schema as the tool wrote it, its root an object.
pub mod anthropic {
    use serde_json::{Map, Value};

    /// The schema with `type: object` at its root (MCP requires it; a server that left it out
    /// meant it) and no `$schema` (the API reads 2020-12 anyway).
    pub fn input_schema(schema: &Value) -> Value {
        let mut map = match schema {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        map.remove("$schema");
        map.entry("type")
            .or_insert_with(|| Value::String("object".into()));
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_is_told_by_its_host() {
        assert!(is_gemini_url(
            "https://generativelanguage.googleapis.com/v1beta/openai"
        ));
        assert!(!is_gemini_url("https://api.openai.com/v1"));
        assert!(!is_gemini_url(
            "https://generativelanguage.googleapis.com.evil.example/v1"
        ));
    }

    #[test]
    fn a_call_is_read_back_to_the_tools_own_contract() {
        let spec = ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "extra": {"type": "object", "additionalProperties": true},
            }, "required": ["path"]}),
        };
        let declared = Dialect::OpenAi.declare(std::slice::from_ref(&spec));
        assert_eq!(declared.entries[0]["function"]["strict"], false);
        let mut call = ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: r#"{"path":"a","limit":null,"note":null}"#.into(),
        };
        declared.restore(&mut call);
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args, json!({"path": "a", "note": null}), "{args}");
        let declared = Dialect::Gemini.declare(std::slice::from_ref(&spec));
        let mut call = ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: r#"{"path":"a","extra":"{\"k\": 1}"}"#.into(),
        };
        declared.restore(&mut call);
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args, json!({"path": "a", "extra": {"k": 1}}));
    }
}
