//! Checksums: FA_file_checksum and FA_verify_checksum.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    hashing::{Algorithm, chunk_size, digests_match, hash_file},
    paths::show,
};

pub(crate) fn default_algorithm() -> String {
    "sha256".into()
}
fn default_chunk() -> i64 {
    1024 * 1024
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChecksumArgs {
    /// The file to hash.
    path: String,
    /// A hashlib name: md5, sha1, sha224, sha256, sha384, sha512, sha3_224, sha3_256, sha3_384, sha3_512, blake2b, blake2s.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
    /// Bytes per read (1 to 268435456).
    #[serde(default = "default_chunk")]
    #[schemars(default = "default_chunk")]
    chunk_size: i64,
}

#[derive(Serialize, JsonSchema)]
struct ChecksumOut {
    path: String,
    algorithm: &'static str,
    /// Lower-case hex digest.
    digest: String,
    /// Bytes hashed.
    size: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyArgs {
    /// The file to hash.
    path: String,
    /// The expected hex digest (case-insensitive).
    expected: String,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
    /// Bytes per read (1 to 268435456).
    #[serde(default = "default_chunk")]
    #[schemars(default = "default_chunk")]
    chunk_size: i64,
}

#[derive(Serialize, JsonSchema)]
struct VerifyOut {
    path: String,
    algorithm: &'static str,
    /// Whether the file's digest equals `expected`.
    matched: bool,
    /// The digest the file has.
    actual: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_file_checksum",
            "Hex digest of a file (sha256 by default), streamed in chunk_size reads.",
        )
        .timeout_s(600),
        move |ctx: ToolContext, a: ChecksumArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                let chunk = chunk_size(a.chunk_size)?;
                let path = c.existing_file(&a.path)?;
                blocking(move || {
                    let (digest, size) = hash_file(&path, &a.path, algorithm, chunk, Some(&ctx))?;
                    Ok(ChecksumOut {
                        path: show(&path),
                        algorithm: algorithm.name(),
                        digest,
                        size,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_verify_checksum",
            "Check a file against an expected hex digest (constant-time compare); answers matched and the actual digest.",
        )
        .timeout_s(600),
        move |ctx: ToolContext, a: VerifyArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                let chunk = chunk_size(a.chunk_size)?;
                if a.expected.trim().is_empty() || !a.expected.trim().bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ToolError::bad_argument("expected must be a hex digest"));
                }
                let path = c.existing_file(&a.path)?;
                blocking(move || {
                    let (actual, _) = hash_file(&path, &a.path, algorithm, chunk, Some(&ctx))?;
                    Ok(VerifyOut {
                        path: show(&path),
                        algorithm: algorithm.name(),
                        matched: digests_match(&actual, &a.expected),
                        actual,
                    })
                })
                .await
            }
        },
    );
}
