//! Zip extraction (FA_unzip_file, FA_unzip_all): every member is written inside the target
//! directory, from its root's handle (a link in the target is never written through), and
//! symlink members are written as plain files holding their target, as Python's zipfile does.
//!
//! Extraction is bounded ([`ExtractionLimits`]: total bytes, member count, expansion ratio, and
//! the free space on the target's filesystem), checked on what the archive declares before a
//! byte is written and on what is really written while writing. Members are written under
//! temporary names and renamed into place only once all of them are in, so a failed extraction
//! removes every file and directory it made and leaves the target tree as it was.

use std::{
    ffi::OsString,
    io::Read,
    path::{Path, PathBuf},
    sync::Arc,
    time::SystemTime,
};

use maljan_server::{ErrorCode, Renamed, ToolContext, ToolError, Write, blocking};

use crate::{
    Config,
    archive::{NamesOut, by_name, member_err, open_zip, zip_err},
    paths::{CANCEL_CHECK_BYTES, Opened, cancelled, io_err, join_inside, show},
};

/// What one extraction may write. The defaults stop a zip bomb long before it fills a disk;
/// the binary sets them from `maljan serve files --max-extracted-bytes / --max-extracted-files
/// / --max-expansion-ratio` (see [`FilesConfig`](crate::FilesConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractionLimits {
    /// The most bytes all members together may expand to.
    pub max_bytes: u64,
    /// The most members (files and directories) one extraction writes.
    pub max_files: u64,
    /// The most the expanded size may be, as a multiple of the archive's own size.
    pub max_ratio: u64,
}

impl Default for ExtractionLimits {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 30,
            max_files: 100_000,
            max_ratio: 200,
        }
    }
}

/// Free space kept on the target's filesystem: extraction stops before it would go below.
const FREE_SPACE_RESERVE: u64 = 16 << 20;

/// FA_unzip_file and FA_unzip_all are one extraction; they differ only in how the members are
/// named (one name, or an optional list).
pub(crate) struct Unzip {
    pub(crate) zip_file_path: String,
    /// None: every member.
    pub(crate) members: Option<Vec<String>>,
    pub(crate) extract_path: Option<String>,
    pub(crate) password: Option<String>,
}

pub(crate) async fn extract(
    c: Arc<Config>,
    ctx: ToolContext,
    u: Unzip,
) -> Result<NamesOut, ToolError> {
    let zip = c.existing_file(&u.zip_file_path)?;
    let dest = extract_dir(&c, &zip.path, u.extract_path.as_deref())?;
    blocking(move || {
        let mut made = Made::default();
        match unzip(&c, zip, &dest, &u, &ctx, &mut made) {
            Ok(names) => Ok(NamesOut {
                count: names.len(),
                names,
            }),
            Err(e) => {
                made.undo(&c);
                Err(e)
            }
        }
    })
    .await
}

fn extract_dir(c: &Config, zip: &Path, given: Option<&str>) -> Result<PathBuf, ToolError> {
    match given {
        Some(d) => c.target(d),
        None => Ok(zip.parent().map(PathBuf::from).unwrap_or_default()),
    }
}

/// What an extraction has made so far, to take back when it fails.
#[derive(Default)]
struct Made {
    /// Directories created, outermost first.
    dirs: Vec<PathBuf>,
    /// Members written under temporary names: (temporary path, final path).
    files: Vec<(PathBuf, PathBuf)>,
    /// Directories that existed and had entries made in them, with their modification time
    /// then: put back when the extraction is undone, so the tree is as it was.
    touched: Vec<(PathBuf, SystemTime)>,
}

impl Made {
    /// Removes every temporary file and every directory made (innermost first). A member
    /// already renamed into place is removed too, by its final name.
    fn undo(&self, c: &Config) {
        for (tmp, _) in &self.files {
            let _ = c.roots.remove_file(tmp, &show(tmp));
        }
        for dir in self.dirs.iter().rev() {
            if let Ok((parent, name)) = c.roots.parent_dir(dir, &show(dir)) {
                let _ = parent.rmdir(name.as_os_str());
            }
        }
        for (dir, modified) in &self.touched {
            let listed = c.roots.open_dir(dir, &show(dir)).and_then(|d| {
                d.open(Path::new(""), libc::O_RDONLY | libc::O_DIRECTORY, 0)
                    .map_err(io_err(&show(dir)))
            });
            if let Ok(listed) = listed {
                let _ = listed.set_times(std::fs::FileTimes::new().set_modified(*modified));
            }
        }
    }

    /// Creates `dir` and any missing directory above it, each from the one above's handle,
    /// remembering the ones it made.
    fn ensure_dir(&mut self, c: &Config, dir: &Path) -> Result<(), ToolError> {
        let shown = show(dir);
        match c.roots.open_dir(dir, &shown) {
            Ok(handle) => {
                if !self.dirs.iter().any(|d| d == dir)
                    && !self.touched.iter().any(|(d, _)| d == dir)
                {
                    let modified = handle
                        .open(Path::new(""), libc::O_RDONLY | libc::O_DIRECTORY, 0)
                        .and_then(|f| f.metadata()?.modified())
                        .map_err(io_err(&shown))?;
                    self.touched.push((dir.to_path_buf(), modified));
                }
                return Ok(());
            }
            Err(e) if e.code == ErrorCode::NoSuchFile => {}
            Err(e) => return Err(e),
        }
        if let Some(parent) = dir.parent() {
            self.ensure_dir(c, parent)?;
        }
        let (parent, name) = c.roots.parent_dir(dir, &shown)?;
        match parent.mkdir(name.as_os_str(), 0o777) {
            Ok(()) => self.dirs.push(dir.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&shown)(e)),
        }
        Ok(())
    }
}

fn over_limit(what: String, name: &str, value: u64) -> ToolError {
    ToolError::bad_argument(format!(
        "{what}: the extraction limit {name} is {value}; nothing extracted is left"
    ))
    .with_remediation(
        "extract only the members you need (FA_unzip_file), or raise the limit if the archive is trusted",
    )
}

/// Extracts the requested members of `zip` into `dest`; the paths written.
fn unzip(
    c: &Config,
    zip: Opened,
    dest: &Path,
    u: &Unzip,
    ctx: &ToolContext,
    made: &mut Made,
) -> Result<Vec<String>, ToolError> {
    let limits = c.extraction;
    let given = u.zip_file_path.as_str();
    let password = u.password.as_deref();
    let archive_size = zip.size()?.max(1);
    let mut archive = open_zip(zip)?;
    let wanted: Vec<usize> = match &u.members {
        Some(names) => names
            .iter()
            .map(|n| {
                archive.index_for_name(n).ok_or_else(|| {
                    ToolError::no_such_file(format!("no member named '{n}' in {given}"))
                })
            })
            .collect::<Result<_, _>>()?,
        None => (0..archive.len()).collect(),
    };
    // What the archive declares, before anything is written.
    if wanted.len() as u64 > limits.max_files {
        return Err(over_limit(
            format!("{given} has {} members", wanted.len()),
            "max_extracted_files",
            limits.max_files,
        ));
    }
    let max_bytes = limits
        .max_bytes
        .min(archive_size.saturating_mul(limits.max_ratio));
    let mut declared = 0u64;
    for &i in &wanted {
        let size = archive.by_index_raw(i).map_err(zip_err(given))?.size();
        declared = declared.saturating_add(size);
    }
    check_expanded(declared, archive_size, limits, given, "declares")?;
    made.ensure_dir(c, dest)?;
    let free = |dir: &Path| -> Result<u64, ToolError> {
        c.roots
            .open_dir(dir, &show(dir))?
            .free_bytes()
            .map_err(io_err(&show(dir)))
    };
    if declared.saturating_add(FREE_SPACE_RESERVE) > free(dest)? {
        return Err(ToolError::tool_failed(format!(
            "{given} declares {declared} bytes, more than the free space on the target's filesystem"
        ))
        .with_remediation("free some space, or extract into another directory"));
    }
    let mut written_bytes = 0u64;
    let mut since_check = 0u64;
    let mut names = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    for i in wanted {
        if ctx.is_cancelled() {
            return Err(cancelled());
        }
        let raw_name = archive
            .by_index_raw(i)
            .map_err(zip_err(given))?
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_default();
        let Some(out) = join_inside(dest, &raw_name) else {
            return Err(ToolError::bad_argument(format!(
                "member '{raw_name}' would be written outside the target directory"
            )));
        };
        let mut member = by_name(&mut archive, &raw_name, password)?;
        if member.is_dir() {
            made.ensure_dir(c, &out)?;
            continue;
        }
        made.ensure_dir(c, out.parent().unwrap_or(dest))?;
        let (dir, name) = c.roots.parent_dir(&out, &raw_name)?;
        let tmp_name = OsString::from(format!(
            ".{}.{}.part",
            name.display(),
            uuid::Uuid::new_v4().simple()
        ));
        let tmp = out.with_file_name(&tmp_name);
        // A symlink member is written as a file holding its target, as Python's zipfile does.
        let mut f = dir
            .open_write(Path::new(&tmp_name), Write::New { mode: 0o666 })
            .map_err(io_err(&raw_name))?;
        made.files.push((tmp, out.clone()));
        loop {
            let n = match member.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(member_err(&raw_name, e)),
            };
            written_bytes += n as u64;
            if written_bytes > max_bytes {
                check_expanded(written_bytes, archive_size, limits, given, "expands to")?;
            }
            std::io::Write::write_all(&mut f, &buf[..n]).map_err(io_err(&raw_name))?;
            since_check += n as u64;
            if since_check >= CANCEL_CHECK_BYTES {
                since_check = 0;
                if ctx.is_cancelled() {
                    return Err(cancelled());
                }
                if free(dest)? < FREE_SPACE_RESERVE {
                    return Err(ToolError::tool_failed(format!(
                        "the target's filesystem is nearly full after {written_bytes} bytes of {given}; what was extracted is removed"
                    ))
                    .with_remediation("free some space, or extract into another directory"));
                }
            }
        }
        names.push(show(&out));
    }
    // Every member is in: rename them into place, in archive order (a later duplicate wins).
    for (tmp, out) in &made.files {
        if c.roots.rename(tmp, out, &show(out))? != Renamed::Done {
            return Err(ToolError::tool_failed(format!(
                "{} could not be renamed into place",
                show(out)
            )));
        }
    }
    made.files.clear();
    Ok(names)
}

/// Refuses an expanded size over the byte limit or the ratio limit; `how` says whether the
/// size is what the archive declares or what it really expanded to.
fn check_expanded(
    size: u64,
    archive_size: u64,
    limits: crate::unzip::ExtractionLimits,
    given: &str,
    how: &str,
) -> Result<(), ToolError> {
    if size > limits.max_bytes {
        return Err(over_limit(
            format!("{given} {how} at least {size} bytes"),
            "max_extracted_bytes",
            limits.max_bytes,
        ));
    }
    if size > archive_size.saturating_mul(limits.max_ratio) {
        return Err(over_limit(
            format!(
                "{given} {how} at least {size} bytes from {archive_size}, more than {} times its size",
                limits.max_ratio
            ),
            "max_expansion_ratio",
            limits.max_ratio,
        ));
    }
    Ok(())
}
