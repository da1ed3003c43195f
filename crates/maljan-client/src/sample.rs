//! The sample a job is about: where it is, its name, size and sha256, read once when the job
//! starts. Below both the job and staging, which hands it to servers.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The sample a job is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub path: PathBuf,
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

impl Sample {
    /// Reads size and sha256 of `path`.
    pub fn read(path: &Path) -> std::io::Result<Self> {
        use sha2::Digest;
        use std::io::Read;
        let path = std::fs::canonicalize(path)?;
        let mut f = std::fs::File::open(&path)?;
        let mut h = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            size += n as u64;
            h.update(&buf[..n]);
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            path,
            name,
            size,
            sha256: hex::encode(h.finalize()),
        })
    }
}
