//! The console's credentials and who holds which: the owner's login token, the admin password,
//! the API tokens with their scopes, and the sessions they open.
//!
//! - The **owner's login token** is drawn afresh each time a console starts, kept in memory and
//!   in a 0600 file in the data directory (`console-login.url`, the login URL), and printed once
//!   on stderr as that URL, as Jupyter does: only the account that started the console (and
//!   root) can read it. Opening the URL gives an `admin` session.
//! - The **admin password** (`maljan console set-password`, an argon2 hash) gives an `admin`
//!   session too; changing it ends every older session.
//! - **API tokens** (`maljan console token --scope read|submit|admin`) are kept as SHA-256
//!   digests with their scope, creation and last use; `--revoke ID` removes one, and the
//!   sessions opened with it end with it.
//!
//! The file (`console-auth.toml`, 0600) is the store: every check looks at it again (a `stat`,
//! and a fresh read when it changed), so a token made, a token revoked or a password set by the
//! CLI takes effect on a running console at once. Writers hold an exclusive lock on
//! `console-auth.lock` and re-read the file under it, so the CLI and a console noting a token's
//! last use never undo each other's change.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier, password_hash::SaltString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a session lasts without a new login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// A token's last use is written to the store at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// What a token or a session may do; each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read pages, jobs, reports and the ledger.
    Read,
    /// Read, and submit and cancel jobs (on the servers the admin configured).
    Submit,
    /// Everything: add, change, test and remove servers (a stdio server is a program this
    /// console starts), and the settings.
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Submit => "submit",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" => Some(Scope::Read),
            "submit" => Some(Scope::Submit),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token made before tokens had scopes may submit jobs, no more: the power to run programs
/// has to be granted again, on purpose (`maljan console token --scope admin`).
fn legacy_scope() -> Scope {
    Scope::Submit
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct AuthFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    password_hash: Option<String>,
    /// Drawn again whenever the password changes: a session opened under another epoch has
    /// ended.
    #[serde(default)]
    session_epoch: String,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenEntry {
    pub sha256: String,
    pub label: String,
    pub created_at: String,
    #[serde(default = "legacy_scope")]
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<String>,
}

impl TokenEntry {
    /// The token's public id (`--list`, `--revoke`): the start of its digest, which tells
    /// nothing of the token itself.
    pub fn id(&self) -> &str {
        &self.sha256[..self.sha256.len().min(12)]
    }
}

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A browser session (the cookie's id).
    Session { sid: String, scope: Scope },
    /// A bearer token (`owner` for the owner's login token).
    Token { id: String, scope: Scope },
}

impl Identity {
    pub fn scope(&self) -> Scope {
        match self {
            Identity::Session { scope, .. } | Identity::Token { scope, .. } => *scope,
        }
    }
}

/// What opened a session, so that its end can follow that credential's.
#[derive(Debug, Clone)]
struct Session {
    created: Instant,
    scope: Scope,
    epoch: String,
    /// The API token it was opened with (ends when the token is revoked).
    token_id: Option<String>,
}

/// A file's identity and version: a rename-into-place changes the inode, a write the mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    len: u64,
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Fingerprint {
        dev: m.dev(),
        ino: m.ino(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        len: m.len(),
    })
}

struct Cached {
    file: AuthFile,
    seen: Option<Fingerprint>,
}

/// The store of credentials (see the module's comment) and the sessions of this process.
pub struct AuthStore {
    path: PathBuf,
    cached: Mutex<Cached>,
    sessions: Mutex<HashMap<String, Session>>,
    csrf_key: [u8; 32],
    owner_token: String,
    /// When this process last wrote each token's last use.
    touched: Mutex<HashMap<String, Instant>>,
}

fn now_rfc3339() -> String {
    maljan_client::time::rfc3339(SystemTime::now())
}

fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn read_file(path: &Path) -> anyhow::Result<AuthFile> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AuthFile::default()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
}

/// Writes `text` to `path` through a 0600 temporary file renamed into place.
pub(crate) fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    if let Some(dir) = path.parent() {
        maljan_client::paths::ensure_private_dir(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

impl AuthStore {
    pub fn file_in(data_dir: &Path) -> PathBuf {
        data_dir.join("console-auth.toml")
    }

    /// Where a started console keeps its login URL (0600), beside the store.
    pub fn login_file_in(data_dir: &Path) -> PathBuf {
        data_dir.join("console-login.url")
    }

    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = Self::file_in(data_dir);
        let seen = fingerprint(&path);
        let file = read_file(&path)?;
        Ok(Self {
            path,
            cached: Mutex::new(Cached { file, seen }),
            sessions: Mutex::default(),
            csrf_key: rand::random(),
            owner_token: format!("mjo_{}", hex::encode(rand::random::<[u8; 32]>())),
            touched: Mutex::default(),
        })
    }

    /// The store as it is on disk now (read again only when the file changed). A file that
    /// no longer parses counts as empty: no password, no token — the console fails closed.
    fn current(&self) -> AuthFile {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let now = fingerprint(&self.path);
        if now != cached.seen {
            cached.file = read_file(&self.path).unwrap_or_else(|e| {
                tracing::warn!("the console's credentials do not read ({e}): refusing them all");
                AuthFile {
                    session_epoch: "unreadable".into(),
                    ..AuthFile::default()
                }
            });
            cached.seen = now;
        }
        cached.file.clone()
    }

    /// Changes the store under its lock, on what is on disk at that moment.
    fn update<R>(&self, change: impl FnOnce(&mut AuthFile) -> R) -> anyhow::Result<R> {
        if let Some(dir) = self.path.parent() {
            maljan_client::paths::ensure_private_dir(dir)?;
        }
        let lock = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(self.path.with_extension("lock"))?
        };
        lock.lock()?;
        let mut file = read_file(&self.path)?;
        let out = change(&mut file);
        write_private(&self.path, &toml::to_string_pretty(&file)?)?;
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached.seen = fingerprint(&self.path);
        cached.file = file;
        drop(lock);
        Ok(out)
    }

    pub fn has_password(&self) -> bool {
        self.current().password_hash.is_some()
    }

    /// Stores the argon2 hash of `password` (at least 8 characters) and ends every session
    /// opened before.
    pub fn set_password(&self, password: &str) -> anyhow::Result<()> {
        if password.chars().count() < 8 {
            anyhow::bail!("the password needs at least 8 characters");
        }
        let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
            .map_err(|e| anyhow::anyhow!("salt: {e}"))?;
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| anyhow::anyhow!("argon2: {e}"))?
            .to_string();
        self.update(|file| {
            file.password_hash = Some(hash);
            file.session_epoch = hex::encode(rand::random::<[u8; 16]>());
        })
    }

    pub fn check_password(&self, password: &str) -> bool {
        let Some(stored) = self.current().password_hash else {
            return false;
        };
        PasswordHash::new(&stored).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    }

    /// Makes a new API token with `scope`; returns its id and the token (shown once: only its
    /// digest is kept).
    pub fn create_token(&self, label: &str, scope: Scope) -> anyhow::Result<(String, String)> {
        let token = format!("mjc_{}", hex::encode(rand::random::<[u8; 32]>()));
        let entry = TokenEntry {
            sha256: digest(&token),
            label: label.to_string(),
            created_at: now_rfc3339(),
            scope,
            last_used: None,
        };
        let id = entry.id().to_string();
        self.update(|file| file.tokens.push(entry))?;
        Ok((id, token))
    }

    /// Removes the token whose id is `id` (or starts with it, when that names one token).
    /// Returns the removed entry; its sessions end with it.
    pub fn revoke_token(&self, id: &str) -> anyhow::Result<TokenEntry> {
        let id = id.trim().to_ascii_lowercase();
        anyhow::ensure!(
            id.len() >= 4,
            "a token id has at least 4 characters (see --list)"
        );
        let removed = self.update(|file| {
            let hits: Vec<usize> = (0..file.tokens.len())
                .filter(|&i| file.tokens[i].id().starts_with(&id))
                .collect();
            match hits.as_slice() {
                [one] => Ok(file.tokens.remove(*one)),
                [] => Err(anyhow::anyhow!("no token with id {id} (see --list)")),
                _ => Err(anyhow::anyhow!(
                    "{} tokens have ids starting with {id}: give more of it",
                    hits.len()
                )),
            }
        })??;
        Ok(removed)
    }

    pub fn tokens(&self) -> Vec<TokenEntry> {
        self.current().tokens
    }

    /// The owner's login token of this process (see the module's comment).
    pub fn owner_token(&self) -> &str {
        &self.owner_token
    }

    /// Who `token` is: the owner (admin), an API token with its scope, or nobody.
    pub fn check_token(&self, token: &str) -> Option<Identity> {
        if bool::from(token.as_bytes().ct_eq(self.owner_token.as_bytes())) {
            return Some(Identity::Token {
                id: "owner".into(),
                scope: Scope::Admin,
            });
        }
        let wanted = digest(token);
        let file = self.current();
        let entry = file
            .tokens
            .iter()
            .find(|t| bool::from(t.sha256.as_bytes().ct_eq(wanted.as_bytes())))?;
        self.touch(entry.id());
        Some(Identity::Token {
            id: entry.id().to_string(),
            scope: entry.scope,
        })
    }

    /// Notes a token's last use in the store, at most once a minute per token.
    fn touch(&self, id: &str) {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            if touched.get(id).is_some_and(|at| at.elapsed() < TOUCH_EVERY) {
                return;
            }
            touched.insert(id.to_string(), Instant::now());
        }
        let stamp = now_rfc3339();
        let result = self.update(|file| {
            if let Some(t) = file.tokens.iter_mut().find(|t| t.id() == id) {
                t.last_used = Some(stamp);
            }
        });
        if let Err(e) = result {
            tracing::debug!("a token's last use was not written: {e}");
        }
    }

    /// Opens a session with `scope` (`token_id`: the API token it was opened with).
    pub fn new_session(&self, scope: Scope, token_id: Option<&str>) -> String {
        let epoch = self.current().session_epoch;
        let id = hex::encode(rand::random::<[u8; 32]>());
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.created.elapsed() < SESSION_TTL);
        sessions.insert(
            id.clone(),
            Session {
                created: Instant::now(),
                scope,
                epoch,
                token_id: token_id.map(str::to_string),
            },
        );
        id
    }

    pub fn end_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The session `sid`, while it lasts: not expired, opened since the password last changed,
    /// and its token (if any) not revoked.
    pub fn session(&self, sid: &str) -> Option<Identity> {
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sid)
            .cloned()?;
        let file = self.current();
        let alive = session.created.elapsed() < SESSION_TTL
            && session.epoch == file.session_epoch
            && session
                .token_id
                .as_deref()
                .is_none_or(|id| id == "owner" || file.tokens.iter().any(|t| t.id() == id));
        if !alive {
            self.end_session(sid);
            return None;
        }
        Some(Identity::Session {
            sid: sid.to_string(),
            scope: session.scope,
        })
    }

    /// The CSRF token of a session (`login` is the one of the login form, before a session).
    pub fn csrf_for(&self, sid: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.csrf_key);
        h.update(b"csrf:");
        h.update(sid.as_bytes());
        hex::encode(h.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_order_and_parse() {
        assert!(Scope::Read < Scope::Submit && Scope::Submit < Scope::Admin);
        assert_eq!(Scope::parse(" Admin "), Some(Scope::Admin));
        assert_eq!(Scope::parse("root"), None);
    }

    #[test]
    fn a_second_store_sees_a_new_token_a_revocation_and_a_password_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let console = AuthStore::load(dir.path()).unwrap();
        let cli = AuthStore::load(dir.path()).unwrap();
        let (id, token) = cli.create_token("ci", Scope::Read).unwrap();
        assert_eq!(
            console.check_token(&token),
            Some(Identity::Token {
                id: id.clone(),
                scope: Scope::Read
            })
        );
        let sid = console.new_session(Scope::Read, Some(&id));
        assert!(console.session(&sid).is_some());
        cli.revoke_token(&id).unwrap();
        assert_eq!(console.check_token(&token), None, "revoked at once");
        assert!(console.session(&sid).is_none(), "its session ended with it");

        let admin = console.new_session(Scope::Admin, None);
        cli.set_password("a long password").unwrap();
        assert!(
            console.session(&admin).is_none(),
            "set-password ends older sessions"
        );
        assert!(console.check_password("a long password"));
        let fresh = console.new_session(Scope::Admin, None);
        assert!(console.session(&fresh).is_some());
    }

    #[test]
    fn legacy_tokens_read_as_submit_and_ids_are_digest_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let token = "mjc_legacy";
        std::fs::write(
            AuthStore::file_in(dir.path()),
            format!(
                "[[tokens]]\nsha256 = \"{}\"\nlabel = \"old\"\ncreated_at = \"2026-01-01T00:00:00Z\"\n",
                digest(token)
            ),
        )
        .unwrap();
        let store = AuthStore::load(dir.path()).unwrap();
        let Some(Identity::Token { id, scope }) = store.check_token(token) else {
            panic!("the legacy token is known");
        };
        assert_eq!(scope, Scope::Submit);
        assert_eq!(id, &digest(token)[..12]);
        let listed = store.tokens();
        assert!(listed[0].last_used.is_some(), "its use is noted");
    }

    #[test]
    fn the_store_is_private_and_keeps_no_token() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = AuthStore::load(dir.path()).unwrap();
        let (_, token) = store.create_token("x", Scope::Admin).unwrap();
        let path = AuthStore::file_in(dir.path());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!std::fs::read_to_string(&path).unwrap().contains(&token));
        assert!(store.revoke_token("zzzz").is_err());
    }
}
