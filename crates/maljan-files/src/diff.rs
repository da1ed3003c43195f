//! Diffs and patches: FA_diff_files (unified diff), FA_diff_dirs (by content), FA_apply_patch.

use std::{collections::BTreeMap, sync::Arc};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data::non_negative;
use crate::{
    Config,
    hashing::{Algorithm, Watch, hash_file},
    paths::{Opened, show, walk_files},
};

fn default_context() -> i64 {
    3
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffFilesArgs {
    /// The old file.
    left: String,
    /// The new file.
    right: String,
    /// Lines of context around each change.
    #[serde(default = "default_context")]
    #[schemars(default = "default_context")]
    context: i64,
}

#[derive(Serialize, JsonSchema)]
struct DiffFilesOut {
    /// The unified diff (empty when the files are equal).
    diff: String,
    identical: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffDirsArgs {
    /// The old tree.
    left: String,
    /// The new tree.
    right: String,
}

#[derive(Serialize, JsonSchema)]
struct DiffDirsOut {
    /// Files only in `right` (relative paths).
    added: Vec<String>,
    /// Files only in `left`.
    removed: Vec<String>,
    /// Files in both whose content differs.
    changed: Vec<String>,
    identical: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PatchArgs {
    /// The text file patched in place.
    target: String,
    /// A unified diff made against the file's current content.
    patch: String,
}

#[derive(Serialize, JsonSchema)]
struct PatchOut {
    path: String,
    hunks: usize,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_diff_files",
            "Unified diff between two UTF-8 text files.",
        )
        .timeout_s(120),
        move |_ctx, a: DiffFilesArgs| {
            let c = c.clone();
            async move {
                non_negative("context", a.context)?;
                let left = c.existing_file(&a.left)?;
                let right = c.existing_file(&a.right)?;
                blocking(move || {
                    let l = read_utf8(&left, &a.left)?;
                    let r = read_utf8(&right, &a.right)?;
                    let diff = similar::TextDiff::from_lines(&l, &r)
                        .unified_diff()
                        .context_radius(a.context as usize)
                        .header(&show(&left.path), &show(&right.path))
                        .to_string();
                    Ok(DiffFilesOut {
                        identical: l == r,
                        diff,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_diff_dirs",
            "Compare two directory trees by content: files added, removed and changed.",
        )
        .timeout_s(1800),
        move |ctx: ToolContext, a: DiffDirsArgs| {
            let c = c.clone();
            async move {
                let left = c.existing_dir(&a.left)?;
                let right = c.existing_dir(&a.right)?;
                blocking(move || {
                    let stop = || ctx.is_cancelled();
                    let sha = Algorithm::parse("sha256")?;
                    let l: BTreeMap<_, _> = walk_files(&left, &stop)?
                        .into_iter()
                        .filter(|f| !f.is_symlink)
                        .map(|f| (f.rel, f.abs))
                        .collect();
                    let r: BTreeMap<_, _> = walk_files(&right, &stop)?
                        .into_iter()
                        .filter(|f| !f.is_symlink)
                        .map(|f| (f.rel, f.abs))
                        .collect();
                    let added: Vec<String> =
                        r.keys().filter(|k| !l.contains_key(*k)).cloned().collect();
                    let removed: Vec<String> =
                        l.keys().filter(|k| !r.contains_key(*k)).cloned().collect();
                    let mut changed = Vec::new();
                    for (rel, lp) in &l {
                        let Some(rp) = r.get(rel) else { continue };
                        let (lf, rf) = (c.open_resolved(lp)?, c.open_resolved(rp)?);
                        if lf.size()? != rf.size()?
                            || hash_file(lf.file, rel, sha, 1 << 20, Watch::Call(&ctx))?.0
                                != hash_file(rf.file, rel, sha, 1 << 20, Watch::Call(&ctx))?.0
                        {
                            changed.push(rel.clone());
                        }
                    }
                    let identical = added.is_empty() && removed.is_empty() && changed.is_empty();
                    Ok(DiffDirsOut {
                        added,
                        removed,
                        changed,
                        identical,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_apply_patch",
            "Apply a unified diff to a text file in place; every context and removed line must match, else nothing changes.",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(120),
        move |_ctx, a: PatchArgs| {
            let c = c.clone();
            async move {
                let target = c.existing_file(&a.target)?;
                blocking(move || {
                    let text = read_utf8(&target, &a.target)?;
                    let (patched, hunks) = apply_unified(&text, &a.patch)?;
                    c.write_atomic(&target.path, &a.target, patched.as_bytes())?;
                    Ok(PatchOut { path: show(&target.path), hunks })
                })
                .await
            }
        },
    );
}

fn read_utf8(opened: &Opened, given: &str) -> Result<String, ToolError> {
    let bytes = opened.bytes()?;
    String::from_utf8(bytes)
        .map_err(|_| ToolError::unsupported_format(format!("{given} is not UTF-8 text")))
}

struct Hunk {
    old_start: usize,
    ops: Vec<(char, String)>,
}

fn parse_hunks(patch: &str) -> Result<Vec<Hunk>, ToolError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    for line in patch.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("@@ ") {
            let old = rest
                .split_whitespace()
                .next()
                .and_then(|s| s.strip_prefix('-'))
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or_else(|| {
                    ToolError::bad_argument(format!("malformed hunk header: {}", line.trim_end()))
                })?;
            hunks.push(Hunk {
                old_start: old,
                ops: Vec::new(),
            });
            continue;
        }
        let Some(hunk) = hunks.last_mut() else {
            // File headers (---, +++, diff, index) before the first hunk.
            continue;
        };
        if line.starts_with("\\") {
            // "\ No newline at end of file": the line before it has no newline.
            if let Some((_, last)) = hunk.ops.last_mut()
                && last.ends_with('\n')
            {
                last.pop();
            }
            continue;
        }
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            continue;
        }
        let mut chars = line.chars();
        let op = chars.next().unwrap_or(' ');
        let payload = chars.as_str().to_string();
        match op {
            ' ' | '-' | '+' => hunk.ops.push((op, payload)),
            '\n' => hunk.ops.push((' ', "\n".into())),
            _ => {
                return Err(ToolError::bad_argument(format!(
                    "unexpected line in patch: {}",
                    line.trim_end()
                )));
            }
        }
    }
    if hunks.is_empty() {
        return Err(ToolError::bad_argument(
            "the patch has no hunks (@@ … @@ lines)",
        ));
    }
    Ok(hunks)
}

/// Applies hunks in order, checking every context and removed line against the file.
pub(crate) fn apply_unified(text: &str, patch: &str) -> Result<(String, usize), ToolError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let hunks = parse_hunks(patch)?;
    let mut out = String::with_capacity(text.len() + patch.len());
    let mut cursor = 0usize;
    for hunk in &hunks {
        // A hunk starting at old line 0 (an empty old side) inserts at the top.
        let start = hunk.old_start.saturating_sub(1);
        if start < cursor || start > lines.len() {
            return Err(ToolError::bad_argument(format!(
                "hunk at line {} is out of order or past the end",
                hunk.old_start
            )));
        }
        for l in &lines[cursor..start] {
            out.push_str(l);
        }
        cursor = start;
        for (op, payload) in &hunk.ops {
            if *op == '+' {
                out.push_str(payload);
                continue;
            }
            let got = lines.get(cursor).copied();
            if got != Some(payload.as_str()) {
                let kind = if *op == ' ' { "context" } else { "deletion" };
                return Err(ToolError::bad_argument(format!(
                    "patch {kind} mismatch at line {}: expected {:?}, found {:?}",
                    cursor + 1,
                    payload,
                    got.unwrap_or("<end of file>")
                ))
                .with_remediation(
                    "make the patch against the file's current content (FA_diff_files)",
                ));
            }
            if *op == ' ' {
                out.push_str(payload);
            }
            cursor += 1;
        }
    }
    for l in &lines[cursor..] {
        out.push_str(l);
    }
    Ok((out, hunks.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_diff_applies_back() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nB\nc\nd\ne\nf\ng\nh\nextra";
        let diff = similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(1)
            .header("x", "y")
            .to_string();
        let (patched, hunks) = apply_unified(old, &diff).unwrap();
        assert_eq!(patched, new);
        assert_eq!(hunks, 2);
        assert_eq!(
            apply_unified("zzz\n", &diff).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(
            apply_unified(old, "not a patch").unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
    }
}
