//! Where submitted samples wait for the worker that runs their job: a local folder,
//! content-addressed by sha256 (`<dir>/<first two hex>/<sha256>`, 0o700 directories, 0o600
//! files), so a sample submitted twice is stored once. A worker copies the sample into its job's
//! private work directory, checking the hash on the way: a stored file that changed is refused.

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

/// The local sample store (the embedded default).
#[derive(Debug, Clone)]
pub struct SampleStore {
    dir: PathBuf,
}

/// A stored sample: its sha256 (hex) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSample {
    pub sha256: String,
    pub size: u64,
}

impl SampleStore {
    /// The store under `<data dir>/samples`.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self::at(data_dir.join("samples"))
    }

    pub fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path_of(&self, sha256: &str) -> std::io::Result<PathBuf> {
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(std::io::Error::other(format!(
                "'{sha256}' is not a sha256 in hex"
            )));
        }
        Ok(self.dir.join(&sha256[..2]).join(sha256))
    }

    /// Stores the file at `src` (once per content); returns its hash and size.
    pub fn put(&self, src: &Path) -> std::io::Result<StoredSample> {
        crate::paths::ensure_private_dir(&self.dir)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = self
            .dir
            .join(format!(".incoming-{}-{stamp}", std::process::id()));
        let (sha256, size) = {
            let file = private_new_file(&tmp)?;
            copy_hashing(&mut std::fs::File::open(src)?, &file).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })?
        };
        let dest = self.path_of(&sha256)?;
        if dest.exists() {
            std::fs::remove_file(&tmp)?;
        } else {
            crate::paths::ensure_private_dir(dest.parent().expect("a parent"))?;
            // Atomic: a reader never sees half a sample.
            std::fs::rename(&tmp, &dest)?;
        }
        Ok(StoredSample { sha256, size })
    }

    /// Copies a stored sample to `dest` (created 0o600), checking its hash.
    pub fn fetch(&self, sha256: &str, dest: &Path) -> std::io::Result<u64> {
        let src = self.path_of(sha256)?;
        let mut from = std::fs::File::open(&src).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("sample {sha256} is not in the store: {e}"),
            )
        })?;
        let to = private_new_file(dest)?;
        let (got, size) = copy_hashing(&mut from, &to)?;
        if got != sha256 {
            let _ = std::fs::remove_file(dest);
            return Err(std::io::Error::other(format!(
                "the stored sample {sha256} has changed (its content hashes to {got})"
            )));
        }
        Ok(size)
    }
}

fn private_new_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

fn copy_hashing(from: &mut impl Read, mut to: &std::fs::File) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        size += n as u64;
    }
    to.flush()?;
    Ok((hex::encode(hasher.finalize()), size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn stores_once_by_content_and_fetches_privately() {
        let dir = tempfile::tempdir().unwrap();
        let store = SampleStore::at(dir.path().join("samples"));
        let src = dir.path().join("a.bin");
        std::fs::write(&src, b"MZ sample").unwrap();
        let a = store.put(&src).unwrap();
        let b = store.put(&src).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.size, 9);
        let kept = store.path_of(&a.sha256).unwrap();
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let out = dir.path().join("out.bin");
        assert_eq!(store.fetch(&a.sha256, &out).unwrap(), 9);
        assert_eq!(std::fs::read(&out).unwrap(), b"MZ sample");
        std::fs::write(&kept, b"changed").unwrap();
        let err = store.fetch(&a.sha256, &dir.path().join("o2")).unwrap_err();
        assert!(err.to_string().contains("has changed"), "{err}");
        assert!(store.fetch("../../etc", &dir.path().join("o3")).is_err());
    }
}
