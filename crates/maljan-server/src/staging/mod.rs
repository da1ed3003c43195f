//! put_sample: receiving a sample from a client on another host (DESIGN.md, "put_sample").
//!
//! The store verifies size and sha256 before anything becomes visible, writes under its own
//! staging root (0o700 directory, 0o600 files created with O_EXCL|O_NOFOLLOW, never chmodded after
//! the fact), reduces the filename to a safe base name, bounds the sample size and the number of
//! uploads in flight, and expires abandoned uploads. The path it returns lies inside the server's
//! roots, so its other tools accept it.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    context::blocking,
    errors::ToolError,
    registry::{Registry, ToolMeta},
};

/// Limits and place of a staging store.
#[derive(Debug, Clone)]
pub struct StagingOptions {
    pub dir: PathBuf,
    /// The largest sample accepted, in bytes.
    pub max_sample_bytes: u64,
    /// Chunked uploads in flight at once.
    pub max_open_uploads: usize,
    /// An upload with no chunk for this long is dropped.
    pub upload_ttl: Duration,
}

impl StagingOptions {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_sample_bytes: 2 * 1024 * 1024 * 1024,
            max_open_uploads: 32,
            upload_ttl: Duration::from_secs(15 * 60),
        }
    }

    /// The default place: a per-user directory under the runtime or temp dir.
    pub fn default_dir(server: &str) -> PathBuf {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        base.join(format!("maljan-staging-{uid}"))
            .join(sanitize_filename(server))
    }
}

struct Upload {
    filename: String,
    sha256: String,
    size: u64,
    received: u64,
    /// Digest of each chunk received, by seq: a repeated chunk is checked against it.
    chunks: Vec<[u8; 32]>,
    hasher: Sha256,
    file: File,
    temp: PathBuf,
    touched: Instant,
}

/// Where put_sample writes. One per server process.
pub struct StagingStore {
    options: StagingOptions,
    dir: PathBuf,
    uploads: Mutex<HashMap<String, Arc<Mutex<Upload>>>>,
}

impl StagingStore {
    /// Creates (or checks) the staging directory: 0o700, a real directory, owned by this user.
    pub fn open(options: StagingOptions) -> std::io::Result<Arc<Self>> {
        let dir = ensure_private_dir(&options.dir)?;
        Ok(Arc::new(Self {
            options,
            dir,
            uploads: Mutex::new(HashMap::new()),
        }))
    }

    /// Drops abandoned uploads every minute, so a part file never outlives its TTL by much even
    /// when no new upload arrives. Ends when the store is dropped.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                let Some(store) = weak.upgrade() else { break };
                store.evict_expired();
            }
        });
    }

    /// The canonical staging directory (add it to the server's roots).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_size(&self, size: u64) -> Result<(), ToolError> {
        if size > self.options.max_sample_bytes {
            return Err(ToolError::bad_argument(format!(
                "the sample is {size} bytes; this server accepts at most {} bytes",
                self.options.max_sample_bytes
            ))
            .with_remediation(
                "send a smaller sample, or start the server with a larger --max-sample-bytes",
            ));
        }
        Ok(())
    }

    /// Moves a verified temp file to `<dir>/<sha256>/<safe name>` and returns that path.
    fn publish(&self, temp: &Path, sha256: &str, filename: &str) -> Result<PathBuf, ToolError> {
        let folder = ensure_private_dir(&self.dir.join(sha256))
            .map_err(|e| ToolError::tool_failed(format!("staging: {e}")))?;
        let target = folder.join(sanitize_filename(filename));
        std::fs::rename(temp, &target)
            .map_err(|e| ToolError::tool_failed(format!("staging: {e}")))?;
        Ok(target)
    }

    fn new_temp(&self) -> Result<(File, PathBuf), ToolError> {
        let path = self
            .dir
            .join(format!(".part-{}", uuid::Uuid::new_v4().simple()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| ToolError::tool_failed(format!("staging: cannot create a file: {e}")))?;
        Ok((file, path))
    }

    fn put(&self, filename: &str, content_b64: &str, sha256: &str) -> Result<PathBuf, ToolError> {
        // Bound the work before decoding: the encoded length tells the decoded size.
        self.check_size(content_b64.len() as u64 / 4 * 3)?;
        let bytes = decode_b64(content_b64)?;
        let digest = hex::encode(Sha256::digest(&bytes));
        let expected = normalize_sha256(sha256)?;
        if let Some(expected) = &expected
            && expected != &digest
        {
            return Err(ToolError::bad_argument(format!(
                "sha256 mismatch: the content's sha256 is {digest}, the argument said {expected}"
            )));
        }
        let (mut file, temp) = self.new_temp()?;
        let written = file.write_all(&bytes).and_then(|_| file.sync_data());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(write_error(e));
        }
        self.publish(&temp, &digest, filename).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }

    fn evict_expired(&self) {
        let mut uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.options.upload_ttl;
        uploads.retain(|_, upload| {
            let upload = upload.lock().unwrap_or_else(|p| p.into_inner());
            let keep = upload.touched.elapsed() < ttl;
            if !keep {
                let _ = std::fs::remove_file(&upload.temp);
            }
            keep
        });
    }

    fn begin(&self, filename: &str, sha256: &str, size: u64) -> Result<String, ToolError> {
        self.check_size(size)?;
        let sha256 = normalize_sha256(sha256)?
            .ok_or_else(|| ToolError::bad_argument("sha256 is required for a chunked upload"))?;
        self.evict_expired();
        let (file, temp) = self.new_temp()?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        if uploads.len() >= self.options.max_open_uploads {
            let _ = std::fs::remove_file(&temp);
            return Err(ToolError::tool_failed(format!(
                "{} uploads are already in flight, the most this server accepts",
                self.options.max_open_uploads
            ))
            .with_remediation("finish or abandon other uploads (they expire), then retry"));
        }
        let upload = Upload {
            filename: filename.to_string(),
            sha256,
            size,
            received: 0,
            chunks: Vec::new(),
            hasher: Sha256::new(),
            file,
            temp,
            touched: Instant::now(),
        };
        uploads.insert(id.clone(), Arc::new(Mutex::new(upload)));
        Ok(id)
    }

    fn upload(&self, id: &str) -> Result<Arc<Mutex<Upload>>, ToolError> {
        let uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        uploads.get(id).cloned().ok_or_else(|| {
            ToolError::bad_argument(format!(
                "no upload '{id}' is open (it finished, failed or expired)"
            ))
            .with_remediation("start again with put_sample_begin")
        })
    }

    fn abort(&self, id: &str) {
        let removed = self
            .uploads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(upload) = removed {
            let _ = std::fs::remove_file(&upload.lock().unwrap_or_else(|p| p.into_inner()).temp);
        }
    }

    fn chunk(&self, id: &str, seq: u64, content_b64: &str) -> Result<u64, ToolError> {
        let upload = self.upload(id)?;
        let mut up = upload.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = decode_b64(content_b64)?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        let next = up.chunks.len() as u64;
        if seq < next {
            // A retried chunk: idempotent when it is the same bytes.
            return if up.chunks[seq as usize] == digest {
                Ok(seq)
            } else {
                Err(ToolError::bad_argument(format!(
                    "chunk {seq} was already received with other content"
                )))
            };
        }
        if seq > next {
            return Err(ToolError::bad_argument(format!(
                "chunk {seq} arrived before chunk {next}: chunks must come in order"
            ))
            .with_remediation(format!("send chunk {next} next")));
        }
        if up.received + bytes.len() as u64 > up.size {
            drop(up);
            self.abort(id);
            return Err(ToolError::bad_argument(
                "the chunks exceed the size given to put_sample_begin; the upload was dropped",
            ));
        }
        if let Err(e) = up.file.write_all(&bytes) {
            drop(up);
            self.abort(id);
            return Err(write_error(e));
        }
        up.hasher.update(&bytes);
        up.received += bytes.len() as u64;
        up.chunks.push(digest);
        up.touched = Instant::now();
        Ok(seq)
    }

    fn finish(&self, id: &str) -> Result<PathBuf, ToolError> {
        let upload = self.upload(id)?;
        let removed = self
            .uploads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        drop(removed);
        let mut up = upload.lock().unwrap_or_else(|p| p.into_inner());
        let fail = |up: &Upload, error: ToolError| {
            let _ = std::fs::remove_file(&up.temp);
            Err(error)
        };
        if up.received != up.size {
            let msg = format!(
                "received {} of {} bytes; the upload was dropped",
                up.received, up.size
            );
            return fail(&up, ToolError::bad_argument(msg));
        }
        let digest = hex::encode(std::mem::take(&mut up.hasher).finalize());
        if digest != up.sha256 {
            let msg = format!(
                "sha256 mismatch: the content's sha256 is {digest}, put_sample_begin said {}",
                up.sha256
            );
            return fail(&up, ToolError::bad_argument(msg));
        }
        if let Err(e) = up.file.sync_data() {
            return fail(&up, write_error(e));
        }
        let (temp, filename) = (up.temp.clone(), up.filename.clone());
        self.publish(&temp, &digest, &filename).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }
}

fn write_error(e: std::io::Error) -> ToolError {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        ToolError::tool_failed("the staging disk is full")
            .with_remediation("free space on the server's staging disk")
    } else {
        ToolError::tool_failed(format!("staging: cannot write the sample: {e}"))
    }
}

fn decode_b64(content: &str) -> Result<Vec<u8>, ToolError> {
    base64::engine::general_purpose::STANDARD
        .decode(content.trim())
        .map_err(|e| ToolError::bad_argument(format!("content_b64 is not valid base64: {e}")))
}

/// "" means "not given" (Maljan's Python server accepts that on put_sample).
fn normalize_sha256(sha256: &str) -> Result<Option<String>, ToolError> {
    let s = sha256.trim().to_ascii_lowercase();
    if s.is_empty() {
        return Ok(None);
    }
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ToolError::bad_argument(
            "sha256 must be 64 hexadecimal characters",
        ));
    }
    Ok(Some(s))
}

/// Reduces a client's filename to a safe base name: no directories, no `..`, no control
/// characters, nothing hidden, never empty.
pub fn sanitize_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_string();
    let cleaned: String = cleaned.chars().take(200).collect();
    if cleaned.is_empty() {
        "sample".to_string()
    } else {
        cleaned
    }
}

/// Creates a 0o700 directory, or accepts an existing one only if it is a real directory owned by
/// this user (the temp dir is shared: another user could have planted a link there).
fn ensure_private_dir(dir: &Path) -> std::io::Result<PathBuf> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => {
            // SAFETY: getuid has no preconditions and cannot fail.
            let uid = unsafe { libc::getuid() };
            if meta.file_type().is_symlink() || !meta.is_dir() {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory (refusing a link)",
                    dir.display()
                )));
            }
            if meta.uid() != uid {
                return Err(std::io::Error::other(format!(
                    "{} belongs to another user",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        Err(e) => return Err(e),
    }
    std::fs::canonicalize(dir)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PutArgs {
    /// The sample's file name (reduced to a safe base name).
    filename: String,
    /// The whole sample, base64.
    content_b64: String,
    /// The sample's sha256, hex; "" to skip the check.
    #[serde(default)]
    sha256: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BeginArgs {
    filename: String,
    sha256: String,
    /// The sample's size in bytes.
    size: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChunkArgs {
    upload_id: String,
    /// The chunk's number, from 0, in order.
    seq: u64,
    content_b64: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FinishArgs {
    upload_id: String,
}

#[derive(Serialize, JsonSchema)]
struct StagedPath {
    /// Where the sample now is; pass it to this server's other tools.
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct UploadId {
    upload_id: String,
}

#[derive(Serialize, JsonSchema)]
struct ChunkAck {
    seq: u64,
}

/// Adds the four put_sample tools: listed in tools/list (that is how a client learns this server
/// receives samples), kept out of the manifest; the client runtime hides them from models.
pub fn register(registry: &mut Registry, store: Arc<StagingStore>) {
    // The description says who it is for: a generic MCP host that does not hide these shows it.
    let meta = |name: &str, what: &str| {
        ToolMeta::new(
            name,
            format!("Staging primitive for the client runtime, not a model: {what}"),
        )
        .writes()
        .not_idempotent()
        .timeout_s(600)
        .staging_primitive()
    };
    let s = store.clone();
    registry.add(
        meta(
            "put_sample",
            "Receive a whole sample (base64) and stage it.",
        ),
        move |_ctx, a: PutArgs| {
            let s = s.clone();
            async move {
                let path = blocking(move || s.put(&a.filename, &a.content_b64, &a.sha256)).await?;
                Ok::<_, ToolError>(StagedPath {
                    path: path.to_string_lossy().into_owned(),
                })
            }
        },
    );
    let s = store.clone();
    registry.add(
        meta("put_sample_begin", "Start a chunked upload of a sample."),
        move |_ctx, a: BeginArgs| {
            let s = s.clone();
            async move {
                let upload_id = blocking(move || s.begin(&a.filename, &a.sha256, a.size)).await?;
                Ok::<_, ToolError>(UploadId { upload_id })
            }
        },
    );
    let s = store.clone();
    registry.add(
        meta(
            "put_sample_chunk",
            "Receive one chunk of an upload, in order from seq 0.",
        ),
        move |_ctx, a: ChunkArgs| {
            let s = s.clone();
            async move {
                let seq = blocking(move || s.chunk(&a.upload_id, a.seq, &a.content_b64)).await?;
                Ok::<_, ToolError>(ChunkAck { seq })
            }
        },
    );
    let s = store;
    registry.add(
        meta("put_sample_finish", "Verify and stage a chunked upload."),
        move |_ctx, a: FinishArgs| {
            let s = s.clone();
            async move {
                let path = blocking(move || s.finish(&a.upload_id)).await?;
                Ok::<_, ToolError>(StagedPath {
                    path: path.to_string_lossy().into_owned(),
                })
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::ErrorCode;
    use base64::engine::general_purpose::STANDARD as B64;
    use proptest::prelude::*;

    fn store(max: u64) -> (tempfile::TempDir, Arc<StagingStore>) {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StagingOptions::new(dir.path().join("staging"));
        opts.max_sample_bytes = max;
        opts.max_open_uploads = 2;
        (dir, StagingStore::open(opts).unwrap())
    }

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn put_verifies_and_stores_privately() {
        let (_d, s) = store(1 << 20);
        let path = s
            .put(
                "../../etc/evil.exe",
                &B64.encode(b"MZ hello"),
                &sha(b"MZ hello"),
            )
            .unwrap();
        assert!(path.starts_with(s.dir()));
        assert_eq!(path.file_name().unwrap(), "evil.exe");
        assert_eq!(std::fs::read(&path).unwrap(), b"MZ hello");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(s.dir()), 0o700);
        let err = s.put("x", &B64.encode(b"abc"), &sha(b"abd")).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgument);
        assert!(err.message.contains("mismatch"));
        let leftovers: Vec<_> = std::fs::read_dir(s.dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".part"))
            .collect();
        assert!(leftovers.is_empty(), "a half-written file stayed visible");
    }

    #[test]
    fn chunks_in_order_with_idempotent_repeats_and_gap_errors() {
        let (_d, s) = store(1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let id = s
            .begin("sample.bin", &sha(&data), data.len() as u64)
            .unwrap();
        let parts: Vec<&[u8]> = data.chunks(4096).collect();
        assert_eq!(s.chunk(&id, 0, &B64.encode(parts[0])).unwrap(), 0);
        assert_eq!(
            s.chunk(&id, 0, &B64.encode(parts[0])).unwrap(),
            0,
            "a repeated chunk is idempotent"
        );
        assert!(
            s.chunk(&id, 0, &B64.encode(parts[1])).is_err(),
            "a different chunk 0 is refused"
        );
        let gap = s.chunk(&id, 2, &B64.encode(parts[2])).unwrap_err();
        assert!(gap.message.contains("before chunk 1"), "{}", gap.message);
        s.chunk(&id, 1, &B64.encode(parts[1])).unwrap();
        s.chunk(&id, 2, &B64.encode(parts[2])).unwrap();
        let path = s.finish(&id).unwrap();
        assert_eq!(std::fs::read(path).unwrap(), data);
        assert!(s.finish(&id).is_err(), "a finished upload is gone");
    }

    #[test]
    fn bounds_size_open_uploads_and_a_wrong_digest() {
        let (_d, s) = store(100);
        assert_eq!(
            s.begin("a", &sha(b""), 101).unwrap_err().code,
            ErrorCode::BadArgument
        );
        assert!(s.put("a", &B64.encode([0u8; 200]), "").is_err());
        let a = s.begin("a", &sha(b"x"), 1).unwrap();
        let _b = s.begin("b", &sha(b"x"), 1).unwrap();
        assert!(
            s.begin("c", &sha(b"x"), 1).is_err(),
            "only two uploads may be open"
        );
        s.chunk(&a, 0, &B64.encode(b"y")).unwrap();
        assert!(s.finish(&a).unwrap_err().message.contains("mismatch"));
    }

    #[test]
    fn abandoned_uploads_expire() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StagingOptions::new(dir.path().join("s"));
        opts.upload_ttl = Duration::from_millis(1);
        let s = StagingStore::open(opts).unwrap();
        let id = s.begin("a", &sha(b"x"), 1).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        s.evict_expired();
        assert!(s.chunk(&id, 0, &B64.encode(b"x")).is_err());
        assert_eq!(
            std::fs::read_dir(s.dir()).unwrap().count(),
            0,
            "the abandoned part file was removed"
        );
    }

    #[test]
    fn a_planted_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("staging")).unwrap();
        assert!(StagingStore::open(StagingOptions::new(dir.path().join("staging"))).is_err());
    }

    proptest! {
        #[test]
        fn sanitized_names_never_escape(name in ".{0,80}") {
            let safe = sanitize_filename(&name);
            prop_assert!(!safe.is_empty());
            prop_assert!(!safe.contains('/') && !safe.contains('\\'));
            prop_assert!(!safe.starts_with('.'));
            prop_assert!(!safe.chars().any(char::is_control));
            prop_assert!(Path::new(&safe).components().count() == 1);
        }
    }
}
