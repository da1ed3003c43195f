//! YAML written so PyYAML (YAML 1.1) reads back every string as a string.
//!
//! serde_yaml_ng resolves plain scalars by YAML 1.2's core schema, so it leaves `yes`, `off`,
//! `2001-12-14`, `0o17`-less octals like `017`, `1_000` or `1:30` unquoted; PyYAML's resolver
//! (automation-file's reader) turns those into booleans, dates and numbers. Every string
//! PyYAML's implicit resolvers would give another tag is written single-quoted, as PyYAML's own
//! emitter writes it.

use std::sync::LazyLock;

use regex::RegexSet;
use serde_json::Value;

/// PyYAML's implicit resolvers (yaml/resolver.py) for every tag but `str`.
static NOT_A_STRING: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new([
        // bool
        r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
        // float
        r"(?x)^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
            |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
            |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$",
        // int
        r"(?x)^(?:[-+]?0b[0-1_]+
            |[-+]?0[0-7_]+
            |[-+]?(?:0|[1-9][0-9_]*)
            |[-+]?0x[0-9a-fA-F_]+
            |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        // merge, value (SafeLoader cannot even build these)
        r"^(?:<<|=)$",
        // null
        r"^(?:~|null|Null|NULL|)$",
        // timestamp
        r"(?x)^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
            |[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
             (?:[Tt]|[\ \t]+)[0-9][0-9]?
             :[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
             (?:[\ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
    ])
    .expect("PyYAML's resolver patterns compile")
});

/// Whether PyYAML would read the plain scalar `s` as something other than a string.
pub(crate) fn resolves_to_non_string(s: &str) -> bool {
    NOT_A_STRING.is_match(s)
}

/// `doc` as YAML text in which each string reads back as that string under YAML 1.1 too.
///
/// serde_yaml_ng has no per-scalar style setting, so each such string is first replaced by a
/// placeholder it always single-quotes (a leading-zero digit run, unique to this call) and the
/// quoted placeholder is then swapped for the quoted string.
pub(crate) fn to_string(doc: &Value) -> Result<String, serde_yaml_ng::Error> {
    let nonce = loop {
        let n = format!(
            "0{:019}",
            rand::random::<u64>() % 10_000_000_000_000_000_000
        );
        if !mentions(doc, &n) {
            break n;
        }
    };
    let mut originals = Vec::new();
    let mut doc = doc.clone();
    hide(&mut doc, &nonce, &mut originals);
    let mut text = serde_yaml_ng::to_string(&doc)?;
    for (i, original) in originals.iter().enumerate() {
        text = text.replacen(
            &format!("'{nonce}{i:06}'"),
            &format!("'{}'", original.replace('\'', "''")),
            1,
        );
    }
    Ok(text)
}

fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|i| mentions(i, needle)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(needle) || mentions(v, needle)),
        _ => false,
    }
}

fn placeholder(s: &mut String, nonce: &str, originals: &mut Vec<String>) {
    if resolves_to_non_string(s) {
        let shown = format!("{nonce}{:06}", originals.len());
        originals.push(std::mem::replace(s, shown));
    }
}

/// Replaces, depth first in output order, each string (keys too) PyYAML would not read as one.
fn hide(v: &mut Value, nonce: &str, originals: &mut Vec<String>) {
    match v {
        Value::String(s) => placeholder(s, nonce, originals),
        Value::Array(items) => items.iter_mut().for_each(|i| hide(i, nonce, originals)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (mut k, mut v) in entries {
                placeholder(&mut k, nonce, originals);
                hide(&mut v, nonce, originals);
                map.insert(k, v);
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
    fn yaml_1_1_non_strings_are_quoted() {
        for s in [
            "yes",
            "No",
            "on",
            "OFF",
            "~",
            "null",
            "",
            "1.5",
            ".5",
            "1_000",
            "017",
            "0x1F",
            "1:30",
            "2001-12-14",
            "2001-12-14 21:59:43.10 -5",
            "=",
            "<<",
            ".inf",
        ] {
            assert!(resolves_to_non_string(s), "{s}");
        }
        for s in ["plain", "1e3", "yes please", "0o17", "y", "n"] {
            assert!(!resolves_to_non_string(s), "{s}");
        }
        let text =
            to_string(&json!({"yes": "on", "list": ["2001-12-14", "it's"], "n": 3})).unwrap();
        assert_eq!(text, "'yes': 'on'\nlist:\n- '2001-12-14'\n- it's\nn: 3\n");
    }
}
