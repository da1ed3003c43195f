//! Whole directories and new files: copy, move, rename, remove, create_file.

use std::{fs, io::Write as _, path::Path, sync::Arc};

use maljan_server::{
    ErrorCode, Registry, Renamed, ToolContext, ToolError, ToolMeta, Write, blocking,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    encoding::encode_text,
    local::copy_one,
    paths::{cancelled, io_err, show, walk_files},
};

fn default_true() -> bool {
    true
}
fn default_utf8() -> String {
    "utf-8".into()
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
                        let source = c.open_resolved(&f.abs)?;
                        copy_one(
                            &c,
                            &source,
                            &target,
                            a.copy_metadata,
                            &a.target_path,
                            &stopper(&ctx),
                        )?;
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
                    let mut file = c
                        .roots
                        .create_file(&path, &a.file_path, Write::Truncate)
                        .map_err(|e| match e.code {
                            ErrorCode::NoSuchFile => ToolError::no_such_file(format!(
                                "the file's directory does not exist: {}",
                                a.file_path
                            ))
                            .with_remediation("create the directory first with FA_create_dir"),
                            _ => e,
                        })?;
                    file.write_all(&bytes).map_err(io_err(&a.file_path))?;
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
                    let (parent, name) = c.roots.parent_dir(&dir, &a.dir_path)?;
                    let kind = parent.entry_kind(name.as_os_str()).map_err(io_err(&a.dir_path))?;
                    if kind != libc::S_IFDIR {
                        return Err(ToolError::bad_argument(format!(
                            "{} is not a directory (a symlink is never followed); FA_remove_file removes files and links",
                            a.dir_path
                        )));
                    }
                    parent.remove_tree(name.as_os_str()).map_err(io_err(&a.dir_path))?;
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
                        if c.roots.rename(&f.abs, &new, &f.rel)? != Renamed::Done {
                            return Err(ToolError::tool_failed(format!("{} could not be renamed in place", f.rel)));
                        }
                        renamed.push(show(&new));
                    }
                    Ok(PathsOut { count: renamed.len(), paths: renamed })
                })
                .await
            }
        },
    );
}

/// Copies a tree, recreating symlinks as links (never copying what they point to, which may
/// lie outside the roots). Returns the files written. Every directory, link and file is made
/// from its root's handle, so a link already in the destination is never written through.
fn copy_tree(
    cfg: &Config,
    src: &Path,
    dst: &Path,
    given: &str,
    ctx: &ToolContext,
) -> Result<Vec<String>, ToolError> {
    cfg.roots.create_dir_all(dst, given)?;
    let mut copied = Vec::new();
    for entry in walkdir::WalkDir::new(src)
        .follow_links(false)
        .min_depth(1)
        .sort_by_file_name()
    {
        if ctx.is_cancelled() {
            return Err(cancelled());
        }
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(src) else {
            continue;
        };
        let target = dst.join(rel);
        let ft = entry.file_type();
        if ft.is_dir() {
            cfg.roots.create_dir_all(&target, given)?;
        } else if ft.is_symlink() {
            // A link's text is copied as text: nothing is read through it.
            let link = fs::read_link(entry.path()).map_err(io_err(given))?;
            let (dir, name) = cfg.roots.parent_dir(&target, given)?;
            let _ = dir.unlink(name.as_os_str());
            dir.symlink(&link, name.as_os_str())
                .map_err(io_err(given))?;
            copied.push(show(&target));
        } else if ft.is_file() {
            let (dir, name) = cfg.roots.parent_dir(&target, given)?;
            if dir.entry_kind(name.as_os_str()).ok() == Some(libc::S_IFLNK) {
                // Never write through a link that already sits in the destination.
                dir.unlink(name.as_os_str()).map_err(io_err(given))?;
            }
            let source = cfg.open_resolved(entry.path())?;
            copy_one(cfg, &source, &target, true, given, &stopper(ctx))?;
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
    if cfg.roots.rename(src, dst, given)? == Renamed::Done {
        return Ok(());
    }
    let (parent, name) = cfg.roots.parent_dir(src, given)?;
    if parent.entry_kind(name.as_os_str()).map_err(io_err(given))? == libc::S_IFDIR {
        copy_tree(cfg, src, dst, given, ctx)?;
        parent.remove_tree(name.as_os_str()).map_err(io_err(given))
    } else {
        let source = cfg.open_resolved(src)?;
        copy_one(cfg, &source, dst, true, given, &stopper(ctx))?;
        parent.unlink(name.as_os_str()).map_err(io_err(given))
    }
}
