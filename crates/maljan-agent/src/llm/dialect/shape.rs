//! What a JSON Schema accepts, as far as the dialects need to know: shared by the converters and
//! by reading calls back, so the two can never disagree.

use maljan_protocol::schema::CONSTRAINING_KEYWORDS;
use serde_json::{Map, Value};

/// `true`, `{}`, or a schema of annotations only: any JSON value.
pub(crate) fn unconstrained(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(m) => !m
            .keys()
            .any(|k| CONSTRAINING_KEYWORDS.contains(&k.as_str())),
        _ => false,
    }
}

/// The branches of an `anyOf`/`oneOf` (`oneOf` read as `anyOf`: which one matched is the
/// server's to check).
pub(crate) fn branches(m: &Map<String, Value>) -> Option<&Vec<Value>> {
    m.get("anyOf")
        .or_else(|| m.get("oneOf"))
        .and_then(Value::as_array)
}

/// The types `type` names (one, or an array's).
pub(crate) fn named_types(m: &Map<String, Value>) -> Option<Vec<&str>> {
    match m.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

/// Whether `null` is a value of `schema`.
pub(crate) fn accepts_null(schema: &Value) -> bool {
    if unconstrained(schema) {
        return true;
    }
    let Value::Object(m) = schema else {
        return false;
    };
    if let Some(types) = named_types(m) {
        return types.contains(&"null");
    }
    if let Some(bs) = branches(m) {
        return bs.iter().any(accepts_null);
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        return values.contains(&Value::Null);
    }
    m.get("const").is_some_and(Value::is_null)
}

/// The schema's branches that admit something other than null (itself, when it has no
/// `anyOf`/`oneOf`).
pub(crate) fn non_null_branches(schema: &Value) -> Vec<&Value> {
    match schema.as_object().and_then(branches) {
        Some(bs) => bs.iter().filter(|b| !is_null_only(b)).collect(),
        None => vec![schema],
    }
}

/// `{"type": "null"}` and its spellings.
pub(crate) fn is_null_only(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    match named_types(m) {
        Some(types) => !types.is_empty() && types.iter().all(|t| *t == "null"),
        None => {
            m.get("const").is_some_and(Value::is_null)
                || m.get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|v| !v.is_empty() && v.iter().all(Value::is_null))
        }
    }
}

/// An object with no declared properties (a map, or anything): a dialect that needs every
/// object's properties named cannot describe it.
fn free_form_object(m: &Map<String, Value>) -> bool {
    let is_object = named_types(m).is_some_and(|t| t.contains(&"object"));
    let named = m
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    is_object && !named
}

/// Whether a dialect that types every schema once (Gemini's) has to ask for this value as JSON
/// text: any JSON value, a free-form object, or a union with one of those in it.
pub(crate) fn needs_json_text(schema: &Value) -> bool {
    if unconstrained(schema) {
        return true;
    }
    let Value::Object(m) = schema else {
        return false;
    };
    if let Some(bs) = branches(m) {
        return bs.iter().filter(|b| !is_null_only(b)).any(needs_json_text);
    }
    free_form_object(m)
}

/// The object schema a value of `schema` is read against: itself when it names properties,
/// else its first branch that does.
pub(crate) fn object_schema(schema: &Value) -> Option<&Map<String, Value>> {
    let m = schema.as_object()?;
    if m.contains_key("properties") {
        return Some(m);
    }
    let in_all = m.get("allOf").and_then(Value::as_array);
    (branches(m).into_iter().chain(in_all))
        .flatten()
        .find_map(object_schema)
}

/// The schema of an array's items under `schema`, looking into its branches.
pub(crate) fn items_schema(schema: &Value) -> Option<&Value> {
    let m = schema.as_object()?;
    if let Some(items) = m.get("items").filter(|i| !i.is_array()) {
        return Some(items);
    }
    branches(m)?.iter().find_map(items_schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_free_form_and_json_text_are_told_apart() {
        assert!(accepts_null(
            &json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        ));
        assert!(accepts_null(&json!({"type": ["integer", "null"]})));
        assert!(accepts_null(&json!({"description": "any"})));
        assert!(!accepts_null(&json!({"type": "string", "default": "x"})));
        assert!(needs_json_text(
            &json!({"type": "object", "additionalProperties": true})
        ));
        assert!(needs_json_text(
            &json!({"anyOf": [{"type": "object"}, {"type": "string"}]})
        ));
        assert!(!needs_json_text(
            &json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        ));
        assert!(!needs_json_text(
            &json!({"type": "object", "properties": {"a": {"type": "string"}}})
        ));
    }
}
