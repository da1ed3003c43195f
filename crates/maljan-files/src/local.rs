//! Local files and directories: list, create, copy, remove (automation-file's file_ops/dir_ops).

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
    time::UNIX_EPOCH,
};

use maljan_server::{ErrorCode, Registry, ToolContext, ToolError, ToolMeta, Write, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    paths::{Opened, copy_data, io_err, show},
};

fn default_true() -> bool {
    true
}
fn default_max_entries() -> i64 {
    10_000
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListDirArgs {
    /// The directory to list.
    dir_path: String,
    /// List the whole tree below the directory, not only its direct entries.
    #[serde(default)]
    #[schemars(default)]
    recursive: bool,
    /// Stop after this many entries (the answer then says `truncated`).
    #[serde(default = "default_max_entries")]
    #[schemars(default = "default_max_entries")]
    max_entries: i64,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct DirEntryOut {
    /// Path of the entry.
    path: String,
    /// Its name.
    name: String,
    /// `file`, `dir`, `symlink` or `other` (symlinks are not followed).
    kind: &'static str,
    /// Size in bytes (of the link itself for a symlink).
    size: u64,
    /// Last modification, seconds since the Unix epoch.
    modified: Option<f64>,
}

#[derive(Serialize, JsonSchema)]
struct ListDirOut {
    dir_path: String,
    entries: Vec<DirEntryOut>,
    count: usize,
    truncated: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateDirArgs {
    /// The directory to create; missing parents are created too, and an existing one is fine.
    dir_path: String,
}

#[derive(Serialize, JsonSchema)]
struct CreateDirOut {
    dir_path: String,
    /// False when the directory was already there.
    created: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyFileArgs {
    /// The file to copy.
    file_path: String,
    /// Where to copy it: a file path, or an existing directory to copy it into.
    target_path: String,
    /// Also copy the modification and access times (like shutil.copy2); permissions are always copied.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    copy_metadata: bool,
}

#[derive(Serialize, JsonSchema)]
struct CopyOut {
    source: String,
    target: String,
    bytes: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemoveFileArgs {
    /// The file to delete (a symlink is removed itself, never its target).
    file_path: String,
}

#[derive(Serialize, JsonSchema)]
struct RemovedOut {
    removed: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_list_dir",
            "List a directory's entries (name, kind, size, modification time), optionally recursively.",
        )
        .timeout_s(120),
        move |ctx: ToolContext, a: ListDirArgs| {
            let c = c.clone();
            async move {
                let dir = c.existing_dir(&a.dir_path)?;
                if a.max_entries < 1 {
                    return Err(ToolError::bad_argument("max_entries must be at least 1"));
                }
                blocking(move || list_dir(&c, &dir, a.recursive, a.max_entries as usize, &ctx)).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_create_dir",
            "Create a directory and any missing parents (no error if it exists).",
        )
        .writes()
        .timeout_s(30),
        move |_ctx, a: CreateDirArgs| {
            let c = c.clone();
            async move {
                let dir = c.target(&a.dir_path)?;
                blocking(move || {
                    if dir.is_dir() {
                        return Ok(CreateDirOut {
                            dir_path: show(&dir),
                            created: false,
                        });
                    }
                    c.roots.create_dir_all(&dir, &a.dir_path)?;
                    Ok(CreateDirOut {
                        dir_path: show(&dir),
                        created: true,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_copy_file",
            "Copy one file to a path or into a directory, overwriting an existing target.",
        )
        .destructive()
        .timeout_s(600),
        move |ctx, a: CopyFileArgs| {
            let c = c.clone();
            async move {
                let source = c.existing_file(&a.file_path)?;
                let target = c.target(&a.target_path)?;
                blocking(move || {
                    let target = into_dir(&source.path, target);
                    let bytes = copy_one(
                        &c,
                        &source,
                        &target,
                        a.copy_metadata,
                        &a.target_path,
                        &|| ctx.is_cancelled(),
                    )?;
                    Ok(CopyOut {
                        source: show(&source.path),
                        target: show(&target),
                        bytes,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_remove_file",
            "Delete one file (not a directory; FA_remove_dir_tree does those).",
        )
        .destructive()
        .timeout_s(60),
        move |_ctx, a: RemoveFileArgs| {
            let c = c.clone();
            async move {
                let entry = c.entry(&a.file_path)?;
                blocking(move || {
                    let (dir, name) = c.roots.parent_dir(&entry, &a.file_path)?;
                    let kind = dir
                        .entry_kind(name.as_os_str())
                        .map_err(io_err(&a.file_path))?;
                    if kind == libc::S_IFDIR {
                        return Err(ToolError::bad_argument(format!(
                            "{} is a directory; FA_remove_dir_tree removes directories",
                            a.file_path
                        )));
                    }
                    dir.unlink(name.as_os_str()).map_err(io_err(&a.file_path))?;
                    Ok(RemovedOut {
                        removed: show(&entry),
                    })
                })
                .await
            }
        },
    );
}

/// shutil.copy's rule: a target that is an existing directory receives the file under its name.
pub(crate) fn into_dir(source: &Path, target: PathBuf) -> PathBuf {
    match source.file_name() {
        Some(name) if target.is_dir() => target.join(name),
        _ => target,
    }
}

/// Copies one open file's bytes and permissions to a resolved target (created or emptied from
/// its root's handle), and with `metadata` its times too.
pub(crate) fn copy_one(
    c: &Config,
    source: &Opened,
    target: &Path,
    metadata: bool,
    given_target: &str,
    stop: &dyn Fn() -> bool,
) -> Result<u64, ToolError> {
    if source.path == target {
        return Err(ToolError::bad_argument(format!(
            "{} and {given_target} are the same file",
            source.given
        )));
    }
    let out = c
        .roots
        .create_file(target, given_target, Write::Truncate)
        .map_err(|e| {
            if e.code == ErrorCode::NoSuchFile {
                ToolError::no_such_file(format!(
                    "the target's directory does not exist: {given_target}"
                ))
                .with_remediation(
                    "create the directory first (FA_create_dir), or copy into an existing one",
                )
            } else {
                e
            }
        })?;
    let bytes = copy_data(&source.file, &mut &out, given_target, stop)?;
    let source_meta = source.file.metadata().map_err(io_err(&source.given))?;
    out.set_permissions(source_meta.permissions())
        .map_err(io_err(given_target))?;
    if metadata {
        copy_times(&source_meta, &out).map_err(io_err(given_target))?;
    }
    Ok(bytes)
}

/// Sets an open file's modified (and accessed) times to those in `source`.
pub(crate) fn copy_times(source: &fs::Metadata, target: &fs::File) -> std::io::Result<()> {
    let mut times = fs::FileTimes::new().set_modified(source.modified()?);
    if let Ok(accessed) = source.accessed() {
        times = times.set_accessed(accessed);
    }
    target.set_times(times)
}

pub(crate) fn entry_out(path: &Path, meta: &fs::Metadata) -> DirEntryOut {
    let ft = meta.file_type();
    let kind = if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    };
    DirEntryOut {
        path: show(path),
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        kind,
        size: meta.len(),
        modified: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64()),
    }
}

fn list_dir(
    cfg: &Config,
    dir: &Path,
    recursive: bool,
    max: usize,
    ctx: &ToolContext,
) -> Result<ListDirOut, ToolError> {
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut pending = vec![dir.to_path_buf()];
    'walk: while let Some(current) = pending.pop() {
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
        let read = match fs::read_dir(&current) {
            Ok(r) => r,
            // The directory asked for must be readable; one found below it may not be.
            Err(e) if current == dir => return Err(ToolError::io(&show(dir), e)),
            Err(_) => continue,
        };
        let mut here: Vec<_> = read.filter_map(Result::ok).collect();
        here.sort_by_key(|e| e.file_name());
        for e in here {
            let path = e.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if entries.len() >= max {
                truncated = true;
                break 'walk;
            }
            if recursive && meta.is_dir() && cfg.contains(&path) {
                pending.push(path.clone());
            }
            entries.push(entry_out(&path, &meta));
        }
    }
    if recursive {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
    }
    Ok(ListDirOut {
        dir_path: show(dir),
        count: entries.len(),
        entries,
        truncated,
    })
}
