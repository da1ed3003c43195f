//! automation-file's automation actions that run on their own: schedules (`FA_schedule_*`),
//! file-watch triggers (`FA_watch_*`) and pipelines (`FA_pipeline_*`).
//!
//! Unlike automation-file, which keeps them in memory, schedules and watches are rows in the
//! state database and come back when the server starts again; pipeline runs are recorded task
//! by task, so a run cut short resumes from its last finished task. What they run is an action
//! list (or a pipeline) on this same server, through the hosted [`ServerHandle`] the server
//! gives the registry's start hook: the same tools, the same `--read-only` /
//! `--allowed-actions` policy and the same roots as a client's call. Time comes from a
//! [`Clock`], so tests fire schedules without waiting for the wall clock.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, OnceLock},
};

use chrono::{DateTime, SecondsFormat, Utc};
use maljan_server::{Registry, ServerHandle, ToolContext, ToolError};
use serde_json::Value;

use crate::Config;

pub(crate) mod cron;
pub(crate) mod definition;
pub(crate) mod limits;
pub(crate) mod pipeline;
pub(crate) mod schedule;
pub(crate) mod scheduler;
pub(crate) mod watch_fs;

/// The tables of schedules, their runs, watches and pipeline runs (one state migration).
pub(crate) const SCHEMA: &str = "
CREATE TABLE schedule_jobs (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, next_due TEXT, created_at TEXT NOT NULL);
CREATE TABLE schedule_runs (
    run_id TEXT PRIMARY KEY, job TEXT NOT NULL, trigger TEXT NOT NULL, target TEXT NOT NULL,
    state TEXT NOT NULL, scheduled_at TEXT, started_at TEXT NOT NULL, finished_at TEXT,
    duration_ms INTEGER, error TEXT, reason TEXT);
CREATE INDEX schedule_runs_by_job ON schedule_runs (job, started_at);
CREATE TABLE watch_specs (name TEXT PRIMARY KEY, spec TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE pipeline_runs (
    run_id TEXT PRIMARY KEY, pipeline TEXT NOT NULL, status TEXT NOT NULL,
    definition TEXT NOT NULL, params TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, error TEXT);
CREATE INDEX pipeline_runs_by_pipeline ON pipeline_runs (pipeline, started_at);
CREATE TABLE pipeline_tasks (
    run_id TEXT NOT NULL, task TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL,
    result TEXT, error TEXT, reason TEXT, started_at TEXT, finished_at TEXT, duration_ms INTEGER,
    PRIMARY KEY (run_id, task));
";

/// Where the automation actions read the time and wait for it.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
    /// Resolves once [`Clock::now`] has reached `at`.
    fn sleep_until(&self, at: DateTime<Utc>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        // At most a minute at a time, so a wall-clock jump (suspend, NTP) is noticed soon.
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        Box::pin(tokio::time::sleep(
            wait.min(std::time::Duration::from_secs(60)),
        ))
    }
}

/// A clock that moves only when told (tests and benches): waiters wake when it passes them.
pub struct ManualClock {
    now: tokio::sync::watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self {
            now: tokio::sync::watch::Sender::new(start),
        })
    }

    /// Moves the clock to `to` (never backwards).
    pub fn set(&self, to: DateTime<Utc>) {
        self.now.send_modify(|now| *now = (*now).max(to));
    }

    pub fn advance(&self, by: chrono::Duration) {
        self.now.send_modify(|now| *now += by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let mut moved = self.now.subscribe();
        Box::pin(async move {
            while *moved.borrow_and_update() < at {
                if moved.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
    }
}

/// What the automation actions share: the clock and, once the server serves, its handle.
pub(crate) struct Automation {
    pub(crate) clock: Arc<dyn Clock>,
    handle: OnceLock<ServerHandle>,
    pub(crate) scheduler: scheduler::Scheduler,
    pub(crate) watches: watch_fs::Watches,
    /// The rate limit per schedule and watch, and the loops already recorded.
    pub(crate) limits: limits::Limits,
}

impl Automation {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            handle: OnceLock::new(),
            scheduler: Default::default(),
            watches: Default::default(),
            limits: Default::default(),
        }
    }

    /// The running server, or why background work cannot run yet.
    pub(crate) fn handle(&self) -> Result<&ServerHandle, ToolError> {
        self.handle.get().ok_or_else(|| {
            ToolError::not_configured("schedules and watches run only on a serving server")
                .with_remediation("serve the files server (maljan serve files)")
        })
    }
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    schedule::register(reg, cfg);
    watch_fs::register(reg, cfg);
    pipeline::register(reg, cfg);
    let c = cfg.clone();
    reg.on_start(move |handle| {
        if c.automation.handle.set(handle).is_err() {
            return;
        }
        scheduler::start(&c);
        watch_fs::start(&c);
    });
}

/// The arguments of the actions that name one schedule or watch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NameArgs {
    pub(crate) name: String,
}

/// The arguments of the actions that take none.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// Times as automation-file writes them (ISO 8601), in UTC.
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn parse_iso(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Checks every action of a list against the tools this server serves, before it is stored.
pub(crate) fn check_actions(
    cfg: &Config,
    ctx: &ToolContext,
    list: &[Value],
) -> Result<(), ToolError> {
    if list.is_empty() {
        return Err(ToolError::bad_argument("action_list is empty"));
    }
    for (i, action) in list.iter().enumerate() {
        cfg.parse_action(ctx, action, i)?;
    }
    Ok(())
}

/// Why a stored row could not be read back (a database written by hand or another version).
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::tool_failed(format!(
        "state database: a stored {what} is unreadable: {e}"
    ))
}

/// A name for a schedule, a watch or a pipeline: not blank.
pub(crate) fn checked_name(name: &str) -> Result<&str, ToolError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(ToolError::bad_argument(
            "name must be a non-empty string of at most 200 characters",
        ));
    }
    Ok(name)
}

/// Runs `f` on the state database from async code.
pub(crate) async fn db<T: Send + 'static>(
    cfg: &Arc<Config>,
    f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    let c = cfg.clone();
    maljan_server::blocking(move || c.state.with(f)).await
}
