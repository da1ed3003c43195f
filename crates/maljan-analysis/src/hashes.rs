//! `hashes`: MD5, SHA-1, SHA-256, SHA-512 and the similarity hashes ssdeep and TLSH.
//!
//! Each digest runs on its own thread over the memory-mapped sample, so the wall time is that of
//! the slowest digest (MD5 or SHA-512), not the sum.

use std::sync::Arc;

use maljan_server::{Registry, ToolError, ToolMeta};
use md5::Md5;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use crate::{AnalysisConfig, common::on_sample};

/// The digests of one byte string.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Hashes {
    pub size: u64,
    pub md5: String,
    pub sha1: String,
    pub sha256: String,
    pub sha512: String,
    /// ssdeep (context-triggered piecewise hash); null when not asked for.
    pub ssdeep: Option<String>,
    /// TLSH (128 buckets, 1-byte checksum, "T1" prefix); null when not asked for or the input is
    /// too small or too uniform (TLSH needs at least 50 bytes with some variety).
    pub tlsh: Option<String>,
}

const PARALLEL_FROM: usize = 1 << 20;

/// Every digest reads its input in chunks of this size and checks the call's cancellation between
/// them: a cancelled or timed-out call frees its cores within a chunk's time.
const CHUNK: usize = 1 << 20;

/// Whether the call has been cancelled (shared by the digest threads).
pub type Cancel<'a> = &'a (dyn Fn() -> bool + Sync);

/// Feeds `bytes` to `update` chunk by chunk; false when cancelled part-way.
fn feed(bytes: &[u8], cancel: Cancel, mut update: impl FnMut(&[u8])) -> bool {
    for chunk in bytes.chunks(CHUNK) {
        if cancel() {
            return false;
        }
        update(chunk);
    }
    true
}

fn digest_hex<D: Digest>(bytes: &[u8], cancel: Cancel) -> Option<String> {
    let mut d = D::new();
    feed(bytes, cancel, |c| d.update(c)).then(|| hex::encode(d.finalize()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    digest_hex::<Sha256>(bytes, &|| false).unwrap_or_default()
}

fn ssdeep_cancellable(bytes: &[u8], cancel: Cancel) -> Option<String> {
    let mut h = fuzzyhash::FuzzyHash::default();
    if !feed(bytes, cancel, |c| h.update(c)) {
        return None;
    }
    h.finalize();
    Some(h.to_string())
}

pub fn ssdeep(bytes: &[u8]) -> String {
    ssdeep_cancellable(bytes, &|| false).unwrap_or_default()
}

/// TLSH, or None when the input is too small or uniform (the outer None: cancelled).
fn tlsh_cancellable(bytes: &[u8], cancel: Cancel) -> Option<Option<String>> {
    let mut builder = tlsh2::TlshDefaultBuilder::new();
    if !feed(bytes, cancel, |c| builder.update(c)) {
        return None;
    }
    Some(
        builder
            .build()
            .map(|t| String::from_utf8_lossy(&t.hash()).into_owned()),
    )
}

pub fn tlsh(bytes: &[u8]) -> Option<String> {
    tlsh_cancellable(bytes, &|| false).flatten()
}

/// All digests of `bytes`; `fuzzy` adds ssdeep and TLSH. Fails once `cancel` answers true.
pub fn hash_bytes(bytes: &[u8], fuzzy: bool, cancel: Cancel) -> Result<Hashes, ToolError> {
    let size = bytes.len() as u64;
    let cancelled = crate::budget::cancelled;
    if bytes.len() < PARALLEL_FROM {
        return Ok(Hashes {
            size,
            md5: digest_hex::<Md5>(bytes, cancel).ok_or_else(cancelled)?,
            sha1: digest_hex::<Sha1>(bytes, cancel).ok_or_else(cancelled)?,
            sha256: digest_hex::<Sha256>(bytes, cancel).ok_or_else(cancelled)?,
            sha512: digest_hex::<Sha512>(bytes, cancel).ok_or_else(cancelled)?,
            ssdeep: match fuzzy {
                true => Some(ssdeep_cancellable(bytes, cancel).ok_or_else(cancelled)?),
                false => None,
            },
            tlsh: match fuzzy {
                true => tlsh_cancellable(bytes, cancel).ok_or_else(cancelled)?,
                false => None,
            },
        });
    }
    std::thread::scope(|s| {
        let md5 = s.spawn(|| digest_hex::<Md5>(bytes, cancel));
        let sha1 = s.spawn(|| digest_hex::<Sha1>(bytes, cancel));
        let sha256 = s.spawn(|| digest_hex::<Sha256>(bytes, cancel));
        let sha512 = s.spawn(|| digest_hex::<Sha512>(bytes, cancel));
        let ssdeep = fuzzy.then(|| s.spawn(|| ssdeep_cancellable(bytes, cancel)));
        let tlsh = fuzzy.then(|| s.spawn(|| tlsh_cancellable(bytes, cancel)));
        let join = |h: std::thread::ScopedJoinHandle<'_, Option<String>>| {
            h.join().ok().flatten().ok_or_else(cancelled)
        };
        Ok(Hashes {
            size,
            md5: join(md5)?,
            sha1: join(sha1)?,
            sha256: join(sha256)?,
            sha512: join(sha512)?,
            ssdeep: ssdeep.map(join).transpose()?,
            tlsh: match tlsh {
                Some(h) => h.join().ok().flatten().ok_or_else(cancelled)?,
                None => None,
            },
        })
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashesArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Also compute the similarity hashes ssdeep and TLSH. Null (the default): for files up to
    /// 64 MiB (they run at a few hundred MB/s); true: always; false: never.
    #[serde(default)]
    pub fuzzy: Option<bool>,
}

/// Above this size ssdeep and TLSH are computed only when asked for (`fuzzy: true`).
pub const FUZZY_DEFAULT_CAP: usize = 64 << 20;

#[derive(Debug, Serialize, JsonSchema)]
pub struct HashesOutput {
    /// The file that was read.
    pub read_path: String,
    #[serde(flatten)]
    pub hashes: Hashes,
    /// What this answer leaves out and why.
    pub without: Vec<String>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "hashes",
            "MD5, SHA-1, SHA-256 and SHA-512 of the sample, plus the similarity hashes ssdeep and TLSH.",
        )
        .title("Hashes")
        .timeout_s(120),
        move |ctx, a: HashesArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let big = s.bytes().len() > FUZZY_DEFAULT_CAP;
                    let fuzzy = a.fuzzy.unwrap_or(!big);
                    let mut without = Vec::new();
                    if !fuzzy && a.fuzzy.is_none() {
                        without.push(format!(
                            "ssdeep and TLSH are skipped above {} MiB unless fuzzy is true",
                            FUZZY_DEFAULT_CAP >> 20
                        ));
                    }
                    Ok::<_, ToolError>(HashesOutput {
                        read_path: s.read_path(),
                        hashes: hash_bytes(s.bytes(), fuzzy, &|| ctx.is_cancelled())?,
                        without,
                    })
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        let h = hash_bytes(b"abc", true, &|| false).unwrap();
        assert_eq!(h.md5, "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(h.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            h.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(h.sha512.starts_with("ddaf35a193617aba"));
        assert_eq!(h.tlsh, None, "too short for TLSH");
        assert!(h.ssdeep.unwrap().starts_with("3:"));
    }

    #[test]
    fn parallel_path_matches_sequential() {
        let data: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let par = hash_bytes(&data, true, &|| false).unwrap();
        assert_eq!(par.sha256, sha256_hex(&data));
        assert_eq!(par.md5, digest_hex::<Md5>(&data, &|| false).unwrap());
        // Fed in chunks, ssdeep is the one-shot hash.
        assert_eq!(
            par.ssdeep.unwrap(),
            fuzzyhash::FuzzyHash::new(&data).to_string()
        );
        assert!(par.tlsh.as_deref().unwrap().starts_with("T1"));
    }
}

#[cfg(test)]
mod cancel_tests {
    use super::*;

    #[test]
    fn a_cancelled_call_gets_no_digests() {
        let data = vec![7u8; 3 << 20];
        let err = hash_bytes(&data, true, &|| true).unwrap_err();
        assert_eq!(err.message, "the call was cancelled");
        assert!(hash_bytes(b"abc", false, &|| true).is_err());
    }
}
