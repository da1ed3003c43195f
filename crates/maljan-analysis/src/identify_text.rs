//! Text files for identify_file: encodings (ASCII, UTF-8, UTF-16LE), scripts by shebang or telltale
//! constructs (PowerShell, VBScript, JavaScript, batch, HTA, Python, shell), HTML and XML.

use crate::identify::FileKind;

pub(crate) fn text_kind(b: &[u8]) -> FileKind {
    let head = &b[..b.len().min(64 * 1024)];
    let utf16 = head.starts_with(&[0xFF, 0xFE])
        || (head.len() >= 8
            && head.iter().skip(1).step_by(2).take(64).all(|&c| c == 0)
            && head[0] != 0);
    let text: String = if utf16 {
        let units: Vec<u16> = head
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
            .trim_start_matches('\u{feff}')
            .to_string()
    } else {
        let printable = head
            .iter()
            .filter(|&&c| c >= 0x20 || matches!(c, b'\n' | b'\r' | b'\t' | 0x0c))
            .count();
        let valid_utf8 = match std::str::from_utf8(head) {
            Ok(_) => true,
            Err(e) => e.error_len().is_none(), // cut in the middle of a character
        };
        if printable * 100 < head.len() * 95
            || head.contains(&0)
            || (!valid_utf8 && printable * 100 < head.len() * 99)
        {
            return FileKind::new(
                "data",
                "binary data",
                "application/octet-stream",
                "bin",
                None,
            );
        }
        String::from_utf8_lossy(head)
            .trim_start_matches('\u{feff}')
            .to_string()
    };
    let enc = if utf16 {
        "UTF-16LE"
    } else if text.is_ascii() {
        "ASCII"
    } else {
        "UTF-8"
    };
    if let Some(k) = encoded_or_mail(&text, enc) {
        return k;
    }
    if let Some(lang) = script_language(&text) {
        return FileKind::new(
            "script",
            format!("{lang} script, {enc} text"),
            "text/plain",
            script_ext(lang),
            Some("strings"),
        )
        .with("language", lang)
        .with("encoding", enc);
    }
    let lower = text.trim_start().to_ascii_lowercase();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.contains("<body")
    {
        return FileKind::new(
            "html",
            format!("HTML document, {enc} text"),
            "text/html",
            "html",
            Some("iocs_from_file"),
        )
        .with("encoding", enc);
    }
    if lower.starts_with("<?xml") {
        return FileKind::new(
            "xml",
            format!("XML document, {enc} text"),
            "text/xml",
            "xml",
            Some("iocs_from_file"),
        )
        .with("encoding", enc);
    }
    FileKind::new(
        "text",
        format!("{enc} text"),
        "text/plain",
        "txt",
        Some("iocs_from_file"),
    )
    .with("encoding", enc)
}

fn script_ext(lang: &str) -> &'static str {
    match lang {
        "PowerShell" => "ps1",
        "VBScript" => "vbs",
        "JavaScript" => "js",
        "Batch" => "bat",
        "HTA" => "hta",
        "Python" => "py",
        "Shell" => "sh",
        "Perl" => "pl",
        "AutoIt" => "au3",
        "Ruby" => "rb",
        "JScript" => "js",
        _ => "txt",
    }
}

/// The scripting language of a text, by shebang or by telltale constructs.
pub fn script_language(text: &str) -> Option<&'static str> {
    let first = text.lines().next().unwrap_or("").trim();
    if let Some(shebang) = first.strip_prefix("#!") {
        let s = shebang.to_ascii_lowercase();
        return Some(if s.contains("python") {
            "Python"
        } else if s.contains("perl") {
            "Perl"
        } else if s.contains("node") {
            "JavaScript"
        } else if s.contains("pwsh") || s.contains("powershell") {
            "PowerShell"
        } else if s.contains("ruby") {
            "Ruby"
        } else {
            "Shell"
        });
    }
    let l = text.to_ascii_lowercase();
    let score = |words: &[&str]| words.iter().filter(|w| l.contains(*w)).count();
    let candidates = [
        ("HTA", score(&["<hta:application"]) * 3),
        (
            "PowerShell",
            score(&[
                "$env:",
                "invoke-expression",
                "iex ",
                "new-object",
                "-encodedcommand",
                "[system.",
                "write-host",
                "param(",
                "$psversiontable",
                "downloadstring",
                "-bxor",
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
            ]),
        ),
        (
            "JavaScript",
            score(&[
                "function(",
                "function ",
                "var ",
                "activexobject",
                "eval(",
                "document.",
                "=>",
                "const ",
                "let ",
            ]),
        ),
        (
            "Batch",
            score(&[
                "@echo off",
                "%~dp0",
                "goto ",
                "setlocal",
                "set /a",
                "%comspec%",
            ]) * 2,
        ),
        ("Python", score(&["import ", "def ", "__name__", "print("])),
        (
            "Perl",
            score(&["use strict;", "my $", "use warnings;", "=~ "]),
        ),
        (
            "Ruby",
            score(&[
                "require '",
                "require \"",
                "require_relative",
                "puts ",
                " do |",
                "attr_accessor",
                "elsif ",
                "def self.",
                "end\nend",
            ]),
        ),
        (
            "AutoIt",
            score(&[
                "#include <",
                "#notrayicon",
                "endfunc",
                "autoitsetoption",
                "@scriptdir",
                "dllcall(",
            ]) * 2,
        ),
    ];
    let (lang, best) = candidates.iter().copied().max_by_key(|(_, s)| *s)?;
    // Windows Script Host's JavaScript is JScript.
    if lang == "JavaScript" && score(&["activexobject", "wscript."]) > 0 {
        return Some("JScript");
    }
    (best >= 2).then_some(lang)
}

/// Mail (RFC 822 / MIME, mbox) and encoded blobs (uuencode, BinHex, base64, hex).
fn encoded_or_mail(text: &str, enc: &str) -> Option<FileKind> {
    let head: &str = &text[..text.len().min(16 * 1024)];
    let first = head.lines().next().unwrap_or("");
    if first.starts_with("(This file must be converted with BinHex") {
        return Some(FileKind::new(
            "binhex",
            "BinHex binary text",
            "application/mac-binhex40",
            "hqx",
            Some("strings"),
        ));
    }
    if head.lines().take(50).any(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some("begin")
            && w.next()
                .is_some_and(|m| m.len() == 3 && m.bytes().all(|c| (b'0'..=b'7').contains(&c)))
            && w.next().is_some()
    }) {
        return Some(FileKind::new(
            "uuencode",
            format!("uuencoded text, {enc} text"),
            "text/x-uuencode",
            "uu",
            Some("strings"),
        ));
    }
    // Mail: a header block of `Name: value` lines with the headers a message carries.
    let header_lines: Vec<&str> = head
        .lines()
        .take_while(|l| !l.is_empty())
        .take(200)
        .collect();
    let has = |name: &str| {
        header_lines.iter().any(|l| {
            l.len() > name.len() && l.as_bytes()[..name.len()].eq_ignore_ascii_case(name.as_bytes())
        })
    };
    let mbox = first.starts_with("From ") && first.split_whitespace().count() >= 3;
    let mail_headers = [
        "From:",
        "To:",
        "Subject:",
        "Date:",
        "Message-ID:",
        "Received:",
        "Return-Path:",
        "MIME-Version:",
    ]
    .iter()
    .filter(|h| has(h))
    .count();
    if mbox && mail_headers >= 1 {
        return Some(FileKind::new(
            "mbox",
            format!("Unix mailbox (mbox), {enc} text"),
            "application/mbox",
            "mbox",
            Some("iocs_from_file"),
        ));
    }
    if mail_headers >= 3 {
        let desc = if has("Received:") || has("Return-Path:") {
            "SMTP mail"
        } else {
            "RFC 822 mail"
        };
        return Some(
            FileKind::new(
                "email",
                format!("{desc}, {enc} text"),
                "message/rfc822",
                "eml",
                Some("iocs_from_file"),
            )
            .with("mime", has("MIME-Version:")),
        );
    }
    // One unbroken encoded blob (whitespace between lines only), long enough to mean it.
    let compact: Vec<u8> = head.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if compact.len() >= 64 && head.lines().all(|l| !l.trim().contains(' ')) {
        if compact.iter().all(u8::is_ascii_hexdigit) {
            return Some(FileKind::new(
                "hex",
                format!("hex-encoded data, {enc} text"),
                "text/plain",
                "hex",
                Some("strings"),
            ));
        }
        let body = compact
            .strip_suffix(b"==")
            .or_else(|| compact.strip_suffix(b"="))
            .unwrap_or(&compact);
        if body
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
            && body.iter().any(u8::is_ascii_digit)
            && body.iter().any(u8::is_ascii_uppercase)
            && body.iter().any(u8::is_ascii_lowercase)
        {
            return Some(FileKind::new(
                "base64",
                format!("base64-encoded data, {enc} text"),
                "text/plain",
                "b64",
                Some("strings"),
            ));
        }
    }
    None
}
