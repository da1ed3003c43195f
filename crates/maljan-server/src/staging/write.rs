//! How a sample's bytes reach the disk: decoded in the buffer they arrived in, and written with
//! O_DIRECT where the file system allows it.
//!
//! A staged sample must be on disk before it is published (fdatasync). Written through the page
//! cache, every byte is first copied into freshly allocated cache pages and then written out: on
//! this project's VM the copy alone cost 0.1–0.35 s of CPU per 100 MiB, varying run to run, and
//! the flush another ~70 ms. O_DIRECT hands the chunk's own pages to the disk: ~10 ms of CPU per
//! 100 MiB, and the wait is I/O, during which the chunk's sha256 is computed on a second thread.
//! The price is that the staged file is not in the page cache when a tool first reads it.

use std::{fs::File, os::unix::fs::FileExt};

use sha2::{Digest, Sha256};

use crate::errors::ToolError;

/// O_DIRECT needs the buffer, the length and the file offset aligned; a page satisfies every
/// file system that offers it.
pub(super) const ALIGN: usize = 4096;

/// Chunks under this size are written buffered and hashed in line: a second thread costs more
/// than it saves.
const DIRECT_FROM: usize = 1024 * 1024;

/// Decoded bytes: `bytes[at..at + len]`, page-aligned when the buffer had room.
pub(super) struct Decoded {
    bytes: Vec<u8>,
    at: usize,
    len: usize,
}

impl Decoded {
    /// The bytes from `at` to the end of `bytes`.
    pub(super) fn aligned(bytes: Vec<u8>, at: usize) -> Self {
        let len = bytes.len() - at;
        Self { bytes, at, len }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.bytes[self.at..self.at + self.len]
    }

    /// The buffer, for reuse.
    pub(super) fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}

/// Decodes a content_b64 argument in its own buffer (no second allocation of a chunk's size; a
/// SIMD decoder, because on a fast link decoding is a large share of an upload's CPU), then
/// moves the result to the buffer's first page boundary, so it can be written with O_DIRECT.
/// Blanks around the base64 are allowed.
pub(super) fn decode_b64(text: String) -> Result<Decoded, ToolError> {
    let mut bytes = text.into_bytes();
    let start = bytes.len() - bytes.trim_ascii_start().len();
    let end = start + bytes[start..].trim_ascii_end().len();
    let len = base64_simd::STANDARD
        .decode_inplace(&mut bytes[start..end])
        .map_err(|_| {
            ToolError::bad_argument(
                "content_b64 is not valid base64 (standard alphabet, padded, no line breaks)",
            )
        })?
        .len();
    let boundary = (bytes.as_ptr() as usize).next_multiple_of(ALIGN) - bytes.as_ptr() as usize;
    let at = if boundary + len <= bytes.len() {
        boundary
    } else {
        0
    };
    bytes.copy_within(start..start + len, at);
    Ok(Decoded { bytes, at, len })
}

/// Opens the upload's temp file a second time with O_DIRECT; None where the file system does
/// not offer it (tmpfs, for one), and chunks are then written through the page cache.
pub(super) fn open_direct(path: &std::path::Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW)
        .open(path)
        .ok()
}

/// Writes `bytes` at `offset` and adds them to `hasher`: with O_DIRECT when `direct` is open and
/// the chunk is aligned in memory, length and offset (a refusal closes `direct` for the rest of
/// the upload), else through the page cache with its writeback started at once.
pub(super) fn write_chunk(
    file: &File,
    direct: &mut Option<File>,
    hasher: &mut Sha256,
    offset: u64,
    bytes: &[u8],
) -> std::io::Result<()> {
    let aligned = |n: usize| n.is_multiple_of(ALIGN);
    let fits = bytes.len() >= DIRECT_FROM
        && aligned(bytes.as_ptr() as usize)
        && aligned(bytes.len())
        && offset.is_multiple_of(ALIGN as u64);
    if let Some(d) = direct.as_ref().filter(|_| fits) {
        let mut hashed = hasher.clone();
        let written = std::thread::scope(|s| {
            let hashing = s.spawn(|| hashed.update(bytes));
            let written = d.write_all_at(bytes, offset);
            let _ = hashing.join();
            written
        });
        match written {
            Ok(()) => {
                *hasher = hashed;
                return Ok(());
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => *direct = None,
            Err(e) => return Err(e),
        }
    }
    file.write_all_at(bytes, offset)?;
    start_writeback(file, offset, bytes.len() as u64);
    hasher.update(bytes);
    Ok(())
}

/// Starts writing a chunk to disk now, without waiting for it, so the fdatasync that publishing
/// needs finds little left to do instead of the whole sample (~70 ms for 100 MiB here).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on a descriptor this upload owns; it only schedules writeback.
    // A failure only loses the head start: fdatasync still runs before the sample is published.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

pub(super) fn write_error(e: std::io::Error) -> ToolError {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        ToolError::tool_failed("the staging disk is full")
            .with_remediation("free space on the server's staging disk")
    } else {
        ToolError::tool_failed(format!("staging: cannot write the sample: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_chunk_lands_on_a_page_boundary_when_there_is_room() {
        use base64::Engine as _;
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
        let text = base64::engine::general_purpose::STANDARD.encode(&data);
        let d = decode_b64(text).unwrap();
        assert_eq!(d.as_slice(), data);
        assert!((d.as_slice().as_ptr() as usize).is_multiple_of(ALIGN));
        // No room for a boundary: the bytes stay where they are, still right.
        let d = decode_b64("aGVsbG8K".into()).unwrap();
        assert_eq!(d.as_slice(), b"hello\n");
    }

    /// Whichever way a chunk is written, the file and the hash are the same; a chunk that does
    /// not fit O_DIRECT's alignment goes through the page cache.
    #[test]
    fn direct_and_buffered_writes_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        let mut direct = open_direct(&path);
        let had_direct = direct.is_some();
        // A page-aligned buffer of 1 MiB, then an odd tail.
        let mut buf = vec![0u8; DIRECT_FROM + 2 * ALIGN];
        let at = (buf.as_ptr() as usize).next_multiple_of(ALIGN) - buf.as_ptr() as usize;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let first = &buf[at..at + DIRECT_FROM];
        let tail = &buf[..777];
        let mut hasher = Sha256::new();
        write_chunk(&file, &mut direct, &mut hasher, 0, first).unwrap();
        write_chunk(&file, &mut direct, &mut hasher, DIRECT_FROM as u64, tail).unwrap();
        assert_eq!(
            direct.is_some(),
            had_direct,
            "a refusal would have closed it"
        );
        let expected = [first, tail].concat();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        assert_eq!(hasher.finalize(), Sha256::digest(&expected));
    }
}
