//! Text and bytes: split, merge, re-encode, count lines, replace (automation-file's text_ops).

use std::{
    fs::File,
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, Write as Create, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data::non_negative;
use crate::pattern::{Flags, TextPattern};
use crate::{
    Config,
    encoding::{codec, decode_text, encode_text, errors_mode},
    paths::{FileInput, cancelled, copy_data, io_err, show},
};

fn default_utf8() -> String {
    "utf-8".into()
}
fn default_strict() -> String {
    "strict".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SplitArgs {
    /// The file to split.
    file_path: String,
    /// The largest part, in bytes.
    chunk_size: i64,
    /// Where the parts go (created if missing); beside the file when absent.
    #[serde(default)]
    output_dir: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MergeArgs {
    /// The files to concatenate, in order.
    parts: Vec<String>,
    /// The file written (atomically).
    target_path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ConvertArgs {
    /// The text file to read.
    file_path: String,
    /// The file to write.
    target_path: String,
    /// Its current encoding (Python codec name).
    source_encoding: String,
    /// The encoding to write.
    target_encoding: String,
    /// strict, replace or ignore.
    #[serde(default = "default_strict")]
    #[schemars(default = "default_strict")]
    errors: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LineCountArgs {
    /// The text file.
    file_path: String,
    /// Its encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SedArgs {
    /// The file edited in place.
    file_path: String,
    /// The text to find (a regular expression when `regex` is true).
    pattern: String,
    /// The replacement; with `regex`, `\1`, `\g<1>` and `\g<name>` refer to groups.
    replacement: String,
    /// Read `pattern` as a regular expression.
    #[serde(default)]
    #[schemars(default)]
    regex: bool,
    /// At most this many replacements; 0 replaces all.
    #[serde(default)]
    #[schemars(default)]
    count: i64,
    /// The file's encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Serialize, JsonSchema)]
struct PartsOut {
    parts: Vec<String>,
    count: usize,
}

#[derive(Serialize, JsonSchema)]
struct WrittenOut {
    path: String,
    bytes: u64,
}

#[derive(Serialize, JsonSchema)]
struct LinesOut {
    path: String,
    lines: u64,
}

/// Lines as Python counts them: a final newline adds no line.
fn count_lines(path: &Path, raw: &[u8], encoding: &str) -> Result<LinesOut, ToolError> {
    let text = decode_text(raw, encoding, "strict")?;
    // Python reads text files with universal newlines: \n, \r\n and a lone \r each end a line.
    let bytes = text.as_bytes();
    let ends = bytes
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')))
        .count();
    let mut lines = ends as u64;
    if !text.is_empty() && !text.ends_with(['\n', '\r']) {
        lines += 1;
    }
    Ok(LinesOut {
        path: show(path),
        lines,
    })
}

#[derive(Serialize, JsonSchema)]
struct SedOut {
    path: String,
    /// How many replacements were made (0 leaves the file untouched).
    replacements: u64,
}

/// The most parts FA_file_split writes: a tiny chunk_size on a big file is a mistake.
const MAX_PARTS: u64 = 100_000;

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_file_split",
            "Split a file into chunk_size-byte parts named <name>.part000, .part001, …",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: SplitArgs| {
            let c = c.clone();
            async move {
                if a.chunk_size <= 0 {
                    return Err(ToolError::bad_argument(
                        "chunk_size must be a positive number of bytes",
                    ));
                }
                let src = c.existing_file(&a.file_path)?;
                let out_dir = match &a.output_dir {
                    Some(d) => c.target(d)?,
                    None => src.path.parent().map(PathBuf::from).unwrap_or_default(),
                };
                let size = src.size()?;
                if size.div_ceil(a.chunk_size as u64) > MAX_PARTS {
                    return Err(ToolError::bad_argument(format!(
                        "chunk_size {} would make more than {MAX_PARTS} parts",
                        a.chunk_size
                    )));
                }
                blocking(move || {
                    c.roots
                        .create_dir_all(&out_dir, a.output_dir.as_deref().unwrap_or("."))?;
                    let name = src
                        .path
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    let mut reader = &src.file;
                    let mut parts = Vec::new();
                    let mut buf = vec![0u8; (a.chunk_size as usize).min(8 << 20)];
                    loop {
                        if ctx.is_cancelled() {
                            return Err(cancelled());
                        }
                        let mut left = a.chunk_size as u64;
                        let part = out_dir.join(format!("{name}.part{:03}", parts.len()));
                        let mut writer: Option<File> = None;
                        while left > 0 {
                            let want = (left as usize).min(buf.len());
                            let n = reader
                                .read(&mut buf[..want])
                                .map_err(io_err(&a.file_path))?;
                            if n == 0 {
                                break;
                            }
                            if writer.is_none() {
                                let shown = show(&part);
                                if part.is_symlink() {
                                    c.roots.remove_file(&part, &shown)?;
                                }
                                writer =
                                    Some(c.roots.create_file(&part, &shown, Create::Truncate)?);
                            }
                            if let Some(w) = writer.as_mut() {
                                w.write_all(&buf[..n]).map_err(io_err(&show(&part)))?;
                            }
                            left -= n as u64;
                            if ctx.is_cancelled() {
                                return Err(cancelled());
                            }
                        }
                        if writer.is_none() {
                            break;
                        }
                        parts.push(show(&part));
                    }
                    Ok(PartsOut {
                        count: parts.len(),
                        parts,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_file_merge",
            "Concatenate files in order into one (written atomically).",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: MergeArgs| {
            let c = c.clone();
            async move {
                if a.parts.is_empty() {
                    return Err(ToolError::bad_argument("parts must name at least one file"));
                }
                let parts = a
                    .parts
                    .iter()
                    .map(|p| c.existing_file(p))
                    .collect::<Result<Vec<_>, _>>()?;
                let target = c.target(&a.target_path)?;
                blocking(move || {
                    if let Some(parent) = target.parent() {
                        c.roots.create_dir_all(parent, &a.target_path)?;
                    }
                    let mut total = 0;
                    c.roots.write_atomic_with(&target, &a.target_path, |out| {
                        for p in &parts {
                            total +=
                                copy_data(&p.file, out, &a.target_path, &|| ctx.is_cancelled())?;
                        }
                        Ok(())
                    })?;
                    Ok(WrittenOut {
                        path: show(&target),
                        bytes: total,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_encoding_convert",
            "Re-encode a text file from one encoding to another.",
        )
        .destructive()
        .timeout_s(300),
        move |_ctx, a: ConvertArgs| {
            let c = c.clone();
            async move {
                codec(&a.source_encoding)?;
                codec(&a.target_encoding)?;
                errors_mode(&a.errors)?;
                let src = c.existing_file(&a.file_path)?;
                let target = c.target(&a.target_path)?;
                blocking(move || {
                    // Made before the conversion is tried, as automation-file makes it.
                    if let Some(parent) = target.parent() {
                        c.roots.create_dir_all(parent, &a.target_path)?;
                    }
                    let raw = src.bytes()?;
                    let text = decode_text(&raw, &a.source_encoding, &a.errors)?;
                    let bytes = encode_text(&text, &a.target_encoding, &a.errors)?;
                    c.write_atomic(&target, &a.target_path, &bytes)?;
                    Ok(WrittenOut {
                        path: show(&target),
                        bytes: bytes.len() as u64,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_line_count",
            "Count the lines of a text file (\\n, \\r\\n or a lone \\r ends a line, as Python reads text; a final line end adds no line).",
        )
        .timeout_s(300),
        move |ctx: ToolContext, a: LineCountArgs| {
            let c = c.clone();
            async move {
                codec(&a.encoding)?;
                match c.small_file(&a.file_path)? {
                    FileInput::Read { path, bytes } => count_lines(&path, &bytes, &a.encoding),
                    FileInput::Later(opened) => {
                        blocking(move || {
                            let raw = opened.bytes_until(&|| ctx.is_cancelled())?;
                            count_lines(&opened.path, &raw, &a.encoding)
                        })
                        .await
                    }
                }
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_sed_replace",
            "Replace text or regex matches in a file in place; answers the count.",
        )
        .destructive()
        .timeout_s(300),
        move |_ctx, a: SedArgs| {
            let c = c.clone();
            async move {
                non_negative("count", a.count)?;
                if a.pattern.is_empty() {
                    return Err(ToolError::bad_argument("pattern must not be empty"));
                }
                codec(&a.encoding)?;
                let re = if a.regex {
                    Some(TextPattern::new(&a.pattern, Flags::default())?)
                } else {
                    None
                };
                let src = c.existing_file(&a.file_path)?;
                blocking(move || {
                    let raw = src.bytes()?;
                    let text = decode_text(&raw, &a.encoding, "strict")?;
                    let limit = a.count as usize;
                    let (new, hits) = match &re {
                        Some(re) => {
                            let found = re.count(&text)?;
                            let hits = if limit == 0 { found } else { found.min(limit) };
                            let rep = python_replacement(&a.replacement);
                            (re.replacen(&text, limit, &rep)?, hits)
                        }
                        None => {
                            let found = text.matches(&a.pattern).count();
                            let hits = if limit == 0 { found } else { found.min(limit) };
                            (text.replacen(&a.pattern, &a.replacement, hits), hits)
                        }
                    };
                    if hits > 0 {
                        let bytes = encode_text(&new, &a.encoding, "strict")?;
                        c.write_atomic(&src.path, &a.file_path, &bytes)?;
                    }
                    Ok(SedOut {
                        path: show(&src.path),
                        replacements: hits as u64,
                    })
                })
                .await
            }
        },
    );
}

/// Turns a Python `re.sub` replacement (`\1`, `\g<1>`, `\g<name>`, `\\`) into the regex crate's
/// (`${1}`, `${name}`), escaping a literal `$`.
pub(crate) fn python_replacement(rep: &str) -> String {
    let mut out = String::with_capacity(rep.len());
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut n = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        n.push(d);
                        chars.next();
                        if n.len() == 2 {
                            break;
                        }
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|&c| c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_replacements() {
        assert_eq!(
            python_replacement(r"\1-\g<2>-\g<name>"),
            "${1}-${2}-${name}"
        );
        assert_eq!(python_replacement("cost $5"), "cost $$5");
    }
}
