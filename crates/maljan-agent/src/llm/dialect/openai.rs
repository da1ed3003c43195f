//! OpenAI function calling: the strict-mode subset of JSON Schema (Structured Outputs), or the
//! schema as it is with `strict: false` when strict mode cannot express it.
//!
//! Strict mode takes: `type` (one), `properties` with every property `required` and
//! `additionalProperties: false` on every object, `items`, `anyOf` (not at the root), `enum`,
//! `const`, `$ref` into the schema's own `$defs`, and of the validation keywords only `pattern`,
//! `format` (a few), the numeric bounds and `minItems`/`maxItems`; at most 10 levels of nesting,
//! 5000 properties and 1000 enum values. Anything else either goes (an annotation, a bound the
//! server checks anyway) or makes the schema non-strict (a structure strict mode has no word for).

use serde_json::{Map, Value, json};

use super::shape;

/// The formats strict mode knows.
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
/// Strict mode's documented limits.
const MAX_NESTING: usize = 10;
const MAX_PROPERTIES: usize = 5000;
const MAX_ENUM_VALUES: usize = 1000;

/// Annotations dropped: not part of the subset, and nothing the model needs.
const DROPPED_ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
];
/// Validation keywords strict mode refuses; the server still checks them.
const DROPPED_BOUNDS: &[&str] = &[
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentEncoding",
    "contentMediaType",
];

/// Why a schema cannot be sent in strict mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrict(pub String);

/// The schema as strict mode takes it, or why it cannot be.
pub fn strict_parameters(schema: &Value) -> Result<Value, NotStrict> {
    let mut counts = Counts::default();
    let out = convert(schema, 0, &mut counts)?;
    if out.get("type") != Some(&json!("object")) {
        return Err(NotStrict("the root is not an object".into()));
    }
    if counts.properties > MAX_PROPERTIES || counts.enum_values > MAX_ENUM_VALUES {
        return Err(NotStrict(format!(
            "{} properties and {} enum values exceed strict mode's limits",
            counts.properties, counts.enum_values
        )));
    }
    Ok(out)
}

/// The schema for `strict: false`: as the tool wrote it, without `$schema`.
pub fn lenient_parameters(schema: &Value) -> Value {
    let mut out = super::anthropic::input_schema(schema);
    if let Some(m) = out.as_object_mut() {
        m.remove("$schema");
    }
    out
}

#[derive(Default)]
struct Counts {
    properties: usize,
    enum_values: usize,
}

fn not_strict(why: impl Into<String>) -> NotStrict {
    NotStrict(why.into())
}

fn convert(schema: &Value, depth: usize, counts: &mut Counts) -> Result<Value, NotStrict> {
    if depth > MAX_NESTING {
        return Err(not_strict("nested deeper than 10 levels"));
    }
    if shape::unconstrained(schema) {
        return Err(not_strict("a value of any JSON type"));
    }
    let Value::Object(m) = schema else {
        return Err(not_strict("a `false` schema"));
    };
    let mut out = Map::new();
    // One `allOf` branch is the schema itself (schemars writes one for a described reference).
    let mut source = m.clone();
    if let Some(Value::Array(all)) = source.remove("allOf") {
        match all.as_slice() {
            [Value::Object(only)] => {
                for (k, v) in only {
                    source.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            _ => return Err(not_strict("`allOf` of several schemas")),
        }
    }
    let mut description = source
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(default) = source.get("default").filter(|d| !d.is_null()) {
        let note = format!("Default: {default}.");
        description = Some(match description {
            Some(d) => format!("{d} {note}"),
            None => note,
        });
    }
    for (key, value) in &source {
        let key = key.as_str();
        match key {
            "description" | "default" => {}
            k if DROPPED_ANNOTATIONS.contains(&k) || DROPPED_BOUNDS.contains(&k) => {}
            "title" | "pattern" | "minimum" | "maximum" | "exclusiveMinimum"
            | "exclusiveMaximum" | "multipleOf" | "minItems" | "maxItems" | "const" => {
                out.insert(key.into(), value.clone());
            }
            "format" => {
                if value.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)) {
                    out.insert(key.into(), value.clone());
                }
            }
            "enum" => {
                counts.enum_values += value.as_array().map_or(0, Vec::len);
                out.insert(key.into(), value.clone());
            }
            "type" => match value {
                Value::String(_) => {
                    out.insert(key.into(), value.clone());
                }
                _ => return Err(not_strict("a `type` array")),
            },
            "anyOf" | "oneOf" => {
                let branches = value.as_array().ok_or_else(|| not_strict("bad anyOf"))?;
                let converted = (branches.iter())
                    .map(|b| convert(b, depth + 1, counts))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("anyOf".into(), Value::Array(converted));
            }
            "properties" => {
                let props = value
                    .as_object()
                    .ok_or_else(|| not_strict("bad properties"))?;
                let required: Vec<&str> = (source.get("required").and_then(Value::as_array))
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let mut converted = Map::new();
                for (name, prop) in props {
                    counts.properties += 1;
                    let mut p = convert(prop, depth + 1, counts)?;
                    if !required.contains(&name.as_str()) && !shape::accepts_null(&p) {
                        p = nullable(p);
                    }
                    converted.insert(name.clone(), p);
                }
                let names = converted.keys().cloned().map(Value::String).collect();
                out.insert("properties".into(), Value::Object(converted));
                out.insert("required".into(), Value::Array(names));
            }
            "required" => {}
            "additionalProperties" => {
                if value != &Value::Bool(false) && !source.contains_key("properties") {
                    return Err(not_strict("a free-form object"));
                }
                if value != &Value::Bool(false) {
                    return Err(not_strict("an object open to more properties"));
                }
            }
            "items" => {
                out.insert("items".into(), convert(value, depth + 1, counts)?);
            }
            "$ref" => return Err(not_strict("a `$ref`")),
            other => return Err(not_strict(format!("the keyword `{other}`"))),
        }
    }
    if let Some(d) = description {
        out.insert("description".into(), Value::String(d));
    }
    match out.get("type").and_then(Value::as_str) {
        Some("object") => {
            if !out.contains_key("properties") {
                return Err(not_strict("a free-form object"));
            }
            out.insert("additionalProperties".into(), Value::Bool(false));
        }
        Some("array") if !out.contains_key("items") => {
            return Err(not_strict("an array of anything"));
        }
        _ => {}
    }
    if out.contains_key("anyOf") && out.contains_key("type") {
        return Err(not_strict("`anyOf` beside a `type`"));
    }
    Ok(Value::Object(out))
}

/// `schema` or null, its description kept outside the union where the model reads it first.
fn nullable(mut schema: Value) -> Value {
    let description = schema.as_object_mut().and_then(|m| m.remove("description"));
    let branches = match schema.as_object_mut().and_then(|m| m.remove("anyOf")) {
        // Already a union (and the only keyword beside a description): one more branch.
        Some(Value::Array(mut bs)) if schema.as_object().is_some_and(Map::is_empty) => {
            bs.push(json!({"type": "null"}));
            bs
        }
        Some(other) => {
            schema["anyOf"] = other;
            vec![schema, json!({"type": "null"})]
        }
        None => vec![schema, json!({"type": "null"})],
    };
    let mut out = Map::new();
    if let Some(d) = description {
        out.insert("description".into(), d);
    }
    out.insert("anyOf".into(), Value::Array(branches));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_properties_become_required_and_nullable_in_closed_objects() {
        let got = strict_parameters(&json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "p", "minLength": 1},
            "limit": {"type": "integer", "minimum": 0, "default": 10, "description": "l"},
            "mode": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]},
            "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}},
        }, "required": ["path"], "additionalProperties": false}))
        .unwrap();
        assert_eq!(
            got,
            json!({"type": "object", "additionalProperties": false,
                "required": ["path", "limit", "mode", "opts"], "properties": {
                "path": {"type": "string", "description": "p"},
                "limit": {"description": "l Default: 10.", "anyOf": [
                    {"type": "integer", "minimum": 0}, {"type": "null"}]},
                "mode": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]},
                "opts": {"anyOf": [{"type": "object", "additionalProperties": false,
                    "required": ["x"], "properties": {"x": {"anyOf": [
                        {"type": "boolean"}, {"type": "null"}]}}}, {"type": "null"}]},
            }})
        );
    }

    #[test]
    fn what_strict_mode_cannot_say_is_sent_lenient() {
        for schema in [
            json!({"type": "object", "properties": {"v": {"description": "any"}}}),
            json!({"type": "object", "properties": {"m": {"type": "object",
                "additionalProperties": {"type": "string"}}}}),
            json!({"type": "object", "properties": {"l": {"type": "array"}}}),
            json!({"type": "object", "properties": {"n": {"not": {"type": "string"}}}}),
            json!({"anyOf": [{"type": "object", "properties": {}}]}),
        ] {
            assert!(strict_parameters(&schema).is_err(), "{schema}");
        }
        assert_eq!(
            lenient_parameters(&json!({"$schema": "x", "properties": {}})),
            json!({"type": "object", "properties": {}})
        );
    }
}
