//! AES-GCM file encryption in automation-file's envelope, so files encrypted by either side
//! decrypt on the other:
//!
//! `b"FA-AESG"` | version 0x01 | flags 0x00 | aad_len u32 BE | nonce (12) | aad | ciphertext+tag

use std::sync::Arc;

use aes_gcm::{
    Aes128Gcm, Aes256Gcm, AesGcm, KeyInit,
    aead::{Aead, Payload, consts::U12},
    aes::Aes192,
};
use base64::Engine;
use maljan_server::{Registry, ToolError, ToolMeta, blocking};
use rand::RngCore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Config, paths::show};

const MAGIC: &[u8; 7] = b"FA-AESG";
const VERSION: u8 = 1;
const HEADER: usize = 7 + 2 + 4;
const NONCE: usize = 12;
const TAG: usize = 16;
/// GCM's per-message limit is about 64 GiB; files are read whole, so keep well below memory too.
const MAX_PLAINTEXT: u64 = 4 * 1024 * 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EncryptArgs {
    /// The file to encrypt.
    source: String,
    /// The envelope file written.
    target: String,
    /// The AES key, base64: 16, 24 or 32 bytes once decoded.
    key: String,
    /// Authenticated but unencrypted data stored in the envelope, as text.
    #[serde(default)]
    #[schemars(default)]
    associated_data: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DecryptArgs {
    /// The envelope file (FA-AESG).
    source: String,
    /// The plaintext file written.
    target: String,
    /// The AES key, base64: 16, 24 or 32 bytes once decoded.
    key: String,
}

#[derive(Serialize, JsonSchema)]
struct CryptoOut {
    target: String,
    plaintext_bytes: u64,
    ciphertext_bytes: u64,
}

enum Cipher {
    A128(Box<Aes128Gcm>),
    A192(Box<AesGcm<Aes192, U12>>),
    A256(Box<Aes256Gcm>),
}

impl Cipher {
    fn new(key_b64: &str) -> Result<Self, ToolError> {
        let key = base64::engine::general_purpose::STANDARD
            .decode(key_b64.trim())
            .map_err(|_| ToolError::bad_argument("key must be base64"))?;
        Ok(match key.len() {
            16 => Cipher::A128(Box::new(
                Aes128Gcm::new_from_slice(&key).map_err(|_| bad_len(16))?,
            )),
            24 => Cipher::A192(Box::new(
                AesGcm::<Aes192, U12>::new_from_slice(&key).map_err(|_| bad_len(24))?,
            )),
            32 => Cipher::A256(Box::new(
                Aes256Gcm::new_from_slice(&key).map_err(|_| bad_len(32))?,
            )),
            n => return Err(bad_len(n)),
        })
    }

    fn seal(&self, nonce: &[u8], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, aes_gcm::Error> {
        let n = aes_gcm::Nonce::from_slice(nonce);
        let p = Payload { msg, aad };
        match self {
            Cipher::A128(c) => c.encrypt(n, p),
            Cipher::A192(c) => c.encrypt(n, p),
            Cipher::A256(c) => c.encrypt(n, p),
        }
    }

    fn open(&self, nonce: &[u8], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, aes_gcm::Error> {
        let n = aes_gcm::Nonce::from_slice(nonce);
        let p = Payload { msg, aad };
        match self {
            Cipher::A128(c) => c.decrypt(n, p),
            Cipher::A192(c) => c.decrypt(n, p),
            Cipher::A256(c) => c.decrypt(n, p),
        }
    }
}

fn bad_len(n: usize) -> ToolError {
    ToolError::bad_argument(format!(
        "the key must be 16, 24 or 32 bytes once base64-decoded, not {n}"
    ))
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_encrypt_file",
            "Encrypt a file with AES-GCM (key as base64) into automation-file's FA-AESG envelope.",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(600),
        move |_ctx, a: EncryptArgs| {
            let c = c.clone();
            async move {
                let cipher = Cipher::new(&a.key)?;
                let src = c.existing_file(&a.source)?;
                let target = c.target(&a.target)?;
                blocking(move || {
                    let size = src.size()?;
                    if size > MAX_PLAINTEXT {
                        return Err(ToolError::bad_argument(format!(
                            "{} is larger than {MAX_PLAINTEXT} bytes; split it first (FA_file_split)",
                            a.source
                        )));
                    }
                    let plain = src.bytes()?;
                    let aad = a.associated_data.as_bytes();
                    let mut nonce = [0u8; NONCE];
                    rand::rng().fill_bytes(&mut nonce);
                    let sealed = cipher
                        .seal(&nonce, &plain, aad)
                        .map_err(|_| ToolError::tool_failed("encryption failed"))?;
                    let mut envelope = Vec::with_capacity(HEADER + NONCE + aad.len() + sealed.len());
                    envelope.extend_from_slice(MAGIC);
                    envelope.extend_from_slice(&[VERSION, 0]);
                    envelope.extend_from_slice(&(aad.len() as u32).to_be_bytes());
                    envelope.extend_from_slice(&nonce);
                    envelope.extend_from_slice(aad);
                    envelope.extend_from_slice(&sealed);
                    if let Some(parent) = target.parent() {
                        c.roots.create_dir_all(parent, &a.target)?;
                    }
                    c.write_atomic(&target, &a.target, &envelope)?;
                    Ok(CryptoOut {
                        target: show(&target),
                        plaintext_bytes: plain.len() as u64,
                        ciphertext_bytes: envelope.len() as u64,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_decrypt_file",
            "Decrypt an FA-AESG envelope (AES-GCM, key as base64); a wrong key or tampering writes nothing.",
        )
        .destructive()
        .timeout_s(600),
        move |_ctx, a: DecryptArgs| {
            let c = c.clone();
            async move {
                let cipher = Cipher::new(&a.key)?;
                let src = c.existing_file(&a.source)?;
                let target = c.target(&a.target)?;
                blocking(move || {
                    let envelope = src.bytes()?;
                    let (nonce, aad, sealed) = parse_envelope(&envelope)?;
                    let plain = cipher.open(nonce, sealed, aad).map_err(|_| {
                        ToolError::bad_argument("authentication failed: wrong key or tampered data")
                            .with_remediation("use the key the file was encrypted with; a tampered file cannot be recovered")
                    })?;
                    if let Some(parent) = target.parent() {
                        c.roots.create_dir_all(parent, &a.target)?;
                    }
                    c.write_atomic(&target, &a.target, &plain)?;
                    Ok(CryptoOut {
                        target: show(&target),
                        plaintext_bytes: plain.len() as u64,
                        ciphertext_bytes: envelope.len() as u64,
                    })
                })
                .await
            }
        },
    );
}

/// nonce, associated data, ciphertext with tag.
type Parts<'a> = (&'a [u8], &'a [u8], &'a [u8]);

fn parse_envelope(e: &[u8]) -> Result<Parts<'_>, ToolError> {
    let bad = |m: &str| ToolError::unsupported_format(format!("not an FA-AESG envelope: {m}"));
    if e.len() < HEADER + NONCE + TAG {
        return Err(bad("shorter than the fixed header"));
    }
    if &e[..7] != MAGIC {
        return Err(bad("bad magic"));
    }
    if e[7] != VERSION {
        return Err(bad(&format!("unsupported version {}", e[7])));
    }
    let aad_len = u32::from_be_bytes([e[9], e[10], e[11], e[12]]) as usize;
    let nonce_end = HEADER + NONCE;
    let aad_end = nonce_end
        .checked_add(aad_len)
        .filter(|&end| end + TAG <= e.len())
        .ok_or_else(|| bad("truncated"))?;
    Ok((&e[HEADER..nonce_end], &e[nonce_end..aad_end], &e[aad_end..]))
}
