//! Dotted key paths into a JSON value, as automation-file reads them: `a.b.0.c`, where a number
//! indexes a list (negative counts from the end) and empty segments are ignored.

use maljan_server::ToolError;
use serde_json::{Map, Value};

pub(crate) fn split(key_path: &str) -> Vec<String> {
    key_path
        .split('.')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A list index as Python reads it: negative counts from the end.
pub(crate) fn index(len: usize, seg: &str) -> Option<usize> {
    let i: i64 = seg.parse().ok()?;
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

pub(crate) fn walk<'a>(doc: &'a Value, segments: &[String]) -> Option<&'a Value> {
    segments.iter().try_fold(doc, |cur, seg| match cur {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => index(a.len(), seg).and_then(|i| a.get(i)),
        _ => None,
    })
}

pub(crate) fn set_in(doc: &mut Value, segments: &[String], value: Value) -> Result<(), ToolError> {
    let (last, path) = segments
        .split_last()
        .ok_or_else(|| ToolError::bad_argument("key_path must not be empty"))?;
    if doc.is_null() {
        *doc = Value::Object(Map::new());
    }
    let mut cur = doc;
    for seg in path {
        cur = match cur {
            Value::Object(m) => {
                let slot = m
                    .entry(seg.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() && !slot.is_array() {
                    *slot = Value::Object(Map::new());
                }
                slot
            }
            Value::Array(a) => {
                let i = index(a.len(), seg).ok_or_else(|| {
                    ToolError::bad_argument(format!("list index out of range: {seg}"))
                })?;
                &mut a[i]
            }
            _ => {
                return Err(ToolError::bad_argument(format!(
                    "cannot traverse into '{seg}'"
                )));
            }
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last.parse::<i64>().ok() == Some(a.len() as i64) {
                a.push(value);
                return Ok(());
            }
            let i = index(a.len(), last).ok_or_else(|| {
                ToolError::bad_argument(format!("list index out of range: {last}"))
            })?;
            a[i] = value;
            Ok(())
        }
        _ => Err(ToolError::bad_argument(format!(
            "cannot set '{last}' inside a scalar"
        ))),
    }
}

pub(crate) fn delete_in(doc: &mut Value, segments: &[String]) -> bool {
    let Some((last, path)) = segments.split_last() else {
        return false;
    };
    let mut cur = doc;
    for seg in path {
        cur = match cur {
            Value::Object(m) => match m.get_mut(seg) {
                Some(v) => v,
                None => return false,
            },
            Value::Array(a) => match index(a.len(), seg) {
                Some(i) => &mut a[i],
                None => return false,
            },
            _ => return false,
        };
    }
    match cur {
        Value::Object(m) => m.shift_remove(last).is_some(),
        Value::Array(a) => match index(a.len(), last) {
            Some(i) => {
                a.remove(i);
                true
            }
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dotted_paths() {
        let mut doc = json!({"a": {"b": [1, 2, {"c": 3}]}});
        assert_eq!(walk(&doc, &split("a.b.2.c")), Some(&json!(3)));
        assert_eq!(walk(&doc, &split("a.b.-1.c")), Some(&json!(3)));
        assert_eq!(walk(&doc, &split("a.x")), None);
        set_in(&mut doc, &split("a.new.deep"), json!(true)).unwrap();
        assert_eq!(doc["a"]["new"]["deep"], true);
        set_in(&mut doc, &split("a.b.3"), json!("appended")).unwrap();
        assert_eq!(doc["a"]["b"][3], "appended");
        assert_eq!(
            set_in(&mut doc, &split("a.b.9"), json!(0))
                .unwrap_err()
                .code,
            maljan_server::ErrorCode::BadArgument
        );
        assert!(delete_in(&mut doc, &split("a.b.0")));
        assert_eq!(doc["a"]["b"][0], 2);
        assert!(!delete_in(&mut doc, &split("a.zzz")));
    }
}
