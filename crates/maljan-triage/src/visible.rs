//! Text from a sample, a server or a model, made safe to show: every control character and every
//! bidirectional override is written out as an escape a person can read (`\x1b`, `\u{202e}`),
//! so a file name cannot move a terminal's cursor, retitle its window (OSC), hide itself behind
//! a carriage return, or read backwards (`invoice\u{202e}fdp.exe`) on a terminal, in a report or
//! in the console.
//!
//! One rule for every front end: the progress lines (`term`), the report renderers, the console's
//! pages and the CLI's other commands (ledger, jobs, servers test) call [`visible`] (one line) or
//! [`visible_multiline`] (keeps line breaks and tabs, for text shown in a block).

use std::{borrow::Cow, fmt::Write};

/// True for a character that must not reach a terminal or a page as itself: the C0 controls
/// (ESC starts CSI and OSC sequences), DEL, the C1 controls (U+0080–U+009F: 8-bit CSI and OSC),
/// the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069) and the Unicode line and paragraph separators (U+2028, U+2029), which some
/// viewers break lines on.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `s` on one line, every hidden character (line breaks and tabs included) written as `\xNN`
/// (below U+0100) or `\u{NNNN}`. Text without one is returned as it is.
pub fn visible(s: &str) -> Cow<'_, str> {
    escape_if(s, is_hidden)
}

/// Like [`visible`], but line feeds and tabs stay as they are (a block of text, a `<pre>`).
/// A carriage return is still shown: alone it rewrites the line a reader sees.
pub fn visible_multiline(s: &str) -> Cow<'_, str> {
    escape_if(s, |c| c != '\n' && c != '\t' && is_hidden(c))
}

fn escape_if(s: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hide) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hide(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn push_escape(out: &mut String, c: char) {
    let n = c as u32;
    let _ = if n < 0x100 {
        write!(out, "\\x{n:02x}")
    } else {
        write!(out, "\\u{{{n:04x}}}")
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_csi_osc_c1_and_bidi_and_leaves_plain_text_alone() {
        assert!(matches!(visible("plain.exe"), Cow::Borrowed("plain.exe")));
        assert_eq!(visible("a\x1b[31mred"), "a\\x1b[31mred");
        assert_eq!(visible("\x1b]0;owned\x07title"), "\\x1b]0;owned\\x07title");
        assert_eq!(visible("c1\u{9b}2J"), "c1\\x9b2J");
        assert_eq!(visible("del\u{7f}"), "del\\x7f");
        assert_eq!(visible("invoice\u{202e}fdp.exe"), "invoice\\u{202e}fdp.exe");
        assert_eq!(visible("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(visible("two\nlines\r"), "two\\x0alines\\x0d");
        assert_eq!(visible_multiline("two\nlines\tok\r"), "two\nlines\tok\\x0d");
        // Ordinary non-ASCII text is text.
        assert_eq!(visible("résumé 文件.pdf"), "résumé 文件.pdf");
    }

    #[test]
    fn nothing_hidden_survives() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let shown = visible(&all);
        assert!(!shown.chars().any(is_hidden));
        assert!(
            !visible_multiline(&all)
                .chars()
                .any(|c| c != '\n' && c != '\t' && is_hidden(c))
        );
    }
}
