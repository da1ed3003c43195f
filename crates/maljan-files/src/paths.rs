//! Path arguments: every one is resolved under the server's roots before any file is touched.

use std::path::{Path, PathBuf};

use maljan_server::ToolError;

use crate::Config;

impl Config {
    /// A path that must exist (file or directory).
    pub(crate) fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.roots.existing(path)
    }

    /// An existing regular file.
    pub(crate) fn existing_file(&self, path: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.existing(path)?;
        if resolved.is_dir() {
            return Err(ToolError::bad_argument(format!(
                "{path} is a directory, not a file"
            )));
        }
        Ok(resolved)
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
