//! storage_list, storage_copy (a file or a whole tree) and file_search.

use std::{collections::BTreeMap, sync::Arc};

use futures::StreamExt;
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    add,
    files::{TransferArgs, transfer_file},
};
use crate::{
    Config,
    storage::{
        transfer::{self, Info},
        uri::Location,
    },
};

/// The longest snippet of a matching line.
const SNIPPET: usize = 200;
/// A file with a NUL byte in its first 8 KiB is not searched as text.
const BINARY_PROBE: usize = 8192;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// The directory to list (a storage URI inside a location this server allows).
    uri: String,
    /// List every descendant, not only the direct children.
    recursive: Option<bool>,
    /// Return at most this many entries. The server caps it.
    max_results: Option<usize>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// The directory to search (a storage URI inside a location this server allows).
    uri: String,
    /// Shell-style pattern for the file name: *.csv, report-2026-??.csv. With a '/' it is
    /// matched against the path below the directory: 2026/*/*.csv. Default: every file.
    pattern: Option<String>,
    /// Only return files that contain this text (a plain substring). The first matching line
    /// is returned with its number.
    content: Option<String>,
    /// Search subdirectories too. Default true.
    recursive: Option<bool>,
    /// Match names and content case-sensitively.
    case_sensitive: Option<bool>,
    /// Return at most this many entries. The server caps it.
    max_results: Option<usize>,
}

impl Config {
    /// `asked` within the server's cap on results.
    fn clamp_results(&self, asked: Option<usize>) -> Result<usize, ToolError> {
        let cap = self.semantic.policy.max_results;
        match asked {
            Some(0) => Err(ToolError::bad_argument("max_results must be 1 or more")),
            Some(n) => Ok(n.min(cap)),
            None => Ok(cap),
        }
    }
}

/// An entry as the semantic tools describe it.
fn described(info: &Info) -> Value {
    json!({
        "uri": info.uri,
        "path": info.path,
        "name": info.name,
        "is_dir": info.is_dir,
        "size": info.size,
        "modified_at": info.modified_at,
    })
}

async fn storage_list(c: Arc<Config>, ctx: ToolContext, a: ListArgs) -> Result<Value, ToolError> {
    let at = c.guarded(&a.uri)?;
    let recursive = a.recursive.unwrap_or(false);
    let limit = c.clamp_results(a.max_results)?;
    let listing = transfer::list(&c, &ctx, &at, recursive).await?;
    let entries: Vec<Value> = listing.iter().take(limit).map(described).collect();
    Ok(json!({
        "uri": at.shown(),
        "recursive": recursive,
        "count": entries.len(),
        "entries": entries,
        "total": listing.len(),
        "truncated": listing.len() > limit,
    }))
}

/// The files below a directory by their path under it; a missing directory is empty when
/// `missing_ok`.
async fn files_below(
    c: &Config,
    ctx: &ToolContext,
    at: &Location,
    missing_ok: bool,
) -> Result<BTreeMap<String, Info>, ToolError> {
    if missing_ok && !transfer::exists(c, at).await? {
        return Ok(BTreeMap::new());
    }
    Ok(transfer::list(c, ctx, at, true)
        .await?
        .into_iter()
        .filter(|i| !i.is_dir)
        .map(|i| (i.path.clone(), i))
        .collect())
}

fn child(dir: &Location, rel: &str) -> String {
    format!("{}/{rel}", dir.shown().trim_end_matches('/'))
}

/// Whether `inner` is `outer` or lies below it.
fn below(inner: &Location, outer: &Location) -> bool {
    let (i, o) = (inner.shown(), outer.shown());
    let o = o.trim_end_matches('/');
    i == o || i.starts_with(&format!("{o}/"))
}

async fn copy_tree(
    c: &Config,
    ctx: &ToolContext,
    a: &TransferArgs,
    source: Location,
) -> Result<Value, ToolError> {
    let target = c.guarded(&a.target)?;
    if below(&target, &source) || below(&source, &target) {
        return Err(ToolError::bad_argument(
            "storage_copy: the target is inside the source, or the source inside it",
        ));
    }
    let files = files_below(c, ctx, &source, false).await?;
    let existing = files_below(c, ctx, &target, true).await?;
    let collisions: Vec<&String> = files.keys().filter(|p| existing.contains_key(*p)).collect();
    let overwrite = a.overwrite.unwrap_or(false);
    if overwrite && !collisions.is_empty() && !c.semantic.policy.allow_overwrite {
        return Err(super::refused(
            "overwrite_not_allowed",
            format!("{} of the files exist at the target", collisions.len()),
            "this server does not allow replacing files (--allow-overwrite); copy without overwrite to skip them",
        ));
    }
    let wanted: Vec<&String> = (files.keys())
        .filter(|p| overwrite || !existing.contains_key(*p))
        .collect();
    let limit = c.semantic.policy.max_results;
    let dry_run = a.dry_run.unwrap_or(false);
    let mut body = json!({
        "kind": "tree",
        "source": source.shown(),
        "target": target.shown(),
        "dry_run": dry_run,
        "planned": {
            "copy": wanted.len(),
            "overwrite": if overwrite { collisions.len() } else { 0 },
            "skip": if overwrite { 0 } else { collisions.len() },
            "bytes": wanted.iter().map(|p| files[*p].size.unwrap_or(0)).sum::<u64>(),
        },
        "paths": wanted.iter().take(limit).collect::<Vec<_>>(),
        "existing": collisions.iter().take(limit).collect::<Vec<_>>(),
        "truncated": wanted.len() > limit || collisions.len() > limit,
        "done": false,
    });
    if dry_run {
        return Ok(body);
    }
    let (mut copied, mut errors) = (0usize, Map::new());
    for (n, rel) in wanted.iter().enumerate() {
        if ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
        ctx.progress(n as f64, Some(wanted.len() as f64), None);
        let from = c.guarded(&child(&source, rel))?;
        let to = c.guarded(&child(&target, rel))?;
        match transfer::copy(c, ctx, &from, &to, overwrite).await {
            Ok(_) => copied += 1,
            Err(e) => {
                errors.insert((*rel).clone(), json!(e.message));
            }
        }
    }
    let failed = errors.len();
    body["done"] = json!(true);
    body["ok"] = json!(failed == 0);
    body["copied"] = json!(copied);
    body["skipped"] = json!(files.len() - wanted.len());
    body["failed"] = json!(failed);
    body["errors"] = Value::Object(errors.into_iter().take(limit).collect());
    Ok(body)
}

async fn storage_copy(
    c: Arc<Config>,
    ctx: ToolContext,
    a: TransferArgs,
) -> Result<Value, ToolError> {
    c.require_write("storage_copy")?;
    let source = c.guarded(&a.source)?;
    if transfer::stat(&c, &source).await?.is_dir {
        return copy_tree(&c, &ctx, &a, source).await;
    }
    let mut body = transfer_file(&c, &ctx, &a, "storage_copy", false).await?;
    body["kind"] = json!("file");
    Ok(body)
}

/// A shell-style pattern as Python's fnmatch reads it (`*` crosses `/`).
fn name_pattern(pattern: &str, case_sensitive: bool) -> Result<globset::GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .case_insensitive(!case_sensitive)
        .literal_separator(false)
        .backslash_escape(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::bad_argument(format!("not a valid pattern: {}", e.kind())))
}

/// What one content search has read and left out.
struct Scan {
    left: u64,
    needle: String,
    case_sensitive: bool,
    files: usize,
    bytes: u64,
    skipped: Vec<Value>,
}

impl Scan {
    fn folded(&self, s: &str) -> String {
        if self.case_sensitive {
            s.to_string()
        } else {
            s.to_lowercase()
        }
    }

    fn first_hit(&self, text: &str) -> Option<Value> {
        let needle = self.folded(&self.needle);
        let mut first = None;
        let mut lines = 0;
        for (n, line) in text.lines().enumerate() {
            if self.folded(line).contains(&needle) {
                lines += 1;
                first.get_or_insert((n + 1, line));
            }
        }
        let (number, line) = first?;
        let snippet: String = line.trim().chars().take(SNIPPET).collect();
        Some(json!({"line": number, "snippet": snippet, "matching_lines": lines}))
    }

    async fn searched(&mut self, c: &Config, info: &Info) -> Option<Value> {
        let skip = |reason: &str| json!({"uri": info.uri, "reason": reason});
        match info.size {
            Some(size) if size <= self.left => {}
            _ => {
                self.skipped
                    .push(skip("larger than what is left of the read budget"));
                return None;
            }
        }
        let data = match self.read(c, &info.uri).await {
            Ok(data) => data,
            Err(e) => {
                self.skipped.push(skip(e.code.as_str()));
                return None;
            }
        };
        self.files += 1;
        self.bytes += data.len() as u64;
        self.left = self.left.saturating_sub(data.len() as u64);
        if data[..data.len().min(BINARY_PROBE)].contains(&0) {
            self.skipped.push(skip("not a text file"));
            return None;
        }
        let hit = self.first_hit(&String::from_utf8_lossy(&data))?;
        let mut found = described(info);
        found.as_object_mut()?.extend(hit.as_object()?.clone());
        Some(found)
    }

    async fn read(&self, c: &Config, uri: &str) -> Result<Vec<u8>, ToolError> {
        let mut source = transfer::open(c, &c.guarded(uri)?).await?;
        let mut data = Vec::new();
        while let Some(chunk) = source.chunks.next().await {
            data.extend_from_slice(&chunk?);
            if data.len() as u64 > self.left {
                data.truncate(self.left as usize);
                break;
            }
        }
        Ok(data)
    }
}

async fn file_search(c: Arc<Config>, ctx: ToolContext, a: SearchArgs) -> Result<Value, ToolError> {
    let at = c.guarded(&a.uri)?;
    let pattern = a.pattern.unwrap_or_else(|| "*".into());
    if pattern.is_empty() || pattern.len() > 256 {
        return Err(ToolError::bad_argument(
            "pattern must be 1 to 256 characters",
        ));
    }
    let case_sensitive = a.case_sensitive.unwrap_or(false);
    let limit = c.clamp_results(a.max_results)?;
    let matcher = name_pattern(&pattern, case_sensitive)?;
    let on_path = pattern.contains('/');
    let candidates: Vec<Info> = transfer::list(&c, &ctx, &at, a.recursive.unwrap_or(true))
        .await?
        .into_iter()
        .filter(|i| !i.is_dir && matcher.is_match(if on_path { &i.path } else { &i.name }))
        .collect();
    let mut body = json!({"uri": at.shown(), "pattern": pattern, "candidates": candidates.len()});
    let Some(needle) = a.content else {
        let matches: Vec<Value> = candidates.iter().take(limit).map(described).collect();
        body["count"] = json!(matches.len());
        body["matches"] = json!(matches);
        body["truncated"] = json!(candidates.len() > limit);
        return Ok(body);
    };
    if needle.is_empty() || needle.len() > 1024 {
        return Err(ToolError::bad_argument(
            "content must be 1 to 1024 characters",
        ));
    }
    let mut scan = Scan {
        left: c.semantic.policy.max_search_bytes,
        needle,
        case_sensitive,
        files: 0,
        bytes: 0,
        skipped: Vec::new(),
    };
    let (mut matches, mut stopped) = (Vec::new(), false);
    for (position, info) in candidates.iter().enumerate() {
        if matches.len() >= limit {
            stopped = position < candidates.len();
            break;
        }
        if ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
        matches.extend(scan.searched(&c, info).await);
    }
    body["count"] = json!(matches.len());
    body["matches"] = json!(matches);
    body["truncated"] = json!(stopped);
    body["searched_files"] = json!(scan.files);
    body["searched_bytes"] = json!(scan.bytes);
    body["skipped_count"] = json!(scan.skipped.len());
    body["complete"] = json!(!stopped && scan.skipped.is_empty());
    scan.skipped.truncate(limit);
    body["skipped"] = json!(scan.skipped);
    Ok(body)
}

pub(super) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "storage_list",
            "List the files and directories at a location in any storage backend, with size and modification time. Results are capped: check 'truncated' and 'total'.",
        ),
        storage_list,
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "storage_copy",
            "Copy a file, or a whole directory tree, to another location, in the same storage backend or across two. Needs a server that allows writing. For a tree the result counts what was copied, skipped and failed; run it with dry_run=true first to see the plan.",
        )
        .writes()
        .timeout_s(3600),
        storage_copy,
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_search",
            "Find files below a directory by name pattern and, optionally, by a text they contain (a plain substring, not a regular expression). Results and the bytes read are capped: check 'truncated', and for a content search 'skipped' and 'complete'.",
        ),
        file_search,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_crosses_directories_as_in_fnmatch() {
        let m = name_pattern("2026/*.csv", false).unwrap();
        assert!(m.is_match("2026/a/b.CSV"));
        assert!(!m.is_match("2025/a.csv"));
        assert!(name_pattern("[!a]*", true).unwrap().is_match("b"));
    }
}
