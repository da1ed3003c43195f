//! Where submitted samples wait for the worker that runs their job, content-addressed by sha256
//! (`<first two hex>/<sha256>`), so a sample submitted twice is stored once: a local folder (the
//! embedded default; 0o700 directories, 0o600 files) or a bucket (`s3://…`, `gs://…`, `az://…`
//! through `object_store`, credentials and endpoint from the usual AWS_* / GOOGLE_* / AZURE_*
//! variables). A worker copies the sample into its job's private work directory, checking the
//! hash on the way: a stored sample that changed is refused.

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
};

use std::sync::Arc;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload, path::Path as Key};
use sha2::{Digest, Sha256};

/// The sample store.
#[derive(Debug, Clone)]
pub struct SampleStore {
    dir: PathBuf,
    /// A bucket instead of the folder, and the key prefix in it.
    bucket: Option<(Arc<dyn ObjectStore>, String)>,
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
        Self { dir, bucket: None }
    }

    /// The store a URL names: empty for the data directory's folder, else `s3://bucket/prefix`,
    /// `gs://…` or `az://…` (MALJAN_SAMPLES_URL).
    pub fn from_url(url: &str, data_dir: &Path) -> std::io::Result<Self> {
        if url.is_empty() {
            return Ok(Self::in_data_dir(data_dir));
        }
        let bad =
            |e: object_store::Error| std::io::Error::other(format!("samples store {url}: {e}"));
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            std::io::Error::other(format!(
                "samples store {url}: expected s3://, gs:// or az://"
            ))
        })?;
        // reqwest (under object_store) is built without a default TLS provider: ring, as the
        // transports install it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let prefix = rest
            .split_once('/')
            .map_or("", |(_, p)| p)
            .trim_matches('/');
        let store: Arc<dyn ObjectStore> = match scheme {
            "s3" => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(bad)?,
            ),
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(bad)?,
            ),
            "az" | "azure" | "abfs" | "abfss" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(bad)?,
            ),
            _ => {
                return Err(std::io::Error::other(format!(
                    "samples store {url}: expected s3://, gs:// or az://"
                )));
            }
        };
        Ok(Self {
            dir: data_dir.join("samples"),
            bucket: Some((store, prefix.to_string())),
        })
    }

    fn key_of(prefix: &str, sha256: &str) -> Key {
        let rel = format!("{}/{sha256}", &sha256[..2]);
        if prefix.is_empty() {
            Key::from(rel)
        } else {
            Key::from(format!("{prefix}/{rel}"))
        }
    }

    /// Stores the file at `src` (once per content); returns its hash and size.
    pub async fn store(&self, src: &Path) -> std::io::Result<StoredSample> {
        let Some((bucket, prefix)) = &self.bucket else {
            let (me, src) = (self.clone(), src.to_path_buf());
            return tokio::task::spawn_blocking(move || me.put(&src)).await?;
        };
        let bytes = tokio::fs::read(src).await?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let key = Self::key_of(prefix, &sha256);
        let size = bytes.len() as u64;
        let err =
            |e: object_store::Error| std::io::Error::other(format!("uploading the sample: {e}"));
        // Uploaded once: a sample already there is not sent again.
        match bucket.head(&key).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => {
                bucket
                    .put(&key, PutPayload::from(bytes))
                    .await
                    .map_err(err)?;
            }
            Err(e) => return Err(err(e)),
        }
        Ok(StoredSample { sha256, size })
    }

    /// Copies a stored sample to `dest` (created 0o600), checking its hash.
    pub async fn retrieve(&self, sha256: &str, dest: &Path) -> std::io::Result<u64> {
        let Some((bucket, prefix)) = &self.bucket else {
            let (me, sha, dest) = (self.clone(), sha256.to_string(), dest.to_path_buf());
            return tokio::task::spawn_blocking(move || me.fetch(&sha, &dest)).await?;
        };
        self.path_of(sha256)?; // the same check of the name
        let key = Self::key_of(prefix, sha256);
        let err = |e: object_store::Error| {
            std::io::Error::other(format!("fetching sample {sha256} from the store: {e}"))
        };
        let bytes = bucket
            .get(&key)
            .await
            .map_err(err)?
            .bytes()
            .await
            .map_err(err)?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != sha256 {
            return Err(std::io::Error::other(format!(
                "the stored sample {sha256} has changed (its content hashes to {got})"
            )));
        }
        let mut file = private_new_file(dest)?;
        file.write_all(&bytes)?;
        Ok(bytes.len() as u64)
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
