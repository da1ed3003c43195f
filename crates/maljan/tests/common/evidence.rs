//! Evidence folders for the tests that check it is never written to: a snapshot of a folder
//! (every entry's path, type, mode, size, mtime and content hash, the directories' own mtimes
//! included, so even a file made and removed again shows), zips that carry an executable, and a
//! read-only folder that stays read-only for root too.

use std::{
    io::Write,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use sha2::{Digest, Sha256};

/// One line per entry under `dir` (and `dir` itself), sorted.
pub fn snapshot(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(dir).unwrap().display().to_string();
        let content = if meta.is_file() {
            hex::encode(Sha256::digest(std::fs::read(&p).unwrap()))
        } else {
            String::new()
        };
        let mtime = meta
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        lines.push(format!(
            "{rel:?} {:?} {:o} {} {mtime} {content}",
            meta.file_type(),
            meta.permissions().mode(),
            meta.len(),
        ));
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    lines.sort();
    lines
}

/// A zip holding `entries` (deflated; AES-256 with `password` when given).
pub fn zip_of(entries: &[(&str, &[u8])], password: Option<&str>) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        let mut o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        if let Some(p) = password {
            o = o.with_aes_encryption(zip::AesMode::Aes256, p);
        }
        w.start_file(*name, o).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// `maljan analyze SAMPLE --no-agent --format json` with its data directory in `home`; returns
/// the JSON report and the command's output. `read_only` runs it as [`without_write_override`].
pub fn analyze(home: &Path, sample: &Path, read_only: bool) -> (serde_json::Value, Output) {
    let report = home.with_file_name("report.json");
    let mut cmd = Command::new(super::maljan());
    cmd.arg("analyze")
        .arg(sample)
        .args(["--no-agent", "--format", "json", "--report"])
        .arg(&report)
        .current_dir(home.parent().unwrap())
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .env("MALJAN_LOG", "warn")
        .stdin(Stdio::null());
    if read_only {
        without_write_override(&mut cmd);
    }
    let out = cmd.output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).unwrap();
    (serde_json::from_str(&text).unwrap(), out)
}

/// Capabilities that let root write through permissions: CAP_DAC_OVERRIDE and CAP_FOWNER.
const WRITE_OVERRIDES: [libc::c_ulong; 2] = [1, 3];

/// Runs `cmd` (and everything it starts) with the capabilities that let root write through
/// permissions dropped from its bounding set, so a 0555 folder is read-only even under root.
/// A no-op for another user, who has none of them.
pub fn without_write_override(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe and only changes this child's own capability set.
    unsafe {
        cmd.pre_exec(|| {
            if libc::geteuid() == 0 {
                for cap in WRITE_OVERRIDES {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        });
    }
}

/// A folder of samples made read-only (0555, files 0444). Answers whether writing into it is
/// refused to a process run as [`without_write_override`] (tried with `touch`): when the
/// capabilities cannot be dropped here, the tests still hold by the snapshot, and say so.
pub fn make_read_only(dir: &Path) -> bool {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe: PathBuf = dir.join("probe");
    let mut touch = Command::new("touch");
    touch.arg(&probe).stderr(Stdio::null());
    without_write_override(&mut touch);
    match touch.status() {
        Ok(status) if !status.success() => true,
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            eprintln!("note: writes into a 0555 folder are not refused here; checked by snapshot");
            false
        }
        Err(e) => {
            eprintln!("note: cannot drop CAP_DAC_OVERRIDE here ({e}); checked by snapshot");
            false
        }
    }
}

/// Gives the folder back its owner's write permission, so the temp dir can be removed.
pub fn make_writable(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
}
