//! Text encodings by Python's codec names (utf-8, utf-8-sig, latin-1, ascii, utf-16*, utf-32*, and
//! every WHATWG encoding: cp1252, shift_jis, gbk, big5, …), with Python's strict / replace / ignore
//! errors and its byte-order-mark rules: `utf-8` keeps a BOM as U+FEFF, `utf-8-sig` drops one when
//! reading and writes one; `utf-16`/`utf-32` read either BOM and write the little-endian one; the
//! `-le`/`-be` forms neither read nor write it.

use encoding_rs::{EncoderResult, Encoding};
use maljan_server::ToolError;

/// How a codec name from Python is served.
pub(crate) enum Codec {
    Utf8 { bom: bool },
    Latin1,
    Ascii,
    Utf16 { big_endian: bool, bom: bool },
    Utf32 { big_endian: bool, bom: bool },
    Rs(&'static Encoding),
}

/// What an unknown encoding's error suggests instead.
const SUPPORTED_HINT: &str = "use one of utf-8, utf-8-sig, latin-1, ascii, utf-16, utf-16-le, utf-16-be, utf-32, or a WHATWG encoding \
     name (cp1252, iso-8859-2 … iso-8859-16, koi8-r, shift_jis, euc-jp, iso-2022-jp, gbk, gb18030, big5, euc-kr, …)";

pub(crate) fn codec(name: &str) -> Result<Codec, ToolError> {
    let n = name.trim().to_ascii_lowercase().replace('_', "-");
    Ok(match n.as_str() {
        "utf-8" | "utf8" | "u8" | "utf" | "cp65001" => Codec::Utf8 { bom: false },
        "utf-8-sig" | "utf8-sig" => Codec::Utf8 { bom: true },
        "latin-1" | "latin1" | "iso-8859-1" | "iso8859-1" | "8859" | "l1" => Codec::Latin1,
        "ascii" | "us-ascii" => Codec::Ascii,
        "utf-16" | "utf16" => Codec::Utf16 {
            big_endian: false,
            bom: true,
        },
        "utf-16-le" | "utf-16le" => Codec::Utf16 {
            big_endian: false,
            bom: false,
        },
        "utf-16-be" | "utf-16be" => Codec::Utf16 {
            big_endian: true,
            bom: false,
        },
        "utf-32" | "utf32" | "u32" => Codec::Utf32 {
            big_endian: false,
            bom: true,
        },
        "utf-32-le" | "utf-32le" => Codec::Utf32 {
            big_endian: false,
            bom: false,
        },
        "utf-32-be" | "utf-32be" => Codec::Utf32 {
            big_endian: true,
            bom: false,
        },
        _ => match Encoding::for_label(n.as_bytes())
            .or_else(|| Encoding::for_label(name.trim().as_bytes()))
        {
            Some(e)
                if e != encoding_rs::REPLACEMENT
                    && e != encoding_rs::UTF_16LE
                    && e != encoding_rs::UTF_16BE =>
            {
                Codec::Rs(e)
            }
            _ => {
                return Err(
                    ToolError::bad_argument(format!("unknown encoding '{name}'"))
                        .with_remediation(SUPPORTED_HINT),
                );
            }
        },
    })
}

pub(crate) fn errors_mode(errors: &str) -> Result<u8, ToolError> {
    match errors {
        "strict" => Ok(0),
        "replace" => Ok(1),
        "ignore" => Ok(2),
        other => Err(ToolError::bad_argument(format!(
            "errors must be strict, replace or ignore, not '{other}'"
        ))),
    }
}

/// Decodes bytes as Python's `bytes.decode(encoding, errors)` would for the common codecs.
pub(crate) fn decode_text(bytes: &[u8], encoding: &str, errors: &str) -> Result<String, ToolError> {
    let mode = errors_mode(errors)?;
    let bad = || {
        ToolError::bad_argument(format!("the file is not valid {encoding}"))
            .with_remediation("name the file's real encoding, or pass errors='replace' or 'ignore'")
    };
    let lossy = |s: String| {
        if mode == 2 {
            s.replace('\u{FFFD}', "")
        } else {
            s
        }
    };
    match codec(encoding)? {
        Codec::Utf8 { bom } => match std::str::from_utf8(match bom {
            true => bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
            false => bytes,
        }) {
            Ok(s) => Ok(s.to_string()),
            Err(_) if mode == 0 => Err(bad()),
            Err(_) => {
                let text = String::from_utf8_lossy(bytes);
                let text = match bom {
                    true => text.strip_prefix('\u{FEFF}').unwrap_or(&text),
                    false => &text,
                };
                Ok(lossy(text.to_owned()))
            }
        },
        Codec::Latin1 => Ok(bytes.iter().map(|&b| b as char).collect()),
        Codec::Ascii => {
            if mode == 0 && !bytes.is_ascii() {
                return Err(bad());
            }
            Ok(bytes
                .iter()
                .filter_map(|&b| match (b.is_ascii(), mode) {
                    (true, _) => Some(b as char),
                    (false, 1) => Some('\u{FFFD}'),
                    _ => None,
                })
                .collect())
        }
        Codec::Utf16 { big_endian, bom } => {
            let mut data = bytes;
            let mut be = big_endian;
            if bom && data.len() >= 2 {
                match (data[0], data[1]) {
                    (0xFF, 0xFE) => data = &data[2..],
                    (0xFE, 0xFF) => {
                        data = &data[2..];
                        be = true;
                    }
                    _ => {}
                }
            }
            if data.len() % 2 == 1 && mode == 0 {
                return Err(bad());
            }
            let units = data.chunks_exact(2).map(|c| {
                if be {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_le_bytes([c[0], c[1]])
                }
            });
            let mut out = String::new();
            for r in char::decode_utf16(units) {
                match (r, mode) {
                    (Ok(c), _) => out.push(c),
                    (Err(_), 0) => return Err(bad()),
                    (Err(_), 1) => out.push('\u{FFFD}'),
                    _ => {}
                }
            }
            Ok(out)
        }
        Codec::Utf32 { big_endian, bom } => {
            let mut data = bytes;
            let mut be = big_endian;
            if bom {
                if let Some(rest) = data.strip_prefix(&[0xFF, 0xFE, 0, 0]) {
                    data = rest;
                } else if let Some(rest) = data.strip_prefix(&[0, 0, 0xFE, 0xFF]) {
                    data = rest;
                    be = true;
                }
            }
            if !data.len().is_multiple_of(4) && mode == 0 {
                return Err(bad());
            }
            let mut out = String::with_capacity(data.len() / 4);
            for c in data.chunks_exact(4) {
                let unit = [c[0], c[1], c[2], c[3]];
                let unit = if be {
                    u32::from_be_bytes(unit)
                } else {
                    u32::from_le_bytes(unit)
                };
                match (char::from_u32(unit), mode) {
                    (Some(c), _) => out.push(c),
                    (None, 0) => return Err(bad()),
                    (None, 1) => out.push('\u{FFFD}'),
                    _ => {}
                }
            }
            Ok(out)
        }
        Codec::Rs(enc) => match enc.decode_without_bom_handling_and_without_replacement(bytes) {
            Some(s) => Ok(s.into_owned()),
            None if mode == 0 => Err(bad()),
            None => Ok(lossy(enc.decode_without_bom_handling(bytes).0.into_owned())),
        },
    }
}

/// Encodes text as Python's `str.encode(encoding, errors)` would for the common codecs.
pub(crate) fn encode_text(text: &str, encoding: &str, errors: &str) -> Result<Vec<u8>, ToolError> {
    let mode = errors_mode(errors)?;
    let unmappable = |c: char| {
        ToolError::bad_argument(format!(
            "the character {c:?} cannot be written in {encoding}"
        ))
        .with_remediation(
            "choose an encoding that can hold it (utf-8), or pass errors='replace' or 'ignore'",
        )
    };
    match codec(encoding)? {
        Codec::Utf8 { bom } => {
            let mark: &[u8] = if bom { b"\xEF\xBB\xBF" } else { b"" };
            Ok([mark, text.as_bytes()].concat())
        }
        Codec::Latin1 | Codec::Ascii => {
            let max = if matches!(codec(encoding)?, Codec::Ascii) {
                0x7F
            } else {
                0xFF
            };
            let mut out = Vec::with_capacity(text.len());
            for c in text.chars() {
                match (c as u32 <= max, mode) {
                    (true, _) => out.push(c as u32 as u8),
                    (false, 0) => return Err(unmappable(c)),
                    (false, 1) => out.push(b'?'),
                    _ => {}
                }
            }
            Ok(out)
        }
        Codec::Utf16 { big_endian, bom } => {
            let mut out = Vec::with_capacity(text.len() * 2 + 2);
            if bom {
                out.extend_from_slice(&[0xFF, 0xFE]);
            }
            for u in text.encode_utf16() {
                out.extend_from_slice(&if big_endian {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                });
            }
            Ok(out)
        }
        Codec::Utf32 { big_endian, bom } => {
            let mut out = Vec::with_capacity(text.len() * 4 + 4);
            if bom {
                out.extend_from_slice(&[0xFF, 0xFE, 0, 0]);
            }
            for c in text.chars() {
                let c = c as u32;
                out.extend_from_slice(&if big_endian {
                    c.to_be_bytes()
                } else {
                    c.to_le_bytes()
                });
            }
            Ok(out)
        }
        Codec::Rs(enc) => {
            let mut encoder = enc.output_encoding().new_encoder();
            let mut out = Vec::with_capacity(text.len() + 16);
            let mut rest = text;
            loop {
                let need = encoder
                    .max_buffer_length_from_utf8_without_replacement(rest.len())
                    .unwrap_or(rest.len() * 4 + 16);
                out.reserve(need);
                let (result, read) =
                    encoder.encode_from_utf8_to_vec_without_replacement(rest, &mut out, true);
                rest = &rest[read..];
                match result {
                    EncoderResult::InputEmpty => return Ok(out),
                    EncoderResult::OutputFull => continue,
                    EncoderResult::Unmappable(c) => match mode {
                        0 => return Err(unmappable(c)),
                        1 => out.push(b'?'),
                        _ => {}
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_round_trip() {
        for enc in [
            "utf-8",
            "latin-1",
            "utf-16",
            "utf-16-be",
            "utf-8-sig",
            "utf-32",
            "utf-32-be",
            "cp1252",
            "shift_jis",
            "gbk",
        ] {
            let text = if enc == "latin-1" || enc == "cp1252" {
                "café"
            } else {
                "café 日本"
            };
            let text = if enc == "gbk" || enc == "shift_jis" {
                "日本"
            } else {
                text
            };
            let bytes = encode_text(text, enc, "strict").unwrap();
            assert_eq!(decode_text(&bytes, enc, "strict").unwrap(), text, "{enc}");
        }
        assert_eq!(encode_text("é", "latin-1", "strict").unwrap(), vec![0xE9]);
        assert_eq!(
            encode_text("日", "ascii", "strict").unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(encode_text("a日", "ascii", "replace").unwrap(), b"a?");
        assert_eq!(encode_text("a日", "cp1252", "ignore").unwrap(), b"a");
        assert_eq!(
            decode_text(&[0xFF, 0x41], "utf-8", "strict")
                .unwrap_err()
                .code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(decode_text(&[0xFF, 0x41], "utf-8", "ignore").unwrap(), "A");
        assert_eq!(
            codec("klingon").map(drop).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
    }

    #[test]
    fn byte_order_marks_as_python_reads_and_writes_them() {
        let bom_text = b"\xEF\xBB\xBFhi";
        assert_eq!(decode_text(bom_text, "utf-8-sig", "strict").unwrap(), "hi");
        assert_eq!(decode_text(b"hi", "utf_8_sig", "strict").unwrap(), "hi");
        assert_eq!(
            decode_text(bom_text, "utf-8", "strict").unwrap(),
            "\u{FEFF}hi"
        );
        assert_eq!(encode_text("hi", "utf-8-sig", "strict").unwrap(), bom_text);
        assert_eq!(
            encode_text("a", "utf-32", "strict").unwrap(),
            [0xFF, 0xFE, 0, 0, b'a', 0, 0, 0]
        );
        assert_eq!(
            decode_text(&[0, 0, 0xFE, 0xFF, 0, 0, 0, b'a'], "utf-32", "strict").unwrap(),
            "a"
        );
        assert_eq!(
            encode_text("a", "utf-32-be", "strict").unwrap(),
            [0, 0, 0, b'a']
        );
        assert!(decode_text(&[0, 0, 0x11, 0], "utf-32-le", "strict").is_err());
        assert_eq!(
            decode_text(&[0, 0, 0x11, 0], "utf-32-le", "replace").unwrap(),
            "\u{FFFD}"
        );
    }

    #[test]
    fn an_unknown_encoding_names_the_supported_ones() {
        let Err(err) = codec("klingon") else {
            panic!("klingon is not an encoding")
        };
        assert_eq!(err.code.as_str(), "bad_argument");
        assert!(err.message.contains("klingon"), "{}", err.message);
        for name in ["utf-8", "latin-1", "utf-16", "cp1252", "shift_jis"] {
            // Each suggestion must itself be accepted.
            assert!(err.remediation.contains(name), "{}", err.remediation);
            assert!(codec(name).is_ok(), "{name}");
        }
    }
}
