//! Records whose values pyarrow's `Table.from_pylist` could not put in one column: a key (or a
//! list's items, or a nested object's key) holding values of two kinds. automation-file refuses
//! such records ("cannot build parquet table"); arrow-json would quietly make the column text.

use serde_json::{Map, Value};

/// The kind a column takes from a JSON value; null fits any column, and integers and floats
/// share one (pyarrow widens the column to float).
fn kind(v: &Value) -> Option<&'static str> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some("booleans"),
        Value::Number(_) => Some("numbers"),
        Value::String(_) => Some("strings"),
        Value::Array(_) => Some("lists"),
        Value::Object(_) => Some("objects"),
    }
}

/// The first place where `values` mix kinds, described for an error message.
fn mixed(what: &str, values: &[&Value]) -> Option<String> {
    let mut seen: Option<&str> = None;
    for k in values.iter().filter_map(|v| kind(v)) {
        match seen {
            None => seen = Some(k),
            Some(first) if first != k => return Some(format!("{what} holds both {first} and {k}")),
            Some(_) => {}
        }
    }
    match seen {
        Some("lists") => {
            let items: Vec<&Value> = values
                .iter()
                .filter_map(|v| v.as_array())
                .flatten()
                .collect();
            mixed(&format!("{what}'s list items"), &items)
        }
        Some("objects") => {
            let objects: Vec<&Map<String, Value>> =
                values.iter().filter_map(|v| v.as_object()).collect();
            fields(what, &objects)
        }
        _ => None,
    }
}

fn fields(what: &str, objects: &[&Map<String, Value>]) -> Option<String> {
    let mut keys: Vec<&String> = Vec::new();
    for o in objects {
        for k in o.keys() {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.into_iter().find_map(|key| {
        let values: Vec<&Value> = objects.iter().filter_map(|o| o.get(key)).collect();
        mixed(&format!("{what}.{key}"), &values)
    })
}

/// Why the records cannot make one table, if they cannot.
pub(super) fn mixed_kinds(records: &[Map<String, Value>]) -> Option<String> {
    let records: Vec<&Map<String, Value>> = records.iter().collect();
    fields("column", &records).map(|m| m.replacen("column.", "column ", 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn records(v: Value) -> Vec<Map<String, Value>> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn two_kinds_in_one_place_are_found() {
        let found = |v| mixed_kinds(&records(v));
        assert_eq!(
            found(json!([{"a": 1}, {"a": 1.5}, {"a": null}, {"b": "x"}])),
            None
        );
        assert_eq!(
            found(json!([{"a": 1}, {"a": "x"}])).as_deref(),
            Some("column a holds both numbers and strings")
        );
        assert!(found(json!([{"a": true}, {"a": 1}])).is_some());
        assert!(
            found(json!([{"a": [1, "x"]}]))
                .unwrap()
                .contains("list items")
        );
        assert!(
            found(json!([{"a": {"x": 1}}, {"a": {"x": "s"}}]))
                .unwrap()
                .contains("a.x")
        );
    }
}
