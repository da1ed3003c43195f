//! FA_storage_copy_tree and FA_storage_sync: a directory copied, or mirrored, between any two
//! storage URIs, as automation-file 0.0.55's `storage/tree.py` does it.
//!
//! The source is listed once; then each file goes through the same streamed `transfer::copy`
//! as FA_storage_copy, so the two sides may be any two backends. A file that fails is recorded
//! in `errors` and the others still run. Sync copies a file when the target lacks it, when the
//! sizes differ, or when the source is newer (`checksum` compares SHA-256 digests instead of
//! times); `delete` also removes what the source does not have; `dry_run` changes nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    default_profile,
    storage_actions::{TRANSFER_TIMEOUT_S, add, digest, yes},
    transfer::{self, Info},
    uri::{self, Location},
};
use crate::{Config, hashing::Algorithm};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyTreeArgs {
    /// The directory copied: a storage URI or a local path.
    source: String,
    /// Where its files go, at the same relative paths.
    target: String,
    /// False skips every file the target already has.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SyncArgs {
    /// The directory mirrored: a storage URI or a local path.
    source: String,
    /// The directory made to hold what the source holds.
    target: String,
    /// Also remove what the target has and the source does not.
    #[serde(default)]
    delete: bool,
    /// Compare SHA-256 digests instead of modification times (reads both sides).
    #[serde(default)]
    checksum: bool,
    /// Report what would be copied and deleted, and change nothing.
    #[serde(default)]
    dry_run: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

/// What a tree copy or sync did, as paths relative to the two directories.
#[derive(Serialize, JsonSchema, Default)]
struct TreeResult {
    copied: Vec<String>,
    skipped: Vec<String>,
    deleted: Vec<String>,
    /// The path of each file that failed, and why; the others still ran.
    errors: BTreeMap<String, String>,
    dry_run: bool,
}

/// A directory's files (by relative path) and its sub-directories.
#[derive(Default)]
struct Entries {
    files: BTreeMap<String, Info>,
    dirs: BTreeSet<String>,
}

/// The place `rel` names below the directory `at`.
fn child(at: &Location, rel: &str) -> Location {
    match at {
        Location::Object {
            store,
            key,
            base,
            cloud,
            bucket,
        } => Location::Object {
            store: store.clone(),
            key: if key.is_empty() {
                rel.to_string()
            } else {
                format!("{key}/{rel}")
            },
            base: base.clone(),
            cloud: *cloud,
            bucket: bucket.clone(),
        },
        Location::Local { path } => Location::Local {
            path: format!("{}/{rel}", path.trim_end_matches('/')),
        },
    }
}

/// Every directory above a relative path: `a/b/c` gives `a` and `a/b`.
fn ancestors(rel: &str) -> impl Iterator<Item = &str> {
    rel.match_indices('/').map(|(i, _)| &rel[..i])
}

async fn entries(
    c: &Config,
    ctx: &ToolContext,
    at: &Location,
    missing_ok: bool,
) -> Result<Entries, ToolError> {
    if !transfer::exists(c, at).await? {
        if missing_ok {
            return Ok(Entries::default());
        }
        return Err(ToolError::no_such_file(format!(
            "{} does not exist",
            at.shown()
        )));
    }
    let mut out = Entries::default();
    for info in transfer::list(c, ctx, at, true).await? {
        if info.is_dir {
            out.dirs.insert(info.path);
        } else {
            // Object stores have no directories: the ones a file sits in are implied.
            out.dirs.extend(ancestors(&info.path).map(str::to_string));
            out.files.insert(info.path.clone(), info);
        }
    }
    Ok(out)
}

/// Whether two URIs are the same place (local ones compared after resolving).
fn same_place(c: &Config, a: &Location, b: &Location) -> bool {
    match (a, b) {
        (Location::Local { path: p }, Location::Local { path: q }) => {
            match (c.roots.resolve(p), c.roots.resolve(q)) {
                (Ok(p), Ok(q)) => p == q,
                _ => p == q,
            }
        }
        _ => a.shown() == b.shown(),
    }
}

/// Creates a directory below a local target (object stores have none to create).
fn make_dir(c: &Config, at: &Location) -> Result<(), ToolError> {
    if let Location::Local { path } = at {
        let resolved = c.target(path)?;
        if !resolved.is_dir() {
            c.roots.create_dir_all(&resolved, path)?;
        }
    }
    Ok(())
}

/// One run of a copy or a sync: the two directories, what each holds, and what was done.
struct Run<'a> {
    c: &'a Config,
    ctx: &'a ToolContext,
    source: Location,
    target: Location,
    ours: Entries,
    theirs: Entries,
    result: TreeResult,
}

impl<'a> Run<'a> {
    async fn start(
        c: &'a Config,
        ctx: &'a ToolContext,
        source: &str,
        target: &str,
        profile: &str,
        dry_run: bool,
    ) -> Result<Run<'a>, ToolError> {
        let source = uri::parse(c, source, profile)?;
        let target = uri::parse(c, target, profile)?;
        if same_place(c, &source, &target) {
            return Err(ToolError::bad_argument(format!(
                "{} is both the source and the target",
                source.shown()
            )));
        }
        let ours = entries(c, ctx, &source, false).await?;
        let theirs = entries(c, ctx, &target, true).await?;
        let mut run = Run {
            c,
            ctx,
            source,
            target,
            ours,
            theirs,
            result: TreeResult {
                dry_run,
                ..Default::default()
            },
        };
        run.make_dirs()?;
        Ok(run)
    }

    /// The target directory and the source's sub-directories, where the target has real ones.
    fn make_dirs(&mut self) -> Result<(), ToolError> {
        if self.result.dry_run {
            return Ok(());
        }
        make_dir(self.c, &self.target)?;
        for dir in &self.ours.dirs {
            if let Err(e) = make_dir(self.c, &child(&self.target, dir)) {
                self.result.errors.insert(dir.clone(), e.message);
            }
        }
        Ok(())
    }

    /// Between files: a cancelled call stops, and the caller hears how far it got.
    fn step(&self, done: usize) -> Result<(), ToolError> {
        if self.ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
        let total = self.ours.files.len();
        self.ctx.progress(done as f64, Some(total as f64), None);
        Ok(())
    }

    async fn copy_file(&mut self, rel: &str) {
        if self.result.dry_run {
            self.result.copied.push(rel.to_string());
            return;
        }
        let from = child(&self.source, rel);
        let to = child(&self.target, rel);
        // Each file's byte progress would restart at zero; the run reports files instead.
        let quiet = self.ctx.without_progress();
        match transfer::copy(self.c, &quiet, &from, &to, true).await {
            Ok(_) => self.result.copied.push(rel.to_string()),
            Err(e) => {
                self.result.errors.insert(rel.to_string(), e.message);
            }
        }
    }

    /// Whether the target lacks the source's file or holds another version of it.
    async fn changed(&self, rel: &str, checksum: bool) -> Result<bool, ToolError> {
        let ours = &self.ours.files[rel];
        let Some(theirs) = self.theirs.files.get(rel) else {
            return Ok(true);
        };
        if ours.size != theirs.size {
            return Ok(true);
        }
        if checksum {
            let sha256 = Algorithm::parse("sha256")?;
            let a = digest(self.c, &child(&self.source, rel), sha256).await?;
            let b = digest(self.c, &child(&self.target, rel), sha256).await?;
            return Ok(a != b);
        }
        Ok(newer(ours, theirs))
    }

    /// Removes what the target has and the source does not: files, then directories deepest
    /// first. A directory is removed only once empty, so nothing the listing missed goes too.
    async fn delete_extras(&mut self) -> Result<(), ToolError> {
        let files: Vec<String> = (self.theirs.files.keys())
            .filter(|p| !self.ours.files.contains_key(*p))
            .cloned()
            .collect();
        let mut dirs: Vec<String> = (self.theirs.dirs.iter())
            .filter(|p| !self.ours.dirs.contains(*p))
            .cloned()
            .collect();
        dirs.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        for rel in files.into_iter().chain(dirs) {
            if self.ctx.is_cancelled() {
                return Err(crate::paths::cancelled());
            }
            if !self.result.dry_run {
                let at = child(&self.target, &rel);
                let (recursive, missing_ok) = (false, true);
                if let Err(e) = transfer::delete(self.c, &at, recursive, missing_ok).await {
                    self.result.errors.insert(rel, e.message);
                    continue;
                }
            }
            self.result.deleted.push(rel);
        }
        Ok(())
    }
}

/// Whether the source's file is newer than the target's; unknown times are never newer.
fn newer(ours: &Info, theirs: &Info) -> bool {
    let time = |i: &Info| {
        i.modified_at
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (time(ours), time(theirs)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

async fn copy_tree(
    c: &Config,
    ctx: &ToolContext,
    a: CopyTreeArgs,
) -> Result<TreeResult, ToolError> {
    let mut run = Run::start(c, ctx, &a.source, &a.target, &a.profile, false).await?;
    let paths: Vec<String> = run.ours.files.keys().cloned().collect();
    for (done, rel) in paths.iter().enumerate() {
        run.step(done)?;
        if !a.overwrite && run.theirs.files.contains_key(rel) {
            run.result.skipped.push(rel.clone());
        } else {
            run.copy_file(rel).await;
        }
    }
    run.step(paths.len())?;
    Ok(run.result)
}

async fn sync(c: &Config, ctx: &ToolContext, a: SyncArgs) -> Result<TreeResult, ToolError> {
    let mut run = Run::start(c, ctx, &a.source, &a.target, &a.profile, a.dry_run).await?;
    let paths: Vec<String> = run.ours.files.keys().cloned().collect();
    for (done, rel) in paths.iter().enumerate() {
        run.step(done)?;
        match run.changed(rel, a.checksum).await {
            Ok(true) => run.copy_file(rel).await,
            Ok(false) => run.result.skipped.push(rel.clone()),
            Err(e) => {
                run.result.errors.insert(rel.clone(), e.message);
            }
        }
    }
    if a.delete {
        run.delete_extras().await?;
    }
    run.step(paths.len())?;
    Ok(run.result)
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_copy_tree",
            "Copy every file below the directory `source` to the same relative path below `target` \
             (any two storage URIs or local paths), streamed; returns what was copied, skipped and \
             why any file failed.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: CopyTreeArgs| async move { copy_tree(&c, &ctx, a).await },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_sync",
            "Mirror the directory `source` into `target`, copying only what changed (missing, another \
             size, newer, or with checksum another SHA-256); delete also removes what the source \
             lacks; dry_run only reports.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: SyncArgs| async move { sync(&c, &ctx, a).await },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_every_directory_above_it() {
        assert_eq!(ancestors("a/b/c.txt").collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(ancestors("top.txt").count(), 0);
    }

    #[test]
    fn children_join_below_the_key_or_the_path() {
        let local = Location::Local {
            path: "/data/".into(),
        };
        assert_eq!(child(&local, "a/b").shown(), "file:///data/a/b");
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        let top = Location::Object {
            store,
            key: String::new(),
            base: "memory://bucket".into(),
            cloud: None,
            bucket: "bucket".into(),
        };
        assert_eq!(child(&top, "x").shown(), "memory://bucket/x");
        assert_eq!(child(&child(&top, "d"), "x").shown(), "memory://bucket/d/x");
    }

    fn info(modified_at: Option<&str>) -> Info {
        Info {
            uri: String::new(),
            path: String::new(),
            name: String::new(),
            is_dir: false,
            size: Some(1),
            modified_at: modified_at.map(str::to_string),
            etag: None,
            version: None,
            content_type: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn only_a_known_later_time_is_newer() {
        let early = info(Some("2026-01-01T00:00:00+00:00"));
        let late = info(Some("2026-01-01T01:00:00+01:00"));
        let later = info(Some("2026-01-01T00:00:01Z"));
        assert!(!newer(&late, &early), "the same instant in another zone");
        assert!(newer(&later, &early));
        assert!(!newer(&early, &later));
        assert!(!newer(&info(None), &early));
        assert!(!newer(&later, &info(Some("not a time"))));
    }
}
