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
    ];
    let (lang, best) = candidates.iter().copied().max_by_key(|(_, s)| *s)?;
    (best >= 2).then_some(lang)
}
