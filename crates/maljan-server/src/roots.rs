//! Path confinement, the one rule every tool that touches a path keeps.
//!
//! A path argument is resolved (`..` and symlinks, physically) and must then lie under a root;
//! that gives the error words. The file is then opened, created, renamed or removed from the
//! root's own directory handle (held open for the `Roots`' life), with the kernel told to refuse
//! any symlink on the way and any step out of the root ([`beneath`]). The resolved path has no
//! symlinks, so one met at open time means the tree changed between the check and the open (a
//! swapped link, the classic race): that is refused, never followed. Every read and write then
//! happens on the handle that was opened, never on the name again.

mod beneath;

use std::{
    ffi::OsStr,
    fs::File,
    path::{Component, Path, PathBuf},
    sync::Arc,
};

pub use beneath::{Dir, Write};

use crate::errors::ToolError;

/// The directories a server's tools may touch. Paths are resolved physically (symlinks followed),
/// so a link inside a root that points outside it is refused. Cloning shares the handles.
#[derive(Debug, Clone)]
pub struct Roots {
    roots: Arc<[PathBuf]>,
    /// One directory handle per root (O_PATH), in the order of `roots`.
    handles: Arc<[Dir]>,
}

impl Roots {
    /// Roots from directories; each must exist. They are stored canonical, and each is opened
    /// as a directory handle that every later open starts from.
    pub fn new<P: AsRef<Path>>(dirs: impl IntoIterator<Item = P>) -> std::io::Result<Self> {
        let mut roots = Vec::new();
        let mut handles = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let canonical = std::fs::canonicalize(dir).map_err(|e| {
                std::io::Error::new(e.kind(), format!("root {}: {e}", dir.display()))
            })?;
            let handle = beneath::open_root(&canonical).map_err(|e| {
                let kind = e.kind();
                let what = if e.raw_os_error() == Some(libc::ENOTDIR) {
                    "is not a directory".to_string()
                } else {
                    format!("cannot be opened: {e}")
                };
                std::io::Error::new(kind, format!("root {} {what}", dir.display()))
            })?;
            roots.push(canonical);
            handles.push(handle);
        }
        if roots.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no root given",
            ));
        }
        Ok(Self {
            roots: roots.into(),
            handles: handles.into(),
        })
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Resolves a path that must already exist (`no_such_file` otherwise).
    pub fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        // The usual case takes one realpath, which both resolves the path and proves it exists.
        if let Ok(resolved) = std::fs::canonicalize(self.absolute(path)?) {
            return self.confine(path, resolved);
        }
        let resolved = self.resolve(path)?;
        if std::fs::symlink_metadata(&resolved).is_err() {
            return Err(ToolError::no_such_file(format!(
                "no such file or directory: {path}"
            )));
        }
        Ok(resolved)
    }

    /// Resolves a path that may not exist yet (a target to create). The deepest existing ancestor is
    /// resolved physically; the rest is normalised lexically, which is sound because a component that
    /// does not exist cannot be a symlink.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let resolved =
            resolve_physically(&self.absolute(path)?).map_err(|e| ToolError::io(path, e))?;
        self.confine(path, resolved)
    }

    /// `path` made absolute (relative paths are taken from the first root), once it is known to
    /// be a path at all.
    fn absolute(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.is_empty() {
            return Err(ToolError::bad_argument("the path is empty"));
        }
        if path.contains('\0') {
            return Err(ToolError::bad_argument("the path contains a NUL byte"));
        }
        let given = Path::new(path);
        Ok(if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.roots[0].join(given)
        })
    }

    fn confine(&self, path: &str, resolved: PathBuf) -> Result<PathBuf, ToolError> {
        if self.contains(&resolved) {
            Ok(resolved)
        } else {
            Err(ToolError::path_outside_roots(format!(
                "path '{path}' is outside the server's allowed roots"
            )))
        }
    }

    /// True when `resolved` (already canonical) lies under a root: for paths found while walking.
    pub fn contains(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|root| resolved.starts_with(root))
    }

    /// The handle of the (deepest) root `resolved` lies under, and the path below it: plain
    /// names only, as a resolved path is.
    fn locate<'a>(&self, resolved: &'a Path, shown: &str) -> Result<(&Dir, &'a Path), ToolError> {
        let found = self
            .roots
            .iter()
            .zip(self.handles.iter())
            .filter(|(root, _)| resolved.starts_with(root))
            .max_by_key(|(root, _)| root.as_os_str().len());
        let outside = || {
            ToolError::path_outside_roots(format!(
                "path '{shown}' is outside the server's allowed roots"
            ))
        };
        let (root, handle) = found.ok_or_else(outside)?;
        let rel = resolved.strip_prefix(root).map_err(|_| outside())?;
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(outside());
        }
        Ok((handle, rel))
    }

    /// Opens a resolved path for reading, from its root's handle: a regular file only.
    pub fn open_file(&self, resolved: &Path, shown: &str) -> Result<File, ToolError> {
        let (root, rel) = self.locate(resolved, shown)?;
        let file = root.open_read(rel).map_err(|e| io_error(shown, e))?;
        regular_file(file, shown)
    }

    /// Resolves an existing path and opens it for reading: the path (for the answer) and the
    /// open regular file, which is the one every later read uses.
    pub fn read_existing(&self, path: &str) -> Result<(PathBuf, File), ToolError> {
        let resolved = self.existing(path)?;
        let file = self.open_file(&resolved, path)?;
        Ok((resolved, file))
    }

    /// Opens (creating it when missing) a resolved path for writing, from its root's handle:
    /// a regular file only. The directory it goes in must exist.
    pub fn create_file(&self, resolved: &Path, shown: &str, how: Write) -> Result<File, ToolError> {
        let (root, rel) = self.locate(resolved, shown)?;
        let file = root.open_write(rel, how).map_err(|e| io_error(shown, e))?;
        regular_file(file, shown)
    }

    /// A handle on a resolved directory (for opening names below it).
    pub fn open_dir(&self, resolved: &Path, shown: &str) -> Result<Dir, ToolError> {
        let (root, rel) = self.locate(resolved, shown)?;
        root.open_dir(rel).map_err(|e| io_error(shown, e))
    }

    /// The handle of the directory holding a resolved path, and the path's last name: for
    /// acting on the entry itself (unlink, rename, mkdir). A root itself has no such parent.
    pub fn parent_dir(&self, resolved: &Path, shown: &str) -> Result<(Dir, PathBuf), ToolError> {
        let (root, rel) = self.locate(resolved, shown)?;
        if rel.as_os_str().is_empty() {
            return Err(ToolError::bad_argument(format!(
                "{shown} is one of the server's roots; it cannot be removed, moved or replaced"
            )));
        }
        let (dir, name) = root.parent_of(rel).map_err(|e| io_error(shown, e))?;
        Ok((dir, PathBuf::from(name)))
    }

    /// Creates a resolved directory and every missing one above it (mode 0o777 before the
    /// umask, as `mkdir -p`), each from the handle of the one above.
    pub fn create_dir_all(&self, resolved: &Path, shown: &str) -> Result<Dir, ToolError> {
        self.create_dir_all_mode(resolved, shown, 0o777)
    }

    /// [`Roots::create_dir_all`] with the directories it makes given `mode` (before the umask):
    /// 0o700 for directories only the server's user may read.
    pub fn create_dir_all_mode(
        &self,
        resolved: &Path,
        shown: &str,
        mode: u32,
    ) -> Result<Dir, ToolError> {
        let (root, rel) = self.locate(resolved, shown)?;
        root.create_dir_all(rel, mode)
            .map_err(|e| io_error(shown, e))
    }

    /// Removes a resolved file or symlink (the link itself), by name in its directory.
    pub fn remove_file(&self, resolved: &Path, shown: &str) -> Result<(), ToolError> {
        let (dir, name) = self.parent_dir(resolved, shown)?;
        dir.unlink(name.as_os_str()).map_err(|e| io_error(shown, e))
    }

    /// Removes a resolved directory and everything below it, never following a link.
    pub fn remove_tree(&self, resolved: &Path, shown: &str) -> Result<(), ToolError> {
        let (dir, name) = self.parent_dir(resolved, shown)?;
        dir.remove_tree(name.as_os_str())
            .map_err(|e| io_error(shown, e))
    }

    /// Renames one resolved entry to another (replacing a file there), each by name in the
    /// handle of its directory. Across filesystems nothing is done, and the caller is told so
    /// (to copy instead).
    pub fn rename(&self, from: &Path, to: &Path, shown: &str) -> Result<Renamed, ToolError> {
        let (from_dir, from_name) = self.parent_dir(from, shown)?;
        let (to_dir, to_name) = self.parent_dir(to, shown)?;
        match from_dir.rename(from_name.as_os_str(), &to_dir, to_name.as_os_str()) {
            Ok(()) => Ok(Renamed::Done),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => Ok(Renamed::OtherFilesystem),
            Err(e) => Err(io_error(shown, e)),
        }
    }

    /// Writes a file through a sibling temporary file (`O_EXCL`, in the target's directory
    /// handle) renamed over it, so a reader never sees half of it, a failure leaves the old
    /// content, and a link swapped in at the target's name is replaced, never written through.
    pub fn write_atomic(&self, resolved: &Path, shown: &str, data: &[u8]) -> Result<(), ToolError> {
        self.write_atomic_with(resolved, shown, |f| {
            std::io::Write::write_all(f, data).map_err(|e| io_error(shown, e))
        })
    }

    /// [`Roots::write_atomic`] with the content written by `fill` into the temporary file.
    pub fn write_atomic_with(
        &self,
        resolved: &Path,
        shown: &str,
        fill: impl FnOnce(&mut File) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        use std::os::unix::fs::PermissionsExt;
        let (dir, name) = self.parent_dir(resolved, shown)?;
        let tmp = OsStr::new(&format!(
            ".{}.{}.tmp",
            name.display(),
            uuid::Uuid::new_v4().simple()
        ))
        .to_os_string();
        let result = (|| {
            let mut f = dir
                .open_write(Path::new(&tmp), Write::New { mode: 0o666 })
                .map_err(|e| io_error(shown, e))?;
            fill(&mut f)?;
            let finish = || {
                f.sync_data()?;
                // The old file's mode carries over (read from the file, by handle).
                if let Ok(old) = dir.open(Path::new(&name), libc::O_PATH, 0)
                    && let Ok(meta) = old.metadata()
                    && meta.is_file()
                {
                    f.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))?;
                }
                dir.rename(&tmp, &dir, name.as_os_str())
            };
            finish().map_err(|e| io_error(shown, e))
        })();
        if result.is_err() {
            let _ = dir.unlink(&tmp);
        }
        result
    }
}

/// What [`Roots::rename`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    Done,
    /// The two lie on different filesystems: nothing was renamed.
    OtherFilesystem,
}

/// Maps an I/O error met opening or changing `shown` under a root. A symlink met at open time,
/// or a step out of the root, means the tree changed after the path was resolved (resolved
/// paths have none): that is a confinement refusal, not a failure to retry.
pub fn io_error(shown: &str, e: std::io::Error) -> ToolError {
    match e.raw_os_error() {
        Some(libc::ELOOP | libc::EXDEV) => ToolError::path_outside_roots(format!(
            "path '{shown}' changed while being opened (a symlink appeared on the way); refused, as it may lead outside the server's allowed roots"
        )),
        // What opening a FIFO without a reader for writing (O_NONBLOCK) gives, or a device
        // without its driver: neither is a regular file.
        Some(libc::ENXIO) => not_regular(shown),
        _ => ToolError::io(shown, e),
    }
}

fn not_regular(shown: &str) -> ToolError {
    ToolError::bad_argument(format!(
        "{shown} is not a regular file (FIFOs, devices, sockets are refused)"
    ))
}

/// Keeps an open file only when it is a regular file, and makes it blocking again (it was
/// opened `O_NONBLOCK`, so that a FIFO could not hold the open).
fn regular_file(file: File, shown: &str) -> Result<File, ToolError> {
    let meta = file.metadata().map_err(|e| io_error(shown, e))?;
    if meta.is_dir() {
        return Err(ToolError::bad_argument(format!(
            "{shown} is a directory, not a file"
        )));
    }
    if !meta.is_file() {
        return Err(not_regular(shown));
    }
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a live descriptor; only the O_NONBLOCK status flag is changed.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

fn resolve_physically(absolute: &Path) -> std::io::Result<PathBuf> {
    // Find the longest prefix that exists, canonicalize it, then apply the remaining components.
    let mut existing = absolute.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut hops = 0;
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(canonical) => {
                let mut out = canonical;
                for part in rest.iter().rev() {
                    match Path::new(part).components().next() {
                        Some(Component::ParentDir) => {
                            out.pop();
                        }
                        Some(Component::CurDir) | None => {}
                        _ => out.push(part),
                    }
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink is not a name that is free: a write through it lands where
                // it points. Follow it, and resolve what it names instead.
                if std::fs::symlink_metadata(&existing).is_ok_and(|m| m.file_type().is_symlink()) {
                    hops += 1;
                    if hops > 40 {
                        return Err(std::io::Error::other("too many levels of symbolic links"));
                    }
                    let target = std::fs::read_link(&existing)?;
                    let mut next = existing.parent().unwrap_or(Path::new("/")).join(target);
                    for part in rest.drain(..).rev() {
                        next.push(part);
                    }
                    existing = next;
                    continue;
                }
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    // `..` or the filesystem root: fold it lexically and retry.
                    if !existing.pop() {
                        return Err(e);
                    }
                    rest.push("..".into());
                    continue;
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::ErrorCode;

    #[test]
    fn inside_and_outside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"x").unwrap();
        let roots = Roots::new([dir.path()]).unwrap();
        assert!(roots.existing("a.txt").is_ok());
        assert_eq!(
            roots.resolve("../x").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert_eq!(
            roots.resolve("/etc/passwd").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert_eq!(
            roots.existing("missing").unwrap_err().code,
            ErrorCode::NoSuchFile
        );
        assert!(
            roots
                .resolve("new/dir/../file")
                .unwrap()
                .ends_with("new/file")
        );
    }

    #[test]
    fn a_link_swapped_in_after_resolving_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"outside").unwrap();
        std::fs::write(dir.path().join("f"), b"inside").unwrap();
        let roots = Roots::new([dir.path()]).unwrap();
        let read_target = roots.existing("f").unwrap();
        let write_target = roots.resolve("new").unwrap();
        let (f_dir, _) = roots.parent_dir(&read_target, "f").unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut roots.open_file(&read_target, "f").unwrap(), &mut text)
            .unwrap();
        assert_eq!(text, "inside");
        // The race: both names become links to the outside file after they were checked.
        std::fs::remove_file(dir.path().join("f")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("f")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("new")).unwrap();
        let refused = [
            roots.open_file(&read_target, "f").map(drop),
            roots
                .create_file(&write_target, "new", Write::Append)
                .map(drop),
            roots
                .create_file(&write_target, "new", Write::Truncate)
                .map(drop),
            roots
                .create_dir_all(&write_target.join("sub"), "new/sub")
                .map(drop),
        ];
        for r in refused {
            let e = r.unwrap_err();
            assert_eq!(e.code, ErrorCode::PathOutsideRoots, "{}", e.message);
            assert!(
                e.message.contains("changed while being opened"),
                "{}",
                e.message
            );
        }
        // Atomic writes and removal act on the name: the link is replaced or removed.
        roots
            .write_atomic(&write_target, "new", b"written")
            .unwrap();
        roots.remove_file(&read_target, "f").unwrap();
        assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
        assert_eq!(std::fs::read(dir.path().join("new")).unwrap(), b"written");
        assert!(f_dir.names().unwrap().iter().all(|n| n != "f"));
    }

    #[test]
    fn non_regular_files_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let roots = Roots::new([dir.path()]).unwrap();
        let resolved = roots.existing("fifo").unwrap();
        for e in [
            roots.open_file(&resolved, "fifo").unwrap_err(),
            roots.read_existing("fifo").unwrap_err(),
        ] {
            assert_eq!(e.code, ErrorCode::BadArgument);
            assert!(e.message.contains("not a regular file"), "{}", e.message);
        }
        let e = roots.read_existing(".").unwrap_err();
        assert!(e.message.contains("is a directory"), "{}", e.message);
    }

    #[test]
    fn a_symlink_pointing_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let roots = Roots::new([dir.path()]).unwrap();
        assert_eq!(
            roots.resolve("link/x").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert_eq!(
            roots.resolve("link").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
    }

    #[test]
    fn a_dangling_symlink_resolves_to_where_it_points() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap()
        };
        link(&outside.path().join("not-yet"), "dangling");
        link(&dir.path().join("missing-inside"), "dangling-in");
        link(Path::new("loop-b"), "loop-a");
        link(Path::new("loop-a"), "loop-b");
        let roots = Roots::new([dir.path()]).unwrap();
        assert_eq!(
            roots.resolve("dangling").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert_eq!(
            roots.resolve("dangling/x").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert!(
            roots
                .resolve("dangling-in")
                .unwrap()
                .ends_with("missing-inside")
        );
        let looped = roots.resolve("loop-a").unwrap_err();
        assert_eq!(looped.code, ErrorCode::ToolFailed, "{}", looped.message);
        assert!(looped.message.contains("loop-a"), "{}", looped.message);
    }
}
