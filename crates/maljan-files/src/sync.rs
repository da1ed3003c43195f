//! Backup rotation and incremental directory sync (automation-file's rotate_backups, sync_dir).

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

use crate::data::non_negative;
use crate::{
    Config,
    hashing::{Algorithm, Watch, hash_file},
    local::copy_one,
    paths::{io_err, show, walk_files},
    search::name_glob,
};

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
                    non_negative(name, v)?;
                }
                let dir = c.existing_dir(&a.directory)?;
                let glob = name_glob(&a.pattern)?;
                blocking(move || rotate(&c, &dir, &glob, &a)).await
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

fn mtime(meta: &fs::Metadata) -> f64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn rotate(
    cfg: &Config,
    dir: &Path,
    glob: &globset::GlobMatcher,
    a: &RotateArgs,
) -> Result<RotateOut, ToolError> {
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
            cfg.roots.remove_file(path, &show(path))?;
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
        cfg.roots.create_dir_all(dst, &a.dst)?;
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
        let needs = needs_copy(
            cfg,
            &f.abs,
            &target,
            f.is_symlink,
            a.compare == "checksum",
            sha,
            ctx,
        );
        match needs {
            Ok(false) => out.skipped.push(f.rel.clone()),
            Ok(true) if a.dry_run => out.copied.push(f.rel.clone()),
            Ok(true) => match copy_entry(cfg, &f.abs, &target, f.is_symlink, &f.rel, ctx) {
                Ok(()) => out.copied.push(f.rel.clone()),
                Err(e) => out.errors.push(SyncError {
                    path: f.rel.clone(),
                    error: e.message,
                }),
            },
            Err(e) => out.errors.push(SyncError {
                path: f.rel.clone(),
                error: e.message,
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
                && let Err(e) = cfg.roots.remove_file(&f.abs, &f.rel)
            {
                out.errors.push(SyncError {
                    path: f.rel.clone(),
                    error: e.message,
                });
                continue;
            }
            out.deleted.push(f.rel);
        }
    }
    Ok(out)
}

fn needs_copy(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    src_link: bool,
    checksum: bool,
    sha: Algorithm,
    ctx: &ToolContext,
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
        let stop = stopper(ctx);
        let (a, _) = hash_file(
            cfg.open_resolved(src)?.file,
            &show(src),
            sha,
            1 << 20,
            Watch::Stop(&stop),
        )?;
        let (b, _) = hash_file(
            cfg.open_resolved(dst)?.file,
            &show(dst),
            sha,
            1 << 20,
            Watch::Stop(&stop),
        )?;
        return Ok(a != b);
    }
    Ok((mtime(&smeta) - mtime(&dmeta)).abs() > 2.0)
}

/// Copies one file or link to `dst`, every directory, link and file made from its root's
/// handle; a link already at `dst` is replaced, never written through.
fn copy_entry(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    link: bool,
    given: &str,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    if let Some(parent) = dst.parent() {
        cfg.roots.create_dir_all(parent, given)?;
    }
    let (dir, name) = cfg.roots.parent_dir(dst, given)?;
    if link || dir.entry_kind(name.as_os_str()).ok() == Some(libc::S_IFLNK) {
        let _ = dir.unlink(name.as_os_str());
    }
    if link {
        // A link's text is copied as text: nothing is read through it.
        let text = fs::read_link(src).map_err(io_err(given))?;
        return dir.symlink(&text, name.as_os_str()).map_err(io_err(given));
    }
    let source = cfg.open_resolved(src)?;
    copy_one(cfg, &source, dst, true, given, &stopper(ctx)).map(drop)
}
