//! Path arguments: every one is resolved under the server's roots before any file is touched.

use std::{
    io::Read,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use maljan_server::{IN_PLACE_BYTES, ToolError};

use crate::Config;

/// An existing regular file, for a tool that reads it whole.
pub(crate) enum FileInput {
    /// Small enough to work on at once ([`IN_PLACE_BYTES`] at most): its bytes, read already.
    Read { path: PathBuf, bytes: Vec<u8> },
    /// Bigger, or not a plain readable file: to be read on the blocking pool, where a FIFO may
    /// block and every error is met and reported as for any read.
    Later { path: PathBuf },
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

/// A file's size from its metadata, for choosing where to work on it: a directory is refused,
/// and anything but a regular file (or metadata that could not be read) counts as `u64::MAX`.
fn file_size(path: &str, meta: Option<std::fs::Metadata>) -> Result<u64, ToolError> {
    if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
        return Err(ToolError::bad_argument(format!(
            "{path} is a directory, not a file"
        )));
    }
    Ok(meta
        .filter(std::fs::Metadata::is_file)
        .map_or(u64::MAX, |m| m.len()))
}

impl Config {
    /// A path that must exist (file or directory).
    pub(crate) fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.roots.existing(path)
    }

    /// An existing regular file.
    pub(crate) fn existing_file(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.existing_file_sized(path).map(|(resolved, _)| resolved)
    }

    /// An existing regular file and its size, from one stat, for choosing where to work on it
    /// (`blocking_unless_small`). Anything but a regular file counts as big (`u64::MAX`): a FIFO
    /// or a device says 0 yet may block or never end, and must not be read on the runtime's
    /// thread; a size that cannot be read counts as big too, so the blocking path meets and
    /// reports the error.
    pub(crate) fn existing_file_sized(&self, path: &str) -> Result<(PathBuf, u64), ToolError> {
        let resolved = self.existing(path)?;
        let size = file_size(path, std::fs::metadata(&resolved).ok())?;
        Ok((resolved, size))
    }

    /// An existing regular file, read at once when it is small. One open and one `fstat` answer
    /// both questions (what is it, how big) that `existing_file_sized` and a later read ask with
    /// two `stat`s and a second open; a plain name under a root is opened without resolving it
    /// first ([`Roots::open_plainly_inside`](maljan_server::Roots::open_plainly_inside)).
    pub(crate) fn small_file(&self, path: &str) -> Result<FileInput, ToolError> {
        // O_NONBLOCK: opening a FIFO must not wait for a writer (a regular file ignores it).
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let (resolved, opened) = match self.roots.open_plainly_inside(path, flags) {
            Some((resolved, file)) => (resolved, Ok(file)),
            None => {
                let resolved = self.existing(path)?;
                let opened = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(flags)
                    .open(&resolved);
                (resolved, opened)
            }
        };
        let Ok(file) = opened else {
            return Ok(FileInput::Later { path: resolved });
        };
        let size = file_size(path, file.metadata().ok())?;
        if size > IN_PLACE_BYTES {
            return Ok(FileInput::Later { path: resolved });
        }
        match read_small(&file, size as usize) {
            Some(bytes) => Ok(FileInput::Read {
                path: resolved,
                bytes,
            }),
            // It grew while being read, or the read failed: the usual path.
            None => Ok(FileInput::Later { path: resolved }),
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

/// Maps an I/O error on a path the caller gave to the code they can act on.
pub(crate) fn io_err(given: &str) -> impl FnOnce(std::io::Error) -> ToolError + '_ {
    move |e| ToolError::io(given, e)
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

/// Writes a file through a sibling temporary file renamed over it, so a reader never sees half
/// of it and a failure leaves the old content.
pub(crate) fn write_atomic(target: &Path, given: &str, data: &[u8]) -> Result<(), ToolError> {
    use std::io::Write;
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_data()?;
        if let Ok(meta) = std::fs::metadata(target) {
            let _ = std::fs::set_permissions(&tmp, meta.permissions());
        }
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| ToolError::io(given, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use maljan_server::ErrorCode;

    fn rooted_at(dir: &Path) -> Config {
        Config {
            roots: maljan_server::Roots::new([dir]).unwrap(),
            allow_loopback_downloads: false,
            watches: Default::default(),
            params: Default::default(),
        }
    }

    #[test]
    fn only_regular_files_count_as_small() {
        let dir = tempfile::tempdir().unwrap();
        let config = rooted_at(dir.path());
        let file = dir.path().join("small.txt");
        std::fs::write(&file, b"12345").unwrap();
        let sized = |p: &Path| config.existing_file_sized(p.to_str().unwrap());
        assert_eq!(sized(&file).unwrap().1, 5);
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(
            sized(&fifo).unwrap().1,
            u64::MAX,
            "a FIFO is never read in place"
        );
        assert_eq!(
            sized(dir.path()).unwrap_err().code,
            ErrorCode::BadArgument,
            "a directory is not a file"
        );
        assert_eq!(
            sized(&dir.path().join("missing")).unwrap_err().code,
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
        assert!(matches!(input(&big).unwrap(), FileInput::Later { .. }));
        // Opened without waiting for a writer, and left for the blocking pool.
        assert!(matches!(input(&fifo).unwrap(), FileInput::Later { .. }));
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
            FileInput::Later { .. }
        ));
    }
}
