//! Path arguments: every one is resolved under the server's roots before any file is touched.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use maljan_server::{IN_PLACE_BYTES, ToolError};

use crate::Config;

/// An existing regular file, for a tool that reads it whole.
pub(crate) enum FileInput {
    /// Small enough to work on at once ([`IN_PLACE_BYTES`] at most): its bytes, read already.
    Read { path: PathBuf, bytes: Vec<u8> },
    /// Bigger: to be read on the blocking pool, from the handle already opened.
    Later(Opened),
}

/// A regular file opened under the roots: every read goes through `file`, the handle that was
/// checked, never through the name again.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The resolved path, for answers.
    pub(crate) path: PathBuf,
    /// The path as the caller gave it, for error words.
    pub(crate) given: String,
    pub(crate) file: std::fs::File,
}

impl Opened {
    /// The file's size by `fstat`.
    pub(crate) fn size(&self) -> Result<u64, ToolError> {
        Ok(self.file.metadata().map_err(io_err(&self.given))?.len())
    }

    /// The whole content.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, ToolError> {
        self.bytes_until(&|| false)
    }

    /// The whole content, read a few MiB at a time with `stop` asked in between (a cancelled
    /// or timed-out call stops reading a big file within a moment).
    pub(crate) fn bytes_until(&self, stop: &dyn Fn() -> bool) -> Result<Vec<u8>, ToolError> {
        let mut out = Vec::with_capacity(self.size().unwrap_or(0).min(1 << 30) as usize);
        loop {
            let got = (&self.file)
                .take(CANCEL_CHECK_BYTES)
                .read_to_end(&mut out)
                .map_err(io_err(&self.given))?;
            if got == 0 {
                return Ok(out);
            }
            if stop() {
                return Err(cancelled());
            }
        }
    }

    /// The whole content as UTF-8 text.
    pub(crate) fn text(&self) -> Result<String, ToolError> {
        String::from_utf8(self.bytes()?).map_err(|_| {
            ToolError::bad_argument(format!(
                "{}: stream did not contain valid UTF-8",
                self.given
            ))
        })
    }
}

/// A regular file of `size` bytes by `fstat`, read whole. The read that would only confirm the
/// end is skipped once `size` bytes are in, except for a size of 0, which procfs and sysfs give
/// for files that have content. `None` when the file turns out longer (it grew) or a read fails.
fn read_small(mut file: &std::fs::File, size: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0; size + 1];
    let mut got = 0;
    while got < bytes.len() {
        match file.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got == size {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    if got > size {
        return None;
    }
    bytes.truncate(got);
    Some(bytes)
}

impl Config {
    /// A path that must exist (file or directory).
    pub(crate) fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.roots.existing(path)
    }

    /// An existing regular file, opened for reading (anything else is refused before a byte
    /// is read: a FIFO or a device may block or never end).
    pub(crate) fn existing_file(&self, path: &str) -> Result<Opened, ToolError> {
        let (resolved, file) = self.roots.read_existing(path)?;
        Ok(Opened {
            path: resolved,
            given: path.to_string(),
            file,
        })
    }

    /// Opens a path already resolved (met while walking a tree, say) for reading.
    pub(crate) fn open_resolved(&self, resolved: &Path) -> Result<Opened, ToolError> {
        let given = show(resolved);
        let file = self.roots.open_file(resolved, &given)?;
        Ok(Opened {
            path: resolved.to_path_buf(),
            given,
            file,
        })
    }

    /// An existing regular file, read at once when it is small. One open and one `fstat` answer
    /// both questions (what is it, how big).
    pub(crate) fn small_file(&self, path: &str) -> Result<FileInput, ToolError> {
        let opened = self.existing_file(path)?;
        let size = opened.size()?;
        if size > IN_PLACE_BYTES {
            return Ok(FileInput::Later(opened));
        }
        match read_small(&opened.file, size as usize) {
            Some(bytes) => Ok(FileInput::Read {
                path: opened.path,
                bytes,
            }),
            // It grew while being read, or the read failed: the usual path, from the start.
            None => {
                use std::io::Seek;
                (&opened.file).rewind().map_err(io_err(&opened.given))?;
                Ok(FileInput::Later(opened))
            }
        }
    }

    /// An existing directory.
    pub(crate) fn existing_dir(&self, path: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.existing(path)?;
        if !resolved.is_dir() {
            return Err(ToolError::no_such_file(format!("not a directory: {path}")));
        }
        Ok(resolved)
    }

    /// A path to create or overwrite. Besides the roots check, no component of the part that does
    /// not resolve may be a dangling symlink: writing through one would create its target, which
    /// can lie anywhere.
    pub(crate) fn target(&self, path: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.roots.resolve(path)?;
        refuse_dangling_links(&resolved, path)?;
        Ok(resolved)
    }

    /// An existing directory entry itself, for removing or renaming it: the parent is resolved
    /// physically but the last component is not followed, so a symlink is acted on as a link and
    /// never through to its target. A root itself is refused.
    pub(crate) fn entry(&self, path: &str) -> Result<PathBuf, ToolError> {
        let given = Path::new(path);
        let resolved = match given.file_name() {
            Some(name) if !path.ends_with('/') => {
                let parent = match given.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_string_lossy().into_owned(),
                    _ => ".".to_string(),
                };
                self.roots.resolve(&parent)?.join(name)
            }
            // `..`, `.`, `dir/`: nothing to keep unresolved.
            _ => self.roots.resolve(path)?,
        };
        if !self.contains(&resolved) {
            return Err(ToolError::path_outside_roots(format!(
                "path '{path}' is outside the server's allowed roots"
            )));
        }
        if self.roots.dirs().contains(&resolved) {
            return Err(ToolError::bad_argument(format!(
                "{path} is one of the server's roots; it cannot be removed or moved"
            )));
        }
        if std::fs::symlink_metadata(&resolved).is_err() {
            return Err(ToolError::no_such_file(format!(
                "no such file or directory: {path}"
            )));
        }
        Ok(resolved)
    }

    /// Whether a path met while walking a tree (not followed through symlinks) is still confined.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.roots.contains(path)
    }
}

fn refuse_dangling_links(resolved: &Path, given: &str) -> Result<(), ToolError> {
    // The existing prefix of `resolved` is canonical, so any symlink left on the way is one whose
    // target does not exist.
    for ancestor in resolved.ancestors() {
        match std::fs::symlink_metadata(ancestor) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ToolError::path_outside_roots(format!(
                    "path '{given}' goes through a symlink whose target does not exist and may lie outside the roots"
                )));
            }
            Ok(_) => return Ok(()),
            Err(_) => continue,
        }
    }
    Ok(())
}

/// A path as shown in results.
pub(crate) fn show(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Maps an I/O error on a path the caller gave to the code they can act on (a symlink met
/// where a resolved path had none is a confinement refusal).
pub(crate) fn io_err(given: &str) -> impl FnOnce(std::io::Error) -> ToolError + '_ {
    move |e| maljan_server::roots::io_error(given, e)
}

/// One regular file or symlink found below a directory (directories themselves are not listed).
pub(crate) struct Found {
    pub(crate) abs: PathBuf,
    /// Relative to the walked directory, `/`-separated.
    pub(crate) rel: String,
    pub(crate) is_symlink: bool,
}

/// Every file and symlink below `dir`, sorted by path, without following symlinks (so nothing
/// found can lie outside `dir`). Unreadable subdirectories are skipped; `stop` ends the walk.
pub(crate) fn walk_files(dir: &Path, stop: &dyn Fn() -> bool) -> Result<Vec<Found>, ToolError> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        if out.len() % 256 == 0 && stop() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else {
            continue;
        };
        out.push(Found {
            rel: rel.to_string_lossy().replace('\\', "/"),
            abs: entry.into_path(),
            is_symlink: ft.is_symlink(),
        });
    }
    Ok(out)
}

/// Joins a relative path taken from data (a manifest, an archive) under `base`, refusing
/// absolute paths and `..` so the result cannot leave `base` lexically.
pub(crate) fn join_inside(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for part in Path::new(rel).components() {
        match part {
            std::path::Component::Normal(p) => out.push(p),
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    (out != base).then_some(out)
}

/// How much is copied or read between two looks at the call's cancellation.
pub(crate) const CANCEL_CHECK_BYTES: u64 = 4 << 20;

/// Copies a file's bytes from one open handle to another, stopping (with `tool_failed`) soon
/// after `stop` says the call was cancelled or timed out.
pub(crate) fn copy_data(
    mut from: &std::fs::File,
    to: &mut dyn std::io::Write,
    given: &str,
    stop: &dyn Fn() -> bool,
) -> Result<u64, ToolError> {
    let mut buf = vec![0u8; 1 << 20];
    let (mut total, mut since_check) = (0u64, 0u64);
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(given)(e)),
        };
        to.write_all(&buf[..n]).map_err(io_err(given))?;
        total += n as u64;
        since_check += n as u64;
        if since_check >= CANCEL_CHECK_BYTES {
            since_check = 0;
            if stop() {
                return Err(cancelled());
            }
        }
    }
}

/// The answer to a call cancelled (or timed out) mid-work.
pub(crate) fn cancelled() -> ToolError {
    ToolError::tool_failed("the call was cancelled").with_remediation("none needed")
}

impl Config {
    /// Writes a file atomically (see [`Roots::write_atomic`](maljan_server::Roots::write_atomic)).
    pub(crate) fn write_atomic(
        &self,
        target: &Path,
        given: &str,
        data: &[u8],
    ) -> Result<(), ToolError> {
        self.roots.write_atomic(target, given, data)
    }
}

/// A configuration with one root, for unit tests.
#[cfg(test)]
pub(crate) fn rooted_at(dir: &Path) -> Config {
    Config {
        roots: maljan_server::Roots::new([dir]).unwrap(),
        allow_loopback_downloads: false,
        extraction: Default::default(),
        storage: Default::default(),
        watches: Default::default(),
        state: crate::state::StateDb::new(None),
        automation: crate::automation::Automation::new(std::sync::Arc::new(crate::SystemClock)),
        shell_env: Vec::new(),
        notifier: crate::notify::Notifier::new(Default::default()),
        audit: crate::audit::Audit::new(Default::default()),
        progress: Default::default(),
        semantic: crate::semantic::Semantic::new(Default::default()),
        params: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maljan_server::ErrorCode;

    use crate::paths::rooted_at;

    #[test]
    fn only_regular_files_are_opened() {
        let dir = tempfile::tempdir().unwrap();
        let config = rooted_at(dir.path());
        let file = dir.path().join("small.txt");
        std::fs::write(&file, b"12345").unwrap();
        let opened = |p: &Path| config.existing_file(p.to_str().unwrap());
        assert_eq!(opened(&file).unwrap().size().unwrap(), 5);
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let refused = opened(&fifo).unwrap_err();
        assert_eq!(refused.code, ErrorCode::BadArgument, "a FIFO is never read");
        assert!(
            refused.message.contains("not a regular file"),
            "{}",
            refused.message
        );
        assert_eq!(
            opened(dir.path()).unwrap_err().code,
            ErrorCode::BadArgument,
            "a directory is not a file"
        );
        assert_eq!(
            opened(&dir.path().join("missing")).unwrap_err().code,
            ErrorCode::NoSuchFile
        );
    }

    #[test]
    fn small_files_are_read_at_once_and_anything_else_later() {
        let dir = tempfile::tempdir().unwrap();
        let config = rooted_at(dir.path());
        let input = |p: &Path| config.small_file(p.to_str().unwrap());
        let small = dir.path().join("small.txt");
        std::fs::write(&small, b"12345").unwrap();
        let big = dir.path().join("big.bin");
        std::fs::write(&big, vec![1u8; IN_PLACE_BYTES as usize + 1]).unwrap();
        let exact = dir.path().join("exact.bin");
        std::fs::write(&exact, vec![2u8; IN_PLACE_BYTES as usize]).unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let canonical = std::fs::canonicalize(&small).unwrap();
        assert!(matches!(input(&small).unwrap(),
            FileInput::Read { path, bytes } if bytes == b"12345" && path == canonical));
        assert!(matches!(input(&exact).unwrap(),
            FileInput::Read { bytes, .. } if bytes.len() == IN_PLACE_BYTES as usize));
        assert!(matches!(input(&big).unwrap(), FileInput::Later(..)));
        // Opened without waiting for a writer, and refused.
        assert_eq!(
            input(&fifo).map(drop).unwrap_err().code,
            ErrorCode::BadArgument
        );
        assert_eq!(
            input(dir.path()).map(drop).unwrap_err().code,
            ErrorCode::BadArgument,
            "a directory is not a file"
        );
        assert_eq!(
            input(&dir.path().join("missing"))
                .map(drop)
                .unwrap_err()
                .code,
            ErrorCode::NoSuchFile
        );
        assert_eq!(
            input(Path::new("/etc/hostname"))
                .map(drop)
                .unwrap_err()
                .code,
            ErrorCode::PathOutsideRoots,
            "outside the roots"
        );
        // An empty file is read at once; a symlink to a small file is resolved and read too.
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(input(&empty).unwrap(),
            FileInput::Read { bytes, .. } if bytes.is_empty()));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("small.txt", &link).unwrap();
        assert!(matches!(input(&link).unwrap(),
            FileInput::Read { path, bytes } if bytes == b"12345" && path == canonical));
    }

    #[test]
    fn a_file_that_says_it_is_empty_but_is_not_is_read_later() {
        // procfs gives its files a size of 0: reading must not stop at what fstat said.
        let config = rooted_at(Path::new("/proc/self"));
        assert!(matches!(
            config.small_file("status").unwrap(),
            FileInput::Later(..)
        ));
    }
}
