//! Starting a stdio server: a child process in its own process group, with a cleared environment
//! (only [`crate::config::BASE_ENV`], `env_allow` and `env`), whose stderr goes to a bounded log
//! and never into the protocol. Dropping the [`ChildGuard`] kills the whole group.

use std::{
    collections::{BTreeMap, VecDeque},
    ffi::OsString,
    io::Write,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
};

use tokio::{
    io::AsyncReadExt,
    process::{Child, ChildStdin, ChildStdout, Command},
};

use crate::config::{BASE_ENV, ServerConfig};

/// The last bytes a server wrote to stderr, kept in memory (and mirrored to a capped file) so a
/// failure can say why without the log growing without bound.
#[derive(Clone, Default)]
pub struct StderrLog {
    inner: Arc<Mutex<StderrInner>>,
}

#[derive(Default)]
struct StderrInner {
    tail: VecDeque<u8>,
    total: u64,
}

/// Bytes of stderr kept in memory per server.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// Size at which the stderr file is rotated to `.1` (so at most twice this on disk).
pub const STDERR_FILE_BYTES: u64 = 1024 * 1024;

impl StderrLog {
    fn push(&self, bytes: &[u8]) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.total += bytes.len() as u64;
        let bytes = if bytes.len() > STDERR_TAIL_BYTES {
            &bytes[bytes.len() - STDERR_TAIL_BYTES..]
        } else {
            bytes
        };
        let overflow = (g.tail.len() + bytes.len()).saturating_sub(STDERR_TAIL_BYTES);
        g.tail.drain(..overflow);
        g.tail.extend(bytes);
    }

    /// The last `max` bytes as text (lossy), trimmed to whole lines where possible.
    pub fn tail(&self, max: usize) -> String {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let skip = g.tail.len().saturating_sub(max);
        let bytes: Vec<u8> = g.tail.iter().skip(skip).copied().collect();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match (skip > 0, text.find('\n')) {
            (true, Some(i)) if i + 1 < text.len() => text[i + 1..].trim_end().to_string(),
            _ => text.trim_end().to_string(),
        }
    }

    /// Total bytes the server has written to stderr.
    pub fn total_bytes(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// A running child: killed, with its process group, when dropped.
pub struct ChildGuard {
    child: Child,
    pgid: Option<i32>,
    pub stderr: StderrLog,
}

impl ChildGuard {
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The exit status, if the process has ended.
    pub fn try_exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn kill_group(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg only sends a signal; a stale pgid at worst hits nothing (ESRCH).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill_group();
        // Reap it so no zombie is left behind; tokio's orphan reaper finishes the job if this fails.
        let _ = self.child.try_wait();
    }
}

/// The environment a stdio child gets: [`BASE_ENV`] and `env_allow` from `parent`, then `env`,
/// then `PYTHONIOENCODING=utf-8` if still unset. Nothing else passes through.
pub fn child_env(
    cfg: &ServerConfig,
    parent: impl Fn(&str) -> Option<OsString>,
) -> BTreeMap<OsString, OsString> {
    let mut env = BTreeMap::new();
    for name in BASE_ENV
        .iter()
        .copied()
        .chain(cfg.env_allow.iter().map(String::as_str))
    {
        if let Some(v) = parent(name) {
            env.insert(OsString::from(name), v);
        }
    }
    for (k, v) in &cfg.env {
        env.insert(OsString::from(k), OsString::from(v));
    }
    env.entry(OsString::from("PYTHONIOENCODING"))
        .or_insert_with(|| OsString::from("utf-8"));
    env
}

/// Resolves `cwd`: relative to `base`; it must be an existing directory.
pub fn resolve_cwd(cwd: &str, base: &Path) -> Result<Option<PathBuf>, String> {
    if cwd.is_empty() {
        return Ok(None);
    }
    let p = Path::new(cwd);
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    if p.is_dir() {
        Ok(Some(p))
    } else {
        Err(format!("cwd {} is not an existing directory", p.display()))
    }
}

/// Spawns the server. `log_file`: where stderr is mirrored (rotated at [`STDERR_FILE_BYTES`]).
pub fn spawn(
    cfg: &ServerConfig,
    base_dir: &Path,
    log_file: Option<PathBuf>,
) -> Result<(ChildGuard, ChildStdout, ChildStdin), String> {
    let mut cmd = Command::new(&cfg.command);
    cmd.args(&cfg.args)
        .env_clear()
        .envs(child_env(cfg, |n| std::env::var_os(n)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = resolve_cwd(&cfg.cwd, base_dir)? {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} not found on PATH", cfg.command),
        std::io::ErrorKind::PermissionDenied => {
            format!("{} is not executable (permission denied)", cfg.command)
        }
        _ => format!("cannot start {}: {e}", cfg.command),
    })?;
    let pgid = child.id().map(|p| p as i32);
    let stdout = child
        .stdout
        .take()
        .ok_or("the child's stdout was not captured")?;
    let stdin = child
        .stdin
        .take()
        .ok_or("the child's stdin was not captured")?;
    let stderr = StderrLog::default();
    if let Some(mut pipe) = child.stderr.take() {
        let log = stderr.clone();
        tokio::spawn(async move {
            let mut file = log_file.and_then(|p| RotatingFile::open(p).ok());
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        log.push(&buf[..n]);
                        if let Some(f) = file.as_mut() {
                            f.write(&buf[..n]);
                        }
                    }
                }
            }
        });
    }
    Ok((
        ChildGuard {
            child,
            pgid,
            stderr,
        },
        stdout,
        stdin,
    ))
}

/// A log file that is rotated to `<name>.1` when it passes [`STDERR_FILE_BYTES`].
struct RotatingFile {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
}

impl RotatingFile {
    fn open(path: PathBuf) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent() {
            crate::paths::ensure_private_dir(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Self { path, file, len })
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() as u64 > STDERR_FILE_BYTES {
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            let _ = std::fs::rename(&self.path, &old);
            if let Ok(f) = Self::open(self.path.clone()) {
                *self = f;
            }
        }
        if self.file.write_all(bytes).is_ok() {
            self.len += bytes.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_base_allowed_and_configured_variables_pass() {
        let cfg = ServerConfig {
            command: "x".into(),
            env_allow: vec!["ALLOWED".into()],
            env: [("SET".to_string(), "1".to_string())].into(),
            ..Default::default()
        };
        let parent = |n: &str| match n {
            "PATH" | "ALLOWED" | "SECRET_THING" => Some(OsString::from("v")),
            _ => None,
        };
        let env = child_env(&cfg, parent);
        let names: Vec<_> = env
            .keys()
            .map(|k| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["ALLOWED", "PATH", "PYTHONIOENCODING", "SET"]);
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let log = StderrLog::default();
        for _ in 0..100 {
            log.push(&[b'x'; 4096]);
        }
        log.push(b"\nlast line\n");
        assert_eq!(log.total_bytes(), 100 * 4096 + 11);
        assert!(log.tail(usize::MAX).len() <= STDERR_TAIL_BYTES);
        assert!(log.tail(20).ends_with("last line"));
    }
}
