//! Whole directories and new files: copy, move, rename, remove, create_file.

use std::{fs, path::Path, sync::Arc};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    encoding::encode_text,
    local::{copy_one, copy_times},
    paths::{io_err, show, walk_files},
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
