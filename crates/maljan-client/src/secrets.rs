//! Secrets at rest: an `auth_token` is stored as `enc:v1:<base64url(nonce ‖ ciphertext)>`, sealed
//! with ChaCha20-Poly1305 under a 32-byte key from `MALJAN_SECRET_KEY` (64 hex digits or base64)
//! or the key file `<data dir>/secret.key` (created 0o600 on first use).
//!
//! [`Secret`] never shows its value in `Debug`/`Display`: a token cannot reach a log by accident.

use std::{
    fmt,
    io::Write,
    path::{Path, PathBuf},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chacha20poly1305::{
    ChaCha20Poly1305, KeyInit, Nonce,
    aead::{Aead, Payload},
};

const PREFIX: &str = "enc:v1:";
const AAD: &[u8] = b"maljan auth_token v1";

/// A value that must never be printed. `expose()` is the only way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(**********)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("**********")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("MALJAN_SECRET_KEY is not a 32-byte key (64 hex digits or base64)")]
    BadEnvKey,
    #[error(
        "the key file {0} is not a 32-byte key; move it away to create a new one (tokens sealed with it are then lost)"
    )]
    BadKeyFile(PathBuf),
    #[error("cannot read or create the key file {path}: {err}")]
    KeyFileIo { path: PathBuf, err: std::io::Error },
    #[error("the stored token is not in the enc:v1 format")]
    NotSealed,
    #[error(
        "the stored token cannot be opened with this key (a different MALJAN_SECRET_KEY or key file?); set it again with `maljan servers set-token NAME`"
    )]
    WrongKey,
}

/// Where the sealing key comes from.
#[derive(Debug, Clone)]
pub struct KeySource {
    pub key_file: PathBuf,
}

impl KeySource {
    /// The default: `MALJAN_SECRET_KEY`, else `<data dir>/secret.key`.
    pub fn in_dir(data_dir: &Path) -> Self {
        Self {
            key_file: data_dir.join("secret.key"),
        }
    }

    fn key(&self, create: bool) -> Result<[u8; 32], SecretError> {
        if let Ok(v) = std::env::var("MALJAN_SECRET_KEY")
            && !v.is_empty()
        {
            return parse_key(v.trim()).ok_or(SecretError::BadEnvKey);
        }
        let io = |err| SecretError::KeyFileIo {
            path: self.key_file.clone(),
            err,
        };
        match std::fs::read_to_string(&self.key_file) {
            Ok(text) => {
                parse_key(text.trim()).ok_or_else(|| SecretError::BadKeyFile(self.key_file.clone()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                use std::os::unix::fs::OpenOptionsExt;
                if let Some(dir) = self.key_file.parent() {
                    crate::paths::ensure_private_dir(dir).map_err(io)?;
                }
                let key: [u8; 32] = rand::random();
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&self.key_file)
                    .map_err(io)?;
                f.write_all(hex::encode(key).as_bytes()).map_err(io)?;
                f.write_all(b"\n").map_err(io)?;
                Ok(key)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Seals `token` as `enc:v1:…`, creating the key file if needed.
    pub fn seal(&self, token: &Secret) -> Result<String, SecretError> {
        let key = self.key(true)?;
        let cipher = ChaCha20Poly1305::new(&key.into());
        let nonce: [u8; 12] = rand::random();
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: token.expose().as_bytes(),
                    aad: AAD,
                },
            )
            .map_err(|_| SecretError::WrongKey)?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Opens an `enc:v1:…` value.
    pub fn open(&self, stored: &str) -> Result<Secret, SecretError> {
        let body = stored.strip_prefix(PREFIX).ok_or(SecretError::NotSealed)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SecretError::NotSealed)?;
        if bytes.len() < 12 + 16 {
            return Err(SecretError::NotSealed);
        }
        let key = self.key(false)?;
        let cipher = ChaCha20Poly1305::new(&key.into());
        let (nonce, ct) = bytes.split_at(12);
        let plain = cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: AAD })
            .map_err(|_| SecretError::WrongKey)?;
        String::from_utf8(plain)
            .map(Secret)
            .map_err(|_| SecretError::WrongKey)
    }
}

/// Reads one line holding a secret: from a terminal with echo off after `prompt` (on stderr), else
/// from stdin as piped. Surrounding whitespace is trimmed.
pub fn read_secret_line(prompt: &str) -> std::io::Result<Secret> {
    use std::io::BufRead;
    let fd = libc::STDIN_FILENO;
    // SAFETY: isatty/tcgetattr/tcsetattr only read or write the termios struct we own.
    let tty = unsafe { libc::isatty(fd) } == 1;
    let mut saved: Option<libc::termios> = None;
    if tty {
        eprint!("{prompt}");
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) == 0 {
                saved = Some(t);
                t.c_lflag &= !libc::ECHO;
                libc::tcsetattr(fd, libc::TCSANOW, &t);
            }
        }
    }
    let mut line = String::new();
    let r = std::io::stdin().lock().read_line(&mut line);
    if let Some(t) = saved {
        unsafe {
            libc::tcsetattr(fd, libc::TCSANOW, &t);
        }
        eprintln!();
    }
    r?;
    Ok(Secret::new(line.trim()))
}

/// True when a stored value is sealed (as opposed to plain text someone wrote into the file).
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

fn parse_key(text: &str) -> Option<[u8; 32]> {
    if text.len() == 64
        && let Ok(bytes) = hex::decode(text)
    {
        return bytes.try_into().ok();
    }
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ] {
        if let Ok(bytes) = engine.decode(text) {
            return bytes.try_into().ok();
        }
    }
    URL_SAFE_NO_PAD
        .decode(text)
        .ok()
        .and_then(|b| b.try_into().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_open_round_trip_with_a_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let keys = KeySource::in_dir(dir.path());
        // Only the key file path is used here; MALJAN_SECRET_KEY is not set in unit tests.
        if std::env::var_os("MALJAN_SECRET_KEY").is_some() {
            return;
        }
        let sealed = keys.seal(&Secret::new("s3cr3t-token")).unwrap();
        assert!(sealed.starts_with("enc:v1:"));
        assert!(!sealed.contains("s3cr3t"));
        assert_eq!(keys.open(&sealed).unwrap().expose(), "s3cr3t-token");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&keys.key_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Another key cannot open it.
        let other = tempfile::tempdir().unwrap();
        let other_keys = KeySource::in_dir(other.path());
        other_keys.seal(&Secret::new("x")).unwrap();
        assert!(matches!(
            other_keys.open(&sealed),
            Err(SecretError::WrongKey)
        ));
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?} {s}").contains("hunter2"));
    }
}
