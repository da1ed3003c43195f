//! Where `maljan analyze` writes its reports and its index: the path is checked before the
//! analysis runs (its folder must exist — it is never created — and must take a new file), and
//! the text is written atomically (a temporary file beside it, renamed into place), so a reader
//! never sees half a report. Every error names the user's path, never the temporary file, with
//! controls made visible.

use std::{
    fs::OpenOptions,
    io::ErrorKind,
    path::{Path, PathBuf},
};

use anyhow::bail;
use maljan_triage::visible;

/// A path as the terminal may show it (controls and bidi overrides written out).
pub fn shown(path: &Path) -> String {
    visible(&path.to_string_lossy()).into_owned()
}

/// An I/O error as a person reads it: "permission denied", not "Permission denied (os error 13)".
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::NotFound => "no such file or folder".into(),
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only".into(),
        ErrorKind::StorageFull => "no space left on the device".into(),
        ErrorKind::IsADirectory => "it is a folder".into(),
        ErrorKind::NotADirectory => "a part of the path is not a folder".into(),
        _ => e.to_string(),
    }
}

/// The folder a file path lives in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The temporary file a write to `path` goes through.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    folder_of(path).join(format!(".{name}.tmp{}", std::process::id()))
}

/// Checks, before any work, that `path` (a report or an index) can be written: its folder exists
/// (a missing one is named, never made), it is not a folder itself, and a new file can be made
/// beside it. `what` names it in the error ("the report", "the index").
pub fn check_writable(path: &Path, what: &str) -> anyhow::Result<()> {
    let shown_path = shown(path);
    if path.is_dir() {
        bail!("cannot write {what} {shown_path}: it is a folder");
    }
    check_folder(folder_of(path), &format!("{what} {shown_path}"))
}

/// Checks that `dir` exists, is a folder and takes a new file; `for_what` says whose folder it is
/// in the error ("the report x/r.md", "--report out").
pub fn check_folder(dir: &Path, for_what: &str) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => bail!(
            "cannot write {for_what}: the folder {} does not exist (maljan does not create it)",
            shown(dir)
        ),
        Err(e) => bail!("cannot write {for_what}: {}: {}", shown(dir), io_reason(&e)),
        Ok(m) if !m.is_dir() => {
            bail!("cannot write {for_what}: {} is not a folder", shown(dir))
        }
        Ok(_) => {}
    }
    let probe = dir.join(format!(".maljan-probe.tmp{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => bail!("cannot write {for_what}: {}", io_reason(&e)),
    }
}

/// Writes `text` to `path` atomically; an error names `path` (the temporary file is removed).
pub fn write_atomically(path: &Path, text: &str, what: &str) -> anyhow::Result<()> {
    let tmp = temp_beside(path);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        bail!("cannot write {what} {}: {}", shown(path), io_reason(&e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_folder_is_named_and_never_made() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("no/such/r.md");
        let e = check_writable(&path, "the report").unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert!(e.contains(&tmp.path().join("no/such").display().to_string()));
        assert!(!tmp.path().join("no").exists());
    }

    #[test]
    fn a_folder_is_not_a_report_and_a_write_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let e = check_writable(tmp.path(), "the report").unwrap_err();
        assert!(e.to_string().contains("it is a folder"), "{e}");
        let path = tmp.path().join("r.md");
        check_writable(&path, "the report").unwrap();
        write_atomically(&path, "text", "the report").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "text");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn a_hostile_path_is_shown_with_its_controls_visible() {
        let e = check_writable(Path::new("/nonexistent\x1b[2J/r.md"), "the report")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\\x1b[2J") && !e.contains('\x1b'), "{e:?}");
    }
}
