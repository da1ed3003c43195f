//! The capability manifest (DESIGN.md): what the server can do on this host, computed once at
//! start-up by probing — a binary on PATH, an environment variable, a readable directory — never
//! asserted. The manifest's JSON shape is the wire convention's, shared with the client runtime
//! (`maljan-protocol`); the probes are the server's own.

use std::{path::PathBuf, sync::Arc};

pub use maljan_protocol::{Manifest, ManifestTool};

/// What a probe found missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
    pub remediation: String,
    /// What the tool still answers without the dependency (None: nothing).
    pub without: Option<String>,
}

/// A check for one optional dependency, run once when the server is built.
#[derive(Clone)]
pub struct Probe {
    pub dependency: String,
    check: Arc<dyn Fn() -> Result<(), Unavailable> + Send + Sync>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("dependency", &self.dependency)
            .finish()
    }
}

impl Probe {
    pub fn custom(
        dependency: impl Into<String>,
        check: impl Fn() -> Result<(), Unavailable> + Send + Sync + 'static,
    ) -> Self {
        Self {
            dependency: dependency.into(),
            check: Arc::new(check),
        }
    }

    /// An executable that must be on PATH.
    pub fn binary(name: &'static str, remediation: impl Into<String>) -> Self {
        let remediation = remediation.into();
        Self::custom(name, move || match find_on_path(name) {
            Some(_) => Ok(()),
            None => Err(Unavailable {
                reason: format!("{name} not found on PATH"),
                remediation: remediation.clone(),
                without: None,
            }),
        })
    }

    /// An environment variable that must be set and non-empty.
    pub fn env(var: &'static str, remediation: impl Into<String>) -> Self {
        let remediation = remediation.into();
        Self::custom(var, move || match std::env::var_os(var) {
            Some(v) if !v.is_empty() => Ok(()),
            _ => Err(Unavailable {
                reason: format!("environment variable {var} is not set"),
                remediation: remediation.clone(),
                without: None,
            }),
        })
    }

    pub fn run(&self) -> Result<(), Unavailable> {
        (self.check)()
    }
}

/// Looks an executable up on PATH the way a shell would.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}
