//! Uploading a sample through put_sample (whole, base64) or put_sample_begin / _chunk / _finish
//! (4 MiB raw per chunk, up to three in flight). Every call goes through the runtime's call path
//! (breaker, cap, timeout, ledger) and so through rmcp's own client, and the ledger gets a
//! summary — never the content. The file is read and encoded (SIMD base64) one chunk at a time,
//! the next chunk while the others are on the wire, so a 100 MiB sample never sits in memory
//! whole; its sha256 is the one the job computed at start.

use std::io::{Read, Seek};

use futures::{FutureExt, StreamExt};
use maljan_protocol::{PUT_SAMPLE, PUT_SAMPLE_BEGIN, PUT_SAMPLE_CHUNK, PUT_SAMPLE_FINISH};
use serde_json::{Map, Value, json};

use super::{StagingTarget, UploadProgress};
use crate::{outcome::CallRecord, sample::Sample};

/// Raw bytes per put_sample_chunk.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Chunks sent before the first is acknowledged. The server waits a moment for a chunk that
/// overtook its predecessor, so these stay in order. Never more than the server's cap on calls
/// lets through: see [`chunks_in_flight`].
const CHUNKS_IN_FLIGHT: usize = 3;
/// Samples over this size go through the chunked calls (when the server has all three).
pub const CHUNKED_ABOVE: u64 = 8 * 1024 * 1024;

/// Uploads `sample` to `server`, returning the path the server gave back.
pub(super) async fn upload(
    server: &impl StagingTarget,
    sample: &Sample,
    chunked: bool,
) -> Result<String, String> {
    let filename = super::safe_name(&sample.name);
    let progress = |sent: u64| {
        server.report_progress(&UploadProgress {
            server: server.server().to_string(),
            sent,
            total: sample.size,
        })
    };
    progress(0);
    if !chunked {
        let content = encoded_part(sample, 0, sample.size).await?;
        let args =
            obj(json!({"filename": filename, "content_b64": content, "sha256": sample.sha256}));
        let summary = json!({"filename": filename, "sha256": sample.sha256, "size": sample.size});
        let rec = server.call_staging(PUT_SAMPLE, args, summary).await;
        let path = returned(&rec, "path")?;
        progress(sample.size);
        return Ok(path);
    }

    let summary = json!({"filename": filename, "sha256": sample.sha256, "size": sample.size});
    let args = obj(json!({"filename": filename, "sha256": sample.sha256, "size": sample.size}));
    let rec = server.call_staging(PUT_SAMPLE_BEGIN, args, summary).await;
    let upload_id = returned(&rec, "upload_id")?;

    let parts = sample.size.div_ceil(CHUNK_BYTES);
    let upload_id = &upload_id;
    let send_chunk = |seq: u64| {
        let offset = seq * CHUNK_BYTES;
        let n = CHUNK_BYTES.min(sample.size - offset);
        async move {
            let content = encoded_part(sample, offset, n).await?;
            let args = obj(json!({"upload_id": upload_id, "seq": seq, "content_b64": content}));
            let summary =
                json!({"upload_id": upload_id, "seq": seq, "size": n, "content": "not recorded"});
            let rec = server.call_staging(PUT_SAMPLE_CHUNK, args, summary).await;
            let acked = answer(&rec)?.get("seq").and_then(Value::as_u64);
            match acked {
                Some(a) if a == seq => Ok(n),
                _ => Err(format!(
                    "put_sample_chunk {seq} was acknowledged as {acked:?}"
                )),
            }
        }
    };
    let window = chunks_in_flight(server.call_cap());
    send_chunks(parts, window, send_chunk, progress).await?;
    let summary = json!({"upload_id": upload_id});
    let rec = server
        .call_staging(PUT_SAMPLE_FINISH, obj(summary.clone()), summary)
        .await;
    returned(&rec, "path")
}

/// No more chunks in flight than the server's cap on calls (0: none) lets through at once. A
/// chunk waiting for a slot could take it before its predecessor (reads finish in any order),
/// and the server would then hold it until its wait for the predecessor ran out.
fn chunks_in_flight(cap: usize) -> usize {
    match cap {
        0 => CHUNKS_IN_FLIGHT,
        cap => CHUNKS_IN_FLIGHT.min(cap),
    }
}

/// Sends chunks `0..parts`, `window` of them in flight, each future reading, sending and checking
/// one chunk and giving its raw size. Should one fail, the rest in flight are let finish (each is
/// a ledgered call) and the chunks are sent again one at a time from the first that failed: a
/// server that keeps DESIGN.md's strict order (a gap is an error) refuses a chunk that overtook
/// its predecessor, and a chunk sent twice is idempotent. What fails one at a time is the error.
async fn send_chunks<F, Fut>(
    parts: u64,
    window: usize,
    send: F,
    progress: impl Fn(u64),
) -> Result<(), String>
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<u64, String>>,
{
    let mut in_flight = futures::stream::FuturesOrdered::new();
    let (mut next, mut sent) = (0u64, 0u64);
    let mut failed_at = None;
    loop {
        while failed_at.is_none() && next < parts && in_flight.len() < window.max(1) {
            let seq = next;
            in_flight.push_back(send(seq).map(move |r| (seq, r)));
            next += 1;
        }
        let Some((seq, result)) = in_flight.next().await else {
            break;
        };
        match result {
            Ok(raw) if failed_at.is_none() => {
                sent += raw;
                progress(sent);
            }
            Ok(_) => {}
            Err(_) => {
                failed_at.get_or_insert(seq);
            }
        }
    }
    let Some(from) = failed_at else {
        return Ok(());
    };
    for seq in from..parts {
        sent += send(seq).await?;
        progress(sent);
    }
    Ok(())
}

/// [`read_part`] on the blocking pool, with its error said as the upload says errors.
async fn encoded_part(sample: &Sample, offset: u64, n: u64) -> Result<String, String> {
    let path = sample.path.clone();
    match tokio::task::spawn_blocking(move || read_part(&path, offset, n)).await {
        Ok(Ok(content)) => Ok(content),
        Ok(Err(e)) => Err(format!("reading the sample: {e}")),
        Err(e) => Err(format!("reading the sample: {e}")),
    }
}

/// Reads exactly `n` bytes at `offset` and encodes them as base64 (SIMD: on a fast link encoding
/// is a large share of an upload's CPU); a sample that got shorter since the job hashed it is an
/// error (the server would refuse its digest anyway; this says why). Each part opens the file
/// afresh, so parts in flight never share a cursor.
fn read_part(path: &std::path::Path, offset: u64, n: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    file.seek(std::io::SeekFrom::Start(offset))?;
    // Read into spare capacity: zeroing 4 MiB first would cost a pass of its own.
    let mut buf = Vec::with_capacity(n as usize);
    file.take(n).read_to_end(&mut buf)?;
    if (buf.len() as u64) < n {
        return Err(std::io::Error::other(
            "the sample got shorter since the job started",
        ));
    }
    Ok(base64_simd::STANDARD.encode_type::<String>(&buf))
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
    use base64::Engine as _;
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };

    #[test]
    fn parts_are_read_exactly_and_a_short_file_is_named() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b"hello world").unwrap();
        assert_eq!(read_part(tmp.path(), 0, 5).unwrap(), "aGVsbG8=");
        let b = read_part(tmp.path(), 5, 6).unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD.decode(b).unwrap(),
            b" world"
        );
        let err = read_part(tmp.path(), 5, 7).unwrap_err();
        assert!(err.to_string().contains("shorter"), "{err}");
    }

    #[test]
    fn no_more_chunks_in_flight_than_the_cap_lets_through() {
        assert_eq!(chunks_in_flight(0), CHUNKS_IN_FLIGHT, "0 is uncapped");
        assert_eq!(chunks_in_flight(1), 1);
        assert_eq!(chunks_in_flight(2), 2);
        assert_eq!(chunks_in_flight(64), CHUNKS_IN_FLIGHT);
    }

    /// A server that keeps strict order: a chunk that is not the next one is refused.
    #[derive(Default)]
    struct StrictServer {
        received: Mutex<Vec<u64>>,
        in_flight: Mutex<(usize, usize)>,
        attempts: Mutex<Vec<u64>>,
    }

    impl StrictServer {
        /// Later chunks travel faster, so in flight they overtake the earlier ones.
        async fn chunk(&self, seq: u64, parts: u64, broken: Option<u64>) -> Result<u64, String> {
            self.attempts.lock().unwrap().push(seq);
            {
                let mut f = self.in_flight.lock().unwrap();
                f.0 += 1;
                f.1 = f.1.max(f.0);
            }
            tokio::time::sleep(Duration::from_millis(5 * (parts - seq))).await;
            self.in_flight.lock().unwrap().0 -= 1;
            if broken == Some(seq) {
                return Err(format!("chunk {seq}: disk full"));
            }
            let mut received = self.received.lock().unwrap();
            match received.len() as u64 {
                n if n == seq => {
                    received.push(seq);
                    Ok(10)
                }
                n if seq < n => Ok(10),
                n => Err(format!("chunk {seq} arrived before chunk {n}")),
            }
        }
    }

    #[tokio::test]
    async fn chunks_that_overtook_a_strict_server_are_sent_again_in_order() {
        let server = Arc::new(StrictServer::default());
        let progress = Mutex::new(Vec::new());
        let parts = 6;
        let result = send_chunks(
            parts,
            3,
            |seq| {
                let s = server.clone();
                async move { s.chunk(seq, parts, None).await }
            },
            |sent| progress.lock().unwrap().push(sent),
        )
        .await;
        assert_eq!(result, Ok(()));
        assert_eq!(
            *server.received.lock().unwrap(),
            (0..parts).collect::<Vec<_>>()
        );
        assert_eq!(
            server.in_flight.lock().unwrap().1,
            3,
            "three were in flight"
        );
        let progress = progress.into_inner().unwrap();
        assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
        assert_eq!(progress.last(), Some(&(10 * parts)));
        assert!(
            server.attempts.lock().unwrap().len() > parts as usize,
            "the overtaking chunks were refused and sent again"
        );
    }

    #[tokio::test]
    async fn a_chunk_that_fails_one_at_a_time_is_the_error() {
        let server = Arc::new(StrictServer::default());
        let result = send_chunks(
            5,
            3,
            |seq| {
                let s = server.clone();
                async move { s.chunk(seq, 5, Some(3)).await }
            },
            |_| {},
        )
        .await;
        assert_eq!(result, Err("chunk 3: disk full".to_string()));
        assert_eq!(*server.received.lock().unwrap(), vec![0, 1, 2]);
        assert!(
            !server.attempts.lock().unwrap().contains(&4),
            "nothing after the chunk that failed one at a time is sent"
        );
    }
}
