//! Structured data: dotted-path edits of JSON and YAML files, CSV filtering and conversion, JSON
//! Lines. Parquet (FA_parquet_read/_write, FA_csv_to_parquet) is in parquet.rs, behind the cargo
//! feature `parquet`: the arrow and parquet crates add about half again to this crate's build.

use std::{io::Write, path::Path, sync::Arc};

use maljan_server::{Registry, ToolError, ToolMeta, Write as Create, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Config,
    encoding::{decode_text, encode_text},
    keypath::{delete_in, set_in, split, walk},
    paths::{Opened, io_err, show},
};

pub(crate) fn default_utf8() -> String {
    "utf-8".into()
}
pub(crate) fn default_comma() -> String {
    ",".into()
}

#[derive(Clone, Copy)]
enum Format {
    Json,
    Yaml,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    /// The file.
    path: String,
    /// Dotted path: `a.b.0.c` (numbers index lists; negative numbers count from the end).
    key_path: String,
    /// Answered when the path is absent.
    #[serde(default)]
    #[schemars(default)]
    default: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    /// The file (rewritten atomically).
    path: String,
    /// Dotted path; missing objects on the way are created.
    key_path: String,
    /// The value to store (any JSON).
    value: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    /// The file (rewritten atomically).
    path: String,
    /// Dotted path of the value to remove.
    key_path: String,
}

#[derive(Serialize, JsonSchema)]
struct GetOut {
    /// The value at the path, or `default`.
    value: Value,
    found: bool,
}

#[derive(Serialize, JsonSchema)]
struct ChangedOut {
    path: String,
    /// False when a delete found nothing to remove.
    changed: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CsvFilterArgs {
    /// The CSV file read (its first row is the header).
    src: String,
    /// The CSV file written.
    target: String,
    /// Keep only these columns, in this order.
    #[serde(default)]
    columns: Option<Vec<String>>,
    /// Keep only rows whose value in this column…
    #[serde(default)]
    where_column: Option<String>,
    /// …equals this.
    #[serde(default)]
    where_equals: Option<String>,
    /// The field delimiter (one character).
    #[serde(default = "default_comma")]
    #[schemars(default = "default_comma")]
    delimiter: String,
    /// The files' encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CsvToJsonlArgs {
    /// The CSV file read (its first row is the header).
    src: String,
    /// The JSON Lines file written, one object per row.
    target: String,
    /// The field delimiter (one character).
    #[serde(default = "default_comma")]
    #[schemars(default = "default_comma")]
    delimiter: String,
    /// The files' encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct JsonlIterArgs {
    /// The JSON Lines file.
    path: String,
    /// Return at most this many records.
    #[serde(default)]
    limit: Option<i64>,
    /// Its encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct JsonlAppendArgs {
    /// The JSON Lines file (created if missing).
    path: String,
    /// The object appended as one line.
    record: Map<String, Value>,
    /// Its encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Serialize, JsonSchema)]
struct RowsOut {
    target: String,
    /// Rows written.
    rows: u64,
}

#[derive(Serialize, JsonSchema)]
struct RecordsOut {
    records: Vec<Map<String, Value>>,
    count: usize,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    for (format, prefix, what) in [
        (Format::Json, "FA_json", "JSON"),
        (Format::Yaml, "FA_yaml", "YAML"),
    ] {
        let c = cfg.clone();
        reg.add(
            ToolMeta::new(
                format!("{prefix}_get"),
                format!("Read the value at a dotted key path in a {what} file."),
            )
            .timeout_s(60),
            move |_ctx, a: GetArgs| {
                let c = c.clone();
                async move {
                    let path = c.existing_file(&a.path)?;
                    let segments = split(&a.key_path);
                    blocking(move || {
                        let doc = load(&path, &a.path, format)?;
                        Ok(match walk(&doc, &segments) {
                            Some(v) => GetOut {
                                value: v.clone(),
                                found: true,
                            },
                            None => GetOut {
                                value: a.default,
                                found: false,
                            },
                        })
                    })
                    .await
                }
            },
        );

        let c = cfg.clone();
        reg.add(
            ToolMeta::new(
                format!("{prefix}_set"),
                format!("Set the value at a dotted key path in a {what} file, creating objects on the way."),
            )
            .destructive()
            .timeout_s(60),
            move |_ctx, a: SetArgs| {
                edit(c.clone(), a.path, a.key_path, format, move |doc, segments| {
                    set_in(doc, segments, a.value).map(|()| true)
                })
            },
        );

        let c = cfg.clone();
        reg.add(
            ToolMeta::new(
                format!("{prefix}_delete"),
                format!("Remove the value at a dotted key path in a {what} file."),
            )
            .destructive()
            .timeout_s(60),
            move |_ctx, a: DeleteArgs| {
                edit(c.clone(), a.path, a.key_path, format, |doc, segments| {
                    Ok(delete_in(doc, segments))
                })
            },
        );
    }

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_csv_filter",
            "Copy a CSV keeping chosen columns and/or rows whose column equals a value.",
        )
        .destructive()
        .timeout_s(600),
        move |_ctx, a: CsvFilterArgs| {
            let c = c.clone();
            async move {
                if a.where_column.is_some() != a.where_equals.is_some() {
                    return Err(ToolError::bad_argument(
                        "where_column and where_equals must be given together",
                    ));
                }
                let delim = delimiter(&a.delimiter)?;
                let src = c.existing_file(&a.src)?;
                let target = c.target(&a.target)?;
                blocking(move || {
                    let (header, mut rdr) = read_csv(&src, &a.src, &a.encoding, delim)?;
                    if header.is_empty() {
                        return Err(ToolError::bad_argument(format!(
                            "{} has no header row",
                            a.src
                        ))
                        .with_remediation("give a CSV whose first line names its columns"));
                    }
                    let col = |name: &str| header.iter().position(|h| h == name);
                    let keep: Vec<usize> = match &a.columns {
                        Some(cols) => {
                            let missing: Vec<&str> = cols
                                .iter()
                                .filter(|n| col(n).is_none())
                                .map(String::as_str)
                                .collect();
                            if !missing.is_empty() {
                                return Err(ToolError::bad_argument(format!(
                                    "column(s) not in the CSV header: {}",
                                    missing.join(", ")
                                )));
                            }
                            cols.iter().filter_map(|n| col(n)).collect()
                        }
                        None => (0..header.len()).collect(),
                    };
                    let filter = match (&a.where_column, &a.where_equals) {
                        (Some(wc), Some(we)) => Some((
                            col(wc).ok_or_else(|| {
                                ToolError::bad_argument(format!(
                                    "where_column '{wc}' is not in the CSV header"
                                ))
                            })?,
                            we.clone(),
                        )),
                        _ => None,
                    };
                    // Python's csv writer ends rows with \r\n.
                    let mut w = csv::WriterBuilder::new()
                        .delimiter(delim)
                        .terminator(csv::Terminator::CRLF)
                        .from_writer(Vec::new());
                    w.write_record(keep.iter().map(|&i| header[i].as_str()))
                        .map_err(csv_err(&a.target))?;
                    let mut rows = 0u64;
                    for rec in rdr.records() {
                        let rec = rec.map_err(csv_err(&a.src))?;
                        if let Some((i, want)) = &filter
                            && rec.get(*i).unwrap_or("") != want
                        {
                            continue;
                        }
                        w.write_record(keep.iter().map(|&i| rec.get(i).unwrap_or("")))
                            .map_err(csv_err(&a.target))?;
                        rows += 1;
                    }
                    let out = w
                        .into_inner()
                        .map_err(|e| ToolError::tool_failed(e.to_string()))?;
                    let out = String::from_utf8(out)
                        .map_err(|e| ToolError::tool_failed(e.to_string()))?;
                    write_rows(&c, &target, &a.target, &out, &a.encoding, rows)
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_csv_to_jsonl",
            "Convert a CSV file to JSON Lines, one object per row keyed by the header.",
        )
        .destructive()
        .timeout_s(600),
        move |_ctx, a: CsvToJsonlArgs| {
            let c = c.clone();
            async move {
                let delim = delimiter(&a.delimiter)?;
                let src = c.existing_file(&a.src)?;
                let target = c.target(&a.target)?;
                blocking(move || {
                    let (header, mut rdr) = read_csv(&src, &a.src, &a.encoding, delim)?;
                    let mut out = String::new();
                    let mut rows = 0u64;
                    for rec in rdr.records() {
                        let rec = rec.map_err(csv_err(&a.src))?;
                        let mut obj: Map<String, Value> = header
                            .iter()
                            .enumerate()
                            .map(|(i, h)| {
                                (
                                    h.clone(),
                                    rec.get(i).map(Value::from).unwrap_or(Value::Null),
                                )
                            })
                            .collect();
                        // A row longer than the header keeps its extra cells, as Python's
                        // DictReader does under the key None (which json.dumps writes "null").
                        if rec.len() > header.len() {
                            let extra = rec.iter().skip(header.len()).map(Value::from).collect();
                            obj.insert("null".into(), Value::Array(extra));
                        }
                        out.push_str(&python_json(&Value::Object(obj)));
                        out.push('\n');
                        rows += 1;
                    }
                    write_rows(&c, &target, &a.target, &out, &a.encoding, rows)
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_jsonl_iter",
            "Read the objects of a JSON Lines file (blank lines skipped).",
        )
        .timeout_s(120),
        move |_ctx, a: JsonlIterArgs| {
            let c = c.clone();
            async move {
                let limit = optional_limit(a.limit)?;
                let path = c.existing_file(&a.path)?;
                blocking(move || {
                    let text = decode_text(&path.bytes()?, &a.encoding, "strict")?;
                    let mut records = Vec::new();
                    for (n, line) in text.lines().enumerate() {
                        if limit.is_some_and(|l| records.len() >= l) {
                            break;
                        }
                        if line.trim().is_empty() {
                            continue;
                        }
                        match serde_json::from_str::<Value>(line) {
                            Ok(Value::Object(m)) => records.push(m),
                            Ok(_) => {
                                return Err(ToolError::unsupported_format(format!(
                                    "{}:{} is not a JSON object",
                                    a.path,
                                    n + 1
                                )));
                            }
                            Err(e) => {
                                return Err(ToolError::unsupported_format(format!(
                                    "{}:{} is not valid JSON: {e}",
                                    a.path,
                                    n + 1
                                )));
                            }
                        }
                    }
                    Ok(RecordsOut {
                        count: records.len(),
                        records,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_jsonl_append",
            "Append one object as a line to a JSON Lines file.",
        )
        .writes()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx, a: JsonlAppendArgs| {
            let c = c.clone();
            async move {
                let path = c.target(&a.path)?;
                let line = format!("{}\n", python_json(&Value::Object(a.record)));
                let bytes = encode_text(&line, &a.encoding, "strict")?;
                blocking(move || {
                    if let Some(parent) = path.parent() {
                        c.roots.create_dir_all(parent, &a.path)?;
                    }
                    let mut f = c.roots.create_file(&path, &a.path, Create::Append)?;
                    f.write_all(&bytes).map_err(io_err(&a.path))?;
                    Ok(ChangedOut {
                        path: show(&path),
                        changed: true,
                    })
                })
                .await
            }
        },
    );
}

/// FA_json_set/delete and FA_yaml_set/delete: load the document, apply `change` at the key path
/// (false: nothing changed) and rewrite the file atomically only when something did.
async fn edit(
    c: Arc<Config>,
    given: String,
    key_path: String,
    format: Format,
    change: impl FnOnce(&mut Value, &[String]) -> Result<bool, ToolError> + Send + 'static,
) -> Result<ChangedOut, ToolError> {
    let segments = split(&key_path);
    if segments.is_empty() {
        return Err(ToolError::bad_argument("key_path must not be empty"));
    }
    let path = c.existing_file(&given)?;
    blocking(move || {
        let mut doc = load(&path, &given, format)?;
        let changed = change(&mut doc, &segments)?;
        if changed {
            store(&c, &path.path, &given, format, &doc)?;
        }
        Ok(ChangedOut {
            path: show(&path.path),
            changed,
        })
    })
    .await
}

pub(crate) fn delimiter(d: &str) -> Result<u8, ToolError> {
    match d.as_bytes() {
        [b] => Ok(*b),
        _ => Err(ToolError::bad_argument(
            "delimiter must be exactly one ASCII character",
        )),
    }
}

/// A CSV file decoded from `encoding` (strictly), ready to read, and its header row.
pub(crate) fn read_csv(
    opened: &Opened,
    given: &str,
    encoding: &str,
    delimiter: u8,
) -> Result<(Vec<String>, csv::Reader<std::io::Cursor<String>>), ToolError> {
    let text = decode_text(&opened.bytes()?, encoding, "strict")?;
    // Flexible: a short or long row is the caller's to judge, not a parse error.
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .from_reader(std::io::Cursor::new(text));
    let header = rdr
        .headers()
        .map_err(csv_err(given))?
        .iter()
        .map(String::from)
        .collect();
    Ok((header, rdr))
}

pub(crate) fn csv_err(given: &str) -> impl Fn(csv::Error) -> ToolError + '_ {
    move |e| ToolError::unsupported_format(format!("{given} is not readable CSV: {e}"))
}

fn load(opened: &Opened, given: &str, format: Format) -> Result<Value, ToolError> {
    let text = opened.text()?;
    match format {
        Format::Json => serde_json::from_str(&text)
            .map_err(|e| ToolError::unsupported_format(format!("{given} is not valid JSON: {e}"))),
        Format::Yaml if text.trim().is_empty() => Ok(Value::Null),
        Format::Yaml => serde_yaml_ng::from_str(&text).map_err(|e| {
            ToolError::unsupported_format(format!("{given} is not YAML this tool can edit: {e}"))
        }),
    }
}

fn store(
    c: &Config,
    path: &Path,
    given: &str,
    format: Format,
    doc: &Value,
) -> Result<(), ToolError> {
    let text = match format {
        Format::Json => serde_json::to_string_pretty(doc)
            .map(|s| s + "\n")
            .map_err(|e| ToolError::tool_failed(e.to_string()))?,
        Format::Yaml => {
            crate::yaml11::to_string(doc).map_err(|e| ToolError::tool_failed(e.to_string()))?
        }
    };
    c.write_atomic(path, given, text.as_bytes())
}

/// Writes converted rows to `target` in `encoding` and says how many.
fn write_rows(
    c: &Config,
    target: &Path,
    given: &str,
    text: &str,
    encoding: &str,
    rows: u64,
) -> Result<RowsOut, ToolError> {
    if let Some(parent) = target.parent() {
        c.roots.create_dir_all(parent, given)?;
    }
    c.write_atomic(target, given, &encode_text(text, encoding, "strict")?)?;
    Ok(RowsOut {
        target: show(target),
        rows,
    })
}

/// JSON as Python's `json.dumps(value, ensure_ascii=False)` writes it: `", "` between items and
/// `": "` after a key, so a line appended by maljan reads like one automation-file appended.
pub(crate) fn python_json(value: &Value) -> String {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    serde::Serialize::serialize(value, &mut ser).expect("a JSON value serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// automation-file's `limit: int | None`: absent means all, a negative number is refused.
pub(crate) fn optional_limit(limit: Option<i64>) -> Result<Option<usize>, ToolError> {
    limit
        .map(|n| non_negative("limit", n).map(|n| n as usize))
        .transpose()
}

/// An integer argument that must not be negative (automation-file's schemas say "integer", so a
/// negative one passes the schema and is refused here, naming the argument).
pub(crate) fn non_negative(name: &str, value: i64) -> Result<u64, ToolError> {
    u64::try_from(value).map_err(|_| ToolError::bad_argument(format!("{name} must be >= 0")))
}
