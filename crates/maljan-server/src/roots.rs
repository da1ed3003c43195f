//! Path confinement: every path argument, after resolving `..` and symlinks, must lie under a root.

use std::{
    fs::File,
    path::{Component, Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};

use crate::errors::ToolError;

/// Set once `openat2` turns out to be unavailable (an old kernel, or a seccomp filter that
/// refuses it): a fact about the kernel, the same for every `Roots` in the process.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// The directories a server's tools may touch. Paths are resolved physically (symlinks followed),
/// so a link inside a root that points outside it is refused.
#[derive(Debug, Clone)]
pub struct Roots {
    roots: Vec<PathBuf>,
}

impl Roots {
    /// Roots from directories; each must exist. They are stored canonical.
    pub fn new<P: AsRef<Path>>(dirs: impl IntoIterator<Item = P>) -> std::io::Result<Self> {
        let mut roots = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let canonical = std::fs::canonicalize(dir).map_err(|e| {
                std::io::Error::new(e.kind(), format!("root {}: {e}", dir.display()))
            })?;
            if !canonical.is_dir() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    format!("root {} is not a directory", dir.display()),
                ));
            }
            roots.push(canonical);
        }
        if roots.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no root given",
            ));
        }
        Ok(Self { roots })
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

    /// Opens an existing path in one system call when that alone proves it confined: the path
    /// names a root's descendant lexically (no `..`), and the kernel is told to refuse any
    /// symlink on the way (`openat2`, `RESOLVE_NO_SYMLINKS`), so the file it opens is the one
    /// that name spells. Returns the path as [`Roots::existing`] would and the open file, or
    /// `None` whenever that cannot be had, for any reason: then the caller resolves the path the
    /// usual way, which also words the errors. `flags` are `open(2)` flags; `O_CLOEXEC` is added.
    pub fn open_plainly_inside(&self, path: &str, flags: libc::c_int) -> Option<(PathBuf, File)> {
        use std::os::unix::{ffi::OsStrExt, io::FromRawFd};
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return None;
        }
        let absolute = self.absolute(path).ok()?;
        let plain = absolute
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !plain || !self.contains(&absolute) {
            return None;
        }
        // The kernel gets the name as given, so a trailing `/` on a file still fails as it
        // would for realpath; the caller gets it tidied (`//` and a trailing `/` dropped).
        let name = std::ffi::CString::new(absolute.as_os_str().as_bytes()).ok()?;
        // SAFETY: open_how is plain integers, for which zero is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_NO_SYMLINKS;
        // SAFETY: `name` is NUL-terminated and `how` is a live open_how of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error();
            if matches!(errno, Some(libc::ENOSYS | libc::EPERM)) {
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            return None;
        }
        // SAFETY: the kernel has just returned this descriptor; nothing else owns it.
        let file = unsafe { File::from_raw_fd(fd as libc::c_int) };
        Some((absolute.components().collect(), file))
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
    fn opening_plainly_inside_agrees_with_resolving() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.txt"), b"x").unwrap();
        std::fs::write(outside.path().join("b.txt"), b"y").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("in")).unwrap();
        let roots = Roots::new([dir.path()]).unwrap();
        let root = &roots.dirs()[0];
        let open = |p: &str| roots.open_plainly_inside(p, libc::O_RDONLY).map(|(p, _)| p);

        // A plain name inside a root opens at once, with the same path realpath gives.
        let plain = root.join("sub/a.txt");
        for given in ["sub/a.txt", "sub//a.txt", &plain.to_string_lossy()] {
            assert_eq!(open(given), Some(roots.existing(given).unwrap()), "{given}");
        }
        // Anything else is left to the resolving path: a symlink on the way (pointing out or
        // not), `..`, a name outside the roots, a missing file, a file named as a directory.
        let escaping = format!("{}/../{}", root.display(), "x");
        for given in [
            "out/b.txt",
            "in/a.txt",
            "sub/../sub/a.txt",
            escaping.as_str(),
            "/etc/passwd",
            "sub/missing",
            "sub/a.txt/",
        ] {
            assert_eq!(open(given), None, "{given}");
        }
        assert_eq!(
            roots.existing("out/b.txt").unwrap_err().code,
            ErrorCode::PathOutsideRoots
        );
        assert_eq!(
            roots.existing("in/a.txt").unwrap(),
            roots.existing("sub/a.txt").unwrap()
        );
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
