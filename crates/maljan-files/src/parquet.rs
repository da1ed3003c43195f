//! Parquet (cargo feature `parquet`): FA_parquet_read, FA_parquet_write and FA_csv_to_parquet,
//! with automation-file's names, parameters and meanings (it uses pyarrow).
//!
//! Behind a feature because the arrow and parquet crates cost more to build than the rest of this
//! crate's own dependencies (figures in this crate's Cargo.toml). Records travel as JSON objects:
//! arrow-json infers a schema from the records written and renders read batches back to JSON.
//! Files are written with snappy compression (pyarrow's default); snappy, gzip, lz4 and
//! uncompressed files are read. Other codecs are refused with `unsupported_format`.

use std::{path::Path, sync::Arc};

use arrow_array::{
    Array, ArrayAccessor, ArrayRef, RecordBatch,
    builder::{ListBuilder, StringBuilder},
    cast::AsArray,
};
use arrow_json::{
    Encoder, EncoderFactory, EncoderOptions,
    writer::{JsonArray, NullableEncoder, WriterBuilder},
};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use base64::Engine;
use maljan_server::{Registry, ToolError, ToolMeta, blocking};
use parquet::{
    arrow::{ArrowWriter, ProjectionMask, arrow_reader::ParquetRecordBatchReaderBuilder},
    basic::Compression,
    errors::ParquetError,
    file::properties::WriterProperties,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Config,
    data::{csv_err, default_comma, default_utf8, delimiter, read_csv},
    paths::{Opened, show},
};

#[path = "parquet_kinds.rs"]
mod kinds;

/// The most JSON FA_parquet_read answers with: a whole multi-gigabyte file rendered as records
/// would take the server's memory with it. `limit` and `columns` narrow a bigger answer.
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Rows per decoded batch when reading (the reader's memory is about one batch at a time).
const BATCH_ROWS: usize = 8192;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The Parquet file.
    path: String,
    /// Return at most this many rows (the first ones); null = all.
    #[serde(default)]
    limit: Option<i64>,
    /// Return only these columns, in this order; null = all. An unknown name is an error.
    #[serde(default)]
    columns: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The Parquet file written (replaced atomically; missing parent directories are created).
    path: String,
    /// The rows, one JSON object each. Columns are the union of their keys, in first-seen order;
    /// types are inferred (integers and floats mixed make floats, other mixes make strings).
    records: Vec<Map<String, Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CsvArgs {
    /// The CSV file read (its first row is the header).
    csv_path: String,
    /// The Parquet file written: one string column per header field, as automation-file writes it.
    parquet_path: String,
    /// The field delimiter (one character).
    #[serde(default = "default_comma")]
    #[schemars(default = "default_comma")]
    delimiter: String,
    /// The CSV file's encoding.
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Serialize, JsonSchema)]
struct Column {
    name: String,
    /// The Arrow type: Int64, Float64, Boolean, Utf8, List(…), Struct(…), …
    #[serde(rename = "type")]
    data_type: String,
}

#[derive(Serialize, JsonSchema)]
struct ReadOut {
    path: String,
    /// One object per row, every returned column present (null where the value is null).
    /// Binary values are base64 strings.
    records: Vec<Map<String, Value>>,
    /// Rows returned.
    count: usize,
    /// Rows in the file.
    total_rows: u64,
    /// The returned columns, in order.
    columns: Vec<Column>,
}

#[derive(Serialize, JsonSchema)]
struct WriteOut {
    path: String,
    /// Rows written.
    rows: u64,
    /// The columns written, in order.
    columns: Vec<Column>,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_parquet_read",
            "Read a Parquet file's rows as JSON objects, optionally only some columns and the first `limit` rows.",
        )
        .timeout_s(300),
        move |_ctx, a: ReadArgs| {
            let c = c.clone();
            async move {
                let limit = crate::data::optional_limit(a.limit)?;
                let path = c.existing_file(&a.path)?;
                blocking(move || read(path, &a.path, limit, a.columns.as_deref())).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_parquet_write",
            "Write JSON objects as the rows of a Parquet file (snappy), inferring the column types.",
        )
        .destructive()
        .timeout_s(300),
        move |_ctx, a: WriteArgs| {
            let c = c.clone();
            async move {
                let path = c.target(&a.path)?;
                blocking(move || {
                    let batch = records_to_batch(&a.records)?;
                    store(&c, &path, &a.path, &batch)
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_csv_to_parquet",
            "Convert a CSV file (header row first) to Parquet, every column a string as automation-file writes it (a long row's extra cells as a list in a last column `None`).",
        )
        .destructive()
        .timeout_s(600),
        move |_ctx, a: CsvArgs| {
            let c = c.clone();
            async move {
                let delim = delimiter(&a.delimiter)?;
                let src = c.existing_file(&a.csv_path)?;
                let target = c.target(&a.parquet_path)?;
                blocking(move || {
                    let (header, rows) = read_csv(&src, &a.csv_path, &a.encoding, delim)?;
                    let batch = csv_to_batch(header, rows, &a.csv_path)?;
                    store(&c, &target, &a.parquet_path, &batch)
                })
                .await
            }
        },
    );
}

fn columns_of(schema: &Schema) -> Vec<Column> {
    schema
        .fields()
        .iter()
        .map(|f| Column {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
        })
        .collect()
}

fn parquet_err(given: &str) -> impl Fn(ParquetError) -> ToolError + '_ {
    move |e| unreadable(given, e.to_string())
}

/// A file this build cannot decode. A codec left out of the build is said as such, with the way
/// round it; anything else is a file that is not (valid) Parquet.
fn unreadable(given: &str, why: String) -> ToolError {
    if why.contains("Disabled feature") || why.contains("codec") {
        ToolError::unsupported_format(format!("{given} is compressed with a codec this build cannot read: {why}"))
            .with_remediation(
                "rewrite the file with snappy, gzip, lz4 or no compression (pyarrow: compression='snappy')",
            )
    } else {
        ToolError::unsupported_format(format!(
            "{given} is not a Parquet file this tool can read: {why}"
        ))
    }
}

fn read(
    opened: Opened,
    given: &str,
    limit: Option<usize>,
    columns: Option<&[String]>,
) -> Result<ReadOut, ToolError> {
    let path = show(&opened.path);
    let file = opened.file;
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(parquet_err(given))?
        .with_batch_size(BATCH_ROWS);
    let total_rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
    let schema = builder.schema().clone();
    if let Some(wanted) = columns {
        let unknown: Vec<&str> = wanted
            .iter()
            .filter(|n| schema.index_of(n).is_err())
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            let available: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(ToolError::bad_argument(format!(
                "column(s) not in {given}: {}",
                unknown.join(", ")
            ))
            .with_remediation(format!(
                "name columns the file has: {}",
                available.join(", ")
            )));
        }
        let indices: Vec<usize> = wanted
            .iter()
            .filter_map(|n| schema.index_of(n).ok())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        builder = builder.with_projection(mask);
    }
    if let Some(n) = limit {
        builder = builder.with_limit(n);
    }
    let reader = builder.build().map_err(parquet_err(given))?;
    // The projected schema keeps the file's column order; the answer follows the caller's.
    let projected = reader_schema(&schema, columns);

    let mut json = Vec::new();
    {
        let mut writer = WriterBuilder::new()
            .with_explicit_nulls(true)
            .with_encoder_factory(Arc::new(Base64Binary))
            .build::<_, JsonArray>(&mut json);
        for batch in reader {
            let batch = batch.map_err(|e| arrow_read_err(given, e))?;
            writer
                .write(&batch)
                .map_err(|e| ToolError::tool_failed(format!("rendering {given} as JSON: {e}")))?;
            if writer.get_ref().len() > MAX_ANSWER {
                return Err(ToolError::bad_argument(format!(
                    "the rows of {given} make more than {MAX_ANSWER} bytes of JSON"
                ))
                .with_remediation("pass limit (and columns) to read a part of the file"));
            }
        }
        writer
            .finish()
            .map_err(|e| ToolError::tool_failed(format!("rendering {given} as JSON: {e}")))?;
    }
    // An empty answer is written as nothing at all, not `[]`.
    let mut records: Vec<Map<String, Value>> = if json.is_empty() {
        Vec::new()
    } else {
        serde_json::from_slice(&json)
            .map_err(|e| ToolError::tool_failed(format!("rendering {given} as JSON: {e}")))?
    };
    if let Some(wanted) = columns {
        for record in &mut records {
            let mut ordered = Map::with_capacity(wanted.len());
            for name in wanted {
                if let Some(v) = record.remove(name) {
                    ordered.insert(name.clone(), v);
                }
            }
            *record = ordered;
        }
    }
    Ok(ReadOut {
        path,
        count: records.len(),
        records,
        total_rows,
        columns: columns_of(&projected),
    })
}

/// The schema of the answer: the file's, or the chosen columns in the caller's order.
fn reader_schema(schema: &SchemaRef, columns: Option<&[String]>) -> Schema {
    match columns {
        None => schema.as_ref().clone(),
        Some(wanted) => {
            let mut seen = std::collections::HashSet::new();
            Schema::new(
                wanted
                    .iter()
                    .filter(|n| seen.insert(n.as_str()))
                    .filter_map(|n| schema.field_with_name(n).ok().cloned())
                    .collect::<Vec<Field>>(),
            )
        }
    }
}

fn arrow_read_err(given: &str, e: ArrowError) -> ToolError {
    unreadable(given, e.to_string())
}

/// The records as one batch, with the schema arrow-json infers from them.
fn records_to_batch(records: &[Map<String, Value>]) -> Result<RecordBatch, ToolError> {
    let refuse = |why: String| {
        ToolError::bad_argument(format!("the records do not make one table: {why}")).with_remediation(
            "give each key values of one kind in every record (numbers, strings, booleans, lists or objects)",
        )
    };
    let bad = |e: ArrowError| refuse(e.to_string());
    // Refused as automation-file (pyarrow) refuses them, not written as text.
    if let Some(why) = kinds::mixed_kinds(records) {
        return Err(refuse(why));
    }
    let schema = arrow_json::reader::infer_json_schema_from_iterator(
        records.iter().map(|r| Ok(Value::Object(r.clone()))),
    )
    .map_err(bad)?;
    if schema.fields().is_empty() {
        return Err(ToolError::bad_argument(
            "the records have no keys: a Parquet file needs at least one column",
        ));
    }
    let schema = Arc::new(schema);
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        // A key inferred as a string column may hold numbers or booleans in some records.
        .with_coerce_primitive(true)
        .build_decoder()
        .map_err(bad)?;
    decoder.serialize(records).map_err(bad)?;
    Ok(decoder
        .flush()
        .map_err(bad)?
        .unwrap_or_else(|| RecordBatch::new_empty(schema)))
}

/// The CSV as one batch of nullable string columns named by the header. A short row's missing
/// fields are null (csv.DictReader's restval=None); a long row's extra cells are kept as a list
/// in a last column named `None`, where csv.DictReader puts them (restkey=None) and pyarrow
/// writes them. Rows without extras have null there; the column exists only when a row has some.
fn csv_to_batch(
    header: Vec<String>,
    mut rows: csv::Reader<impl std::io::Read>,
    given: &str,
) -> Result<RecordBatch, ToolError> {
    if header.iter().all(String::is_empty) {
        return Err(ToolError::unsupported_format(format!(
            "{given} has no header row"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = header.iter().find(|h| !seen.insert(h.as_str())) {
        return Err(ToolError::unsupported_format(format!(
            "{given} names column '{dup}' twice in its header"
        ))
        .with_remediation("rename one of the columns"));
    }
    let mut builders: Vec<StringBuilder> = header.iter().map(|_| StringBuilder::new()).collect();
    let mut extras = ListBuilder::new(StringBuilder::new());
    let mut ragged = false;
    for rec in rows.records() {
        let rec = rec.map_err(csv_err(given))?;
        for (i, b) in builders.iter_mut().enumerate() {
            b.append_option(rec.get(i));
        }
        if rec.len() > header.len() {
            ragged = true;
            for cell in rec.iter().skip(header.len()) {
                extras.values().append_value(cell);
            }
            extras.append(true);
        } else {
            extras.append(false);
        }
    }
    if ragged && seen.contains(EXTRAS) {
        return Err(ToolError::unsupported_format(format!(
            "{given} has rows longer than its header and a column named '{EXTRAS}' already"
        )));
    }
    let mut fields: Vec<Field> = header
        .iter()
        .map(|h| Field::new(h, DataType::Utf8, true))
        .collect();
    let mut arrays: Vec<ArrayRef> = builders
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    if ragged {
        let list = extras.finish();
        fields.push(Field::new(EXTRAS, list.data_type().clone(), true));
        arrays.push(Arc::new(list));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| ToolError::tool_failed(format!("building the table of {given}: {e}")))
}

/// The column of a long row's extra cells: Python's `str(None)`, as pyarrow names the key None.
const EXTRAS: &str = "None";

/// Writes the batch as a snappy-compressed Parquet file, atomically.
fn store(c: &Config, path: &Path, given: &str, batch: &RecordBatch) -> Result<WriteOut, ToolError> {
    let failed = |e: ParquetError| ToolError::tool_failed(format!("writing {given}: {e}"));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).map_err(failed)?;
    writer.write(batch).map_err(failed)?;
    writer.close().map_err(failed)?;
    if let Some(parent) = path.parent() {
        c.roots.create_dir_all(parent, given)?;
    }
    c.write_atomic(path, given, &out)?;
    Ok(WriteOut {
        path: show(path),
        rows: batch.num_rows() as u64,
        columns: columns_of(&batch.schema()),
    })
}

/// Renders binary columns as base64 strings (arrow-json's own choice is hex).
#[derive(Debug)]
struct Base64Binary;

struct Base64Of<A>(A);

impl<'a, A: ArrayAccessor<Item = &'a [u8]>> Encoder for Base64Of<A> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'"');
        out.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(self.0.value(idx))
                .as_bytes(),
        );
        out.push(b'"');
    }
}

impl EncoderFactory for Base64Binary {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let encoder: Box<dyn Encoder + 'a> = match array.data_type() {
            DataType::Binary => Box::new(Base64Of(array.as_binary::<i32>())),
            DataType::LargeBinary => Box::new(Base64Of(array.as_binary::<i64>())),
            DataType::FixedSizeBinary(_) => Box::new(Base64Of(array.as_fixed_size_binary())),
            DataType::BinaryView => Box::new(Base64Of(array.as_binary_view())),
            _ => return Ok(None),
        };
        Ok(Some(NullableEncoder::new(encoder, array.nulls().cloned())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objects(v: Value) -> Vec<Map<String, Value>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_object().unwrap().clone())
            .collect()
    }

    #[test]
    fn inferred_types_follow_the_values() {
        let batch = records_to_batch(&objects(json!([
            {"i": 1, "f": 1, "s": "x", "b": true, "n": null},
            {"i": 2, "f": 2.5, "s": null, "b": false, "n": "two", "late": [1, 2]}
        ])))
        .unwrap();
        let cols: Vec<(String, String)> = columns_of(&batch.schema())
            .into_iter()
            .map(|c| (c.name, c.data_type))
            .collect();
        assert_eq!(cols[0], ("i".into(), "Int64".into()));
        assert_eq!(cols[1], ("f".into(), "Float64".into()));
        assert_eq!(cols[2], ("s".into(), "Utf8".into()));
        assert_eq!(cols[3], ("b".into(), "Boolean".into()));
        assert_eq!(cols[4], ("n".into(), "Utf8".into()));
        assert_eq!(cols[5].0, "late");
        assert_eq!(batch.num_rows(), 2);
    }

    #[test]
    fn records_that_cannot_share_a_column_are_refused() {
        let err = records_to_batch(&objects(json!([{"a": 1}, {"a": {"x": 1}}]))).unwrap_err();
        assert_eq!(err.code.as_str(), "bad_argument", "{}", err.message);
        let err = records_to_batch(&objects(json!([{"a": 1}, {"a": "two"}]))).unwrap_err();
        assert!(
            err.message.contains("numbers and strings"),
            "{}",
            err.message
        );
        let err = records_to_batch(&objects(json!([{}]))).unwrap_err();
        assert!(err.message.contains("no keys"), "{}", err.message);
    }

    fn csv_batch(text: &str, delimiter: u8) -> Result<RecordBatch, ToolError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, text).unwrap();
        let opened = crate::paths::rooted_at(dir.path()).existing_file("t.csv")?;
        let (header, rows) = read_csv(&opened, "t.csv", "utf-8", delimiter)?;
        csv_to_batch(header, rows, "t.csv")
    }

    #[test]
    fn csv_short_rows_are_null_and_long_rows_keep_their_extras() {
        let batch = csv_batch("a;b\n1;2\n3\n", b';').unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(
            batch.num_columns(),
            2,
            "no extras column without a long row"
        );
        assert_eq!(batch.column(1).null_count(), 1);
        assert_eq!(batch.column(0).as_string::<i32>().value(1), "3");
        let batch = csv_batch("a,b\n1,2,3,4\n5,6\n", b',').unwrap();
        assert_eq!(batch.schema().field(2).name(), "None");
        assert_eq!(batch.column(2).null_count(), 1);
        let err = csv_batch("None,b\n1,2,3\n", b',').unwrap_err();
        assert!(err.message.contains("named 'None'"), "{}", err.message);
        let err = csv_batch("a,a\n1,2\n", b',').unwrap_err();
        assert!(err.message.contains("'a' twice"), "{}", err.message);
        let err = csv_batch("", b',').unwrap_err();
        assert!(err.message.contains("no header"), "{}", err.message);
        // A header alone makes an empty table that keeps its columns.
        let batch = csv_batch("x,y\n", b',').unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (0, 2));
    }

    #[test]
    fn binary_columns_read_as_base64() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.parquet");
        let bin = arrow_array::BinaryArray::from_iter([Some(b"\x00\xffhi".as_slice()), None]);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "blob",
            DataType::Binary,
            true,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(bin) as ArrayRef]).unwrap();
        let c = crate::paths::rooted_at(dir.path());
        store(&c, &path, "b.parquet", &batch).unwrap();
        let out = read(
            c.existing_file("b.parquet").unwrap(),
            "b.parquet",
            None,
            None,
        )
        .unwrap();
        assert_eq!(out.records[0]["blob"], "AP9oaQ==");
        assert_eq!(out.records[1]["blob"], Value::Null);
        assert_eq!(out.total_rows, 2);
    }
}
