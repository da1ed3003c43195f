//! Path confinement: every path argument, after resolving `..` and symlinks, must lie under a root.

use std::path::{Component, Path, PathBuf};

use crate::errors::ToolError;

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
        assert!(roots.resolve("loop-a").is_err());
    }
}
