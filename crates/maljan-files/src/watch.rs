//! Integrity watches: named monitors that re-verify a tree against its baseline on an interval,
//! as background tasks of the server (FA_integrity_watch_start / _stop / FA_integrity_status).

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use maljan_server::{Registry, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    baseline::{DriftReport, iso, load_baseline, local, verify},
    paths::show,
};

#[derive(Serialize, JsonSchema, Clone)]
pub(crate) struct WatchStatus {
    name: String,
    target: String,
    baseline: String,
    algorithm: String,
    interval: f64,
    running: bool,
    last_run: Option<String>,
    last_error: Option<String>,
    last_report: Option<DriftReport>,
}

#[derive(Serialize, JsonSchema)]
struct StatusList {
    monitors: Vec<WatchStatus>,
}

/// A running watch: its task and what it last found.
pub(crate) struct Watch {
    task: tokio::task::JoinHandle<()>,
    status: Arc<Mutex<WatchStatus>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) type Watches = Mutex<HashMap<String, Watch>>;

fn default_interval() -> f64 {
    60.0
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    /// One monitor's name; every monitor when absent.
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WatchStartArgs {
    /// The monitor's name (unique while it runs).
    name: String,
    /// The directory watched.
    target: String,
    /// The baseline file (create it first with FA_integrity_baseline).
    baseline: String,
    /// Seconds between verifications.
    #[serde(default = "default_interval")]
    #[schemars(default = "default_interval")]
    interval: f64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    /// The monitor's name.
    name: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_integrity_watch_start",
            "Start a named monitor that verifies a directory against its baseline every `interval` seconds, in the background.",
        )
        .writes()
        .not_idempotent()
        .timeout_s(30),
        move |_ctx, a: WatchStartArgs| {
            let c = c.clone();
            async move {
                if a.name.trim().is_empty() {
                    return Err(ToolError::bad_argument("an integrity monitor needs a name"));
                }
                if !a.interval.is_finite() || a.interval < 0.1 || a.interval > 86_400.0 * 365.0 {
                    return Err(ToolError::bad_argument("interval must be between 0.1 seconds and a year"));
                }
                let root = c.existing_dir(local(&a.target))?;
                let baseline = c.existing(local(&a.baseline))?;
                let base = load_baseline(&c.roots, &baseline, &a.baseline)?;
                let mut watches = c.watches.lock().unwrap_or_else(|p| p.into_inner());
                if watches.get(&a.name).is_some_and(|w| !w.task.is_finished()) {
                    return Err(ToolError::bad_argument(format!("an integrity monitor named '{}' is already running", a.name)));
                }
                let status = Arc::new(Mutex::new(WatchStatus {
                    name: a.name.clone(),
                    target: show(&root),
                    baseline: show(&baseline),
                    algorithm: base.algorithm,
                    interval: a.interval,
                    running: true,
                    last_run: None,
                    last_error: None,
                    last_report: None,
                }));
                let task = tokio::spawn(watch_loop(c.roots.clone(), root, baseline, Duration::from_secs_f64(a.interval), status.clone()));
                let snapshot = status.lock().unwrap_or_else(|p| p.into_inner()).clone();
                watches.insert(a.name, Watch { task, status });
                Ok(snapshot)
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_integrity_watch_stop",
            "Stop a named integrity monitor and answer its last status.",
        )
        .writes()
        .timeout_s(30),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move {
                let watch = c
                    .watches
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&a.name);
                let Some(watch) = watch else {
                    return Err(ToolError::bad_argument(format!(
                        "no integrity monitor named '{}'",
                        a.name
                    ))
                    .with_remediation("FA_integrity_status lists the running monitors"));
                };
                watch.task.abort();
                let mut status = watch
                    .status
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                status.running = false;
                Ok(status)
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_integrity_status",
            "The status of one named integrity monitor, or of all of them.",
        )
        .timeout_s(10),
        move |_ctx, a: StatusArgs| {
            let c = c.clone();
            async move {
                let monitors = statuses(&c, a.name.as_deref())?;
                Ok(StatusList { monitors })
            }
        },
    );
}

/// The status of one named monitor, or of every one by name.
pub(crate) fn statuses(c: &Config, name: Option<&str>) -> Result<Vec<WatchStatus>, ToolError> {
    let watches = c.watches.lock().unwrap_or_else(|p| p.into_inner());
    let view = |w: &Watch| {
        let mut s = w.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
        s.running = !w.task.is_finished();
        s
    };
    Ok(match name {
        Some(n) => vec![view(watches.get(n).ok_or_else(|| {
            ToolError::bad_argument(format!("no integrity monitor named '{n}'"))
        })?)],
        None => {
            let mut all: Vec<WatchStatus> = watches.values().map(view).collect();
            all.sort_by(|x, y| x.name.cmp(&y.name));
            all
        }
    })
}

async fn watch_loop(
    roots: maljan_server::Roots,
    root: PathBuf,
    baseline: PathBuf,
    interval: Duration,
    status: Arc<Mutex<WatchStatus>>,
) {
    loop {
        let (roots, r, b) = (roots.clone(), root.clone(), baseline.clone());
        let result = blocking(move || verify(&roots, &r, &b, false, &|| false)).await;
        {
            let mut s = status.lock().unwrap_or_else(|p| p.into_inner());
            s.last_run = Some(iso(std::time::SystemTime::now()));
            match result {
                Ok(report) => {
                    if !report.ok {
                        // Drift is worth a log line; paths and contents are not logged.
                        tracing::warn!(monitor = %s.name, changes = report.changes.len(), "integrity drift found");
                    }
                    s.last_error = None;
                    s.last_report = Some(report);
                }
                Err(e) => s.last_error = Some(e.to_string()),
            }
        }
        tokio::time::sleep(interval).await;
    }
}
