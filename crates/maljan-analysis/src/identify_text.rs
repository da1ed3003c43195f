//! Text files for identify_file: encodings (ASCII, UTF-8, UTF-16LE), scripts by shebang or telltale
//! constructs (PowerShell, VBScript, JavaScript, batch, HTA, Python, shell), HTML and XML.

use crate::{
    identify::FileKind,
    identify_scripts::{TextClass, classify},
};

/// How far into a text a program carried in base64 is looked for (a smuggling page's blob
/// starts after its markup and script).
const CARRIER_WINDOW: usize = 1 << 20;

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
    let carried = carried_executable(&b[..b.len().min(CARRIER_WINDOW)]);
    // JSON is data whatever words its strings hold (libmagic parses it before its text rules);
    // only a whole file (within the head) is parsed.
    let json = head.len() == b.len()
        && matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['))
        && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
    let class = if json { None } else { classify(&text) };
    let kind = match class {
        Some(TextClass::Script(lang)) => FileKind::new(
            "script",
            format!("{lang} script, {enc} text"),
            script_mime(lang),
            script_ext(lang),
            Some("strings"),
        )
        .with("language", lang),
        Some(TextClass::Html) => FileKind::new(
            "html",
            format!("HTML document, {enc} text"),
            "text/html",
            "html",
            Some("iocs_from_file"),
        ),
        Some(TextClass::Svg) => FileKind::new(
            "xml",
            format!("SVG Scalable Vector Graphics image, {enc} text"),
            "image/svg+xml",
            "svg",
            Some("iocs_from_file"),
        )
        .with("format", "svg"),
        Some(TextClass::Xml) => FileKind::new(
            "xml",
            format!("XML document, {enc} text"),
            "text/xml",
            "xml",
            Some("iocs_from_file"),
        )
        .with("format", "xml"),
        Some(TextClass::Sgml) => FileKind::new(
            "xml",
            format!("exported SGML document, {enc} text"),
            "text/plain",
            "sgml",
            Some("iocs_from_file"),
        )
        .with("format", "sgml"),
        None => FileKind::new(
            "text",
            if json {
                format!("JSON text data, {enc} text")
            } else {
                format!("{enc} text")
            },
            if json {
                "application/json"
            } else {
                "text/plain"
            },
            "txt",
            Some("iocs_from_file"),
        ),
    };
    let kind = kind.with("encoding", enc);
    match carried {
        // A page or image is not a program: a program inside it is the first thing to say.
        Some(what) => {
            let mut k = kind.with("carries_executable", what);
            k.description
                .push_str(&format!(", carrying an executable ({what}, base64)"));
            k
        }
        None => kind,
    }
}

/// libmagic's MIME type for a script (text/plain for the languages it has no magic for).
fn script_mime(lang: &str) -> &'static str {
    match lang {
        "Python" => "text/x-script.python",
        "Ruby" => "text/x-ruby",
        "Shell" => "text/x-shellscript",
        "Perl" => "text/x-perl",
        "JavaScript" => "application/javascript",
        "PHP" => "text/x-php",
        "Lua" => "text/x-lua",
        "Tcl" => "text/x-tcl",
        "awk" => "text/x-awk",
        _ => "text/plain",
    }
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
        "PHP" => "php",
        "Lua" => "lua",
        "Tcl" => "tcl",
        "awk" => "awk",
        _ => "txt",
    }
}

/// The scripting language of a text (shebang, libmagic's rules, the Windows script hosts'
/// telltale constructs), None for any other text.
pub fn script_language(text: &str) -> Option<&'static str> {
    match classify(text) {
        Some(TextClass::Script(lang)) => Some(lang),
        _ => None,
    }
}

/// "pe" or "elf" when the text holds a base64 run (a `data:` URI, a script's string, an SVG's
/// `href`) that decodes to a program: HTML smuggling and its SVG twin. The run is found by the
/// base64 of the program's magic ("MZ" → `TV[o-r]`, "\x7FELF" → `f0VMR`) after a character that
/// cannot be base64, and only its first 4 KiB are decoded.
fn carried_executable(b: &[u8]) -> Option<&'static str> {
    use base64::Engine;
    let is_b64 = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    for (needle, what) in [(&b"TV"[..], "pe"), (b"f0VMR", "elf")] {
        for at in memchr::memmem::find_iter(b, needle) {
            if at > 0 && is_b64(b[at - 1]) {
                continue;
            }
            let run: Vec<u8> = b[at..]
                .iter()
                .copied()
                .take_while(|&c| is_b64(c) || c == b'=' || c == b'\n' || c == b'\r')
                .filter(|c| is_b64(*c))
                .take(4096)
                .collect();
            if run.len() < 64 {
                continue;
            }
            let run = &run[..run.len() / 4 * 4];
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(run) else {
                continue;
            };
            let program = match what {
                "pe" => {
                    crate::identify::pe_header_offset(&bytes).is_some()
                        || (bytes.starts_with(b"MZ")
                            && memchr::memmem::find(&bytes, b"This program cannot be run")
                                .is_some())
                }
                _ => bytes.starts_with(b"\x7FELF"),
            };
            if program {
                return Some(what);
            }
        }
    }
    None
}

/// Mail (RFC 822 / MIME, mbox) and encoded blobs (uuencode, BinHex, base64, hex).
fn encoded_or_mail(text: &str, enc: &str) -> Option<FileKind> {
    let head: &str = &text[..text.floor_char_boundary(16 * 1024)];
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
