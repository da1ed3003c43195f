//! A tool's answer as readable blocks: fields, lists and tables, bounded in size. Generic on
//! purpose: it reads any JSON answer, so a server's new fields show up without a renderer change,
//! and the Markdown and HTML renderers lay out the same blocks.

use serde_json::Value;

/// Rows shown per table and items per list; the rest is counted ("… 1,234 more").
pub const MAX_ROWS: usize = 25;
pub const MAX_ITEMS: usize = 40;
const MAX_COLUMNS: usize = 8;
const MAX_CELL: usize = 160;

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// name → value pairs.
    Fields(Vec<(String, String)>),
    List {
        title: String,
        items: Vec<String>,
        more: usize,
    },
    Table {
        title: String,
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
        more: usize,
    },
    Text(String),
}

/// Keys that only repeat what the header says or that name a host path.
const HIDDEN: &[&str] = &["read_path", "read_as"];

/// Blocks for one answer.
pub fn blocks(answer: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    match answer {
        Value::Object(_) => object(answer, "", &mut out, 0),
        Value::Array(items) => array("items", items, &mut out),
        Value::String(s) => out.push(Block::Text(clip(s, 4000))),
        Value::Null => {}
        other => out.push(Block::Text(other.to_string())),
    }
    out
}

fn object(v: &Value, prefix: &str, out: &mut Vec<Block>, depth: usize) {
    let Value::Object(map) = v else { return };
    let mut fields = Vec::new();
    let mut nested = Vec::new();
    for (k, val) in map {
        if depth == 0 && HIDDEN.contains(&k.as_str()) {
            continue;
        }
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match val {
            Value::Null => {}
            Value::Object(m) if m.is_empty() => {}
            Value::Array(a) if a.is_empty() => fields.push((name, "none".into())),
            Value::Object(m) if depth < 2 && m.values().all(is_scalar) => {
                // A flat object (counts, a header) reads best as one line of pairs.
                let line = m
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", scalar_at(k, v)))
                    .collect::<Vec<_>>()
                    .join(", ");
                fields.push((name, clip(&line, 600)));
            }
            Value::Object(_) if depth < 2 => nested.push((name, val)),
            Value::Array(_) => nested.push((name, val)),
            other if is_scalar(other) => {
                fields.push((name, clip(&scalar_at(k, other), MAX_CELL * 2)))
            }
            other => fields.push((name, clip(&other.to_string(), MAX_CELL))),
        }
    }
    if !fields.is_empty() {
        out.push(Block::Fields(fields));
    }
    for (name, val) in nested {
        match val {
            Value::Array(items) => array(&name, items, out),
            obj => object(obj, &name, out, depth + 1),
        }
    }
}

fn array(title: &str, items: &[Value], out: &mut Vec<Block>) {
    if items.iter().all(is_scalar) {
        let shown: Vec<String> = items
            .iter()
            .take(MAX_ITEMS)
            .map(|v| clip(&scalar(v), MAX_CELL))
            .collect();
        out.push(Block::List {
            title: title.into(),
            more: items.len() - shown.len(),
            items: shown,
        });
        return;
    }
    // Columns: scalar keys in first-seen order over the rows shown.
    let mut columns: Vec<String> = Vec::new();
    for item in items.iter().take(MAX_ROWS) {
        if let Value::Object(m) = item {
            for (k, v) in m {
                if !columns.contains(k) && columns.len() < MAX_COLUMNS && !v.is_object() {
                    columns.push(k.clone());
                }
            }
        }
    }
    if columns.is_empty() {
        let shown: Vec<String> = items
            .iter()
            .take(MAX_ITEMS)
            .map(|v| clip(&v.to_string(), MAX_CELL))
            .collect();
        out.push(Block::List {
            title: title.into(),
            more: items.len() - shown.len(),
            items: shown,
        });
        return;
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .take(MAX_ROWS)
        .map(|item| {
            columns
                .iter()
                .map(|c| match item.get(c) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::Array(a)) if a.iter().all(is_scalar) => clip(
                        &a.iter()
                            .map(|v| scalar_at(c, v))
                            .collect::<Vec<_>>()
                            .join(", "),
                        MAX_CELL,
                    ),
                    Some(v) if is_scalar(v) => clip(&scalar_at(c, v), MAX_CELL),
                    Some(v) => clip(&v.to_string(), MAX_CELL),
                })
                .collect()
        })
        .collect();
    out.push(Block::Table {
        title: title.into(),
        more: items.len() - rows.len(),
        columns,
        rows,
    });
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(n) => match n.as_f64() {
            // Entropies and ratios: three decimals are plenty to read.
            Some(f) if n.is_f64() => format!("{f:.3}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// At most `max` characters, control characters and bidi overrides made visible (strings come
/// from hostile files); line feeds and tabs stay for a text block.
pub fn clip(s: &str, max: usize) -> String {
    let head: String = s.chars().take(max).collect();
    let mut out = crate::visible::visible_multiline(&head).into_owned();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

/// Whether a field holds an address (an entry point, an image base, a virtual address, a file
/// offset): those read in hex, as every disassembler and PE tool shows them. Sizes and counts
/// stay decimal.
pub fn is_address(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    matches!(
        last,
        "entry_point"
            | "entry"
            | "entrypoint"
            | "image_base"
            | "address"
            | "addr"
            | "vaddr"
            | "vmaddr"
            | "va"
            | "rva"
            | "offset"
            | "fileoff"
            | "base"
    ) || ["_address", "_addr", "_va", "_rva", "_offset"]
        .iter()
        .any(|suffix| last.ends_with(suffix))
}

/// A scalar under `key`: an unsigned integer under an address key as `0x…`.
fn scalar_at(key: &str, v: &Value) -> String {
    match v.as_u64() {
        Some(n) if is_address(key) => format!("{n:#x}"),
        _ => scalar(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_become_fields_lists_and_bounded_tables() {
        let rows: Vec<Value> = (0..30)
            .map(|i| json!({"offset": i, "value": format!("s{i}"), "x": {"a": 1}}))
            .collect();
        let b = blocks(
            &json!({"read_path": "/secret/host/path", "kind": "pe", "entropy": 7.123456,
            "counts": {"url": 2}, "dlls": ["a.dll", "b.dll"], "strings": rows}),
        );
        let Block::Fields(f) = &b[0] else {
            panic!("{b:?}")
        };
        assert!(!f.iter().any(|(k, _)| k == "read_path"));
        assert!(f.contains(&("entropy".into(), "7.123".into())));
        assert!(f.contains(&("counts".into(), "url: 2".into())));
        assert!(b.contains(&Block::List {
            title: "dlls".into(),
            items: vec!["a.dll".into(), "b.dll".into()],
            more: 0
        }));
        let Block::Table {
            columns,
            rows,
            more,
            ..
        } = &b[2]
        else {
            panic!("{b:?}")
        };
        assert_eq!(
            (columns.clone(), rows.len(), *more),
            (vec!["offset".to_string(), "value".to_string()], MAX_ROWS, 5)
        );
        assert_eq!(clip("a\u{7}b\u{202e}", 10), "a\\x07b\\u{202e}");
    }

    #[test]
    fn addresses_read_in_hex_and_sizes_in_decimal() {
        let b = blocks(
            &json!({"entry_point": 4096, "image_base": 4194304u64, "size_of_image": 8192,
            "sections": [{"name": ".text", "virtual_address": 4096, "raw_offset": 1024, "raw_size": 512}],
            "header": {"entry": 16}}),
        );
        let Block::Fields(f) = &b[0] else {
            panic!("{b:?}")
        };
        assert!(
            f.contains(&("entry_point".into(), "0x1000".into())),
            "{f:?}"
        );
        assert!(f.contains(&("image_base".into(), "0x400000".into())));
        assert!(f.contains(&("size_of_image".into(), "8192".into())));
        assert!(f.contains(&("header".into(), "entry: 0x10".into())));
        let Block::Table { columns, rows, .. } = &b[1] else {
            panic!("{b:?}")
        };
        assert_eq!(
            columns,
            &["name", "virtual_address", "raw_offset", "raw_size"]
        );
        assert_eq!(rows[0], [".text", "0x1000", "0x400", "512"]);
    }
}
