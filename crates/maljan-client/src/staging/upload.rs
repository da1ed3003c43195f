//! Uploading a sample through put_sample (whole, base64) or put_sample_begin / _chunk / _finish
//! (4 MiB raw per chunk, three in flight). Every call goes through the runtime's call path
//! (breaker, cap, timeout, ledger), and the ledger gets a summary — never the content. The file
//! is read one chunk at a time, the next chunk read and encoded while the others are on the wire,
//! so a 100 MiB sample never sits in memory whole; its sha256 is the one the job computed at start.

use std::io::Read;

use base64::Engine;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::UploadProgress;
use crate::job::{CallRecord, Sample, ServerHandle};

/// Raw bytes per put_sample_chunk.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Chunks sent before the first is acknowledged. The server waits a moment for a chunk that
/// overtook its predecessor, so these stay in order.
const CHUNKS_IN_FLIGHT: usize = 3;
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
    let send_chunk = |seq: u64, content: String| {
        let raw = (content.len() as u64 / 4) * 3 - padding(&content);
        // Built by hand: json! would copy the 5.6 MB string.
        let mut args = obj(json!({"upload_id": upload_id, "seq": seq}));
        args.insert("content_b64".into(), Value::String(content));
        let summary =
            json!({"upload_id": upload_id, "seq": seq, "size": raw, "content": "not recorded"});
        async move {
            let rec = server.call_staging("put_sample_chunk", args, summary).await;
            (seq, raw, rec)
        }
    };
    // Several chunks in flight: the server decodes one while the next is on the wire, and a
    // slow link's round trip is paid once, not per chunk. The server keeps them in order.
    let mut in_flight = futures::stream::FuturesOrdered::new();
    let mut next = (parts > 0).then(|| read_next(file, 0));
    let mut sent = 0u64;
    for seq in 0..parts {
        let Some(pending) = next.take() else { break };
        let read = match pending.await {
            Ok(read) => read.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let (file, content) = match read {
            Ok(part) => part,
            Err(e) => return Err(settle(in_flight, format!("reading the sample: {e}")).await),
        };
        if seq + 1 < parts {
            next = Some(read_next(file, seq + 1));
        }
        in_flight.push_back(send_chunk(seq, content));
        if in_flight.len() >= CHUNKS_IN_FLIGHT
            && let Some(done) = in_flight.next().await
        {
            match acknowledged(done) {
                Ok(raw) => sent += raw,
                Err(e) => return Err(settle(in_flight, e).await),
            }
            progress(sent);
        }
    }
    while let Some(done) = in_flight.next().await {
        match acknowledged(done) {
            Ok(raw) => sent += raw,
            Err(e) => return Err(settle(in_flight, e).await),
        }
        progress(sent);
    }
    let summary = json!({"upload_id": upload_id});
    let rec = server
        .call_staging("put_sample_finish", obj(summary.clone()), summary)
        .await;
    returned(&rec, "path")
}

/// Lets the calls still in flight finish (each is recorded in the ledger; dropping one would
/// lose its record) and hands back the first error.
async fn settle<F: Future>(
    mut in_flight: futures::stream::FuturesOrdered<F>,
    error: String,
) -> String {
    while in_flight.next().await.is_some() {}
    error
}

/// The raw size of an acknowledged chunk, or why it was not.
fn acknowledged((seq, raw, rec): (u64, u64, CallRecord)) -> Result<u64, String> {
    let acked = answer(&rec)?.get("seq").and_then(Value::as_u64);
    if acked != Some(seq) {
        return Err(format!(
            "put_sample_chunk {seq} was acknowledged as {acked:?}"
        ));
    }
    Ok(raw)
}

/// Reads exactly `n` bytes and encodes them; a sample that got shorter since the job hashed it
/// is an error (the server would refuse its digest anyway; this says why).
fn read_part(mut file: std::fs::File, n: u64) -> std::io::Result<(std::fs::File, String)> {
    // Read into spare capacity: zeroing 4 MiB first would cost a pass of its own.
    let mut buf = Vec::with_capacity(n as usize);
    (&mut file).take(n).read_to_end(&mut buf)?;
    if (buf.len() as u64) < n {
        return Err(std::io::Error::other(
            "the sample got shorter since the job started",
        ));
    }
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
