//! Tar archives (automation-file's tar_ops): create with gz, bz2, xz or no compression; extract
//! any of them, refusing the whole archive when a member or link would land outside the target.

use std::{
    io::{BufReader, BufWriter, Read, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use maljan_server::{
    ErrorCode, Registry, ToolContext, ToolError, ToolMeta, Write as Create, blocking,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::{
    Config,
    archive::{ArchiveOut, NamesOut},
    paths::{CANCEL_CHECK_BYTES, Opened, cancelled, io_err, join_inside, show},
};

fn default_gz() -> Option<String> {
    Some("gz".into())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateTarArgs {
    /// The file or directory archived (stored under its own name).
    source: String,
    /// The archive written.
    target: String,
    /// gz, bz2, xz, or none/null for a plain tar.
    #[serde(default = "default_gz")]
    #[schemars(default = "default_gz")]
    compression: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExtractTarArgs {
    /// The archive (plain, gz, bz2 or xz: detected from its content).
    source: String,
    /// The directory to extract into (created if missing).
    target_dir: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_create_tar",
            "Create a tar archive (gz, bz2, xz or plain) of a file or directory.",
        )
        .destructive()
        .timeout_s(3600),
        move |ctx: ToolContext, a: CreateTarArgs| {
            let c = c.clone();
            async move {
                let kind = a.compression.as_deref().unwrap_or("").to_ascii_lowercase();
                if !matches!(kind.as_str(), "" | "none" | "gz" | "bz2" | "xz") {
                    return Err(ToolError::bad_argument(format!(
                        "unknown compression '{kind}'; use gz, bz2, xz or none"
                    )));
                }
                let src = c.existing(&a.source)?;
                let target = c.target(&a.target)?;
                if target.starts_with(&src) && src.is_dir() {
                    return Err(ToolError::bad_argument(
                        "the archive cannot be written inside the directory it archives",
                    ));
                }
                blocking(move || {
                    if let Some(parent) = target.parent() {
                        c.roots.create_dir_all(parent, &a.target)?;
                    }
                    let out = BufWriter::new(c.roots.create_file(
                        &target,
                        &a.target,
                        Create::Truncate,
                    )?);
                    let members = match kind.as_str() {
                        "gz" => {
                            let enc =
                                flate2::write::GzEncoder::new(out, flate2::Compression::default());
                            let (n, enc) = write_tar(&c, enc, &src, &a.source, &ctx)?;
                            enc.finish().map_err(io_err(&a.target))?;
                            n
                        }
                        "bz2" => {
                            let enc =
                                bzip2::write::BzEncoder::new(out, bzip2::Compression::default());
                            let (n, enc) = write_tar(&c, enc, &src, &a.source, &ctx)?;
                            enc.finish().map_err(io_err(&a.target))?;
                            n
                        }
                        "xz" => {
                            let enc = lzma_rust2::XzWriter::new(
                                out,
                                lzma_rust2::XzOptions::with_preset(6),
                            )
                            .map_err(io_err(&a.target))?;
                            let (n, enc) = write_tar(&c, enc, &src, &a.source, &ctx)?;
                            enc.finish().map_err(io_err(&a.target))?;
                            n
                        }
                        _ => {
                            let (n, mut w) = write_tar(&c, out, &src, &a.source, &ctx)?;
                            w.flush().map_err(io_err(&a.target))?;
                            n
                        }
                    };
                    Ok(ArchiveOut {
                        path: show(&target),
                        members,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_extract_tar",
            "Extract a tar archive (any compression) into a directory; members or links that would escape it are refused.",
        )
        .destructive()
        .timeout_s(3600),
        move |ctx: ToolContext, a: ExtractTarArgs| {
            let c = c.clone();
            async move {
                let src = c.existing_file(&a.source)?;
                let dest = c.target(&a.target_dir)?;
                blocking(move || {
                    c.roots.create_dir_all(&dest, &a.target_dir)?;
                    // First pass: refuse the whole archive before writing anything.
                    let mut tar = open_tar(&src)?;
                    for entry in tar.entries().map_err(tar_err(&a.source))? {
                        let entry = entry.map_err(tar_err(&a.source))?;
                        check_tar_member(&entry, &dest)?;
                    }
                    let mut tar = open_tar(&src)?;
                    let mut names = Vec::new();
                    for entry in tar.entries().map_err(tar_err(&a.source))? {
                        if ctx.is_cancelled() {
                            return Err(cancelled());
                        }
                        let mut entry = entry.map_err(tar_err(&a.source))?;
                        let name = entry.path().map_err(tar_err(&a.source))?.to_string_lossy().into_owned();
                        if unpack(&c, &mut entry, &dest, &name, &ctx)? {
                            names.push(name);
                        }
                    }
                    Ok(NamesOut { count: names.len(), names })
                })
                .await
            }
        },
    );
}

/// Archives `src` (a file, or a directory and everything below it) without following links: a
/// link is stored as a link, and every file is read from the handle opened under the roots.
fn write_tar<W: Write>(
    c: &Config,
    w: W,
    src: &Path,
    given: &str,
    ctx: &ToolContext,
) -> Result<(usize, W), ToolError> {
    let mut b = tar::Builder::new(w);
    let name = src
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut members = 0;
    for entry in walkdir::WalkDir::new(src)
        .follow_links(false)
        .sort_by_file_name()
    {
        if ctx.is_cancelled() {
            return Err(cancelled());
        }
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(src) else {
            continue;
        };
        // Joining an empty path adds a separator: the archive of one file would hold "a.txt/",
        // which tar lists as a directory.
        let member = if rel.as_os_str().is_empty() {
            name.clone()
        } else {
            name.join(rel)
        };
        let ft = entry.file_type();
        let mut header = tar::Header::new_gnu();
        if ft.is_file() {
            let opened = c.open_resolved(entry.path())?;
            let meta = opened.file.metadata().map_err(io_err(given))?;
            header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
            b.append_data(&mut header, &member, &opened.file)
                .map_err(io_err(given))?;
        } else if ft.is_dir() || ft.is_symlink() {
            let meta = entry.metadata().map_err(|e| io_err(given)(e.into()))?;
            header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
            if ft.is_symlink() {
                let target = std::fs::read_link(entry.path()).map_err(io_err(given))?;
                b.append_link(&mut header, &member, &target)
                    .map_err(io_err(given))?;
            } else {
                b.append_data(&mut header, &member, std::io::empty())
                    .map_err(io_err(given))?;
            }
        } else {
            // Devices, FIFOs and sockets are not archived (reading one may never end).
            continue;
        }
        members += 1;
    }
    let w = b.into_inner().map_err(io_err(given))?;
    Ok((members, w))
}

fn tar_err(given: &str) -> impl Fn(std::io::Error) -> ToolError + '_ {
    move |e| match e.kind() {
        std::io::ErrorKind::InvalidData
        | std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::Other => {
            ToolError::unsupported_format(format!("{given} is not a readable tar archive: {e}"))
        }
        _ => ToolError::io(given, e),
    }
}

/// A tar archive read from the start of the handle that was opened under the roots (each call
/// reads it again from its first byte).
fn open_tar(opened: &Opened) -> Result<tar::Archive<Box<dyn Read>>, ToolError> {
    use std::io::Seek;
    let given = opened.given.as_str();
    let mut f = opened.file.try_clone().map_err(io_err(given))?;
    f.rewind().map_err(io_err(given))?;
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic).map_err(io_err(given))?;
    f.rewind().map_err(io_err(given))?;
    let r = BufReader::new(f);
    let reader: Box<dyn Read> = match &magic[..n] {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(r)),
        [b'B', b'Z', b'h', ..] => Box::new(bzip2::read::MultiBzDecoder::new(r)),
        [0xfd, b'7', b'z', b'X', b'Z', 0x00] => Box::new(lzma_rust2::XzReader::new(r, true)),
        _ => Box::new(r),
    };
    Ok(tar::Archive::new(reader))
}

/// Writes one (already checked) member under `dest`, every directory, file and link made from
/// its root's handle: a member that would go through a symlink (one the archive made, or one
/// already there) is refused, never followed. Devices, FIFOs and the like are skipped, as
/// Python's "data" filter does. True when something was written.
fn unpack<R: Read>(
    c: &Config,
    entry: &mut tar::Entry<'_, R>,
    dest: &Path,
    name: &str,
    ctx: &ToolContext,
) -> Result<bool, ToolError> {
    use tar::EntryType::*;
    let kind = entry.header().entry_type();
    if !matches!(kind, Regular | Directory | Symlink | Link | Continuous) {
        return Ok(false);
    }
    let Some(out) = join_inside(dest, name) else {
        // `.` or `./`: the target directory itself.
        return Ok(false);
    };
    let through_link = |e: ToolError| {
        if e.code == ErrorCode::PathOutsideRoots {
            ToolError::bad_argument(format!(
                "tar member {name} would be written through a symlink; refused"
            ))
        } else {
            e
        }
    };
    if kind == Directory {
        c.roots.create_dir_all(&out, name).map_err(through_link)?;
        return Ok(true);
    }
    if let Some(parent) = out.parent() {
        c.roots.create_dir_all(parent, name).map_err(through_link)?;
    }
    let (dir, file_name) = c.roots.parent_dir(&out, name).map_err(through_link)?;
    let file_name = file_name.as_os_str();
    // What is at the name already is replaced, never written through (unless a directory).
    if dir.entry_kind(file_name).is_ok_and(|k| k != libc::S_IFDIR) {
        dir.unlink(file_name).map_err(io_err(name))?;
    }
    let link = || {
        entry
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.into_owned())
            .unwrap_or_default()
    };
    match kind {
        Symlink => {
            dir.symlink(&link(), file_name).map_err(io_err(name))?;
        }
        Link => {
            let source = join_inside(dest, &link().to_string_lossy()).ok_or_else(|| {
                ToolError::bad_argument(format!(
                    "tar hardlink escapes the target directory: {name}"
                ))
            })?;
            let (from_dir, from_name) = c.roots.parent_dir(&source, name).map_err(through_link)?;
            from_dir
                .hard_link(from_name.as_os_str(), &dir, file_name)
                .map_err(io_err(name))?;
        }
        _ => {
            let file = dir
                .open_write(Path::new(file_name), Create::New { mode: 0o600 })
                .map_err(io_err(name))?;
            let mut into = &file;
            let mut buf = vec![0u8; 1 << 20];
            let mut since_check = 0u64;
            loop {
                let n = match entry.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(tar_err(name)(e)),
                };
                into.write_all(&buf[..n]).map_err(io_err(name))?;
                since_check += n as u64;
                if since_check >= CANCEL_CHECK_BYTES {
                    since_check = 0;
                    if ctx.is_cancelled() {
                        return Err(cancelled());
                    }
                }
            }
            // The permission bits only (no setuid, setgid or sticky), as the tar crate
            // applies them when it does not preserve ownership.
            use std::os::unix::fs::PermissionsExt;
            let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io_err(name))?;
            if let Ok(mtime) = entry.header().mtime() {
                let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
                let _ = file.set_times(std::fs::FileTimes::new().set_modified(when));
            }
        }
    }
    Ok(true)
}

fn check_tar_member<R: Read>(entry: &tar::Entry<'_, R>, dest: &Path) -> Result<(), ToolError> {
    let name = entry
        .path()
        .map_err(|e| ToolError::unsupported_format(e.to_string()))?;
    let name = name.to_string_lossy().into_owned();
    let inside = join_inside(dest, &name);
    if inside.is_none() && !matches!(name.as_str(), "." | "./") {
        return Err(ToolError::bad_argument(format!(
            "tar member escapes the target directory: {name}"
        )));
    }
    let kind = entry.header().entry_type();
    if kind.is_symlink() || kind.is_hard_link() {
        let link = entry
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = if kind.is_symlink() {
            // A symlink's target is relative to the directory holding it.
            inside
                .as_ref()
                .and_then(|p| p.parent())
                .map(PathBuf::from)
                .unwrap_or_else(|| dest.to_path_buf())
        } else {
            dest.to_path_buf()
        };
        let ok = !Path::new(&link).is_absolute() && lexically_inside(&base.join(&link), dest);
        if !ok {
            let what = if kind.is_symlink() {
                "symlink"
            } else {
                "hardlink"
            };
            return Err(ToolError::bad_argument(format!(
                "tar {what} escapes the target directory: {name} -> {link}"
            )));
        }
    }
    Ok(())
}

/// Whether `path`, with `..` folded lexically, stays under `base`.
fn lexically_inside(path: &Path, base: &Path) -> bool {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return false;
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(base)
}
