//! The digest algorithms automation-file accepts (hashlib names) and streaming file hashing.

use std::{fs::File, io::Read};

use digest::DynDigest;
use maljan_server::{ToolContext, ToolError};

/// hashlib's names for the algorithms served here; `shake_*` needs a length and is left out.
pub(crate) const SUPPORTED: &[&str] = &[
    "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384",
    "sha3_512", "blake2b", "blake2s",
];

/// The largest read size accepted: beyond this a bigger buffer only costs memory.
pub(crate) const MAX_CHUNK: u64 = 256 * 1024 * 1024;

/// Hashing reports progress every this many bytes.
const PROGRESS_STEP: u64 = 256 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Algorithm(&'static str);

impl Algorithm {
    /// Reads an algorithm name as hashlib would (case-insensitive; `sha-256` and `SHA256` too).
    pub(crate) fn parse(name: &str) -> Result<Self, ToolError> {
        let wanted = name.trim().to_ascii_lowercase().replace('-', "_");
        let squashed = wanted.replace('_', "");
        SUPPORTED
            .iter()
            .find(|s| **s == wanted || s.replace('_', "") == squashed)
            .map(|s| Algorithm(s))
            .ok_or_else(|| {
                ToolError::bad_argument(format!(
                    "unknown hash algorithm '{name}'; supported: {}",
                    SUPPORTED.join(", ")
                ))
            })
    }

    /// An algorithm an integrity baseline may be made with: collision-resistant ones only, as
    /// automation-file's `checked_algorithm` says (md5 or sha1 would let a file be swapped for
    /// another with the same digest unnoticed).
    pub(crate) fn for_integrity(name: &str) -> Result<Self, ToolError> {
        const STRONG: [&str; 3] = ["sha256", "sha512", "blake2b"];
        let algorithm = Self::parse(name)?;
        if STRONG.contains(&algorithm.0) {
            return Ok(algorithm);
        }
        Err(ToolError::bad_argument(format!(
            "{} is refused for integrity checks: it is not collision-resistant, so a file can be \
             replaced by another with the same digest and the change goes unnoticed",
            algorithm.0
        ))
        .with_remediation(format!("use one of {}", STRONG.join(", "))))
    }

    pub(crate) fn name(self) -> &'static str {
        self.0
    }

    pub(crate) fn hasher(self) -> Box<dyn DynDigest + Send> {
        match self.0 {
            "md5" => Box::new(md5::Md5::default()),
            "sha1" => Box::new(sha1::Sha1::default()),
            "sha224" => Box::new(sha2::Sha224::default()),
            "sha256" => Box::new(sha2::Sha256::default()),
            "sha384" => Box::new(sha2::Sha384::default()),
            "sha512" => Box::new(sha2::Sha512::default()),
            "sha3_224" => Box::new(sha3::Sha3_224::default()),
            "sha3_256" => Box::new(sha3::Sha3_256::default()),
            "sha3_384" => Box::new(sha3::Sha3_384::default()),
            "sha3_512" => Box::new(sha3::Sha3_512::default()),
            "blake2b" => Box::new(blake2::Blake2b512::default()),
            "blake2s" => Box::new(blake2::Blake2s256::default()),
            other => unreachable!("algorithm {other} is in SUPPORTED but has no hasher"),
        }
    }

    #[cfg(test)]
    pub(crate) fn hex_of(self, bytes: &[u8]) -> String {
        let mut h = self.hasher();
        h.update(bytes);
        hex::encode(h.finalize())
    }
}

/// Checks a `chunk_size` argument: 0, negative or absurd sizes are the caller's mistake.
pub(crate) fn chunk_size(value: i64) -> Result<usize, ToolError> {
    if value <= 0 {
        return Err(ToolError::bad_argument(format!(
            "chunk_size must be a positive number of bytes, not {value}"
        )));
    }
    if value as u64 > MAX_CHUNK {
        return Err(ToolError::bad_argument(format!(
            "chunk_size {value} is larger than the {MAX_CHUNK}-byte maximum"
        )));
    }
    Ok(value as usize)
}

/// Hashes an open file in `chunk`-byte reads. Returns the hex digest and the number of bytes
/// read. Cancellation is polled between reads; a call's progress is reported on big files.
pub(crate) fn hash_file(
    file: File,
    given: &str,
    algorithm: Algorithm,
    chunk: usize,
    ctx: Watch<'_>,
) -> Result<(String, u64), ToolError> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut hasher = algorithm.hasher();
    let mut progress = Progress {
        ctx,
        size,
        next: PROGRESS_STEP,
    };
    let total = if size >= PIPELINE_FROM {
        hash_pipelined(file, &mut *hasher, chunk, given, &mut progress)?
    } else {
        // A buffer no bigger than the file (+1 to meet its end in one read): a fresh 1 MiB
        // buffer costs a page fault per 4 KiB, more than hashing a small file.
        let buffer = chunk.min(
            usize::try_from(size)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        hash_inline(file, &mut *hasher, buffer, given, &mut progress)?
    };
    Ok((hex::encode(hasher.finalize()), total))
}

/// The digest of bytes already read, and their length: the in-place twin of [`hash_file`].
pub(crate) fn hash_bytes(bytes: &[u8], algorithm: Algorithm) -> (String, u64) {
    let mut hasher = algorithm.hasher();
    hasher.update(bytes);
    (hex::encode(hasher.finalize()), bytes.len() as u64)
}

/// Files at least this big are read on a second thread while the first one hashes.
const PIPELINE_FROM: u64 = 8 * 1024 * 1024;

/// The smallest buffer the two threads hand each other.
const PIPELINE_BUFFER: usize = 1024 * 1024;

/// Who watches a long hash: a call (cancellation polled, progress reported), or only a
/// cancellation check (a walk's, a background monitor's).
#[derive(Clone, Copy)]
pub(crate) enum Watch<'a> {
    Call(&'a ToolContext),
    Stop(&'a dyn Fn() -> bool),
}

struct Progress<'a> {
    ctx: Watch<'a>,
    size: u64,
    next: u64,
}

impl Progress<'_> {
    /// Reports progress now and then; false when the call was cancelled.
    fn tick(&mut self, done: u64) -> bool {
        let ctx = match self.ctx {
            Watch::Stop(stop) => return !stop(),
            Watch::Call(ctx) => ctx,
        };
        if ctx.is_cancelled() {
            return false;
        }
        if done >= self.next {
            ctx.progress(done as f64, Some(self.size.max(done) as f64), None);
            self.next = done + PROGRESS_STEP;
        }
        true
    }
}

fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn cancelled() -> ToolError {
    ToolError::tool_failed("the call was cancelled")
}

fn hash_inline(
    mut file: File,
    hasher: &mut dyn DynDigest,
    chunk: usize,
    given: &str,
    progress: &mut Progress<'_>,
) -> Result<u64, ToolError> {
    let mut buf = vec![0u8; chunk];
    let mut total = 0u64;
    loop {
        if !progress.tick(total) {
            return Err(cancelled());
        }
        let n = read_full(&mut file, &mut buf).map_err(|e| ToolError::io(given, e))?;
        if n == 0 {
            return Ok(total);
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
}

/// Reading (a copy out of the page cache) and hashing overlap on two threads, so a big file is
/// hashed at the digest's own speed. Buffers circulate between the threads and are reused.
fn hash_pipelined(
    mut file: File,
    hasher: &mut dyn DynDigest,
    chunk: usize,
    given: &str,
    progress: &mut Progress<'_>,
) -> Result<u64, ToolError> {
    use std::sync::mpsc::sync_channel;
    const BUFFERS: usize = 3;
    let (full_tx, full_rx) = sync_channel::<std::io::Result<(Vec<u8>, usize)>>(BUFFERS);
    let (free_tx, free_rx) = sync_channel::<Vec<u8>>(BUFFERS);
    // chunk_size cannot change the digest, only the cost: below 1 MiB per hand-over the channel
    // traffic starts to show, so a small one is rounded up here (the inline path keeps it as is).
    let size = chunk.max(PIPELINE_BUFFER);
    for _ in 0..BUFFERS {
        let _ = free_tx.send(vec![0u8; size]);
    }
    std::thread::scope(|scope| {
        scope.spawn(move || {
            // Ends when the file ends, on an error, or when the hashing side hangs up.
            while let Ok(mut buf) = free_rx.recv() {
                let result = read_full(&mut file, &mut buf);
                let done = matches!(result, Ok(0) | Err(_));
                if full_tx.send(result.map(|n| (buf, n))).is_err() || done {
                    return;
                }
            }
        });
        // Owning both channel ends here means returning early (cancel, error) drops them, which
        // unblocks the reader so the scope can end.
        let mut hash = move || {
            let mut total = 0u64;
            loop {
                if !progress.tick(total) {
                    return Err(cancelled());
                }
                match full_rx.recv() {
                    Ok(Ok((_, 0))) | Err(_) => return Ok(total),
                    Ok(Ok((buf, n))) => {
                        hasher.update(&buf[..n]);
                        total += n as u64;
                        let _ = free_tx.send(buf);
                    }
                    Ok(Err(e)) => return Err(ToolError::io(given, e)),
                }
            }
        };
        hash()
    })
}

/// Compares two hex digests case-insensitively in time independent of where they differ.
pub(crate) fn digests_match(actual: &str, expected: &str) -> bool {
    let a = actual.trim().to_ascii_lowercase();
    let b = expected.trim().to_ascii_lowercase();
    if a.len() != b.len() {
        return false;
    }
    a.bytes()
        .zip(b.bytes())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        let abc = b"abc";
        let cases = [
            ("md5", "900150983cd24fb0d6963f7d28e17f72"),
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                "sha256",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                "sha3_256",
                "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532",
            ),
            (
                "blake2s",
                "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982",
            ),
        ];
        for (name, want) in cases {
            assert_eq!(Algorithm::parse(name).unwrap().hex_of(abc), want, "{name}");
        }
    }

    #[test]
    fn names_are_read_as_hashlib_reads_them() {
        assert_eq!(Algorithm::parse("SHA256").unwrap().name(), "sha256");
        assert_eq!(Algorithm::parse("sha-512").unwrap().name(), "sha512");
        assert_eq!(Algorithm::parse("sha3-256").unwrap().name(), "sha3_256");
        let err = Algorithm::parse("crc32").unwrap_err();
        assert!(
            err.message.contains("sha256") && err.message.contains("crc32"),
            "{}",
            err.message
        );
    }

    #[test]
    fn chunk_size_limits() {
        assert_eq!(
            chunk_size(0).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(
            chunk_size(-5).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(
            chunk_size((MAX_CHUNK + 1) as i64).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(chunk_size(4096).unwrap(), 4096);
    }

    #[test]
    fn the_pipelined_path_agrees_with_the_inline_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let data: Vec<u8> = (0..(PIPELINE_FROM as usize + 12_345))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let sha = Algorithm::parse("sha256").unwrap();
        for chunk in [1 << 20, 777_777, 4096] {
            let (digest, n) = hash_file(
                File::open(&path).unwrap(),
                "big",
                sha,
                chunk,
                Watch::Stop(&|| false),
            )
            .unwrap();
            assert_eq!(n, data.len() as u64);
            assert_eq!(digest, sha.hex_of(&data), "chunk {chunk}");
        }
    }

    #[test]
    fn digest_comparison() {
        assert!(digests_match("ABCdef", "abcDEF"));
        assert!(!digests_match("abc", "abd"));
        assert!(!digests_match("abc", "abcd"));
    }
}
