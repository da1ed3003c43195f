//! The check a call passes before it is sent: the tool is one the server listed (else
//! `no_such_tool`), and its arguments match the tool's `inputSchema` (else `bad_argument`).
//!
//! Every server gets the same check, a third-party one above all: a server that is not maljan's
//! may answer a wrong argument with a stack trace, a JSON-RPC error or nothing useful, and an
//! unknown tool with anything at all. Checked here, the caller (a person, the agent's model) gets
//! the code and the remedy DESIGN.md promises, and the ledger records the refused call once.
//!
//! The schema is the server's, so it is untrusted: it never makes the client fetch anything (every
//! `$ref` outside the schema is refused), its patterns run on the linear-time `regex` engine, and a
//! schema the validator cannot compile is not a reason to refuse the call — the server judges it.
//! The refusal names what is wrong, never the value given (an argument may be a secret).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use jsonschema::{PatternOptions, Retrieve, Uri, Validator};
use maljan_protocol::ErrorCode;
use serde_json::{Map, Value};

use crate::{manifest::ServerView, outcome::CallError};

/// The code of a call to a tool the server did not list (kept as a string: a client-side code,
/// like `server_resting`, that servers never send).
pub const NO_SUCH_TOOL: &str = "no_such_tool";

/// At most this many schema errors are named in one refusal.
const ERRORS_NAMED: usize = 3;

/// Compiled validators a server's cache keeps before it starts over.
const CACHED_SCHEMAS: usize = 512;

/// A server's compiled schemas, by the schema's text (held by its slot: a job calls a tool many
/// times, and a worker runs many jobs against the same servers).
#[derive(Default)]
pub struct SchemaCache(Mutex<HashMap<String, Option<Arc<Validator>>>>);

/// Refuses `tool` with `arguments` on the server `view` describes, or lets it through. Without a
/// `cache` (the server's `send_unchecked_arguments`) only an unlisted tool is refused.
pub fn check(
    cache: Option<&SchemaCache>,
    view: &ServerView,
    tool: &str,
    arguments: Option<&Map<String, Value>>,
) -> Result<(), CallError> {
    let Some(info) = view.tool(tool) else {
        if view.advertises(tool) {
            // A staging primitive (put_sample…): listed, kept from users and models, no schema here.
            return Ok(());
        }
        return Err(no_such_tool(view, tool));
    };
    let Some(validator) = cache.and_then(|c| c.validator_for(&info.input_schema)) else {
        return Ok(());
    };
    let empty = Value::Object(Map::new());
    let instance = arguments.map(|a| Value::Object(a.clone()));
    let instance = instance.as_ref().unwrap_or(&empty);
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(ERRORS_NAMED + 1)
        .map(|e| {
            let at = e.instance_path().to_string();
            let what = e.masked_with("the value").to_string();
            if at.is_empty() {
                what
            } else {
                format!("{at}: {what}")
            }
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let more = if problems.len() > ERRORS_NAMED {
        "; …"
    } else {
        ""
    };
    let named: Vec<&str> = problems
        .iter()
        .take(ERRORS_NAMED)
        .map(String::as_str)
        .collect();
    Err(CallError::new(
        ErrorCode::BadArgument,
        format!(
            "the arguments of {tool} do not match its inputSchema on server '{}' (not sent): {}{more}",
            view.server,
            named.join("; ")
        ),
    )
    .with_remediation(format!(
        "correct the argument the message names; the tool's inputSchema lists what it accepts (`maljan servers test {0} --json` prints it); if the server accepts more than its schema says, set `send_unchecked_arguments = true` under [servers.{0}]",
        view.server
    )))
}

fn no_such_tool(view: &ServerView, tool: &str) -> CallError {
    let mut names: Vec<&str> = view.tools.iter().map(|t| t.name.as_str()).collect();
    let listed = names.len();
    names.truncate(12);
    let shown = if names.is_empty() {
        "it lists none".to_string()
    } else if listed > names.len() {
        format!(
            "it lists {} and {} more",
            names.join(", "),
            listed - names.len()
        )
    } else {
        format!("it lists {}", names.join(", "))
    };
    CallError::new(
        ErrorCode::Other(NO_SUCH_TOOL.into()),
        format!(
            "server '{}' has no tool named '{tool}' (not sent; {shown})",
            view.server
        ),
    )
    .with_remediation(format!(
        "call one of the tools the server lists (`maljan servers test {}`); a tool left out of servers.{}.tools in the config is not offered",
        view.server, view.server
    ))
}

/// Every `$ref` that leaves the schema is refused: a server's schema must not make the client
/// open a URL or read a file.
struct NoRetrieval;

impl Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "external schema references are not followed ({})",
            uri.as_str()
        )
        .into())
    }
}

impl SchemaCache {
    /// The compiled validator of `schema`, or None when it does not compile.
    fn validator_for(&self, schema: &Value) -> Option<Arc<Validator>> {
        let key = schema.to_string();
        if let Some(v) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return v.clone();
        }
        let built = jsonschema::options()
            .should_validate_formats(false)
            .with_retriever(NoRetrieval)
            .with_pattern_options(PatternOptions::regex())
            .build(schema);
        let compiled = match built {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::debug!(
                    "a tool's inputSchema does not compile, arguments not checked: {e}"
                );
                None
            }
        };
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= CACHED_SCHEMAS {
            map.clear();
        }
        map.insert(key, compiled.clone());
        compiled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ToolInfo;
    use serde_json::json;

    fn view(schema: Value) -> ServerView {
        ServerView {
            server: "peer".into(),
            via: "stdio".into(),
            protocol_version: "2025-06-18".into(),
            server_name: None,
            server_version: None,
            tools: vec![ToolInfo {
                name: "add".into(),
                description: None,
                input_schema: schema,
                available: true,
                reason: None,
                remediation: None,
                without: None,
                timeout_s: None,
                read_only: None,
                destructive: None,
                open_world: None,
            }],
            staging_tools: vec!["put_sample".into()],
            manifest: maljan_protocol::Manifest {
                server: "peer".into(),
                version: String::new(),
                tools: vec![],
            },
            manifest_declared: false,
            manifest_error: None,
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn add_schema() -> Value {
        json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]})
    }

    #[test]
    fn an_unlisted_tool_is_no_such_tool_and_a_staging_tool_passes() {
        let v = view(add_schema());
        let e = check(Some(&SchemaCache::default()), &v, "subtract", None).unwrap_err();
        assert_eq!(e.code.as_str(), NO_SUCH_TOOL);
        assert!(
            e.message.contains("'subtract'") && e.message.contains("add"),
            "{}",
            e.message
        );
        assert!(
            e.remediation.contains("maljan servers test peer"),
            "{}",
            e.remediation
        );
        assert!(
            check(
                Some(&SchemaCache::default()),
                &v,
                "put_sample",
                Some(&args(json!({"x": 1})))
            )
            .is_ok()
        );
    }

    #[test]
    fn a_schema_error_is_bad_argument_naming_the_place_not_the_value() {
        let v = view(add_schema());
        assert!(
            check(
                Some(&SchemaCache::default()),
                &v,
                "add",
                Some(&args(json!({"a": 1, "b": 2})))
            )
            .is_ok()
        );
        let e = check(
            Some(&SchemaCache::default()),
            &v,
            "add",
            Some(&args(json!({"a": "s3cret-token", "b": 2}))),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::BadArgument);
        assert!(
            e.message.contains("/a") && e.message.contains("integer"),
            "{}",
            e.message
        );
        assert!(
            !e.message.contains("s3cret"),
            "the value is named: {}",
            e.message
        );
        let missing = check(Some(&SchemaCache::default()), &v, "add", None).unwrap_err();
        assert!(
            missing.message.contains("\"a\" is a required property"),
            "{}",
            missing.message
        );
    }

    #[test]
    fn an_external_ref_is_never_fetched_and_a_broken_schema_lets_the_call_through() {
        let remote = view(json!({"$ref": "http://127.0.0.1:9/schema.json"}));
        assert!(
            check(
                Some(&SchemaCache::default()),
                &remote,
                "add",
                Some(&args(json!({"a": 1})))
            )
            .is_ok()
        );
        let file = view(json!({"$ref": "file:///etc/passwd"}));
        assert!(
            check(
                Some(&SchemaCache::default()),
                &file,
                "add",
                Some(&args(json!({"a": 1})))
            )
            .is_ok()
        );
        let broken = view(json!({"type": 12}));
        assert!(
            check(
                Some(&SchemaCache::default()),
                &broken,
                "add",
                Some(&args(json!({"a": 1})))
            )
            .is_ok()
        );
    }

    #[test]
    fn without_a_cache_only_an_unlisted_tool_is_refused() {
        let v = view(
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        );
        assert!(check(None, &v, "add", Some(&args(json!({"a": "x"})))).is_ok());
        assert!(check(None, &v, "add", None).is_ok());
        let e = check(None, &v, "subtract", None).unwrap_err();
        assert_eq!(e.code.as_str(), NO_SUCH_TOOL);
    }
}
