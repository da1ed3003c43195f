//! Zip extraction (FA_unzip_file, FA_unzip_all): every member is written inside the target
//! directory, each path written is checked under the roots again (the target may hold symlinks),
//! and symlink members are written as plain files holding their target, as Python's zipfile does.

use std::{
    fs::{self, File},
    path::{Path, PathBuf},
    sync::Arc,
};

use maljan_server::{ToolContext, ToolError, blocking};

use crate::{
    Config,
    archive::{NamesOut, by_name, member_err, open_zip, zip_err},
    paths::{io_err, join_inside, show},
};

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
    let path = c.existing_file(&u.zip_file_path)?;
    let dest = extract_dir(&c, &path, u.extract_path.as_deref())?;
    blocking(move || {
        let names = unzip(&c, &path, &dest, &u, &ctx)?;
        Ok(NamesOut {
            count: names.len(),
            names,
        })
    })
    .await
}

fn extract_dir(c: &Config, zip: &Path, given: Option<&str>) -> Result<PathBuf, ToolError> {
    match given {
        Some(d) => c.target(d),
        None => Ok(zip.parent().map(PathBuf::from).unwrap_or_default()),
    }
}

/// Extracts the requested members of the archive at `path` into `dest`; the paths written.
fn unzip(
    c: &Config,
    path: &Path,
    dest: &Path,
    u: &Unzip,
    ctx: &ToolContext,
) -> Result<Vec<String>, ToolError> {
    let given = u.zip_file_path.as_str();
    let password = u.password.as_deref();
    let mut archive = open_zip(path, given)?;
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
    fs::create_dir_all(dest).map_err(io_err(&show(dest)))?;
    let mut written = Vec::new();
    for i in wanted {
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
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
        // The target may already contain symlinks: resolve again under the roots.
        c.target(&show(&out))?;
        let mut member = by_name(&mut archive, &raw_name, password)?;
        if member.is_dir() {
            fs::create_dir_all(&out).map_err(io_err(&raw_name))?;
            continue;
        }
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent).map_err(io_err(&raw_name))?;
        }
        if out.is_symlink() {
            fs::remove_file(&out).map_err(io_err(&raw_name))?;
        }
        // A symlink member is written as a file holding its target, as Python's zipfile does.
        let mut f = File::create(&out).map_err(io_err(&raw_name))?;
        std::io::copy(&mut member, &mut f).map_err(|e| member_err(&raw_name, e))?;
        written.push(show(&out));
    }
    Ok(written)
}
