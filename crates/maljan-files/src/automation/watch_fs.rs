//! FA_watch_*: run an action list when files change under a path (automation-file's file-watch
//! triggers), on the notify project's watcher: a burst of events on a path (an editor's save,
//! a copy written in chunks) fires the action list once, after `debounce` seconds of quiet.
//!
//! A watch is a row in the state database and is started again when the server starts. Its
//! path must resolve (symlinks included) under the roots, checked when it is started and again
//! at each server start; the actions it runs are checked like any call's.

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher, event::ModifyKind};
use rusqlite::params;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{NameArgs, NoArgs, check_actions, checked_name, corrupt, db, iso};
use crate::{Config, executor};

const EVENTS: &[&str] = &["created", "modified", "deleted", "moved"];

fn default_true() -> bool {
    true
}
fn default_debounce() -> f64 {
    0.5
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StartArgs {
    /// The watch's unique name.
    name: String,
    /// A file or directory under the roots.
    path: String,
    /// The actions to run: `[["FA_name", {kwargs}], ...]`.
    action_list: Vec<Value>,
    /// Any of created, modified, deleted, moved (a string or a list; default created and modified).
    events: Option<Value>,
    /// Watch the directories below `path` too.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    recursive: bool,
    /// Seconds of quiet after a burst of events before the actions run (0.05 to 60).
    #[serde(default = "default_debounce")]
    #[schemars(default = "default_debounce")]
    debounce: f64,
}

/// A watch as stored.
#[derive(Serialize, Deserialize, Clone)]
struct WatchSpec {
    name: String,
    path: String,
    action_list: Vec<Value>,
    events: BTreeSet<String>,
    recursive: bool,
    debounce: f64,
}

#[derive(Serialize, JsonSchema)]
struct WatchOut {
    name: String,
    path: String,
    events: Vec<String>,
    recursive: bool,
    debounce: f64,
    /// Whether it is watching now (false when its path is gone or left the roots).
    running: bool,
    /// How many times it ran its actions since the server started.
    fired: u64,
    /// How many firings were refused since the server started: changes its own actions made
    /// under its path (a loop), or firings over the rate limit.
    refused: u64,
    last_fired: Option<String>,
    last_error: Option<String>,
}

/// The watches running in this server.
#[derive(Default)]
pub(crate) struct Watches {
    running: Mutex<HashMap<String, Running>>,
}

struct Running {
    /// Dropping it stops the watcher and its thread.
    _watcher: RecommendedWatcher,
    stop: CancellationToken,
    status: Arc<Status>,
}

#[derive(Default)]
struct Status {
    fired: AtomicU64,
    /// Firings not run: changes its own actions made, or over the rate limit.
    refused: AtomicU64,
    /// Whether its loop (its actions changing what it watches) was recorded already.
    looped: std::sync::atomic::AtomicBool,
    last: Mutex<(Option<String>, Option<String>)>,
}

impl Watches {
    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn events_of(v: Option<Value>) -> Result<BTreeSet<String>, ToolError> {
    let list: Vec<String> = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(a)) => a
            .into_iter()
            .map(|e| match e {
                Value::String(s) => Ok(s),
                _ => Err(ToolError::bad_argument("events: a list of event names")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ToolError::bad_argument(
                "events: an event name or a list of them",
            ));
        }
    };
    let chosen: BTreeSet<String> = (list.iter())
        .map(|e| e.trim().to_lowercase())
        .filter(|e| !e.is_empty())
        .collect();
    let unknown: Vec<&String> = chosen
        .iter()
        .filter(|e| !EVENTS.contains(&e.as_str()))
        .collect();
    if !unknown.is_empty() {
        return Err(ToolError::bad_argument(format!(
            "unsupported event types: {unknown:?} (any of {})",
            EVENTS.join(", ")
        )));
    }
    if chosen.is_empty() {
        return Ok(["created", "modified"].map(String::from).into());
    }
    Ok(chosen)
}

fn kind_of(kind: &EventKind) -> Option<&'static str> {
    match kind {
        EventKind::Create(_) => Some("created"),
        EventKind::Modify(ModifyKind::Name(_)) => Some("moved"),
        EventKind::Modify(_) => Some("modified"),
        EventKind::Remove(_) => Some("deleted"),
        _ => None,
    }
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new("FA_watch_start", "Run an action list when files under a path are created, modified, deleted or moved (debounced), kept across server restarts.")
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
            .writes()
            .not_idempotent()
.timeout_s(60),
        move |ctx: ToolContext, a: StartArgs| {
            let c = c.clone();
            async move {
                check_actions(&c, &ctx, &a.action_list)?;
                if !(a.debounce.is_finite() && (0.05..=60.0).contains(&a.debounce)) {
                    return Err(ToolError::bad_argument("debounce must be from 0.05 to 60 seconds"));
                }
                let spec = WatchSpec {
                    name: checked_name(&a.name)?.to_string(),
                    path: a.path,
                    action_list: a.action_list,
                    events: events_of(a.events)?,
                    recursive: a.recursive,
                    debounce: a.debounce,
                };
                c.existing(&spec.path)?;
                let handle_ready = c.automation.handle().is_ok();
                let (name, text) = (spec.name.clone(), serde_json::to_string(&spec).map_err(|e| ToolError::tool_failed(e.to_string()))?);
                let now = iso(c.automation.clock.now());
                let inserted = db(&c, move |conn| {
                    conn.execute("INSERT OR IGNORE INTO watch_specs (name, spec, created_at) VALUES (?1, ?2, ?3)", params![name, text, now])
                })
                .await?;
                if inserted == 0 {
                    return Err(ToolError::bad_argument(format!("watcher already exists: {}", spec.name))
                        .with_remediation("stop it first (FA_watch_stop) or pick another name"));
                }
                if handle_ready && let Err(e) = arm(&c, &spec) {
                    let name = spec.name.clone();
                    let _ = db(&c, move |conn| conn.execute("DELETE FROM watch_specs WHERE name = ?1", [name])).await;
                    return Err(e);
                }
                Ok(out_of(&c, &spec))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_watch_stop",
            "Stop and remove a watch; returns its last snapshot.",
        )
        .writes()
        .timeout_s(60),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move {
                let spec = load(&c)
                    .await?
                    .into_iter()
                    .find(|s| s.name == a.name)
                    .ok_or_else(|| {
                        ToolError::bad_argument(format!("no such watcher: {}", a.name))
                    })?;
                let out = out_of(&c, &spec);
                c.automation.watches.running().remove(&a.name);
                let name = a.name.clone();
                db(&c, move |conn| {
                    conn.execute("DELETE FROM watch_specs WHERE name = ?1", [name])
                })
                .await?;
                Ok::<_, ToolError>(out)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_watch_stop_all",
            "Stop and remove every watch; returns their last snapshots.",
        )
        .writes()
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                let out: Vec<WatchOut> = load(&c).await?.iter().map(|s| out_of(&c, s)).collect();
                c.automation.watches.running().clear();
                db(&c, |conn| conn.execute("DELETE FROM watch_specs", [])).await?;
                Ok::<_, ToolError>(out)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_watch_list",
            "Every watch: its path, events, whether it runs, and how often it fired.",
        )
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                Ok::<_, ToolError>(
                    load(&c)
                        .await?
                        .iter()
                        .map(|s| out_of(&c, s))
                        .collect::<Vec<_>>(),
                )
            }
        },
    );
}

async fn load(c: &Arc<Config>) -> Result<Vec<WatchSpec>, ToolError> {
    let rows: Vec<String> = db(c, |conn| {
        let mut stmt = conn.prepare("SELECT spec FROM watch_specs ORDER BY created_at, name")?;
        stmt.query_map([], |r| r.get(0))?.collect()
    })
    .await?;
    rows.iter()
        .map(|s| serde_json::from_str(s).map_err(|e| corrupt("watch", e)))
        .collect()
}

fn out_of(c: &Config, spec: &WatchSpec) -> WatchOut {
    let running = c.automation.watches.running();
    let status = running.get(&spec.name).map(|r| r.status.clone());
    let (last_fired, last_error) = status
        .as_ref()
        .map(|s| s.last.lock().unwrap_or_else(|p| p.into_inner()).clone())
        .unwrap_or_default();
    WatchOut {
        name: spec.name.clone(),
        path: spec.path.clone(),
        events: spec.events.iter().cloned().collect(),
        recursive: spec.recursive,
        debounce: spec.debounce,
        running: status.is_some(),
        fired: status
            .as_ref()
            .map_or(0, |s| s.fired.load(Ordering::Relaxed)),
        refused: status.map_or(0, |s| s.refused.load(Ordering::Relaxed)),
        last_fired,
        last_error,
    }
}

/// Starts watching: the watcher's thread hands each event's kind to a task that waits for the
/// burst to end and then runs the actions.
/// One change the watcher saw: its kind (a name of [`EVENTS`]) and the paths it touched.
struct Change {
    kind: &'static str,
    paths: Vec<PathBuf>,
}

type Changes = tokio::sync::mpsc::UnboundedReceiver<Change>;

fn arm(c: &Arc<Config>, spec: &WatchSpec) -> Result<(), ToolError> {
    let handle = c.automation.handle()?.clone();
    let path = c.existing(&spec.path)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Change>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reads (a file opened, a folder listed) are not changes: they neither start a burst
        // nor keep one from ending.
        if let Ok(event) = event
            && let Some(kind) = kind_of(&event.kind)
        {
            let _ = tx.send(Change {
                kind,
                paths: event.paths,
            });
        }
    })
    .map_err(|e| ToolError::tool_failed(format!("cannot start a file watcher: {e}")))?;
    let mode = if spec.recursive {
        RecursiveMode::Recursive
    } else {
        RecursiveMode::NonRecursive
    };
    watcher
        .watch(&path, mode)
        .map_err(|e| ToolError::tool_failed(format!("cannot watch {}: {e}", spec.path)))?;
    let stop = handle.stopped().child_token();
    let status = Arc::new(Status::default());
    let (c2, spec2, stop2, status2) = (c.clone(), spec.clone(), stop.clone(), status.clone());
    let quiet = Duration::from_secs_f64(spec.debounce);
    tokio::spawn(async move {
        // When the last run ran, and whether its own changes were counted already.
        let mut last_run: Option<(SystemTime, SystemTime)> = None;
        let mut last_run_counted = false;
        loop {
            // A burst starts with a change of a kind the watch names...
            let change = tokio::select! {
                _ = stop2.cancelled() => break,
                got = rx.recv() => match got { Some(c) => c, None => break },
            };
            if !spec2.events.contains(change.kind) {
                continue;
            }
            // ...that the last run did not make itself (the watcher may deliver its changes
            // well after it ended, on a busy machine)...
            if last_run.is_some_and(|run| made_during(&change.paths, run)) {
                if !last_run_counted {
                    last_run_counted = true;
                    note_loop(&status2, &spec2.name, None);
                }
                continue;
            }
            // ...and ends after `debounce` seconds without any change on the path.
            if !drain_burst(&mut rx, quiet, &stop2).await {
                return;
            }
            let origin = format!("watch:{}", spec2.name);
            let now = c2.automation.clock.now();
            if let Err((first, e)) = c2.automation.limits.admit(&origin, now) {
                status2.refused.fetch_add(1, Ordering::Relaxed);
                if first {
                    tracing::warn!(watch = %spec2.name, "watch: {}", e.message);
                    *status2.last.lock().unwrap_or_else(|p| p.into_inner()) =
                        (Some(iso(now)), Some(e.message));
                }
                continue;
            }
            let ctx = match handle.context_for(None, &origin, stop2.child_token()) {
                Ok(ctx) => ctx,
                Err(e) => {
                    tracing::warn!(watch = %spec2.name, "watch: {}", e.message);
                    continue;
                }
            };
            let started = SystemTime::now();
            let outcome =
                executor::run_list(&c2, &ctx, spec2.action_list.clone(), false, false).await;
            last_run = Some((started, SystemTime::now()));
            let mut error = match outcome {
                Ok(out) if out.failed == 0 => None,
                Ok(out) => Some(format!(
                    "{} of {} actions failed",
                    out.failed,
                    out.results.len()
                )),
                Err(e) => Some(e.message),
            };
            status2.fired.fetch_add(1, Ordering::Relaxed);
            // What the run changed under the watched path is the run's own doing, not news:
            // the changes that came during it, and within `debounce` after it, are let go
            // (a deleted file has no change time to tell by). Firing on them would make a watch
            // whose actions write where it watches fire for ever.
            let own = loop {
                tokio::select! {
                    _ = stop2.cancelled() => return,
                    got = tokio::time::timeout(quiet, rx.recv()) => match got {
                        Ok(Some(c)) if spec2.events.contains(c.kind) => break true,
                        Ok(Some(_)) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break false,
                    },
                }
            };
            last_run_counted = own;
            if own {
                if !drain_burst(&mut rx, quiet, &stop2).await {
                    return;
                }
                note_loop(&status2, &spec2.name, Some(&mut error));
            }
            *status2.last.lock().unwrap_or_else(|p| p.into_inner()) =
                (Some(iso(c2.automation.clock.now())), error);
        }
    });
    c.automation.watches.running().insert(
        spec.name.clone(),
        Running {
            _watcher: watcher,
            stop,
            status,
        },
    );
    Ok(())
}

/// Counts a firing refused because the watch's own actions made the change; the first time,
/// says so (into `error`, the run's outcome, or else into the status's last error).
fn note_loop(status: &Status, name: &str, error: Option<&mut Option<String>>) {
    status.refused.fetch_add(1, Ordering::Relaxed);
    if status.looped.swap(true, Ordering::Relaxed) {
        return;
    }
    let message = format!(
        "a loop: the actions of watch:{name} change the path it watches; \
         those changes do not fire it again"
    );
    tracing::warn!(watch = %name, "watch: {message}");
    match error {
        Some(error) => {
            error.get_or_insert(message);
        }
        None => {
            let mut last = status.last.lock().unwrap_or_else(|p| p.into_inner());
            last.1.get_or_insert(message);
        }
    }
}

/// Whether every path of a change still exists and last changed while the run ran: the run's
/// own writing, however late the watcher tells of it. The status change time is used where the
/// platform keeps one, since a file moved in keeps its old modification time.
fn made_during(paths: &[PathBuf], (started, ended): (SystemTime, SystemTime)) -> bool {
    // File times come from a coarse clock (a tick of a few milliseconds behind the real time).
    let from = started - Duration::from_millis(20);
    !paths.is_empty()
        && paths
            .iter()
            .all(|p| changed_at(p).is_some_and(|t| from <= t && t <= ended))
}

#[cfg(unix)]
fn changed_at(path: &Path) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let (secs, nanos) = (u64::try_from(meta.ctime()).ok()?, meta.ctime_nsec());
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, u32::try_from(nanos).ok()?))
}

#[cfg(not(unix))]
fn changed_at(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path).ok()?.modified().ok()
}

/// Waits until `quiet` passes without a change, letting every change go; false when the
/// watch stopped meanwhile.
async fn drain_burst(rx: &mut Changes, quiet: Duration, stop: &CancellationToken) -> bool {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return false,
            got = tokio::time::timeout(quiet, rx.recv()) => match got {
                Ok(Some(_)) => continue,
                Ok(None) => return false,
                Err(_quiet) => return true,
            },
        }
    }
}

/// Starts every stored watch (from the registry's start hook).
pub(crate) fn start(c: &Arc<Config>) {
    let c = c.clone();
    tokio::spawn(async move {
        let Ok(stopped) = c.automation.handle().map(|h| h.stopped().clone()) else {
            return;
        };
        // The database may be held by a server sharing the state directory a while longer:
        // stored watches are armed once it answers, not dropped for the process's lifetime.
        let mut warned = false;
        let specs = loop {
            match load(&c).await {
                Ok(specs) => break specs,
                Err(e) if !warned => {
                    tracing::warn!(error = %e.message, "watches: cannot read the state database; trying again");
                    warned = true;
                }
                Err(_) => {}
            }
            tokio::select! {
                biased;
                () = stopped.cancelled() => return,
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
        };
        for spec in specs {
            if let Err(e) = arm(&c, &spec) {
                tracing::warn!(watch = %spec.name, error = %e.message, "watches: not started again");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_the_runs_own_only_when_its_file_changed_while_the_run_ran() {
        let dir = tempfile::tempdir().unwrap();
        let before = dir.path().join("before.txt");
        std::fs::write(&before, "old").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let started = SystemTime::now();
        let during = dir.path().join("during.txt");
        std::fs::write(&during, "the run's").unwrap();
        let ended = SystemTime::now();
        std::thread::sleep(Duration::from_millis(50));
        let after = dir.path().join("after.txt");
        std::fs::write(&after, "news").unwrap();
        let run = (started, ended);
        assert!(made_during(std::slice::from_ref(&during), run));
        assert!(!made_during(std::slice::from_ref(&before), run));
        assert!(!made_during(std::slice::from_ref(&after), run));
        assert!(!made_during(&[during.clone(), after.clone()], run));
        assert!(!made_during(&[dir.path().join("gone.txt")], run));
        assert!(!made_during(&[], run));
        // A file written long ago and moved in afterwards is news: its move is a change.
        let moved = dir.path().join("moved.txt");
        std::fs::rename(&before, &moved).unwrap();
        #[cfg(unix)]
        assert!(!made_during(&[moved], run));
    }
}
