//! Gemini function declarations: the OpenAPI 3.0 subset of JSON Schema Gemini takes, also
//! through its OpenAI-compatible endpoint.
//!
//! Every schema has one `type` (`string`, `number`, `integer`, `boolean`, `array`, `object`);
//! null is `nullable: true` on it, never a type or an `anyOf` branch; `$ref`s are inlined (no
//! `$defs`); there is no `additionalProperties`; an object names its properties and an array
//! its items; a `format` is one Gemini knows (`date-time` and `enum` for strings, `int32`/
//! `int64`, `float`/`double`); besides those only `title`, `description`, `enum` (strings),
//! `required`, `minItems`/`maxItems`, `minLength`/`maxLength`, `pattern`, `minimum`/`maximum`,
//! `minProperties`/`maxProperties`, `anyOf`, `default` and `example`. A value Gemini cannot
//! type — any JSON, a free-form object — is asked for as JSON text (a string the agent parses
//! back, see `Declared::restore`); a bound it has no word for goes.

use serde_json::{Map, Value, json};

use super::shape;

/// A `$ref` chain longer than this is recursion: the rest is asked for as JSON text.
const MAX_INLINE_DEPTH: usize = 24;

/// The tool's parameters in Gemini's subset.
pub fn parameters(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = convert(schema, &defs, 0);
    // A tool's parameters are an object, even one without any.
    if out.get("type") != Some(&json!("object")) {
        out = json!({"type": "object", "properties": {}});
    }
    out
}

fn json_text(description: Option<&str>, nullable: bool) -> Value {
    let note = "Given as JSON text: a JSON value written out in this string.";
    let mut out = json!({"type": "string", "description": match description {
        Some(d) if !d.is_empty() => format!("{d} {note}"),
        _ => note.to_string(),
    }});
    if nullable {
        out["nullable"] = Value::Bool(true);
    }
    out
}

fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>, depth: usize) -> Option<&'a Value> {
    let reference = schema.get("$ref")?.as_str()?;
    let name = reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))?;
    (depth < MAX_INLINE_DEPTH).then(|| defs.get(name)).flatten()
}

fn convert(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let description = schema.get("description").and_then(Value::as_str);
    if schema.get("$ref").is_some() {
        return match resolve(schema, defs, depth) {
            Some(target) => {
                let mut out = convert(target, defs, depth + 1);
                if let (Some(d), Some(m)) = (description, out.as_object_mut()) {
                    m.insert("description".into(), Value::String(d.into()));
                }
                out
            }
            None => json_text(description, true),
        };
    }
    let nullable = shape::accepts_null(schema);
    if shape::needs_json_text(schema) {
        return json_text(description, nullable);
    }
    let Value::Object(m) = schema else {
        // `false`: nothing validates; a string the tool will refuse says as much.
        return json!({"type": "string", "description": "No value is accepted here."});
    };
    let mut m = m.clone();
    // One `allOf` branch is the schema itself.
    if let Some(Value::Array(all)) = m.remove("allOf")
        && let [Value::Object(only)] = all.as_slice()
    {
        for (k, v) in only {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let whole = Value::Object(m.clone());
    let branches = shape::non_null_branches(&whole);
    if shape::branches(&m).is_some() {
        let mut out = if let [only] = branches.as_slice() {
            convert(only, defs, depth + 1)
        } else {
            let converted: Vec<Value> = (branches.iter())
                .map(|b| with_nullable(convert(b, defs, depth + 1), nullable))
                .collect();
            json!({"anyOf": converted})
        };
        annotate(&mut out, &m, nullable);
        return out;
    }
    let types: Vec<&str> = shape::named_types(&m)
        .unwrap_or_else(|| inferred_types(&m))
        .into_iter()
        .filter(|t| *t != "null")
        .collect();
    let mut out = match types.as_slice() {
        // Only null is accepted.
        [] => json!({"type": "string", "nullable": true, "description": "Always null."}),
        [one] => typed(one, &m, defs, depth),
        several => json!({"anyOf": several.iter()
            .map(|t| with_nullable(typed(t, &m, defs, depth), nullable))
            .collect::<Vec<_>>()}),
    };
    annotate(&mut out, &m, nullable);
    out
}

/// `type` from an `enum` or `const` when the schema names none.
fn inferred_types(m: &Map<String, Value>) -> Vec<&'static str> {
    let values: Vec<&Value> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(vs)), _) => vs.iter().collect(),
        (_, Some(c)) => vec![c],
        _ => Vec::new(),
    };
    let mut types = Vec::new();
    for v in values {
        let t = match v {
            Value::String(_) => "string",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Null => "null",
        };
        if !types.contains(&t) {
            types.push(t);
        }
    }
    types
}

fn with_nullable(mut schema: Value, nullable: bool) -> Value {
    if nullable
        && let Some(m) = schema.as_object_mut()
        && m.contains_key("type")
    {
        m.insert("nullable".into(), Value::Bool(true));
    }
    schema
}

/// The annotations Gemini reads, and `nullable` on a typed schema.
fn annotate(out: &mut Value, source: &Map<String, Value>, nullable: bool) {
    let Some(o) = out.as_object_mut() else { return };
    if let Some(v) = source.get("title").filter(|v| v.is_string()) {
        o.insert("title".into(), v.clone());
    }
    if let Some(d) = source.get("description").and_then(Value::as_str) {
        // What the conversion noted (an enum of numbers) follows the tool's own words.
        let text = match o.get("description").and_then(Value::as_str) {
            Some(noted) if noted != d => format!("{d} {noted}"),
            _ => d.to_string(),
        };
        o.insert("description".into(), Value::String(text));
    }
    if let Some(example) = source
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        o.insert("example".into(), example.clone());
    }
    if nullable && o.contains_key("type") {
        o.insert("nullable".into(), Value::Bool(true));
    }
}

/// One type's schema out of `m`, with the keywords of that type Gemini takes.
fn typed(ty: &str, m: &Map<String, Value>, defs: &Map<String, Value>, depth: usize) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), Value::String(ty.into()));
    let copy = |out: &mut Map<String, Value>, keys: &[&str]| {
        for k in keys {
            if let Some(v) = m.get(*k) {
                out.insert((*k).into(), v.clone());
            }
        }
    };
    let enumerated: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(vs)), _) => Some(vs.clone()),
        (_, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    match ty {
        "string" => {
            copy(&mut out, &["minLength", "maxLength", "pattern"]);
            if let Some(f) = m.get("format").and_then(Value::as_str)
                && f == "date-time"
            {
                out.insert("format".into(), json!(f));
            }
            if let Some(values) = enumerated {
                let strings: Vec<Value> = values.into_iter().filter(Value::is_string).collect();
                if !strings.is_empty() {
                    out.insert("enum".into(), Value::Array(strings));
                }
            }
        }
        "integer" | "number" => {
            copy(&mut out, &["minimum", "maximum"]);
            // An exclusive bound, as the inclusive one Gemini has (exact for integers).
            let step = if ty == "integer" { 1.0 } else { 0.0 };
            for (key, to, sign) in [
                ("exclusiveMinimum", "minimum", 1.0),
                ("exclusiveMaximum", "maximum", -1.0),
            ] {
                if let Some(b) = m.get(key).and_then(Value::as_f64) {
                    out.insert(to.into(), json!(b + sign * step));
                }
            }
            let formats: &[&str] = if ty == "integer" {
                &["int32", "int64"]
            } else {
                &["float", "double"]
            };
            if let Some(f) = m.get("format").and_then(Value::as_str)
                && formats.contains(&f)
            {
                out.insert("format".into(), json!(f));
            }
            if let Some(values) = enumerated {
                // Gemini's enum is for strings: the values go into the description.
                let listed: Vec<String> = values
                    .iter()
                    .filter(|v| v.is_number())
                    .map(Value::to_string)
                    .collect();
                out.insert(
                    "description".into(),
                    json!(format!("One of {}.", listed.join(", "))),
                );
            }
        }
        "array" => {
            copy(&mut out, &["minItems", "maxItems"]);
            let items = match m.get("items") {
                Some(items) if !items.is_array() => convert(items, defs, depth + 1),
                _ => json_text(None, true),
            };
            out.insert("items".into(), items);
        }
        "object" => {
            copy(&mut out, &["minProperties", "maxProperties"]);
            let props = m.get("properties").and_then(Value::as_object);
            let converted: Map<String, Value> = (props.into_iter().flatten())
                .map(|(k, v)| (k.clone(), convert(v, defs, depth + 1)))
                .collect();
            let required: Vec<Value> = (m.get("required").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter(|r| r.as_str().is_some_and(|r| converted.contains_key(r)))
                .cloned()
                .collect();
            out.insert("properties".into(), Value::Object(converted));
            if !required.is_empty() {
                out.insert("required".into(), Value::Array(required));
            }
        }
        _ => {}
    }
    if let Some(d) = m.get("default").filter(|d| !d.is_null() && of_type(d, ty)) {
        out.insert("default".into(), d.clone());
    }
    Value::Object(out)
}

fn of_type(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_unions_refs_and_free_form_values_fit_the_subset() {
        let got = parameters(&json!({"type": "object", "properties": {
            "name": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}],
                     "description": "n"},
            "count": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "kind": {"$ref": "#/$defs/Kind"},
            "value": {"description": "any"},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        }, "required": ["kind"], "additionalProperties": false,
           "$defs": {"Kind": {"type": "string", "enum": ["a", "b"]}}}));
        let p = &got["properties"];
        assert_eq!(
            p["name"],
            json!({"type": "string", "nullable": true, "description": "n"})
        );
        assert_eq!(
            p["count"],
            json!({"type": "integer", "minimum": 1.0, "nullable": true})
        );
        assert_eq!(p["kind"], json!({"type": "string", "enum": ["a", "b"]}));
        assert_eq!(p["value"]["type"], "string");
        assert_eq!(p["value"]["nullable"], true);
        assert_eq!(p["map"]["type"], "string");
        assert_eq!(
            p["either"],
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
        assert!(got.get("additionalProperties").is_none() && got.get("$defs").is_none());
        assert_eq!(got["required"], json!(["kind"]));
    }
}
