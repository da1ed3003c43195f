//! put_sample: receiving a sample from a client on another host (DESIGN.md, "put_sample").
//!
//! The store verifies size and sha256 before anything becomes visible, writes under its own
//! staging root (0o700 directory, 0o600 files created with O_EXCL|O_NOFOLLOW, never chmodded after
//! the fact), reduces the filename to a safe base name, bounds the sample size and the number of
//! uploads in flight, and expires abandoned uploads. The path it returns lies inside the server's
//! roots, so its other tools accept it. Chunks are written in order; one that overtook its
//! predecessor (a client keeping several in flight) waits for it, up to `gap_wait`.
//!
//! Over HTTP a chunk's base64 never passes through rmcp's JSON parser (`intake`), and chunks
//! reach the disk with O_DIRECT from the buffer they arrived in (`write`).

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

use sha2::{Digest, Sha256};

use crate::errors::ToolError;
/// The reduction of a sample's name is the wire convention's: the client applies it too.
pub use maljan_protocol::sanitize_filename;

mod intake;
mod leftovers;
mod split;
mod tools;
mod write;
pub use intake::{Intake, intake};
pub use tools::register;
use write::{Decoded, decode_b64, open_direct, write_chunk, write_error};

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
    /// How long a chunk that arrived ahead of its predecessor waits for it before the gap is an
    /// error (a client may keep several chunks in flight).
    pub gap_wait: Duration,
}

impl StagingOptions {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_sample_bytes: 2 * 1024 * 1024 * 1024,
            max_open_uploads: 32,
            upload_ttl: Duration::from_secs(15 * 60),
            gap_wait: Duration::from_secs(5),
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
    /// Where each chunk received ends in the file, by seq: a repeated chunk is compared with
    /// the bytes written there (retries are rare; hashing every chunk for them cost a second
    /// sha256 pass over the whole upload).
    chunk_ends: Vec<u64>,
    hasher: Sha256,
    file: File,
    /// The same file opened with O_DIRECT, where the file system offers it (see [`write`]).
    direct: Option<File>,
    temp: PathBuf,
    touched: Instant,
    /// Finished, aborted or expired: a chunk still waiting for its turn must not write.
    closed: bool,
}

/// An upload and the signal a chunk waits on when it overtook its predecessor.
struct OpenUpload {
    state: Mutex<Upload>,
    turn: Condvar,
}

impl OpenUpload {
    fn lock(&self) -> std::sync::MutexGuard<'_, Upload> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks it closed (waking any chunk waiting for its turn) and removes its temp file.
    fn close(&self) {
        let mut up = self.lock();
        up.closed = true;
        let _ = std::fs::remove_file(&up.temp);
        self.turn.notify_all();
    }
}

impl Upload {
    /// Bytes written so far: where the last chunk ends.
    fn received(&self) -> u64 {
        self.chunk_ends.last().copied().unwrap_or(0)
    }

    /// Whether the file holds exactly `bytes` from `start` to `end`.
    fn holds_at(&self, start: u64, end: u64, bytes: &[u8]) -> std::io::Result<bool> {
        use std::os::unix::fs::FileExt;
        if end - start != bytes.len() as u64 {
            return Ok(false);
        }
        let mut written = vec![0u8; bytes.len()];
        self.file.read_exact_at(&mut written, start)?;
        Ok(written == bytes)
    }
}

/// Where put_sample writes. One per server process.
pub struct StagingStore {
    options: StagingOptions,
    dir: PathBuf,
    uploads: Mutex<HashMap<String, Arc<OpenUpload>>>,
    /// Contents the HTTP intake cut from requests, waiting for their tool (see [`intake`]).
    stash: intake::Stash,
}

impl std::fmt::Debug for StagingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl StagingStore {
    /// Creates (or checks) the staging directory: 0o700, a real directory, owned by this user.
    /// Removes what a crashed server left there (see [`leftovers`]).
    pub fn open(options: StagingOptions) -> std::io::Result<Arc<Self>> {
        let dir = ensure_private_dir(&options.dir)?;
        leftovers::sweep(&dir, options.upload_ttl, &[], true);
        Ok(Arc::new(Self {
            options,
            dir,
            uploads: Mutex::new(HashMap::new()),
            stash: intake::Stash::default(),
        }))
    }

    /// Drops abandoned uploads every minute, so a part file never outlives its TTL by much even
    /// when no new upload arrives (nor one a crashed process left). Ends when the store is
    /// dropped.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                let Some(store) = weak.upgrade() else { break };
                store.sweep();
            }
        });
    }

    /// Contents the HTTP intake cut from requests that no tool has redeemed yet: zero once the
    /// answers to those requests are gone.
    pub fn stashed(&self) -> usize {
        self.stash.len()
    }

    /// Body buffers kept for the next chunks: some while an upload is open, none once all are
    /// closed.
    pub fn spare_buffers(&self) -> usize {
        self.stash.spares()
    }

    /// How many contents the HTTP intake has cut from requests since the store opened.
    pub fn intake_cuts(&self) -> u64 {
        self.stash.cuts()
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
        // Replacing a file frees its blocks inside the rename, and with discard on that waits
        // for the device (34 ms per 100 MiB here). A second name for the old file keeps the
        // rename to dropping one link; the blocks are freed after the answer, off its path.
        let replaced = folder.join(format!(
            "{}{}",
            leftovers::REPLACED_PREFIX,
            uuid::Uuid::new_v4().simple()
        ));
        let kept = std::fs::hard_link(&target, &replaced).is_ok();
        let renamed = std::fs::rename(temp, &target);
        if kept {
            std::thread::spawn(move || std::fs::remove_file(replaced));
        }
        renamed.map_err(|e| ToolError::tool_failed(format!("staging: {e}")))?;
        Ok(target)
    }

    fn new_temp(&self) -> Result<(File, PathBuf), ToolError> {
        let path = self.dir.join(format!(
            "{}{}",
            leftovers::PART_PREFIX,
            uuid::Uuid::new_v4().simple()
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| ToolError::tool_failed(format!("staging: cannot create a file: {e}")))?;
        Ok((file, path))
    }

    /// The bytes a put_sample tool was given: the argument decoded, or what the HTTP intake
    /// decoded from the request when the argument is its ticket.
    fn content(&self, content_b64: String) -> Result<Decoded, ToolError> {
        match content_b64.strip_prefix(intake::TICKET) {
            Some(key) => self.stash.take(key).ok_or_else(|| {
                ToolError::bad_argument("content_b64 is not base64 (nor a live intake ticket)")
            }),
            None => decode_b64(content_b64),
        }
    }

    fn put(&self, filename: &str, content_b64: String, sha256: &str) -> Result<PathBuf, ToolError> {
        // Bound the work before decoding where there is any left: the encoded length tells the
        // decoded size. (The intake's ticket comes decoded, within the body size bound.)
        if !content_b64.starts_with(intake::TICKET) {
            self.check_size(content_b64.len() as u64 / 4 * 3)?;
        }
        let decoded = self.content(content_b64)?;
        let bytes = decoded.as_slice();
        self.check_size(bytes.len() as u64)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let expected = normalize_sha256(sha256)?;
        if let Some(expected) = &expected
            && expected != &digest
        {
            return Err(ToolError::bad_argument(format!(
                "sha256 mismatch: the content's sha256 is {digest}, the argument said {expected}"
            )));
        }
        let (mut file, temp) = self.new_temp()?;
        let written = file.write_all(bytes).and_then(|_| file.sync_data());
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
            let keep = upload.lock().touched.elapsed() < ttl;
            if !keep {
                upload.close();
            }
            keep
        });
        drop(uploads);
        // A buffer recycled after the last upload closed goes here, within the sweep interval.
        self.drop_spares_when_idle();
    }

    /// The sweeper's round: expired uploads, then part files no upload here owns that nobody
    /// has touched for the TTL (a crashed process's).
    fn sweep(&self) {
        self.evict_expired();
        let uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let open: Vec<PathBuf> = uploads.values().map(|u| u.lock().temp.clone()).collect();
        drop(uploads);
        leftovers::sweep(&self.dir, self.options.upload_ttl, &open, false);
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
            chunk_ends: Vec::new(),
            hasher: Sha256::new(),
            file,
            direct: open_direct(&temp),
            temp,
            touched: Instant::now(),
            closed: false,
        };
        let upload = OpenUpload {
            state: Mutex::new(upload),
            turn: Condvar::new(),
        };
        uploads.insert(id.clone(), Arc::new(upload));
        Ok(id)
    }

    fn upload(&self, id: &str) -> Result<Arc<OpenUpload>, ToolError> {
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
            upload.close();
        }
        self.drop_spares_when_idle();
    }

    /// Spare decode buffers are kept only while some upload is open.
    fn drop_spares_when_idle(&self) {
        let idle = self
            .uploads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        if idle {
            self.stash.drop_spares();
        }
    }

    fn chunk(&self, id: &str, seq: u64, content_b64: String) -> Result<u64, ToolError> {
        let upload = self.upload(id)?;
        // Decoded (by the intake as it arrived, or here) before taking the upload: chunks in
        // flight decode side by side.
        let decoded = self.content(content_b64)?;
        let bytes = decoded.as_slice();
        let mut up = upload.lock();
        // A chunk that overtook its predecessor (a client may keep several in flight) waits a
        // moment for it; a real gap is still an error, only a later one.
        let deadline = Instant::now() + self.options.gap_wait;
        while seq > up.chunk_ends.len() as u64 && !up.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            up = upload
                .turn
                .wait_timeout(up, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if up.closed {
            return Err(ToolError::bad_argument(format!(
                "upload '{id}' was dropped while chunk {seq} waited for its turn"
            ))
            .with_remediation("start again with put_sample_begin"));
        }
        let next = up.chunk_ends.len() as u64;
        if seq < next {
            // A retried chunk: idempotent when it is the same bytes.
            let end = up.chunk_ends[seq as usize];
            let start = match seq {
                0 => 0,
                _ => up.chunk_ends[seq as usize - 1],
            };
            return if up.holds_at(start, end, bytes).map_err(write_error)? {
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
        if up.received() + bytes.len() as u64 > up.size {
            drop(up);
            self.abort(id);
            return Err(ToolError::bad_argument(
                "the chunks exceed the size given to put_sample_begin; the upload was dropped",
            ));
        }
        let start = up.received();
        let Upload {
            file,
            direct,
            hasher,
            ..
        } = &mut *up;
        if let Err(e) = write_chunk(file, direct, hasher, start, bytes) {
            drop(up);
            self.abort(id);
            return Err(write_error(e));
        }
        let end = start + bytes.len() as u64;
        up.chunk_ends.push(end);
        up.touched = Instant::now();
        upload.turn.notify_all();
        drop(up);
        self.stash.recycle(decoded.into_buffer());
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
        self.drop_spares_when_idle();
        let mut up = upload.lock();
        up.closed = true;
        upload.turn.notify_all();
        let fail = |up: &Upload, error: ToolError| {
            let _ = std::fs::remove_file(&up.temp);
            Err(error)
        };
        if up.received() != up.size {
            let msg = format!(
                "received {} of {} bytes; the upload was dropped",
                up.received(),
                up.size
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

#[cfg(test)]
mod tests;
