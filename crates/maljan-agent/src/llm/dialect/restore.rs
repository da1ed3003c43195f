//! Reading a call back from a dialect's schema to the tool's own (see `Declared::restore`).

use serde_json::Value;

use super::shape;

/// Walks `value` along the tool's own `schema`: drops a `null` given for an optional property
/// that does not take null (the dialect made it nullable to stand for "absent"), and with
/// `json_text` (Gemini) parses a string given where the dialect asked for JSON text.
pub(super) fn restore(schema: &Value, value: &mut Value, json_text: bool) {
    if json_text
        && shape::needs_json_text(schema)
        && let Value::String(text) = value
    {
        // Not JSON: the string itself, which such a schema may take as it is.
        if let Ok(parsed) = serde_json::from_str::<Value>(text) {
            *value = parsed;
        }
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(object) = shape::object_schema(schema) else {
                return;
            };
            let props = object.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = (object.get("required").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            map.retain(|k, v| {
                let optional_non_null = !required.contains(&k.as_str())
                    && props
                        .and_then(|p| p.get(k))
                        .is_some_and(|p| !shape::accepts_null(p));
                !(v.is_null() && optional_non_null)
            });
            for (k, v) in map.iter_mut() {
                if let Some(p) = props.and_then(|p| p.get(k)) {
                    restore(p, v, json_text);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = shape::items_schema(schema) {
                for item in items {
                    restore(item_schema, item, json_text);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_nulls_are_dropped_and_json_text_parsed() {
        let schema = json!({"type": "object", "properties": {
            "opts": {"type": "object", "properties": {
                "depth": {"type": "integer"}, "tag": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            "list": {"type": "array", "items": {"anyOf": [{"type": "object"}, {"type": "string"}]}},
        }});
        let mut v = json!({"opts": {"depth": null, "tag": null},
                           "list": ["{\"a\": 1}", "plain words"]});
        restore(&schema, &mut v, true);
        assert_eq!(
            v,
            json!({"opts": {"tag": null}, "list": [{"a": 1}, "plain words"]})
        );
    }
}
