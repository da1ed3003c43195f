//! What the CLI prints of text it did not write — a sample's name, a server's tool names,
//! descriptions, errors and answers, a model's words, a ledger row — goes through here, so no
//! such string can move the cursor, retitle the terminal, hide a line or read backwards.
//!
//! Lines for people use maljan-triage's one rule ([`maljan_triage::visible`]: every control
//! character and bidirectional override written out as `\x1b`, `\u{202e}`). JSON keeps its
//! values exactly, with the same characters written as JSON's `\uXXXX` escapes: serde_json
//! escapes only the C0 controls, and leaves C1 controls (an 8-bit CSI) and U+202E raw.

use std::{borrow::Cow, fmt::Write as _};

use maljan_triage::visible::is_hidden;
pub use maljan_triage::{visible, visible_multiline};

/// Pretty JSON of `value` in which no hidden character is written as itself.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    Ok(escape_json(serde_json::to_string_pretty(value)?))
}

/// A hidden character of serialized JSON other than the pretty layout's line feeds can only
/// stand inside a string (serde_json writes a string's C0 controls escaped; the syntax is ASCII),
/// where `\uXXXX` means the same character: the value read back is unchanged.
fn escape_json(text: String) -> String {
    let hidden = |c: char| c != '\n' && is_hidden(c);
    if !text.chars().any(hidden) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            // Every hidden character is in the Basic Multilingual Plane: one escape each.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// An optional string, shown visibly (empty when absent).
pub fn opt(s: Option<&str>) -> Cow<'_, str> {
    s.map(visible).unwrap_or(Cow::Borrowed(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_escapes_every_hidden_character_and_keeps_the_value() {
        let v = json!({"name": "a\u{1b}[31mb\u{9b}2J\u{202e}fdp.exe\u{7}", "n": 1});
        let text = json(&v).unwrap();
        assert!(!text.chars().any(|c| c != '\n' && is_hidden(c)), "{text:?}");
        assert!(
            text.contains("\\u009b") && text.contains("\\u202e"),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        // Plain text is left as serde_json wrote it.
        assert_eq!(json(&json!({"a": "é"})).unwrap(), "{\n  \"a\": \"é\"\n}");
    }
}
