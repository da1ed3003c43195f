//! Where maljan keeps its files: the data directory (`MALJAN_HOME`, else `$XDG_DATA_HOME/maljan`,
//! else `~/.local/share/maljan`) and the config file inside it (`MALJAN_CONFIG` overrides).

use std::path::{Path, PathBuf};

/// The data directory: config.toml, ledger.sqlite3, secret.key and the stdio servers' logs live here.
pub fn data_dir() -> PathBuf {
    if let Some(home) = non_empty_env("MALJAN_HOME") {
        return PathBuf::from(home);
    }
    if let Some(xdg) = non_empty_env("XDG_DATA_HOME") {
        return Path::new(&xdg).join("maljan");
    }
    let home = non_empty_env("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".local/share/maljan")
}

/// Where the built-in files server may work: `<data dir>/work`, private (0700). Its default
/// root, so a configuration nobody wrote reaches no file of the user's beyond it (not the
/// current directory, not the temp dir); `maljan analyze` narrows it to one directory per run.
pub fn work_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("work")
}

/// Creates `dir` (and its parents) readable by its owner only.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The config file: `explicit` (the `--config` flag), else `MALJAN_CONFIG`, else
/// `<data dir>/config.toml`.
pub fn config_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = non_empty_env("MALJAN_CONFIG") {
        return PathBuf::from(p);
    }
    data_dir().join("config.toml")
}

/// Creates `dir` (and parents) with mode 0o700 when it does not exist yet.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}
