//! Every built-in tool (`serve files` with every tool allowed, `serve analysis`), as the agent
//! declares it to each provider (maljan_agent::llm::dialect), passes that provider's rules:
//!
//! - OpenAI: the SDK's own types and strict-schema pass (`openai.lib._pydantic`, via
//!   provider_dialects.py: a strict schema is a fixed point of it), JSON Schema 2020-12's
//!   meta-schema, and strict mode's documented subset (checked here);
//! - Anthropic: the SDK's `ToolParam`, the meta-schema, an object at the root;
//! - Gemini (OpenAI-compatible endpoint): the OpenAPI 3.0 Schema Object (openapi-spec-validator)
//!   and Gemini's subset of it (checked here: one type, `nullable`, no null type, no `$ref`, no
//!   `additionalProperties`, known formats only, named properties and items).

mod common;

use std::{collections::BTreeSet, process::Command, time::Duration};

use common::*;
use maljan_agent::llm::{Dialect, ToolSpec};
use serde_json::{Map, Value, json};

/// tools/list of a built-in server, through Inspector (the same listing a host reads).
fn listed(args: &[&str]) -> Vec<Value> {
    let out = run(
        Command::new(peer("MALJAN_NODE"))
            .args([
                peer("MALJAN_INSPECTOR").as_str(),
                "--cli",
                maljan(),
                "serve",
            ])
            .args(args)
            .args(["--method", "tools/list"]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    v["tools"].as_array().expect("tools").clone()
}

/// Every built-in tool, as the agent's catalog takes it (name, description, inputSchema).
fn builtin_tools() -> Vec<ToolSpec> {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let files = listed(&["files", "--root", root_s]);
    let mut all: Vec<&str> = (files.iter())
        .filter_map(|t| t["name"].as_str())
        .filter(|n| *n != "capabilities")
        .collect();
    all.push("FA_run_shell");
    let every = all.join(",");
    let mut tools = listed(&["files", "--root", root_s, "--allowed-actions", &every]);
    tools.extend(listed(&["analysis", "--root", root_s]));
    let specs: Vec<ToolSpec> = (tools.iter())
        .filter(|t| t["name"] != "capabilities")
        .map(|t| ToolSpec {
            name: t["name"].as_str().unwrap().to_string(),
            description: t["description"].as_str().unwrap_or("").to_string(),
            parameters: t["inputSchema"].clone(),
        })
        .collect();
    assert!(specs.len() > 200, "only {} built-in tools", specs.len());
    specs
}

/// Runs the SDK and validator checks over the three dialects' declarations.
fn sdk_checks(declared: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("declared.json");
    std::fs::write(&path, declared.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/provider_dialects.py");
    let out = run(
        Command::new(peer("MALJAN_PY")).arg(script).arg(&path),
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

fn problems(report: &Value) -> Vec<String> {
    (report["problems"].as_array().into_iter().flatten())
        .map(|p| p.as_str().unwrap_or("?").to_string())
        .collect()
}

const STRICT_KEYS: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// OpenAI strict mode's documented subset, as the API states it.
fn strict_rules(s: &Value, at: &str, depth: usize, out: &mut Vec<String>) {
    let Some(m) = s.as_object() else {
        return out.push(format!("{at}: not an object schema"));
    };
    if depth > 10 {
        out.push(format!("{at}: deeper than 10 levels"));
    }
    for k in m.keys() {
        if !STRICT_KEYS.contains(&k.as_str()) {
            out.push(format!(
                "{at}: keyword `{k}` is not in strict mode's subset"
            ));
        }
    }
    if let Some(f) = m.get("format").and_then(Value::as_str)
        && !STRICT_FORMATS.contains(&f)
    {
        out.push(format!("{at}: format {f}"));
    }
    if m.contains_key("anyOf") == m.contains_key("type")
        && !m.contains_key("enum")
        && !m.contains_key("const")
    {
        out.push(format!("{at}: neither one `type` nor an `anyOf`"));
    }
    match m.get("type").and_then(Value::as_str) {
        Some("object") => {
            let props = m.get("properties").and_then(Value::as_object);
            let Some(props) = props else {
                return out.push(format!("{at}: an object without properties"));
            };
            if m.get("additionalProperties") != Some(&Value::Bool(false)) {
                out.push(format!("{at}: additionalProperties is not false"));
            }
            let required: BTreeSet<&str> = (m.get("required").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let names: BTreeSet<&str> = props.keys().map(String::as_str).collect();
            if required != names {
                out.push(format!("{at}: not every property is required"));
            }
            for (k, p) in props {
                strict_rules(p, &format!("{at}.{k}"), depth + 1, out);
            }
        }
        Some("array") => match m.get("items") {
            Some(items) => strict_rules(items, &format!("{at}[]"), depth + 1, out),
            None => out.push(format!("{at}: an array without items")),
        },
        Some(_) | None => {}
    }
    for (i, b) in m
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        strict_rules(b, &format!("{at}|{i}"), depth + 1, out);
    }
}

const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "items",
    "minimum",
    "maximum",
    "default",
];

/// Gemini's function-declaration subset of OpenAPI 3.0.
fn gemini_rules(s: &Value, at: &str, out: &mut Vec<String>) {
    let Some(m) = s.as_object() else {
        return out.push(format!("{at}: not an object schema"));
    };
    for k in m.keys() {
        if !GEMINI_KEYS.contains(&k.as_str()) {
            out.push(format!("{at}: keyword `{k}` is not in Gemini's subset"));
        }
    }
    if let Some(n) = m.get("nullable")
        && !n.is_boolean()
    {
        out.push(format!("{at}: nullable is not a boolean"));
    }
    let ty = m.get("type");
    match (ty, m.get("anyOf")) {
        (Some(Value::String(t)), None) => {
            let formats: &[&str] = match t.as_str() {
                "string" => &["date-time", "enum"],
                "integer" => &["int32", "int64"],
                "number" => &["float", "double"],
                "boolean" | "array" | "object" => &[],
                other => return out.push(format!("{at}: type {other}")),
            };
            if let Some(f) = m.get("format")
                && !f.as_str().is_some_and(|f| formats.contains(&f))
            {
                out.push(format!("{at}: format {f} on {t}"));
            }
            if let Some(e) = m.get("enum")
                && (t != "string"
                    || !e
                        .as_array()
                        .is_some_and(|v| !v.is_empty() && v.iter().all(Value::is_string)))
            {
                out.push(format!("{at}: enum {e} on {t}"));
            }
        }
        (None, Some(Value::Array(branches))) if !branches.is_empty() => {
            for (i, b) in branches.iter().enumerate() {
                if b["type"] == "null" {
                    out.push(format!("{at}: a null branch in anyOf"));
                }
                gemini_rules(b, &format!("{at}|{i}"), out);
            }
        }
        _ => out.push(format!("{at}: neither one string `type` nor an `anyOf`")),
    }
    if ty == Some(&json!("object")) {
        let props = m.get("properties").and_then(Value::as_object);
        match props {
            Some(p) if !p.is_empty() => {
                for r in m
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !r.as_str().is_some_and(|r| p.contains_key(r)) {
                        out.push(format!("{at}: required {r} is not a property"));
                    }
                }
                for (k, v) in p {
                    gemini_rules(v, &format!("{at}.{k}"), out);
                }
            }
            _ => out.push(format!("{at}: an object without named properties")),
        }
    }
    if ty == Some(&json!("array")) {
        match m.get("items") {
            Some(items) => gemini_rules(items, &format!("{at}[]"), out),
            None => out.push(format!("{at}: an array without items")),
        }
    }
}

fn entries(dialect: Dialect, specs: &[ToolSpec]) -> Vec<Value> {
    dialect.declare(specs).entries
}

#[test]
fn every_builtin_tool_is_declared_in_each_providers_dialect_by_its_rules() {
    let specs = builtin_tools();
    let openai = entries(Dialect::OpenAi, &specs);
    let anthropic = entries(Dialect::Anthropic, &specs);
    let gemini = entries(Dialect::Gemini, &specs);

    let mut broken = Vec::new();
    let mut strict = 0;
    for e in &openai {
        let f = &e["function"];
        if f["strict"] == true {
            strict += 1;
            let name = f["name"].as_str().unwrap();
            strict_rules(&f["parameters"], name, 0, &mut broken);
            if f["parameters"].get("anyOf").is_some() {
                broken.push(format!("{name}: anyOf at the root"));
            }
        } else {
            assert_eq!(f["strict"], false, "{e}");
        }
    }
    for e in &anthropic {
        let s = &e["input_schema"];
        if s["type"] != "object"
            || ["anyOf", "oneOf", "allOf"]
                .iter()
                .any(|k| s.get(*k).is_some())
        {
            broken.push(format!(
                "{}: input_schema's root is not a plain object",
                e["name"]
            ));
        }
    }
    let mut with_parameters = 0;
    for e in &gemini {
        let f = &e["function"];
        if let Some(p) = f.get("parameters") {
            with_parameters += 1;
            if p["type"] != "object" {
                broken.push(format!("{}: parameters are not an object", f["name"]));
            }
            gemini_rules(p, f["name"].as_str().unwrap(), &mut broken);
        }
    }
    assert!(
        broken.is_empty(),
        "{} problems:\n{}",
        broken.len(),
        broken.join("\n")
    );
    // The checkers bite: the tools' own schemas, unconverted, break Gemini's subset.
    let mut unconverted = Vec::new();
    for t in &specs {
        gemini_rules(&t.parameters, &t.name, &mut unconverted);
    }
    assert!(
        unconverted.iter().any(|p| p.contains("a null branch")),
        "the Gemini checker found nothing in the unconverted schemas"
    );
    let lenient: Vec<String> = (specs.iter())
        .filter_map(|t| {
            let why = maljan_agent::llm::dialect::openai::strict_parameters(&t.parameters).err()?;
            Some(format!("{} ({})", t.name, why.0))
        })
        .collect();
    eprintln!("not strict: {}", lenient.join("; "));

    let sdk = sdk_checks(&json!({"openai": openai, "anthropic": anthropic, "gemini": gemini}));
    eprintln!(
        "{} tools; openai: {strict} strict, {} lenient; gemini: {with_parameters} with parameters; SDK checks: {}",
        specs.len(),
        specs.len() - strict,
        sdk
    );
    for dialect in ["openai", "anthropic", "gemini"] {
        let found = problems(&sdk[dialect]);
        assert!(
            found.is_empty(),
            "{dialect}: {} problems:\n{}",
            found.len(),
            found.join("\n")
        );
        assert_eq!(sdk[dialect]["tools"], json!(specs.len()), "{dialect}");
    }
    assert_eq!(sdk["openai"]["strict"], json!(strict));
    assert_eq!(sdk["gemini"]["with_parameters"], json!(with_parameters));
    // Strict mode is the rule, not the exception: most tools take only what it can say.
    assert!(
        strict * 2 > specs.len(),
        "only {strict} of {} tools strict",
        specs.len()
    );
}

/// The way back: what the model writes against a converted schema runs as the tool's own
/// arguments (a strict-mode null is an absent optional; Gemini's JSON text is parsed).
#[test]
fn calls_against_converted_schemas_are_read_back_to_each_tools_contract() {
    let spec = ToolSpec {
        name: "FA_json_set".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "key_path": {"type": "string"},
            "value": {"anyOf": [{"type": "object"}, {"type": "array"}, {"type": "string"},
                {"type": "number"}, {"type": "boolean"}, {"type": "null"}]},
            "indent": {"type": "integer", "default": 2, "minimum": 0},
        }, "required": ["path", "key_path", "value"], "additionalProperties": false}),
    };
    let mut call = maljan_agent::llm::ToolCall {
        id: "c".into(),
        name: spec.name.clone(),
        arguments: r#"{"path":"a.json","key_path":"k","value":"{\"x\": [1, 2]}","indent":null}"#
            .into(),
    };
    let gemini = Dialect::Gemini.declare(std::slice::from_ref(&spec));
    assert_eq!(
        gemini.entries[0]["function"]["parameters"]["properties"]["value"]["type"],
        "string"
    );
    gemini.restore(&mut call);
    let args: Map<String, Value> = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(
        Value::Object(args),
        json!({"path": "a.json", "key_path": "k", "value": {"x": [1, 2]}})
    );
}
