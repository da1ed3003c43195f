//! FA_schedule_*: jobs fired by cron expressions, kept in the state database.
//!
//! One task per server (started by the registry's start hook) sleeps until the earliest due
//! time, fires what is due and records every run (`schedule_runs`: state, start, duration,
//! error). Catch-up rule: a due time that passed while nothing could fire it (the server was
//! down, the host slept) fires the job once, as soon as the server runs again (trigger
//! `catch_up`), however many due times were missed; the next due time is then the first one
//! after now. A run still marked started when the server starts was cut off by the stop and is
//! recorded as failed. Overlap guard: unless `allow_overlap`, a firing while the job's previous
//! run is still going is recorded as `skipped`. `timeout` ends a run as `timeout`.

use std::{collections::HashMap, sync::Arc, time::Instant};

use chrono::{DateTime, Utc};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{check_actions, checked_name, corrupt, cron::CronSpec, db, iso, parse_iso, pipeline};
use crate::{Config, executor};

#[derive(Default)]
pub(crate) struct Scheduler {
    /// Woken when a job is added or removed, so the loop recomputes its next wake-up.
    changed: tokio::sync::Notify,
    /// The runs in progress of each job: their ids and how to cancel them.
    live: std::sync::Mutex<HashMap<String, Vec<(String, CancellationToken)>>>,
}

impl Scheduler {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(String, CancellationToken)>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A cron trigger as automation-file writes it: `{"kind": "cron", "cron", "timezone"}`.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct CronTrigger {
    cron: String,
    timezone: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(tag = "target", rename_all = "snake_case")]
enum Target {
    Actions {
        action_list: Vec<Value>,
    },
    Pipeline {
        definition: Value,
        params: Map<String, Value>,
    },
}

/// What a job is, as stored.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct JobSpec {
    name: String,
    triggers: Vec<CronTrigger>,
    #[serde(flatten)]
    target: Target,
    allow_overlap: bool,
    timeout: Option<f64>,
}

impl JobSpec {
    fn crons(&self) -> Vec<CronSpec> {
        (self.triggers.iter())
            .filter_map(|t| CronSpec::parse(&t.cron, t.timezone.as_deref()).ok())
            .collect()
    }

    fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.crons().iter().filter_map(|c| c.next_after(now)).min()
    }

    fn target_name(&self) -> &'static str {
        match self.target {
            Target::Actions { .. } => "actions",
            Target::Pipeline { .. } => "pipeline",
        }
    }

    fn pipeline(&self) -> Option<String> {
        match &self.target {
            Target::Pipeline { definition, .. } => definition
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string),
            Target::Actions { .. } => None,
        }
    }
}

fn default_history() -> i64 {
    50
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    /// The job's unique name.
    name: String,
    /// Five fields (minute hour day-of-month month day-of-week) or an @alias (@hourly, @daily…).
    cron_expression: String,
    /// The actions to run: `[["FA_name", {kwargs}], ...]`.
    action_list: Vec<Value>,
    /// Start a run even while the previous one is still going (else it is skipped).
    #[serde(default)]
    allow_overlap: bool,
    /// The IANA time zone the expression is read in (default UTC).
    timezone: Option<String>,
    /// Seconds a run may take before it is stopped as timeout.
    timeout: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct JobArgs {
    name: String,
    /// The actions to run: `[["FA_name", {kwargs}], ...]`.
    action_list: Vec<Value>,
    /// `[{"kind": "cron", "cron": "0 2 * * *", "timezone": "UTC"}]`; none: run only by FA_schedule_run.
    triggers: Option<Vec<Value>>,
    #[serde(default)]
    allow_overlap: bool,
    timeout: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PipelineArgs {
    /// A pipeline definition (see FA_pipeline_run) or the path of its JSON/YAML file.
    definition: Value,
    /// The job's name (default: the pipeline's).
    name: Option<String>,
    /// More triggers besides the definition's own `schedule`.
    triggers: Option<Vec<Value>>,
    /// The parameters of each run.
    params: Option<Map<String, Value>>,
    #[serde(default)]
    allow_overlap: bool,
    timeout: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HistoryArgs {
    /// Only this job's runs.
    job: Option<String>,
    /// Only runs in this state (started, completed, failed, skipped, timeout, cancelled).
    state: Option<String>,
    #[serde(default = "default_history")]
    #[schemars(default = "default_history")]
    limit: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// One firing of a job.
#[derive(Serialize, JsonSchema, Clone, Debug)]
pub(crate) struct RunRecord {
    run_id: String,
    job: String,
    /// cron, catch_up or manual.
    trigger: String,
    /// actions or pipeline.
    target: String,
    /// started, completed, failed, skipped, timeout or cancelled.
    state: String,
    /// The due time it fired for (none for a manual run).
    scheduled_at: Option<String>,
    started_at: String,
    finished_at: Option<String>,
    duration_ms: Option<i64>,
    error: Option<String>,
    reason: Option<String>,
}

/// A job's snapshot, with automation-file's keys (and `next_due`).
#[derive(Serialize, JsonSchema)]
struct JobOut {
    name: String,
    cron: String,
    actions: usize,
    last_run: Option<String>,
    runs: i64,
    allow_overlap: bool,
    running: bool,
    skipped: i64,
    timezone: Option<String>,
    triggers: Vec<Value>,
    target: String,
    pipeline: Option<String>,
    timeout: Option<f64>,
    last_state: Option<String>,
    /// When the job fires next (none without a cron trigger).
    next_due: Option<String>,
}

const STATES: &[&str] = &[
    "started",
    "completed",
    "failed",
    "skipped",
    "timeout",
    "cancelled",
];

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let writer = |name: &str, desc: &str| ToolMeta::new(name, desc).writes().not_idempotent();
    let reader = |name: &str, desc: &str| ToolMeta::new(name, desc);
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_add", "Run an action list on a cron expression (5 fields or an @alias, in a time zone), kept across server restarts."),
        move |ctx: ToolContext, a: AddArgs| {
            let c = c.clone();
            async move {
                check_actions(&c, &ctx, &a.action_list)?;
                let spec = JobSpec {
                    name: checked_name(&a.name)?.to_string(),
                    triggers: vec![cron_trigger(&a.cron_expression, a.timezone)?],
                    target: Target::Actions { action_list: a.action_list },
                    allow_overlap: a.allow_overlap,
                    timeout: checked_timeout(a.timeout)?,
                };
                add(&c, spec).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_job", "Register an action list as a job with cron triggers (or none: run it with FA_schedule_run)."),
        move |ctx: ToolContext, a: JobArgs| {
            let c = c.clone();
            async move {
                check_actions(&c, &ctx, &a.action_list)?;
                let spec = JobSpec {
                    name: checked_name(&a.name)?.to_string(),
                    triggers: triggers_of(a.triggers.unwrap_or_default())?,
                    target: Target::Actions { action_list: a.action_list },
                    allow_overlap: a.allow_overlap,
                    timeout: checked_timeout(a.timeout)?,
                };
                add(&c, spec).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_pipeline", "Register a pipeline definition as a job, on the schedule it declares plus any triggers given."),
        move |ctx: ToolContext, a: PipelineArgs| {
            let c = c.clone();
            async move {
                let definition = pipeline::load(&c, &ctx, a.definition).await?;
                let mut triggers = Vec::new();
                if let Some(schedule) = definition.get("schedule") {
                    let cron = schedule.get("cron").and_then(Value::as_str).unwrap_or_default();
                    let zone = schedule.get("timezone").and_then(Value::as_str);
                    triggers.push(cron_trigger(cron, zone.map(str::to_string))?);
                }
                triggers.extend(triggers_of(a.triggers.unwrap_or_default())?);
                let name = match &a.name {
                    Some(n) => n.clone(),
                    None => definition.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                };
                let spec = JobSpec {
                    name: checked_name(&name)?.to_string(),
                    triggers,
                    target: Target::Pipeline { definition, params: a.params.unwrap_or_default() },
                    allow_overlap: a.allow_overlap,
                    timeout: checked_timeout(a.timeout)?,
                };
                add(&c, spec).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        reader(
            "FA_schedule_list",
            "Every scheduled job: its triggers, counters, last state and next due time.",
        ),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move { list(&c).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        reader(
            "FA_schedule_history",
            "The recorded runs, newest first, of one job and/or in one state.",
        ),
        move |_ctx, a: HistoryArgs| {
            let c = c.clone();
            async move { history(&c, a).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer(
            "FA_schedule_run",
            "Fire a job now, by hand; returns the run's record (skipped if it overlaps).",
        ),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move {
                let spec = load_job(&c, &a.name).await?;
                fire(&c, spec, None, "manual").await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer(
            "FA_schedule_cancel",
            "Cancel the runs in progress of a job; returns their records.",
        ),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move { cancel(&c, &a.name).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer(
            "FA_schedule_remove",
            "Remove a job (a run in progress goes on); returns its last snapshot.",
        )
        .destructive(),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move {
                let out = snapshot_of(&c, &a.name).await?;
                let name = a.name.clone();
                db(&c, move |conn| {
                    conn.execute("DELETE FROM schedule_jobs WHERE name = ?1", [name])
                })
                .await?;
                c.automation.scheduler.changed.notify_one();
                Ok::<_, ToolError>(out)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer(
            "FA_schedule_remove_all",
            "Remove every job; returns their last snapshots.",
        )
        .destructive(),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                let out = list(&c).await?;
                db(&c, |conn| conn.execute("DELETE FROM schedule_jobs", [])).await?;
                c.automation.scheduler.changed.notify_one();
                Ok::<_, ToolError>(out)
            }
        },
    );
}

fn checked_timeout(timeout: Option<f64>) -> Result<Option<f64>, ToolError> {
    match timeout {
        Some(t) if !(t.is_finite() && t > 0.0 && t <= 7.0 * 86400.0) => Err(
            ToolError::bad_argument("timeout must be a positive number of seconds, at most a week"),
        ),
        other => Ok(other),
    }
}

fn cron_trigger(cron: &str, timezone: Option<String>) -> Result<CronTrigger, ToolError> {
    CronSpec::parse(cron, timezone.as_deref()).map_err(ToolError::bad_argument)?;
    Ok(CronTrigger {
        cron: cron.trim().to_string(),
        timezone,
    })
}

fn triggers_of(list: Vec<Value>) -> Result<Vec<CronTrigger>, ToolError> {
    list.into_iter()
        .enumerate()
        .map(|(i, t)| {
            let kind = t.get("kind").and_then(Value::as_str).unwrap_or_default();
            let Some(obj) = t.as_object().filter(|_| kind == "cron") else {
                return Err(ToolError::bad_argument(format!(
                    "triggers[{i}]: kind '{kind}' is not supported here: use {{\"kind\": \"cron\", \"cron\", \"timezone\"}} (for file events, FA_watch_start)"
                )));
            };
            if let Some(extra) = obj.keys().find(|k| !matches!(k.as_str(), "kind" | "cron" | "timezone")) {
                return Err(ToolError::bad_argument(format!("triggers[{i}]: unknown key '{extra}'")));
            }
            let cron = obj.get("cron").and_then(Value::as_str).ok_or_else(|| {
                ToolError::bad_argument(format!("triggers[{i}]: a cron trigger needs 'cron'"))
            })?;
            let zone = obj.get("timezone").and_then(Value::as_str).map(str::to_string);
            cron_trigger(cron, zone)
        })
        .collect()
}

async fn add(c: &Arc<Config>, spec: JobSpec) -> Result<JobOut, ToolError> {
    let now = c.automation.clock.now();
    let next = spec.next_after(now).map(iso);
    let name = spec.name.clone();
    let text = serde_json::to_string(&spec).map_err(|e| ToolError::tool_failed(e.to_string()))?;
    let inserted = db(c, move |conn| {
        conn.execute(
            "INSERT OR IGNORE INTO schedule_jobs (name, spec, next_due, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![name, text, next, iso(now)],
        )
    })
    .await?;
    if inserted == 0 {
        return Err(
            ToolError::bad_argument(format!("job already registered: {}", spec.name))
                .with_remediation("remove it first (FA_schedule_remove) or pick another name"),
        );
    }
    c.automation.scheduler.changed.notify_one();
    snapshot_of(c, &spec.name).await
}

async fn load_jobs(c: &Arc<Config>) -> Result<Vec<(JobSpec, Option<DateTime<Utc>>)>, ToolError> {
    let rows = db(c, |conn| {
        let mut stmt =
            conn.prepare("SELECT spec, next_due FROM schedule_jobs ORDER BY created_at, name")?;
        stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
    })
    .await?;
    rows.into_iter()
        .map(|(spec, due)| {
            let spec: JobSpec = serde_json::from_str(&spec).map_err(|e| corrupt("schedule", e))?;
            Ok((spec, due.as_deref().and_then(parse_iso)))
        })
        .collect()
}

async fn load_job(c: &Arc<Config>, name: &str) -> Result<JobSpec, ToolError> {
    let key = name.to_string();
    let text = db(c, move |conn| {
        conn.query_row(
            "SELECT spec FROM schedule_jobs WHERE name = ?1",
            [key],
            |r| r.get::<_, String>(0),
        )
        .optional()
    })
    .await?
    .ok_or_else(|| ToolError::bad_argument(format!("no such job: {name}")))?;
    serde_json::from_str(&text).map_err(|e| corrupt("schedule", e))
}

async fn snapshot_of(c: &Arc<Config>, name: &str) -> Result<JobOut, ToolError> {
    let spec = load_job(c, name).await?;
    let due = db(c, {
        let name = name.to_string();
        move |conn| {
            conn.query_row(
                "SELECT next_due FROM schedule_jobs WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
        }
    })
    .await?;
    snapshot(c, spec, due).await
}

async fn snapshot(
    c: &Arc<Config>,
    spec: JobSpec,
    next_due: Option<String>,
) -> Result<JobOut, ToolError> {
    let name = spec.name.clone();
    let (runs, skipped, last_run, last_state) = db(c, move |conn| {
        conn.query_row(
            "SELECT COUNT(*) FILTER (WHERE state != 'skipped'), COUNT(*) FILTER (WHERE state = 'skipped'),
                    (SELECT started_at FROM schedule_runs WHERE job = ?1 AND state != 'skipped' ORDER BY started_at DESC, rowid DESC LIMIT 1),
                    (SELECT state FROM schedule_runs WHERE job = ?1 ORDER BY started_at DESC, rowid DESC LIMIT 1)
             FROM schedule_runs WHERE job = ?1",
            [name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
    })
    .await?;
    let running = c
        .automation
        .scheduler
        .live()
        .get(&spec.name)
        .is_some_and(|v| !v.is_empty());
    let first = spec.triggers.first();
    Ok(JobOut {
        cron: first.map(|t| t.cron.clone()).unwrap_or_default(),
        timezone: first.and_then(|t| t.timezone.clone()),
        actions: match &spec.target {
            Target::Actions { action_list } => action_list.len(),
            Target::Pipeline { .. } => 0,
        },
        triggers: (spec.triggers.iter())
            .map(|t| json!({"kind": "cron", "cron": t.cron, "timezone": t.timezone}))
            .collect(),
        target: spec.target_name().to_string(),
        pipeline: spec.pipeline(),
        last_run,
        runs,
        skipped,
        running,
        last_state,
        allow_overlap: spec.allow_overlap,
        timeout: spec.timeout,
        next_due,
        name: spec.name,
    })
}

async fn list(c: &Arc<Config>) -> Result<Vec<JobOut>, ToolError> {
    let mut out = Vec::new();
    for (spec, due) in load_jobs(c).await? {
        out.push(snapshot(c, spec, due.map(iso)).await?);
    }
    Ok(out)
}

fn record_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        run_id: r.get(0)?,
        job: r.get(1)?,
        trigger: r.get(2)?,
        target: r.get(3)?,
        state: r.get(4)?,
        scheduled_at: r.get(5)?,
        started_at: r.get(6)?,
        finished_at: r.get(7)?,
        duration_ms: r.get(8)?,
        error: r.get(9)?,
        reason: r.get(10)?,
    })
}

const RUN_COLUMNS: &str = "run_id, job, trigger, target, state, scheduled_at, started_at, finished_at, duration_ms, error, reason";

async fn history(c: &Arc<Config>, a: HistoryArgs) -> Result<Vec<RunRecord>, ToolError> {
    if let Some(state) = &a.state
        && !STATES.contains(&state.as_str())
    {
        return Err(ToolError::bad_argument(format!(
            "unknown run state '{state}' (one of {})",
            STATES.join(", ")
        )));
    }
    if !(1..=10_000).contains(&a.limit) {
        return Err(ToolError::bad_argument("limit must be between 1 and 10000"));
    }
    db(c, move |conn| {
        let mut stmt = conn.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM schedule_runs
             WHERE (?1 IS NULL OR job = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY started_at DESC, rowid DESC LIMIT ?3"
        ))?;
        stmt.query_map(params![a.job, a.state, a.limit], record_of)?
            .collect()
    })
    .await
}

async fn cancel(c: &Arc<Config>, name: &str) -> Result<Vec<RunRecord>, ToolError> {
    let runs = c
        .automation
        .scheduler
        .live()
        .remove(name)
        .unwrap_or_default();
    if runs.is_empty() {
        load_job(c, name).await?;
        return Ok(Vec::new());
    }
    let now = iso(c.automation.clock.now());
    let ids: Vec<String> = runs.iter().map(|(id, _)| id.clone()).collect();
    for (_, token) in &runs {
        token.cancel();
    }
    db(c, move |conn| {
        let mut out = Vec::new();
        for id in ids {
            conn.execute(
                "UPDATE schedule_runs SET state = 'cancelled', finished_at = ?2, reason = 'cancelled by FA_schedule_cancel' WHERE run_id = ?1 AND state = 'started'",
                params![id, now],
            )?;
            out.push(conn.query_row(&format!("SELECT {RUN_COLUMNS} FROM schedule_runs WHERE run_id = ?1"), [&id], record_of)?);
        }
        Ok(out)
    })
    .await
}

/// Fires `spec` once: records the run and starts it, or records it skipped when it overlaps.
async fn fire(
    c: &Arc<Config>,
    spec: JobSpec,
    scheduled: Option<DateTime<Utc>>,
    trigger: &str,
) -> Result<RunRecord, ToolError> {
    let handle = c.automation.handle()?.clone();
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let started = c.automation.clock.now();
    let token = handle.stopped().child_token();
    let overlapping = {
        let mut live = c.automation.scheduler.live();
        let runs = live.entry(spec.name.clone()).or_default();
        let busy = !runs.is_empty() && !spec.allow_overlap;
        if !busy {
            runs.push((run_id.clone(), token.clone()));
        }
        busy
    };
    let mut record = RunRecord {
        run_id: run_id.clone(),
        job: spec.name.clone(),
        trigger: trigger.to_string(),
        target: spec.target_name().to_string(),
        state: if overlapping { "skipped" } else { "started" }.to_string(),
        scheduled_at: scheduled.map(iso),
        started_at: iso(started),
        finished_at: overlapping.then(|| iso(started)),
        duration_ms: overlapping.then_some(0),
        error: None,
        reason: overlapping.then(|| "overlap: the job's previous run is still going".to_string()),
    };
    let row = record.clone();
    db(c, move |conn| {
        conn.execute(
            &format!("INSERT INTO schedule_runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
            params![row.run_id, row.job, row.trigger, row.target, row.state, row.scheduled_at, row.started_at, row.finished_at, row.duration_ms, row.error, row.reason],
        )
    })
    .await?;
    if overlapping {
        return Ok(record);
    }
    let c2 = c.clone();
    tokio::spawn(async move {
        let clock = Instant::now();
        let ctx = handle.context(token.clone());
        let timeout = spec.timeout.map(std::time::Duration::from_secs_f64);
        let work = run_target(&c2, &ctx, &spec);
        let (state, error) = tokio::select! {
            outcome = async {
                match timeout {
                    Some(t) => tokio::time::timeout(t, work).await.unwrap_or_else(|_| Err(("timeout", format!("the run took longer than its timeout of {} s", t.as_secs_f64())))),
                    None => work.await,
                }
            } => match outcome { Ok(()) => ("completed", None), Err((state, e)) => (state, Some(e)) },
            _ = token.cancelled() => ("cancelled", None),
        };
        token.cancel();
        let finished = iso(c2.automation.clock.now());
        let ms = clock.elapsed().as_millis() as i64;
        let id = run_id.clone();
        let saved = db(&c2, move |conn| {
            conn.execute(
                "UPDATE schedule_runs SET state = ?2, finished_at = ?3, duration_ms = ?4, error = ?5 WHERE run_id = ?1 AND state = 'started'",
                params![id, state, finished, ms, error],
            )
        })
        .await;
        if let Err(e) = saved {
            tracing::warn!(job = %spec.name, error = %e.message, "scheduler: the run's end was not recorded");
        }
        if let Some(runs) = c2.automation.scheduler.live().get_mut(&spec.name) {
            runs.retain(|(id, _)| id != &run_id);
        }
    });
    record.state = "started".into();
    Ok(record)
}

/// Runs what the job runs; Err carries the final state and the error.
async fn run_target(
    c: &Arc<Config>,
    ctx: &ToolContext,
    spec: &JobSpec,
) -> Result<(), (&'static str, String)> {
    let failed = |e: ToolError| ("failed", format!("{}: {}", e.code.as_str(), e.message));
    match &spec.target {
        Target::Actions { action_list } => {
            let out = executor::run_list(c, ctx, action_list.clone(), false, false)
                .await
                .map_err(failed)?;
            match out.results.iter().find(|s| s.status == "failed") {
                None => Ok(()),
                Some(step) => Err((
                    "failed",
                    format!(
                        "{} of {} actions failed; the first, {} (#{}): {}",
                        out.failed,
                        out.results.len(),
                        step.action,
                        step.index,
                        step.error
                            .as_ref()
                            .and_then(|e| e.get("message"))
                            .and_then(Value::as_str)
                            .unwrap_or("failed")
                    ),
                )),
            }
        }
        Target::Pipeline { definition, params } => {
            let run = pipeline::run_new(c, ctx, definition.clone(), params.clone())
                .await
                .map_err(failed)?;
            if run.status == "succeeded" {
                Ok(())
            } else {
                Err((
                    "failed",
                    run.error
                        .unwrap_or_else(|| format!("the pipeline run ended {}", run.status)),
                ))
            }
        }
    }
}

/// Starts the server's scheduler loop (from the registry's start hook).
pub(crate) fn start(c: &Arc<Config>) {
    let c = c.clone();
    tokio::spawn(async move {
        let Ok(handle) = c.automation.handle() else {
            return;
        };
        let stopped = handle.stopped().clone();
        let now = iso(c.automation.clock.now());
        let cut = db(&c, move |conn| {
            conn.execute(
                "UPDATE schedule_runs SET state = 'failed', finished_at = ?1,
                 error = 'the server stopped during the run' WHERE state = 'started'",
                [now],
            )
        })
        .await;
        if let Err(e) = cut {
            tracing::warn!(error = %e.message, "scheduler: cannot read the state database; schedules wait");
        }
        loop {
            let changed = c.automation.scheduler.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let wake = match tick(&c).await {
                Ok(wake) => wake,
                Err(e) => {
                    tracing::warn!(error = %e.message, "scheduler: tick failed");
                    Some(c.automation.clock.now() + chrono::Duration::seconds(60))
                }
            };
            let sleep = match wake {
                Some(at) => c.automation.clock.sleep_until(at),
                None => Box::pin(std::future::pending()),
            };
            tokio::select! {
                _ = stopped.cancelled() => break,
                _ = &mut changed => {}
                _ = sleep => {}
            }
        }
    });
}

/// Fires every job that is due and returns when the next one is.
async fn tick(c: &Arc<Config>) -> Result<Option<DateTime<Utc>>, ToolError> {
    let now = c.automation.clock.now();
    let mut earliest: Option<DateTime<Utc>> = None;
    for (spec, due) in load_jobs(c).await? {
        let next = spec.next_after(now);
        let keep = match due {
            Some(due) if due <= now => {
                // Once however many were missed; "catch_up" when it is late by a minute or more.
                let trigger = if now - due >= chrono::Duration::minutes(1) {
                    "catch_up"
                } else {
                    "cron"
                };
                // The next due time is stored first: a run that ends at once never sees it stale.
                let name = spec.name.clone();
                set_next_due(c, name.clone(), next).await?;
                if let Err(e) = fire(c, spec, Some(due), trigger).await {
                    tracing::warn!(job = %name, error = %e.message, "scheduler: a job did not start");
                }
                next
            }
            Some(due) => Some(due),
            None if next.is_some() => {
                set_next_due(c, spec.name.clone(), next).await?;
                next
            }
            None => None,
        };
        earliest = match (earliest, keep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(earliest)
}

async fn set_next_due(
    c: &Arc<Config>,
    name: String,
    next: Option<DateTime<Utc>>,
) -> Result<(), ToolError> {
    let next = next.map(iso);
    db(c, move |conn| {
        conn.execute(
            "UPDATE schedule_jobs SET next_due = ?2 WHERE name = ?1",
            params![name, next],
        )
    })
    .await
    .map(drop)
}
