//! Files a crashed server leaves in its staging directory, and their removal.
//!
//! A part file belongs to an upload that writes it at least once per upload TTL or expires, so
//! one untouched for longer is nobody's (another process sharing the directory included). A
//! replaced sample's second name (see `StagingStore::publish`) lives for moments after its
//! answer; one a minute old was left by a crash.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

/// A replaced sample's second name older than this was left by a crash.
const REPLACED_FOR_AT_MOST: Duration = Duration::from_secs(60);

pub(super) const PART_PREFIX: &str = ".part-";
pub(super) const REPLACED_PREFIX: &str = ".replaced-";

/// Removes part files in `dir` untouched for `ttl` (except `open`, this process's uploads) and,
/// with `folders`, stale second names in the sample folders (a walk over every staged sample,
/// so only at start).
pub(super) fn sweep(dir: &Path, ttl: Duration, open: &[PathBuf], folders: bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(PART_PREFIX) {
            if !open.contains(&path) && untouched_for(&path, ttl) {
                let _ = std::fs::remove_file(&path);
            }
        } else if folders && is_sample_folder(&name) && entry.file_type().is_ok_and(|t| t.is_dir())
        {
            sweep_folder(&path);
        }
    }
}

fn sweep_folder(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let replaced = entry
            .file_name()
            .to_string_lossy()
            .starts_with(REPLACED_PREFIX);
        if replaced && untouched_for(&path, REPLACED_FOR_AT_MOST) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A folder a sample is published in: its sha256, in lowercase hex.
fn is_sample_folder(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `path` (not followed, if a link) was last modified at least `age` ago.
fn untouched_for(path: &Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed >= age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn file_aged(path: &Path, age: Duration) {
        let f = std::fs::File::create(path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn only_what_a_crash_left_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let ttl = Duration::from_secs(900);
        let hour = Duration::from_secs(3600);
        let old_part = dir.path().join(".part-old");
        let live_part = dir.path().join(".part-live");
        let open_part = dir.path().join(".part-open");
        file_aged(&old_part, hour);
        file_aged(&live_part, Duration::from_secs(5));
        file_aged(&open_part, hour);
        let folder = dir.path().join("ab".repeat(32));
        std::fs::create_dir(&folder).unwrap();
        let sample = folder.join("sample.bin");
        let old_second = folder.join(".replaced-1");
        let new_second = folder.join(".replaced-2");
        file_aged(&sample, hour);
        file_aged(&old_second, hour);
        file_aged(&new_second, Duration::ZERO);
        let other = dir.path().join("notes");
        std::fs::create_dir(&other).unwrap();
        file_aged(&other.join(".replaced-3"), hour);

        sweep(dir.path(), ttl, std::slice::from_ref(&open_part), false);
        assert!(!old_part.exists());
        assert!(live_part.exists() && open_part.exists());
        assert!(old_second.exists(), "folders are walked only when asked");

        sweep(dir.path(), ttl, &[], true);
        assert!(!open_part.exists(), "no longer open, and an hour old");
        assert!(!old_second.exists());
        assert!(sample.exists() && new_second.exists() && live_part.exists());
        assert!(
            other.join(".replaced-3").exists(),
            "only sample folders are swept"
        );
    }
}
