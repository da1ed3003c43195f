//! Untrusted text into a report, by construction. Every string a sample, a server or a model
//! wrote (a file name, a version-info value, an IOC, an error code, a fact's observation, the
//! model's words) reaches the Markdown through [`md_text`], [`md_code`] or [`md_fence`], and the
//! HTML through [`html`]; anchors and link targets go through [`anchor`]. None of them can open a
//! link, an image, raw HTML, a code span or a block the report did not write itself, and every
//! control or bidi override is shown as an escape (`crate::visible`).

use crate::visible::{visible, visible_multiline};

/// ASCII punctuation that can start or end a CommonMark (or GFM) inline construct anywhere in a
/// line: escapes, code spans, emphasis, links and images, raw HTML and autolinks, entities,
/// table cells, strikethrough, and the `:`/`@` GFM's extended autolinks key on.
const INLINE: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '(', ')', '!', '<', '>', '#', '|', '~', '&', ':', '@',
];

/// `s` on one line: line breaks and tabs folded to spaces, other controls and bidi overrides
/// made visible (the first step of every inline rendering).
fn one_line(s: &str) -> String {
    let folded: String = s
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    visible(&folded).into_owned()
}

/// `s` as literal text in a Markdown inline context (a paragraph, a list item, a heading, a
/// table cell): line breaks and tabs folded to spaces, other controls and bidi overrides made
/// visible, every punctuation character that can open a construct backslash-escaped, and what
/// would start a block at the beginning of a line (`-`, `+`, `=`, `1.`, `1)`, an indent)
/// neutralised, so the text may be placed anywhere on a line.
pub fn md_text(s: &str) -> String {
    let shown = one_line(s);
    let mut out = String::with_capacity(shown.len() + 8);
    let leading_digits = shown.chars().take_while(char::is_ascii_digit).count();
    let mut last3 = ['\0'; 3];
    for (i, c) in shown.chars().enumerate() {
        let block_start = i == 0 && matches!(c, '-' | '+' | '=')
            || i == leading_digits && i > 0 && matches!(c, '.' | ')');
        // GFM links `www.` without a scheme; a backslash before its dot stops that.
        let www_dot = c == '.' && last3.iter().all(|p| p.eq_ignore_ascii_case(&'w'));
        if i == 0 && c == ' ' {
            // A paragraph opened by four spaces would be an indented code block.
            out.push_str("&#32;");
        } else if INLINE.contains(&c) || block_start || www_dot {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
        last3 = [last3[1], last3[2], c];
    }
    out
}

/// `s` as an inline code span: the fence one backtick longer than any run inside, padded when
/// the text starts or ends with a backtick, line breaks folded and controls made visible. Text
/// holding a `|` (which would end a table cell even inside a span) or nothing is written with
/// [`md_text`] instead.
pub fn md_code(s: &str) -> String {
    if s.is_empty() || s.contains('|') {
        return md_text(s);
    }
    let shown = one_line(s);
    let fence = "`".repeat(longest_run(&shown, '`') + 1);
    let pad = if shown.starts_with('`')
        || shown.ends_with('`')
        || (shown.starts_with(' ') && shown.ends_with(' ') && shown.trim() != "")
    {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{shown}{pad}{fence}")
}

/// `s` as a fenced code block (its own lines; the caller leaves a blank line around it): the
/// fence longer than any backtick run inside, so no line of `s` can close it; controls other
/// than line feeds and tabs made visible.
pub fn md_fence(s: &str) -> String {
    let shown = visible_multiline(s);
    let fence = "`".repeat((longest_run(&shown, '`') + 1).max(3));
    format!("{fence}text\n{shown}\n{fence}\n")
}

/// An anchor name or link target made of `[A-Za-z0-9_.-]` only: evidence ids are the ledger's
/// (`ev_0001`), but they travel through a model's answer, so nothing else reaches an `id=""`
/// or a `(#…)`.
pub fn anchor(id: &str) -> String {
    let out: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".into() } else { out }
}

/// HTML-escaped text (element content and double-quoted attributes), controls other than line
/// feeds and tabs and every bidi override made visible.
pub fn html(s: &str) -> String {
    let shown = visible_multiline(s);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn longest_run(s: &str, of: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for c in s.chars() {
        run = if c == of { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_text_escapes_what_opens_a_construct() {
        assert_eq!(
            md_text("[x](javascript:alert(1)).zip"),
            "\\[x\\]\\(javascript\\:alert\\(1\\)\\).zip"
        );
        assert_eq!(
            md_text("![p](http://h/p.png)"),
            "\\!\\[p\\]\\(http\\://h/p.png\\)"
        );
        assert_eq!(md_text("<img src=x>"), "\\<img src=x\\>");
        assert_eq!(md_text("a\nb\r\tc"), "a b  c");
        assert_eq!(md_text("# h"), "\\# h");
        assert_eq!(md_text("- item"), "\\- item");
        assert_eq!(md_text("12. item"), "12\\. item");
        assert_eq!(md_text("v1.2"), "v1.2");
        assert_eq!(md_text("    code"), "&#32;   code");
        assert_eq!(md_text("www.evil.com"), "www\\.evil.com");
        assert_eq!(md_text("esc\x1b[2J"), "esc\\\\x1b\\[2J");
    }

    #[test]
    fn code_spans_outlast_the_backticks_inside() {
        assert_eq!(md_code("pe_info"), "`pe_info`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a|b"), "a\\|b");
        assert_eq!(md_code(""), "");
        assert_eq!(md_fence("x\n```\ny"), "````text\nx\n```\ny\n````\n");
    }

    #[test]
    fn anchors_and_html_keep_only_what_is_safe() {
        assert_eq!(anchor("ev_0001"), "ev_0001");
        assert_eq!(anchor("\"><script>"), "___script_");
        assert_eq!(
            html("<b a='1'>&\u{202e}"),
            "&lt;b a=&#39;1&#39;&gt;&amp;\\u{202e}"
        );
    }
}
