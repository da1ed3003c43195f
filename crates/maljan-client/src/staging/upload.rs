//! Uploading a sample through put_sample (whole, base64) or put_sample_begin / _chunk / _finish
//! (4 MiB raw per chunk). Every call goes through the runtime's call path (breaker, cap,
//! timeout, ledger), and the ledger gets a summary — never the content. The file is read one
//! chunk at a time, the next chunk read and encoded while the current one is on the wire, so a
//! 100 MiB sample never sits in memory whole; its sha256 is the one the job computed at start.

use std::io::Read;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::UploadProgress;
use crate::job::{CallRecord, Sample, ServerHandle};

/// Raw bytes per put_sample_chunk.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Samples over this size go through the chunked calls (when the server has all three).
pub const CHUNKED_ABOVE: u64 = 8 * 1024 * 1024;

/// Uploads `sample` to `server`, returning the path the server gave back.
pub async fn upload(
    server: &ServerHandle,
    sample: &Sample,
    chunked: bool,
) -> Result<String, String> {
    let filename = super::safe_name(&sample.name);
    let progress = |sent: u64| {
        server.job().report_progress(&UploadProgress {
            server: server.name().to_string(),
            sent,
            total: sample.size,
        })
    };
    progress(0);
    if !chunked {
        let path = sample.path.clone();
        let size = sample.size;
        let content =
            tokio::task::spawn_blocking(move || read_part(std::fs::File::open(path)?, size))
                .await
                .map_err(|e| format!("reading the sample: {e}"))?
                .map_err(|e| format!("reading the sample: {e}"))?
                .1;
        let mut args = obj(json!({"filename": filename, "sha256": sample.sha256}));
        args.insert("content_b64".into(), Value::String(content));
        let summary = json!({"filename": filename, "sha256": sample.sha256, "size": sample.size});
        let rec = server.call_staging("put_sample", args, summary).await;
        let path = returned(&rec, "path")?;
        progress(sample.size);
        return Ok(path);
    }

    let summary = json!({"filename": filename, "sha256": sample.sha256, "size": sample.size});
    let args = obj(json!({"filename": filename, "sha256": sample.sha256, "size": sample.size}));
    let rec = server.call_staging("put_sample_begin", args, summary).await;
    let upload_id = returned(&rec, "upload_id")?;

    let parts = sample.size.div_ceil(CHUNK_BYTES);
    let file = std::fs::File::open(&sample.path).map_err(|e| format!("reading the sample: {e}"))?;
    let read_next = |file: std::fs::File, seq: u64| {
        let n = CHUNK_BYTES.min(sample.size - seq * CHUNK_BYTES);
        tokio::task::spawn_blocking(move || read_part(file, n))
    };
    let mut next = (parts > 0).then(|| read_next(file, 0));
    let mut sent = 0u64;
    for seq in 0..parts {
        let Some(pending) = next.take() else { break };
        let (file, content) = pending
            .await
            .map_err(|e| format!("reading the sample: {e}"))?
            .map_err(|e| format!("reading the sample: {e}"))?;
        let raw = (content.len() as u64 / 4) * 3 - padding(&content);
        if seq + 1 < parts {
            next = Some(read_next(file, seq + 1));
        }
        // Built by hand: json! would copy the 5.6 MB string.
        let mut args = obj(json!({"upload_id": upload_id, "seq": seq}));
        args.insert("content_b64".into(), Value::String(content));
        let summary =
            json!({"upload_id": upload_id, "seq": seq, "size": raw, "content": "not recorded"});
        let rec = server.call_staging("put_sample_chunk", args, summary).await;
        let acked = answer(&rec)?.get("seq").and_then(Value::as_u64);
        if acked != Some(seq) {
            return Err(format!(
                "put_sample_chunk {seq} was acknowledged as {acked:?}"
            ));
        }
        sent += raw;
        progress(sent);
    }
    let summary = json!({"upload_id": upload_id});
    let rec = server
        .call_staging("put_sample_finish", obj(summary.clone()), summary)
        .await;
    returned(&rec, "path")
}

/// Reads exactly `n` bytes and encodes them; a sample that got shorter since the job hashed it
/// is an error (the server would refuse its digest anyway; this says why).
fn read_part(mut file: std::fs::File, n: u64) -> std::io::Result<(std::fs::File, String)> {
    let mut buf = vec![0u8; n as usize];
    file.read_exact(&mut buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            std::io::Error::other("the sample got shorter since the job started")
        } else {
            e
        }
    })?;
    Ok((file, base64::engine::general_purpose::STANDARD.encode(&buf)))
}

fn padding(b64: &str) -> u64 {
    b64.bytes().rev().take_while(|&b| b == b'=').count() as u64
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The call's JSON answer, or why it failed (the tool's own error, a transport failure, …).
fn answer(rec: &CallRecord) -> Result<Value, String> {
    if let Some(e) = &rec.error {
        return Err(format!(
            "{} answered {}: {}",
            rec.tool,
            e.code.as_str(),
            e.message
        ));
    }
    rec.json()
        .ok_or_else(|| format!("{} answered without JSON", rec.tool))
}

fn returned(rec: &CallRecord, field: &str) -> Result<String, String> {
    let v = answer(rec)?;
    match v.get(field).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(format!("{} returned no {field}", rec.tool)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_read_exactly_and_a_short_file_is_named() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b"hello world").unwrap();
        let f = std::fs::File::open(tmp.path()).unwrap();
        let (f, a) = read_part(f, 5).unwrap();
        assert_eq!(a, "aGVsbG8=");
        assert_eq!(a.len() as u64 / 4 * 3 - padding(&a), 5);
        let (f, b) = read_part(f, 6).unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD.decode(b).unwrap(),
            b" world"
        );
        let err = read_part(f, 1).unwrap_err();
        assert!(err.to_string().contains("shorter"), "{err}");
    }
}
