//! Whole directories: copy, move, rename, remove, create files, sync and backup rotation.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use chrono::{DateTime, Datelike, Utc};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    hashing::{Algorithm, hash_file},
    local::{copy_one, copy_times},
    paths::{io_err, show, walk_files},
    search::name_glob,
    text::encode_text,
};

fn default_true() -> bool {
    true
}
fn default_utf8() -> String {
    "utf-8".into()
}
fn default_star() -> String {
    "*".into()
}
fn default_size_mtime() -> String {
    "size_mtime".into()
}
fn d7() -> i64 {
    7
}
fn d4() -> i64 {
    4
}
fn d12() -> i64 {
    12
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TwoDirs {
    /// The source directory.
    dir_path: String,
    /// The destination directory.
    target_dir_path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyExtArgs {
    /// The directory searched recursively.
    file_dir_path: String,
    /// The extension to copy, with or without the dot (`txt`, `.txt`).
    target_extension: String,
    /// The directory the files are copied into.
    target_path: String,
    /// Also copy modification and access times.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    copy_metadata: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateFileArgs {
    /// The file to write (replaced if it exists).
    file_path: String,
    /// The text to write.
    #[serde(default)]
    #[schemars(default)]
    content: String,
    /// The text encoding to write in (utf-8, utf-16, latin-1, cp1252, shift_jis, gbk, big5, …).
    #[serde(default = "default_utf8")]
    #[schemars(default = "default_utf8")]
    encoding: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DirOnly {
    /// The directory.
    dir_path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenameDirArgs {
    /// The directory to rename or move.
    origin_dir_path: String,
    /// Its new path.
    target_dir: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenameFileArgs {
    /// The directory whose files (recursively) are renamed.
    origin_file_path: String,
    /// The new base name: each file becomes `<target_name>_<n><its extension>` in its own directory.
    target_name: String,
    /// Only files with this extension (with or without the dot); all files when absent.
    #[serde(default)]
    file_extension: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RotateArgs {
    /// The directory holding the backups (not searched recursively).
    directory: String,
    /// Which files are backups: a glob on the name.
    #[serde(default = "default_star")]
    #[schemars(default = "default_star")]
    pattern: String,
    /// Keep the newest file of this many distinct days (0 turns the bucket off).
    #[serde(default = "d7")]
    #[schemars(default = "d7")]
    keep_daily: i64,
    /// … of this many ISO weeks.
    #[serde(default = "d4")]
    #[schemars(default = "d4")]
    keep_weekly: i64,
    /// … of this many months.
    #[serde(default = "d12")]
    #[schemars(default = "d12")]
    keep_monthly: i64,
    /// … of this many years.
    #[serde(default)]
    #[schemars(default)]
    keep_yearly: i64,
    /// Report what would be deleted without deleting.
    #[serde(default)]
    #[schemars(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SyncArgs {
    /// The directory mirrored.
    src: String,
    /// The mirror (created if missing).
    dst: String,
    /// `size_mtime` (size and modification time within 2 s) or `checksum` (sha256 of both sides).
    #[serde(default = "default_size_mtime")]
    #[schemars(default = "default_size_mtime")]
    compare: String,
    /// Delete files in `dst` that `src` does not have.
    #[serde(default)]
    #[schemars(default)]
    delete: bool,
    /// Report without changing anything.
    #[serde(default)]
    #[schemars(default)]
    dry_run: bool,
}

#[derive(Serialize, JsonSchema)]
struct PathsOut {
    /// The paths acted on.
    paths: Vec<String>,
    count: usize,
}

#[derive(Serialize, JsonSchema)]
struct MovedOut {
    source: String,
    target: String,
}

#[derive(Serialize, JsonSchema)]
struct WrittenOut {
    path: String,
    bytes: u64,
}

#[derive(Serialize, JsonSchema)]
struct RotateOut {
    kept: Vec<String>,
    deleted: Vec<String>,
    dry_run: bool,
}

#[derive(Serialize, JsonSchema)]
struct SyncError {
    path: String,
    error: String,
}

#[derive(Serialize, JsonSchema)]
struct SyncOut {
    copied: Vec<String>,
    skipped: Vec<String>,
    deleted: Vec<String>,
    errors: Vec<SyncError>,
    dry_run: bool,
}

fn stopper(ctx: &ToolContext) -> impl Fn() -> bool + '_ {
    move || ctx.is_cancelled()
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_copy_dir",
            "Copy a directory tree into another (merging into an existing one); symlinks are copied as links.",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: TwoDirs| {
            let c = c.clone();
            async move {
                let src = c.existing_dir(&a.dir_path)?;
                let dst = c.target(&a.target_dir_path)?;
                if dst.starts_with(&src) {
                    return Err(ToolError::bad_argument("the target lies inside the directory being copied"));
                }
                blocking(move || {
                    let copied = copy_tree(&c, &src, &dst, &a.target_dir_path, &ctx)?;
                    Ok(PathsOut { count: copied.len(), paths: copied })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_copy_all_file_to_dir",
            "Move a directory into another existing directory (automation-file's meaning, despite the name).",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(1800),
        move |ctx: ToolContext, a: TwoDirs| {
            let c = c.clone();
            async move {
                let src = c.entry(&a.dir_path)?;
                let into = c.existing_dir(&a.target_dir_path)?;
                if !src.is_dir() {
                    return Err(ToolError::no_such_file(format!("not a directory: {}", a.dir_path)));
                }
                let name = src.file_name().map(|n| n.to_os_string()).unwrap_or_default();
                let dst = c.target(&show(&into.join(name)))?;
                if dst.starts_with(&src) {
                    return Err(ToolError::bad_argument("cannot move a directory into itself"));
                }
                blocking(move || {
                    move_path(&c, &src, &dst, &a.target_dir_path, &ctx)?;
                    Ok(MovedOut { source: show(&src), target: show(&dst) })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_copy_specify_extension_file",
            "Copy every file with one extension found below a directory into a target directory.",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: CopyExtArgs| {
            let c = c.clone();
            async move {
                let src = c.existing_dir(&a.file_dir_path)?;
                let into = c.existing_dir(&a.target_path)?;
                let ext = a.target_extension.trim_start_matches('.').to_string();
                if ext.is_empty() || ext.contains('/') {
                    return Err(ToolError::bad_argument(
                        "target_extension must be an extension such as txt",
                    ));
                }
                blocking(move || {
                    let mut copied = Vec::new();
                    for f in walk_files(&src, &stopper(&ctx))? {
                        let matches = f
                            .abs
                            .extension()
                            .is_some_and(|e| e.to_string_lossy() == ext);
                        if f.is_symlink || !matches || f.abs.starts_with(&into) {
                            continue;
                        }
                        let target = into.join(f.abs.file_name().unwrap_or_default());
                        copy_one(&f.abs, &target, a.copy_metadata, &f.rel, &a.target_path)?;
                        copied.push(show(&target));
                    }
                    Ok(PathsOut {
                        count: copied.len(),
                        paths: copied,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_create_file",
            "Write a text file in an encoding (replacing an existing file).",
        )
        .destructive()
        .timeout_s(60),
        move |_ctx, a: CreateFileArgs| {
            let c = c.clone();
            async move {
                let path = c.target(&a.file_path)?;
                let bytes = encode_text(&a.content, &a.encoding, "strict")?;
                blocking(move || {
                    if path.is_dir() {
                        return Err(ToolError::bad_argument(format!(
                            "{} is a directory",
                            a.file_path
                        )));
                    }
                    fs::write(&path, &bytes).map_err(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => ToolError::no_such_file(format!(
                            "the file's directory does not exist: {}",
                            a.file_path
                        ))
                        .with_remediation("create the directory first with FA_create_dir"),
                        _ => ToolError::io(&a.file_path, e),
                    })?;
                    Ok(WrittenOut {
                        path: show(&path),
                        bytes: bytes.len() as u64,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new("FA_remove_dir_tree", "Delete a directory and everything below it (symlinks are not followed).")
            .destructive()
            .timeout_s(600),
        move |_ctx, a: DirOnly| {
            let c = c.clone();
            async move {
                let dir = c.entry(&a.dir_path)?;
                blocking(move || {
                    let meta = fs::symlink_metadata(&dir).map_err(io_err(&a.dir_path))?;
                    if !meta.is_dir() {
                        return Err(ToolError::bad_argument(format!(
                            "{} is not a directory (a symlink is never followed); FA_remove_file removes files and links",
                            a.dir_path
                        )));
                    }
                    fs::remove_dir_all(&dir).map_err(io_err(&a.dir_path))?;
                    Ok(PathsOut { paths: vec![show(&dir)], count: 1 })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_rename_dir",
            "Rename or move a directory to a new path (which must not exist yet).",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(600),
        move |ctx: ToolContext, a: RenameDirArgs| {
            let c = c.clone();
            async move {
                let src = c.entry(&a.origin_dir_path)?;
                let dst = c.target(&a.target_dir)?;
                if !src.is_dir() || src.is_symlink() {
                    return Err(ToolError::no_such_file(format!(
                        "not a directory: {}",
                        a.origin_dir_path
                    )));
                }
                if dst.exists() {
                    return Err(ToolError::bad_argument(format!(
                        "{} already exists",
                        a.target_dir
                    )));
                }
                if dst.starts_with(&src) {
                    return Err(ToolError::bad_argument(
                        "cannot move a directory into itself",
                    ));
                }
                blocking(move || {
                    move_path(&c, &src, &dst, &a.target_dir, &ctx)?;
                    Ok(MovedOut {
                        source: show(&src),
                        target: show(&dst),
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_rename_file",
            "Rename every file below a directory (optionally only one extension) to <target_name>_<n><extension>.",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(600),
        move |ctx: ToolContext, a: RenameFileArgs| {
            let c = c.clone();
            async move {
                let dir = c.existing_dir(&a.origin_file_path)?;
                if a.target_name.is_empty() || a.target_name.contains(['/', '\\', '\0']) || a.target_name == ".." {
                    return Err(ToolError::bad_argument("target_name must be a plain file name"));
                }
                let ext = a.file_extension.map(|e| e.trim_start_matches('.').to_string());
                blocking(move || {
                    let mut renamed = Vec::new();
                    let files = walk_files(&dir, &stopper(&ctx))?;
                    let chosen = files.into_iter().filter(|f| {
                        !f.is_symlink
                            && ext.as_ref().is_none_or(|e| f.abs.extension().is_some_and(|x| x.to_string_lossy() == *e))
                    });
                    for (index, f) in chosen.enumerate() {
                        let suffix = f.abs.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
                        let new = f.abs.with_file_name(format!("{}_{index}{suffix}", a.target_name));
                        fs::rename(&f.abs, &new).map_err(io_err(&f.rel))?;
                        renamed.push(show(&new));
                    }
                    Ok(PathsOut { count: renamed.len(), paths: renamed })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_rotate_backups",
            "Keep the newest backup per day/week/month/year slot (N slots each) in a directory; delete the rest.",
        )
        .destructive()
        .timeout_s(600),
        move |_ctx, a: RotateArgs| {
            let c = c.clone();
            async move {
                for (name, v) in [
                    ("keep_daily", a.keep_daily),
                    ("keep_weekly", a.keep_weekly),
                    ("keep_monthly", a.keep_monthly),
                    ("keep_yearly", a.keep_yearly),
                ] {
                    if v < 0 {
                        return Err(ToolError::bad_argument(format!("{name} must be >= 0")));
                    }
                }
                let dir = c.existing_dir(&a.directory)?;
                let glob = name_glob(&a.pattern)?;
                blocking(move || rotate(&dir, &glob, &a)).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_sync_dir",
            "Mirror a directory into another, copying only new or changed files; optionally delete extras.",
        )
        .destructive()
        .timeout_s(3600),
        move |ctx: ToolContext, a: SyncArgs| {
            let c = c.clone();
            async move {
                if a.compare != "size_mtime" && a.compare != "checksum" {
                    return Err(ToolError::bad_argument(format!(
                        "compare must be 'size_mtime' or 'checksum', not '{}'",
                        a.compare
                    )));
                }
                let src = c.existing_dir(&a.src)?;
                let dst = c.target(&a.dst)?;
                if dst.starts_with(&src) || src.starts_with(&dst) {
                    return Err(ToolError::bad_argument("src and dst must not contain one another"));
                }
                blocking(move || sync(&c, &src, &dst, &a, &ctx)).await
            }
        },
    );
}

/// Copies a tree, recreating symlinks as links (never copying what they point to, which may
/// lie outside the roots). Returns the files written.
fn copy_tree(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    given: &str,
    ctx: &ToolContext,
) -> Result<Vec<String>, ToolError> {
    fs::create_dir_all(dst).map_err(io_err(given))?;
    let mut copied = Vec::new();
    for entry in walkdir::WalkDir::new(src)
        .follow_links(false)
        .min_depth(1)
        .sort_by_file_name()
    {
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(src) else {
            continue;
        };
        // The destination may already hold symlinks; every path written is resolved again so
        // none of them can carry the copy outside the roots.
        let target = dst.join(rel);
        cfg.target(&show(&target))?;
        let ft = entry.file_type();
        if ft.is_dir() {
            fs::create_dir_all(&target).map_err(io_err(given))?;
        } else if ft.is_symlink() {
            let link = fs::read_link(entry.path()).map_err(io_err(given))?;
            let _ = fs::remove_file(&target);
            std::os::unix::fs::symlink(link, &target).map_err(io_err(given))?;
            copied.push(show(&target));
        } else if ft.is_file() {
            if target.is_symlink() {
                // Never write through a link that already sits in the destination.
                fs::remove_file(&target).map_err(io_err(given))?;
            }
            fs::copy(entry.path(), &target).map_err(io_err(given))?;
            copy_times(entry.path(), &target).map_err(io_err(given))?;
            copied.push(show(&target));
        }
    }
    Ok(copied)
}

/// rename(2), or copy and delete when the target is on another filesystem.
fn move_path(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    given: &str,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    match fs::rename(src, dst) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(18) => {
            // EXDEV: across filesystems.
            if src.is_dir() {
                copy_tree(cfg, src, dst, given, ctx)?;
                fs::remove_dir_all(src).map_err(io_err(given))
            } else {
                fs::copy(src, dst).map_err(io_err(given))?;
                fs::remove_file(src).map_err(io_err(given))
            }
        }
        Err(e) => Err(ToolError::io(given, e)),
    }
}

fn mtime(meta: &fs::Metadata) -> f64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn rotate(dir: &Path, glob: &globset::GlobMatcher, a: &RotateArgs) -> Result<RotateOut, ToolError> {
    let mut candidates: Vec<(PathBuf, f64)> = fs::read_dir(dir)
        .map_err(io_err(&a.directory))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()) && glob.is_match(e.file_name()))
        .filter_map(|e| e.metadata().ok().map(|m| (e.path(), mtime(&m))))
        .collect();
    candidates.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    type Keyer = fn(&DateTime<Utc>) -> String;
    let buckets: [(i64, Keyer); 4] = [
        (a.keep_daily, |d| d.format("%Y-%m-%d").to_string()),
        (a.keep_weekly, |d| {
            let w = d.iso_week();
            format!("{}-W{:02}", w.year(), w.week())
        }),
        (a.keep_monthly, |d| d.format("%Y-%m").to_string()),
        (a.keep_yearly, |d| d.format("%Y").to_string()),
    ];
    let mut kept = BTreeSet::new();
    for (keep, key) in buckets {
        if keep <= 0 {
            continue;
        }
        let mut seen = BTreeMap::new();
        for (path, t) in &candidates {
            let when: DateTime<Utc> = (UNIX_EPOCH + Duration::from_secs_f64(t.max(0.0))).into();
            let slot = key(&when);
            if seen.contains_key(&slot) {
                continue;
            }
            seen.insert(slot, path.clone());
            if seen.len() as i64 >= keep {
                break;
            }
        }
        kept.extend(seen.into_values());
    }
    let mut deleted = Vec::new();
    for (path, _) in &candidates {
        if kept.contains(path) {
            continue;
        }
        if !a.dry_run {
            fs::remove_file(path).map_err(io_err(&show(path)))?;
        }
        deleted.push(show(path));
    }
    Ok(RotateOut {
        kept: kept.iter().map(|p| show(p)).collect(),
        deleted,
        dry_run: a.dry_run,
    })
}

fn sync(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    a: &SyncArgs,
    ctx: &ToolContext,
) -> Result<SyncOut, ToolError> {
    if !a.dry_run {
        fs::create_dir_all(dst).map_err(io_err(&a.dst))?;
    }
    let mut out = SyncOut {
        copied: vec![],
        skipped: vec![],
        deleted: vec![],
        errors: vec![],
        dry_run: a.dry_run,
    };
    let files = walk_files(src, &stopper(ctx))?;
    let sha = Algorithm::parse("sha256")?;
    for f in &files {
        let target = dst.join(&f.rel);
        match cfg.target(&show(&target)) {
            Ok(_) => {}
            Err(e) => {
                out.errors.push(SyncError {
                    path: f.rel.clone(),
                    error: e.message,
                });
                continue;
            }
        };
        let needs = needs_copy(&f.abs, &target, f.is_symlink, a.compare == "checksum", sha);
        match needs {
            Ok(false) => out.skipped.push(f.rel.clone()),
            Ok(true) if a.dry_run => out.copied.push(f.rel.clone()),
            Ok(true) => match copy_entry(&f.abs, &target, f.is_symlink) {
                Ok(()) => out.copied.push(f.rel.clone()),
                Err(e) => out.errors.push(SyncError {
                    path: f.rel.clone(),
                    error: e.to_string(),
                }),
            },
            Err(e) => out.errors.push(SyncError {
                path: f.rel.clone(),
                error: e.to_string(),
            }),
        }
    }
    if a.delete && dst.is_dir() {
        let expected: BTreeSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
        for f in walk_files(dst, &stopper(ctx))? {
            if expected.contains(f.rel.as_str()) {
                continue;
            }
            if !a.dry_run
                && let Err(e) = fs::remove_file(&f.abs)
            {
                out.errors.push(SyncError {
                    path: f.rel.clone(),
                    error: e.to_string(),
                });
                continue;
            }
            out.deleted.push(f.rel);
        }
    }
    Ok(out)
}

fn needs_copy(
    src: &Path,
    dst: &Path,
    src_link: bool,
    checksum: bool,
    sha: Algorithm,
) -> Result<bool, ToolError> {
    let Ok(dmeta) = fs::symlink_metadata(dst) else {
        return Ok(true);
    };
    if src_link != dmeta.file_type().is_symlink() {
        return Ok(true);
    }
    if src_link {
        return Ok(fs::read_link(src).ok() != fs::read_link(dst).ok());
    }
    let smeta = fs::metadata(src).map_err(io_err(&show(src)))?;
    if smeta.len() != dmeta.len() {
        return Ok(true);
    }
    if checksum {
        let (a, _) = hash_file(src, &show(src), sha, 1 << 20, None)?;
        let (b, _) = hash_file(dst, &show(dst), sha, 1 << 20, None)?;
        return Ok(a != b);
    }
    Ok((mtime(&smeta) - mtime(&dmeta)).abs() > 2.0)
}

fn copy_entry(src: &Path, dst: &Path, link: bool) -> std::io::Result<()> {
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent)?;
    }
    if link || fs::symlink_metadata(dst).is_ok_and(|m| m.file_type().is_symlink()) {
        let _ = fs::remove_file(dst);
    }
    if link {
        return std::os::unix::fs::symlink(fs::read_link(src)?, dst);
    }
    fs::copy(src, dst)?;
    copy_times(src, dst)
}
