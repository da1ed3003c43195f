//! The shared-volume mirror: a server with `mirror_dir` reads the sample from a copy there. The
//! directory is made 0o700 (an existing one must be a real directory, not a link); the copy is a
//! new 0o600 file created exclusively without following links, so nothing planted in the
//! directory can redirect the write. The job removes its copies when it ends.

use std::{
    fs::OpenOptions,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use crate::sample::Sample;

/// Copies `sample` into `dir` as `maljan-<job>-<server>-<name>` and returns the copy's path.
/// Blocking: run it off the async threads.
pub fn copy_to(
    dir: &Path,
    job_id: &str,
    server: &str,
    sample: &Sample,
) -> std::io::Result<PathBuf> {
    ensure_dir(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let name = format!(
        "maljan-{}-{}-{}",
        super::safe_name(job_id),
        super::safe_name(server),
        super::safe_name(&sample.name)
    );
    let target = dir.join(name);
    let mut src = std::fs::File::open(&sample.path)?;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&target)?;
    let copied = std::io::copy(&mut src, &mut out).and_then(|n| out.flush().map(|_| n));
    match copied {
        Ok(n) if n == sample.size => Ok(target),
        Ok(n) => {
            let _ = std::fs::remove_file(&target);
            Err(std::io::Error::other(format!(
                "the sample changed since the job started ({n} bytes now, {} then)",
                sample.size
            )))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&target);
            Err(e)
        }
    }
}

fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(std::io::Error::other(format!(
            "mirror_dir {} is a link; point mirror_dir at the real directory",
            dir.display()
        ))),
        Ok(meta) if !meta.is_dir() => Err(std::io::Error::other(format!(
            "mirror_dir {} is not a directory",
            dir.display()
        ))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir),
        Err(e) => Err(e),
    }
}

/// Removes mirror copies; a copy already gone is fine.
pub fn remove(paths: Vec<PathBuf>) {
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("could not remove a mirror copy: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sample(dir: &Path, name: &str, body: &[u8]) -> Sample {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        Sample::read(&p).unwrap()
    }

    #[test]
    fn copies_privately_and_refuses_links_and_existing_files() {
        let tmp = tempfile::tempdir().unwrap();
        let s = sample(tmp.path(), "a.exe", b"MZ data");
        let mirror = tmp.path().join("mirror/sub");
        let copy = copy_to(&mirror, "job-1", "files", &s).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), b"MZ data");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&copy), 0o600);
        assert_eq!(mode(&mirror), 0o700);
        // The same name again (a planted file or link) is never written through.
        assert!(copy_to(&mirror, "job-1", "files", &s).is_err());
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&mirror, &link).unwrap();
        assert!(
            copy_to(&link, "job-2", "files", &s).is_err(),
            "a linked mirror_dir is refused"
        );
        remove(vec![copy.clone(), copy.clone()]);
        assert!(!copy.exists());
    }
}
