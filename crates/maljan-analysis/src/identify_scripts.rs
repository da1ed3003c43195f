//! Which kind of text a text file is — a script and its language, HTML, XML, SVG, SGML, or plain
//! text — by libmagic's own text rules (Magdir commands, javascript, ruby, perl, python, sgml,
//! svg), tried in the order libmagic's strength sorts them, over the first 8 KiB as libmagic's
//! `search/8192` and `regex` tests read. The Windows script languages libmagic has no magic for
//! (PowerShell, VBScript, batch, AutoIt, JScript), which malware arrives as, are told apart by
//! their telltale constructs, and Perl that opens with neither `#!` nor `package` too (libmagic
//! says text). bench/analysis_identify.md measures the agreement.

use std::sync::LazyLock;

use regex::Regex;

/// What a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextClass {
    Script(&'static str),
    Html,
    Xml,
    Svg,
    /// An SGML prologue or comment (`<!DOCTYPE …>` of a DTD, `<!-- … -->` first).
    Sgml,
}

/// How much of a text the rules read (libmagic's `search/8192`).
const WINDOW: usize = 8192;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid built-in pattern")
}

/// libmagic's rules that name JavaScript, in its order.
static JAVASCRIPT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?m)^export (function|class|default|const|var|let|async) ",
        r"(?m)^(const|var|let).*=.*require\(",
        r"(?m)^(import|export).* from ",
        r#"module(\.|\[["'])exports.*="#,
        r#"(?m)^(import|export) ["']\./"#,
        r"\((async )?function[( ]",
    ]
    .iter()
    .map(|p| re(p))
    .collect()
});
static JAVASCRIPT_LATE: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [r#"(?m)^require\(["']"#, r"typeof.*[!=]=="]
        .iter()
        .map(|p| re(p))
        .collect()
});
static PERL_PACKAGE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^package[ \t]+[0-9A-Za-z_:]+ *;"));
/// libmagic's Python rules (Magdir python), each a sure sign on its own.
static PYTHON: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?s)def __init__.{0,64}self",
        r#"(?s)if __name__.{0,64}['"]__main__['"]"#,
        r"(?m)^class [_a-zA-Z]+(\(.*\))? *:([ \t]+pass)?$",
        r"(?m)^\s{0,50}def {1,50}[_a-zA-Z]{1,100}\(([a-zA-Z*_, ]){0,255}\):$",
        r"(?m)^from[ \t]+([A-Za-z0-9_]|\.)+[ \t]+import.*$",
        r"(?m)^import [_a-zA-Z]+ as [a-zA-Z][ \t]*$",
    ]
    .iter()
    .map(|p| re(p))
    .collect()
});
static PYTHON_EXCEPT: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^[ \t]*except.*:$"));
static RUBY_CLASS: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^[ \t]*(class|module)[ \t][A-Z]"));
static RUBY_BODY: LazyLock<Regex> =
    LazyLock::new(|| re(r"(modul|includ)e [A-Z]|def [a-z]|(?m)^[ \t]*end([ \t]+[;#if].*)?$"));
static AWK_OR_PERL: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^[ \t\f\r\n]{0,100}BEGIN[ \t\f\r\n]{0,100}[{]"));

/// The class of a text (already decoded, BOM removed), or None for plain text.
pub(crate) fn classify(text: &str) -> Option<TextClass> {
    let head = &text[..text.floor_char_boundary(WINDOW)];
    let lower = head.to_ascii_lowercase();
    // An HTML application is HTML to libmagic; its script host makes it a script to us.
    if lower.contains("<hta:application") {
        return Some(TextClass::Script("HTA"));
    }
    let start = head.trim_start();
    if let Some(shebang) = start.strip_prefix("#!") {
        return Some(TextClass::Script(interpreter(
            shebang.lines().next().unwrap_or(""),
        )));
    }
    let lower_start = lower.trim_start();
    if start.starts_with("<?xml") {
        return Some(if head.contains("<svg") {
            TextClass::Svg
        } else {
            TextClass::Xml
        });
    }
    if start.starts_with("<svg") {
        return Some(TextClass::Svg);
    }
    if lower_start.starts_with("<!doctype html") || lower_start.starts_with("<html") {
        return Some(TextClass::Html);
    }
    // A gettext catalogue (.po) is text, whatever its messages quote.
    if head[..head.floor_char_boundary(1024)].contains("\nmsgid") {
        return None;
    }
    let telltale = telltale_language(&lower);
    let windows = telltale.filter(|l| *l != "Perl");
    // The Windows script hosts' languages before libmagic's JavaScript rules, which match them.
    if let Some(lang) = windows.filter(|l| *l != "JScript") {
        return Some(TextClass::Script(lang));
    }
    if JAVASCRIPT.iter().any(|r| r.is_match(head)) {
        return Some(TextClass::Script(windows.unwrap_or("JavaScript")));
    }
    if head.contains("package") && PERL_PACKAGE.is_match(head) {
        return Some(TextClass::Script("Perl"));
    }
    if head.contains("\"use strict\"") || head.contains("'use strict'") {
        return Some(TextClass::Script(windows.unwrap_or("JavaScript")));
    }
    if JAVASCRIPT_LATE.iter().any(|r| r.is_match(head)) {
        return Some(TextClass::Script(windows.unwrap_or("JavaScript")));
    }
    if text.starts_with("\"\"\"")
        || PYTHON.iter().any(|r| r.is_match(head))
        || (head.contains("try:") && (head.contains("finally:") || PYTHON_EXCEPT.is_match(head)))
    {
        return Some(TextClass::Script("Python"));
    }
    if RUBY_CLASS.is_match(head) && RUBY_BODY.is_match(head) {
        return Some(TextClass::Script("Ruby"));
    }
    let has = |tags: &[&str]| tags.iter().any(|t| lower.contains(t));
    if has(&["<script>", "<script ", "<a href="]) {
        return Some(TextClass::Html);
    }
    if has(&[
        "<title>",
        "<title ",
        "<style>",
        "<style ",
        "<table>",
        "<table ",
        "<head>",
        "<head ",
        "<html>",
        "<html ",
        "<!doctype html",
    ]) {
        return Some(TextClass::Html);
    }
    if has(&["<!doctype", "<!subdoc"]) {
        return Some(TextClass::Sgml);
    }
    if AWK_OR_PERL.is_match(&head[..head.floor_char_boundary(4096)]) {
        return Some(TextClass::Script("Perl"));
    }
    if lower.contains("<!--") {
        return Some(TextClass::Sgml);
    }
    telltale.map(TextClass::Script)
}

/// The language of a `#!` line's interpreter (`/usr/bin/env python3 -u` → Python).
fn interpreter(line: &str) -> &'static str {
    let mut words = line.split_whitespace();
    let mut program = words.next().unwrap_or("");
    if program.ends_with("/env") {
        program = words.find(|w| !w.starts_with('-')).unwrap_or("");
    }
    let name = program
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match base {
        "sh" | "bash" | "dash" | "ksh" | "zsh" | "ash" | "csh" | "tcsh" | "mksh" | "busybox" => {
            "Shell"
        }
        "python" | "pypy" => "Python",
        "perl" => "Perl",
        "ruby" => "Ruby",
        "node" | "nodejs" => "JavaScript",
        "php" => "PHP",
        "lua" => "Lua",
        "tclsh" | "wish" | "tcl" => "Tcl",
        "pwsh" | "powershell" => "PowerShell",
        "awk" | "gawk" | "nawk" | "mawk" => "awk",
        _ => "other",
    }
}

/// The script languages libmagic has no magic for (the Windows script hosts'; Perl without
/// `#!` or `package`), by their telltale constructs: two distinct ones at least (one alone
/// appears in any prose or other language's source).
fn telltale_language(lower: &str) -> Option<&'static str> {
    let score = |words: &[&str]| words.iter().filter(|w| lower.contains(*w)).count();
    let batch_start = lower
        .lines()
        .take(5)
        .any(|l| l.trim_start().starts_with("@echo off"));
    let candidates = [
        (
            "PowerShell",
            score(&[
                "$env:",
                "invoke-expression",
                "iex ",
                "iex(",
                "new-object",
                "-encodedcommand",
                "[system.",
                "write-host",
                "param(",
                "$psversiontable",
                "downloadstring",
                "-bxor",
                "[convert]::",
                "set-itemproperty",
            ]),
        ),
        (
            "VBScript",
            score(&[
                "createobject(",
                "wscript.",
                "dim ",
                "end sub",
                "end function",
                "on error resume next",
                "chr(",
                "set objshell",
            ]),
        ),
        (
            "Batch",
            score(&[
                "%~dp0",
                "goto :",
                "setlocal",
                "set /a",
                "%comspec%",
                "%errorlevel%",
                "@rem ",
            ]) + 2 * batch_start as usize,
        ),
        (
            "AutoIt",
            score(&[
                "#notrayicon",
                "endfunc",
                "autoitsetoption",
                "@scriptdir",
                "dllcall(",
                "#include <",
            ]),
        ),
        (
            "JScript",
            score(&["activexobject", "wscript.createobject", "wscript.shell"]),
        ),
        // A Perl script without `#!` or `package` (libmagic says text).
        (
            "Perl",
            score(&["use strict;", "use warnings;", "my $", "=~ "]),
        ),
    ];
    let (lang, best) = candidates.iter().copied().max_by_key(|(_, s)| *s)?;
    (best >= 2).then_some(lang)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libmagic_order_python_before_ruby() {
        let py = "import os\n\nclass Foo(object):\n    def bar(self):\n        pass\n";
        assert_eq!(classify(py), Some(TextClass::Script("Python")));
        let rb = "require \"x\"\n\nclass Foo::Bar\n  def baz\n  end\nend\n";
        assert_eq!(classify(rb), Some(TextClass::Script("Ruby")));
        let pm = "package JSON::PP;\nuse strict;\n1;\n";
        assert_eq!(classify(pm), Some(TextClass::Script("Perl")));
        assert_eq!(classify("hello world\n"), None);
    }

    #[test]
    fn shebangs_name_their_interpreter() {
        assert_eq!(interpreter(" /usr/bin/env python3 -u"), "Python");
        assert_eq!(interpreter("/bin/sh -e"), "Shell");
        assert_eq!(interpreter("/usr/bin/env escript"), "other");
    }

    #[test]
    fn telltale_languages_need_two_signs() {
        assert_eq!(telltale_language("goto end\n"), None);
        assert_eq!(telltale_language("@echo off\nsetlocal\n"), Some("Batch"));
        assert_eq!(
            telltale_language("$env:temp; iex (new-object net.webclient).downloadstring('x')"),
            Some("PowerShell")
        );
    }
}
