//! RAR members (RAR 1.5 to 4 and RAR 5, solid or not, encrypted with one of the usual
//! passwords) through the `unrar` crate. It builds RARLAB's own unRAR library, the one
//! maintained RAR decoder; its licence allows extraction and forbids only writing a RAR
//! compressor. unRAR opens archives by path, so the bytes go to a private temporary file first
//! (0600 in a 0700 folder, removed when the read ends). unRAR decodes a member whole, so each
//! member's declared size is checked against the limits before it is decoded.

use std::path::Path;

use unrar::{
    Archive,
    error::{Code, UnrarError},
};

use crate::members::{Collector, USUAL_PASSWORDS};

pub(crate) fn rar(b: &[u8], c: &mut Collector) -> String {
    let (_dir, path) = match staged(b) {
        Ok(staged) => staged,
        Err(e) => {
            c.skip(
                "(archive)",
                format!("the RAR archive cannot be staged for unRAR: {e}"),
            );
            return "rar".into();
        }
    };
    match password_for(&path) {
        Ok(password) => read(&path, password, b.len() as u64, c),
        Err(why) => c.skip("(archive)", why),
    }
    "rar".into()
}

/// One entry of a RAR listing.
pub(crate) struct Header {
    pub name: String,
    pub size: u64,
    pub is_dir: bool,
    pub encrypted: bool,
}

/// The first `max` entries of a RAR archive, read from its headers (nothing is decoded).
pub(crate) fn headers(b: &[u8], max: usize) -> Result<Vec<Header>, String> {
    let (_dir, path) = staged(b).map_err(|e| format!("cannot be staged for unRAR: {e}"))?;
    let listing = Archive::new(&path).open_for_listing().map_err(|e| {
        if is_password_error(&e) {
            "its headers are encrypted: the names need the password".to_string()
        } else {
            format!("not a readable RAR archive: {e}")
        }
    })?;
    let mut out = Vec::new();
    for entry in listing.take(max) {
        let e = entry.map_err(|e| format!("the RAR archive stops early: {e}"))?;
        out.push(Header {
            name: e.filename.to_string_lossy().into_owned(),
            size: e.unpacked_size,
            is_dir: e.is_directory(),
            encrypted: e.is_encrypted(),
        });
    }
    Ok(out)
}

/// The archive in a private temporary folder, for unRAR to open by path.
fn staged(b: &[u8]) -> std::io::Result<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::Builder::new().prefix("maljan-rar-").tempdir()?;
    let path = dir.path().join("sample.rar");
    std::fs::write(&path, b)?;
    Ok((dir, path))
}

/// The password the archive needs: None when nothing in it is encrypted, or the first of the
/// usual passwords that opens it.
fn password_for(path: &Path) -> Result<Option<&'static str>, String> {
    let encrypted = match Archive::new(path).open_for_listing() {
        Ok(listing) => {
            let mut any = false;
            for entry in listing {
                match entry {
                    Ok(e) => any |= e.is_encrypted(),
                    Err(e) => return Err(format!("the RAR archive cannot be listed: {e}")),
                }
            }
            any
        }
        // Encrypted headers: even the names need the password.
        Err(e) if is_password_error(&e) => true,
        Err(e) => return Err(format!("not a readable RAR archive: {e}")),
    };
    if !encrypted {
        return Ok(None);
    }
    for pw in USUAL_PASSWORDS {
        if opens_with(path, pw) {
            return Ok(Some(pw));
        }
    }
    Err(format!(
        "the RAR archive is encrypted and none of {} opens it",
        USUAL_PASSWORDS.join(", ")
    ))
}

/// Whether `password` opens the archive: its first encrypted member tests clean (RAR 4 has no
/// password check, so a wrong one shows only as a bad checksum).
fn opens_with(path: &Path, password: &str) -> bool {
    let Ok(mut archive) = Archive::with_password(path, password).open_for_processing() else {
        return false;
    };
    loop {
        let Ok(Some(at)) = archive.read_header() else {
            return false;
        };
        if at.entry().is_encrypted() && at.entry().is_file() {
            return at.test().is_ok();
        }
        archive = match at.skip() {
            Ok(next) => next,
            Err(_) => return false,
        };
    }
}

fn is_password_error(e: &UnrarError) -> bool {
    matches!(e.code, Code::MissingPassword | Code::BadPassword)
}

fn read(path: &Path, password: Option<&str>, packed: u64, c: &mut Collector) {
    let opened = match password {
        Some(pw) => Archive::with_password(path, pw).open_for_processing(),
        None => Archive::new(path).open_for_processing(),
    };
    let mut archive = match opened {
        Ok(a) => a,
        Err(e) => return c.skip("(archive)", format!("not a readable RAR archive: {e}")),
    };
    loop {
        if c.done() {
            return;
        }
        let at = match archive.read_header() {
            Ok(Some(at)) => at,
            Ok(None) => return,
            Err(e) => return c.skip("(archive)", format!("the RAR archive stops early: {e}")),
        };
        let entry = at.entry();
        let name = entry.filename.to_string_lossy().into_owned();
        let used = password.filter(|_| entry.is_encrypted());
        let admitted = if entry.is_file() {
            c.admit(&name, packed, entry.unpacked_size)
        } else {
            Err(true)
        };
        let next = match admitted {
            Ok(()) => match at.read() {
                Ok((data, next)) => {
                    if !c.add(&name, "rar", Some(packed), &mut &data[..], used) {
                        return;
                    }
                    next
                }
                Err(e) => {
                    return c.skip(&name, format!("damaged or unreadable member: {e}"));
                }
            },
            Err(false) => return,
            Err(true) => match at.skip() {
                Ok(next) => next,
                Err(e) => return c.skip("(archive)", format!("the RAR archive stops early: {e}")),
            },
        };
        archive = next;
    }
}
