//! Search: FA_fast_find (a parallel walk with a case-insensitive glob) and FA_grep.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Config, paths::show};

fn default_star() -> String {
    "*".into()
}
fn default_true() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FastFindArgs {
    /// The directory to search under.
    root: String,
    /// A shell-style glob matched case-insensitively against each entry's name (`*.log`, `report_*.csv`).
    #[serde(default = "default_star")]
    #[schemars(default = "default_star")]
    pattern: String,
    /// Stop after this many matches.
    #[serde(default)]
    limit: Option<i64>,
    /// Skip directories (symlinks are never followed and count as files).
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    files_only: bool,
    /// Accepted for compatibility with automation-file. The search always walks the tree live:
    /// an OS index (locate) can be stale and can list files the server may not show.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    use_index: bool,
}

#[derive(Serialize, JsonSchema)]
struct FastFindOut {
    root: String,
    pattern: String,
    /// Absolute paths of the matches, sorted.
    matches: Vec<String>,
    count: usize,
    /// True when `limit` stopped the search early.
    truncated: bool,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_fast_find",
            "Find files under a directory whose names match a glob, case-insensitively, by a parallel walk.",
        )
        .timeout_s(300),
        move |ctx: ToolContext, a: FastFindArgs| {
            let c = c.clone();
            async move {
                let _ = a.use_index;
                let root = c.existing_dir(&a.root)?;
                let glob = name_glob(&a.pattern)?;
                let limit = match a.limit {
                    Some(n) if n < 1 => return Err(ToolError::bad_argument("limit must be at least 1")),
                    Some(n) => Some(n as usize),
                    None => None,
                };
                let files_only = a.files_only;
                let pattern = a.pattern;
                blocking(move || {
                    let (mut found, truncated) = fast_find(&root, &glob, limit, files_only, &ctx)?;
                    found.sort_unstable();
                    let matches: Vec<String> = found.iter().map(|p| show(p)).collect();
                    Ok(FastFindOut { root: show(&root), pattern, count: matches.len(), matches, truncated })
                })
                .await
            }
        },
    );
}

/// fnmatch semantics on a name: case-insensitive, `*` and `?` and `[...]`, no escapes.
pub(crate) fn name_glob(pattern: &str) -> Result<GlobMatcher, ToolError> {
    if pattern.is_empty() {
        return Err(ToolError::bad_argument(
            "pattern is empty; use * to match every name",
        ));
    }
    GlobBuilder::new(pattern)
        .case_insensitive(true)
        .literal_separator(false)
        .backslash_escape(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            ToolError::bad_argument(format!("pattern '{pattern}' is not a valid glob: {e}"))
        })
}

/// Walks `root` on all cores without following symlinks, so every path found stays under it.
/// Returns the matching paths (unordered) and whether `limit` cut the walk short.
pub(crate) fn fast_find(
    root: &Path,
    glob: &GlobMatcher,
    limit: Option<usize>,
    files_only: bool,
    ctx: &ToolContext,
) -> Result<(Vec<PathBuf>, bool), ToolError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(8);
    let walker = WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .threads(threads)
        .build_parallel();
    let shared = Shared {
        glob,
        files_only,
        limit: limit.unwrap_or(usize::MAX),
        count: AtomicUsize::new(0),
        out: Mutex::new(Vec::new()),
        ctx,
    };
    let mut builder = Builder { shared: &shared };
    walker.visit(&mut builder);
    if ctx.is_cancelled() {
        return Err(ToolError::tool_failed("the call was cancelled"));
    }
    let found = shared.out.into_inner().unwrap_or_else(|p| p.into_inner());
    // Only matches numbered below the limit are kept, so more than `limit` counted means some
    // were left out.
    let truncated = shared.count.load(Ordering::Relaxed) > shared.limit;
    Ok((found, truncated))
}

struct Shared<'a> {
    glob: &'a GlobMatcher,
    files_only: bool,
    limit: usize,
    count: AtomicUsize,
    out: Mutex<Vec<PathBuf>>,
    ctx: &'a ToolContext,
}

struct Builder<'a, 's> {
    shared: &'s Shared<'a>,
}

impl<'s> ParallelVisitorBuilder<'s> for Builder<'_, 's> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            shared: self.shared,
            found: Vec::new(),
            seen: 0,
        })
    }
}

/// One walker thread: collects its matches locally and hands them over when dropped, so threads
/// never contend on a lock per match.
struct Visitor<'a, 's> {
    shared: &'s Shared<'a>,
    found: Vec<PathBuf>,
    seen: u32,
}

impl ParallelVisitor for Visitor<'_, '_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        self.seen = self.seen.wrapping_add(1);
        if self.seen.is_multiple_of(1024) && self.shared.ctx.is_cancelled() {
            return WalkState::Quit;
        }
        // Unreadable entries below the root are skipped, as find and automation-file skip them.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if (is_dir && self.shared.files_only) || !self.shared.glob.is_match(entry.file_name()) {
            return WalkState::Continue;
        }
        let n = self.shared.count.fetch_add(1, Ordering::Relaxed);
        if n >= self.shared.limit {
            return WalkState::Quit;
        }
        self.found.push(entry.into_path());
        WalkState::Continue
    }
}

impl Drop for Visitor<'_, '_> {
    fn drop(&mut self) {
        let mut out = self.shared.out.lock().unwrap_or_else(|p| p.into_inner());
        out.append(&mut self.found);
    }
}
