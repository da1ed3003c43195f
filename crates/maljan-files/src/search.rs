//! Search: FA_fast_find (a parallel walk with a case-insensitive glob) and FA_grep (the same walk,
//! each file prefiltered whole by the regex before it is split into lines).

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use globset::{GlobBuilder, GlobMatcher};
use maljan_server::{Registry, Roots, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    paths::{CANCEL_CHECK_BYTES, show},
    pattern::{BytesPattern, Flags},
    walk::{Flow, par_walk, threads},
};

fn default_star() -> String {
    "*".into()
}
fn default_true() -> bool {
    true
}
fn default_max_matches() -> i64 {
    1000
}
fn default_max_line_len() -> i64 {
    4096
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    /// The directory searched (recursively; symlinks are not followed).
    root: String,
    /// The text to find; a regular expression when `regex` is true.
    pattern: String,
    /// Only files whose name matches this glob (`*.py`).
    #[serde(default)]
    glob: Option<String>,
    /// Read `pattern` as a regular expression (Rust regex syntax: no look-around or backreferences).
    #[serde(default)]
    #[schemars(default)]
    regex: bool,
    /// Match regardless of case.
    #[serde(default)]
    #[schemars(default)]
    ignore_case: bool,
    /// Stop after this many matching lines.
    #[serde(default = "default_max_matches")]
    #[schemars(default = "default_max_matches")]
    max_matches: i64,
    /// Longer lines are cut to this many characters and end with `…`.
    #[serde(default = "default_max_line_len")]
    #[schemars(default = "default_max_line_len")]
    max_line_len: i64,
}

#[derive(Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
struct GrepHit {
    path: String,
    /// 1-based line number.
    line: u64,
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct GrepOut {
    /// Matching lines, ordered by path and line.
    matches: Vec<GrepHit>,
    count: usize,
    /// True when max_matches stopped the search.
    truncated: bool,
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
            "FA_grep",
            "Search file contents under a directory for a literal or regex pattern; answers path, line number and text.",
        )
        .timeout_s(600),
        move |ctx: ToolContext, a: GrepArgs| {
            let c = c.clone();
            async move {
                if a.pattern.is_empty() {
                    return Err(ToolError::bad_argument("pattern must not be empty"));
                }
                if a.max_matches <= 0 {
                    return Err(ToolError::bad_argument("max_matches must be positive"));
                }
                if a.max_line_len <= 0 {
                    return Err(ToolError::bad_argument("max_line_len must be positive"));
                }
                let root = c.existing_dir(&a.root)?;
                let source = if a.regex { a.pattern.clone() } else { regex::escape(&a.pattern) };
                let build = |multi_line: bool| {
                    BytesPattern::new(&source, Flags { ignore_case: a.ignore_case, multi_line })
                };
                let line = build(false)?;
                // \A and \z mean the start and end of a line here; over a whole file they would
                // not. A backtracking pattern is not worth a second pass over the file.
                let whole = if source.contains("\\A") || source.contains("\\z") || !line.is_linear() {
                    None
                } else {
                    Some(build(true)?)
                };
                let glob = match &a.glob {
                    Some(g) => Some(
                        GlobBuilder::new(g)
                            .literal_separator(false)
                            .backslash_escape(false)
                            .build()
                            .map_err(|e| ToolError::bad_argument(format!("glob '{g}' is not valid: {e}")))?
                            .compile_matcher(),
                    ),
                    None => None,
                };
                let g = Grep {
                    line,
                    whole,
                    glob,
                    max: a.max_matches as usize,
                    max_line_len: a.max_line_len as usize,
                    count: AtomicUsize::new(0),
                    gave_up: Default::default(),
                };
                blocking(move || {
                    let mut matches = grep(&c.roots, &root, &g, &ctx)?;
                    matches.sort_unstable();
                    let truncated = g.count.load(Ordering::Relaxed) > g.max;
                    matches.truncate(g.max);
                    Ok(GrepOut { count: matches.len(), matches, truncated })
                })
                .await
            }
        },
    );

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
                    let (found, truncated) = fast_find(&root, &glob, limit, files_only, &ctx)?;
                    // Sorted as strings: comparing paths component by component costs several
                    // times more on 100k results.
                    let mut matches: Vec<String> =
                        found.into_iter().map(|p| p.into_os_string().into_string().unwrap_or_else(|o| o.to_string_lossy().into_owned())).collect();
                    matches.sort_unstable();
                    Ok(FastFindOut { root: show(&root), pattern, count: matches.len(), matches, truncated })
                })
                .await
            }
        },
    );
}

/// Everything one grep needs, shared by the walker threads.
struct Grep {
    line: BytesPattern,
    /// The same pattern over a whole file, to skip files without a match cheaply.
    whole: Option<BytesPattern>,
    glob: Option<GlobMatcher>,
    max: usize,
    max_line_len: usize,
    count: AtomicUsize,
    /// The first search the pattern gave up on (over its backtracking budget): the grep ends
    /// with it rather than answer as if that file did not match.
    gave_up: std::sync::Mutex<Option<ToolError>>,
}

/// Files up to this size are read whole and prefiltered; bigger ones are streamed by line.
const WHOLE_FILE: u64 = 64 * 1024 * 1024;

impl Grep {
    fn full(&self) -> bool {
        self.count.load(Ordering::Relaxed) >= self.max
    }

    /// Whether the grep is over: enough matches, or the pattern gave up somewhere.
    fn done(&self) -> bool {
        self.full() || self.gave_up.lock().is_ok_and(|e| e.is_some())
    }

    /// Whether `bytes` match; false (and the grep stopped) when the pattern gave up on them.
    fn matches(&self, pattern: &BytesPattern, bytes: &[u8]) -> bool {
        pattern.is_match(bytes).unwrap_or_else(|e| {
            self.give_up(e);
            false
        })
    }

    /// Keeps the first error of a pattern that gave up; the grep ends with it.
    fn give_up(&self, e: ToolError) {
        let mut gave_up = self.gave_up.lock().unwrap_or_else(|p| p.into_inner());
        gave_up.get_or_insert(e);
    }

    /// `line` comes without its line end.
    fn hit(&self, path: &Path, n: u64, line: &[u8], out: &mut Vec<GrepHit>) -> bool {
        match self.line.is_match(line) {
            Ok(true) => {}
            Ok(false) => return true,
            Err(e) => {
                self.give_up(e);
                return false;
            }
        }
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            return false;
        }
        // Undecodable bytes are dropped, as automation-file's errors="ignore" does.
        let mut text: String = String::from_utf8_lossy(line).replace('\u{FFFD}', "");
        if text.chars().count() > self.max_line_len {
            text = text.chars().take(self.max_line_len).collect::<String>() + "…";
        }
        out.push(GrepHit {
            path: show(path),
            line: n,
            text,
        });
        true
    }

    /// Searches one file found while walking, opened from its root's handle (never through a
    /// link swapped in since the walk saw it); `stop` is polled every few MiB.
    fn scan(&self, roots: &Roots, path: &Path, out: &mut Vec<GrepHit>, stop: &dyn Fn() -> bool) {
        use std::io::{BufRead, Read};
        let Ok(mut file) = roots.open_file(path, &show(path)) else {
            return;
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size <= WHOLE_FILE {
            let mut buf = Vec::with_capacity(size as usize + 1);
            if file.read_to_end(&mut buf).is_err() {
                return;
            }
            if self.whole.as_ref().is_some_and(|w| !self.matches(w, &buf)) {
                return;
            }
            for (i, line) in universal_lines(&buf).enumerate() {
                if !self.hit(path, i as u64 + 1, line, out) {
                    return;
                }
            }
        } else {
            let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
            let mut line = Vec::new();
            let (mut n, mut since_check) = (0, 0u64);
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(read) => since_check += read as u64,
                }
                if since_check >= CANCEL_CHECK_BYTES {
                    since_check = 0;
                    if stop() {
                        return;
                    }
                }
                // read_until keeps a \r\n whole, so a lone \r inside the chunk ends a line too.
                for piece in universal_lines(&line) {
                    n += 1;
                    if !self.hit(path, n, piece, out) {
                        return;
                    }
                }
            }
        }
    }
}

/// The lines of `bytes` as Python's universal newlines read them: `\n`, `\r\n` and a lone `\r`
/// each end a line; the ends are not part of the lines, and a final end adds no empty line.
fn universal_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
            return Some(std::mem::take(&mut rest));
        };
        let line = &rest[..end];
        let width = if rest[end..].starts_with(b"\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + width..];
        Some(line)
    })
}

fn grep(
    roots: &Roots,
    root: &Path,
    g: &Grep,
    ctx: &ToolContext,
) -> Result<Vec<GrepHit>, ToolError> {
    let stop = || ctx.is_cancelled();
    let found = par_walk(
        root,
        threads(),
        &stop,
        Vec::new,
        |out: &mut Vec<GrepHit>, entry, ft| {
            if g.done() {
                return Flow::Quit;
            }
            if !ft.is_file()
                || g.glob
                    .as_ref()
                    .is_some_and(|glob| !glob.is_match(entry.file_name()))
            {
                return Flow::Continue;
            }
            g.scan(roots, &entry.path(), out, &stop);
            Flow::Continue
        },
    );
    if ctx.is_cancelled() {
        return Err(ToolError::tool_failed("the call was cancelled"));
    }
    if let Some(e) = g.gave_up.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    Ok(found.into_iter().flatten().collect())
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
    let max = limit.unwrap_or(usize::MAX);
    let count = AtomicUsize::new(0);
    let stop = || ctx.is_cancelled();
    let found = par_walk(
        root,
        threads(),
        &stop,
        Vec::new,
        |out: &mut Vec<PathBuf>, entry, ft| {
            if files_only && ft.is_dir() {
                return Flow::Continue;
            }
            // Match the bare name first: only matches pay for building a path.
            if !glob.is_match(entry.file_name()) {
                return Flow::Continue;
            }
            if count.fetch_add(1, Ordering::Relaxed) >= max {
                return Flow::Quit;
            }
            out.push(entry.path());
            Flow::Continue
        },
    );
    if ctx.is_cancelled() {
        return Err(ToolError::tool_failed("the call was cancelled"));
    }
    // Only matches numbered below the limit are kept, so more than `limit` counted means some
    // were left out.
    let truncated = count.load(Ordering::Relaxed) > max;
    Ok((found.into_iter().flatten().collect(), truncated))
}

#[cfg(test)]
mod tests {
    use super::universal_lines;

    #[test]
    fn each_python_line_end_ends_a_line() {
        let lines = |b: &'static [u8]| universal_lines(b).collect::<Vec<_>>();
        assert_eq!(lines(b"x\ry\rz"), [b"x", b"y", b"z"]);
        assert_eq!(lines(b"a\r\nb\n\rc\r"), [&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(lines(b"\n\n"), [b"", b""]);
        assert!(lines(b"").is_empty());
    }
}
