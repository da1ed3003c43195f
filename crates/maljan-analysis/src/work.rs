//! The analysis server's own work directory: where everything its tools carve or extract is
//! written (`carved/<sha256 of the sample>/…`), so the evidence — the sample's folder, which may be
//! read-only or must stay untouched — is never written to.
//!
//! Either a directory the caller owns (the job's private directory, `--work-dir`), kept as it is,
//! or a private one made for this process (`analysis-<pid>-<random>`, 0700) and removed when the
//! last handle to it is dropped. A process killed before it could clean up leaves its directory
//! behind; the next server started under the same parent removes those of processes that no
//! longer run.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

/// The work directory, shared by every tool of one server (clones share it).
#[derive(Debug, Clone)]
pub struct WorkDir {
    path: PathBuf,
    /// Present when this process made the directory: removes it when the last clone goes.
    _owned: Option<Arc<tempfile::TempDir>>,
}

/// The prefix of a per-process work directory's name.
const PREFIX: &str = "analysis-";

impl WorkDir {
    /// A directory the caller owns: created (0700, with its parents) when missing, never removed.
    pub fn given(dir: &Path) -> std::io::Result<Self> {
        create_private(dir)?;
        Ok(WorkDir {
            path: std::fs::canonicalize(dir)?,
            _owned: None,
        })
    }

    /// A fresh private directory under `parent` (made 0700 when missing), removed when the last
    /// clone is dropped; left-overs of processes that no longer run are removed first.
    pub fn private_under(parent: &Path) -> std::io::Result<Self> {
        create_private(parent)?;
        sweep_stale(parent);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?;
        // Whatever the umask or the tempfile version did, the directory is the owner's alone.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(WorkDir {
            path: std::fs::canonicalize(dir.path())?,
            _owned: Some(Arc::new(dir)),
        })
    }

    /// The directory (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this process made it (and so removes it).
    pub fn is_private(&self) -> bool {
        self._owned.is_some()
    }
}

fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Removes `analysis-<pid>-*` directories under `parent` whose process no longer runs.
fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid > 0 && !alive(pid) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks whether the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_0700_and_removed_with_the_last_handle() {
        let parent = tempfile::tempdir().unwrap();
        let work = WorkDir::private_under(&parent.path().join("work")).unwrap();
        let path = work.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let clone = work.clone();
        drop(work);
        assert!(path.is_dir(), "a clone still holds it");
        drop(clone);
        assert!(!path.exists());
    }

    #[test]
    fn leftovers_of_dead_processes_are_swept() {
        let parent = tempfile::tempdir().unwrap();
        // A pid far above any the kernel hands out (pid_max is at most 2^22).
        let stale = parent.path().join(format!("{PREFIX}{}-x", 1 << 30));
        std::fs::create_dir(&stale).unwrap();
        let mine = parent
            .path()
            .join(format!("{PREFIX}{}-y", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let _work = WorkDir::private_under(parent.path()).unwrap();
        assert!(!stale.exists());
        assert!(mine.exists(), "a running process keeps its directory");
    }

    #[test]
    fn a_given_directory_is_kept() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("job-1/work");
        let work = WorkDir::given(&dir).unwrap();
        assert!(!work.is_private());
        drop(work);
        assert!(dir.is_dir());
    }
}
