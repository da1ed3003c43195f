//! FA_schedule_*: jobs fired by cron expressions, kept in the state database: the actions, the
//! arguments as automation-file names them, and the stored jobs. When and how a job fires is
//! the scheduler's (`scheduler`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{
    NameArgs, NoArgs, check_actions, checked_name, corrupt,
    cron::CronSpec,
    db, definition, iso, parse_iso,
    scheduler::{RUN_COLUMNS, RunRecord, cancel, fire, record_of},
};
use crate::Config;

/// A cron trigger as automation-file writes it: `{"kind": "cron", "cron", "timezone"}`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(super) struct CronTrigger {
    cron: String,
    timezone: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(tag = "target", rename_all = "snake_case")]
pub(super) enum Target {
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
pub(super) struct JobSpec {
    pub(super) name: String,
    pub(super) triggers: Vec<CronTrigger>,
    #[serde(flatten)]
    pub(super) target: Target,
    pub(super) allow_overlap: bool,
    pub(super) timeout: Option<f64>,
}

impl JobSpec {
    fn crons(&self) -> Vec<CronSpec> {
        (self.triggers.iter())
            .filter_map(|t| CronSpec::parse(&t.cron, t.timezone.as_deref()).ok())
            .collect()
    }

    pub(super) fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.crons().iter().filter_map(|c| c.next_after(now)).min()
    }

    pub(super) fn target_name(&self) -> &'static str {
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
struct HistoryArgs {
    /// Only this job's runs.
    job: Option<String>,
    /// Only runs in this state (started, completed, failed, skipped, timeout, cancelled).
    state: Option<String>,
    #[serde(default = "default_history")]
    #[schemars(default = "default_history")]
    limit: i64,
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
    "refused",
];

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let writer = |name: &str, desc: &str| {
        ToolMeta::new(name, desc)
            .writes()
            .not_idempotent()
            .timeout_s(60)
    };
    let reader = |name: &str, desc: &str| ToolMeta::new(name, desc).timeout_s(60);
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_add", "Run an action list on a cron expression (5 fields or an @alias, in a time zone), kept across server restarts.")
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
        move |ctx: ToolContext, a: AddArgs| {
            let c = c.clone();
            async move {
                let trigger = cron_trigger(&a.cron_expression, a.timezone)?;
                let args = JobArgs { name: a.name, action_list: a.action_list, triggers: None, allow_overlap: a.allow_overlap, timeout: a.timeout };
                add_actions(&c, &ctx, args, vec![trigger]).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_job", "Register an action list as a job with cron triggers (or none: run it with FA_schedule_run).")
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
        move |ctx: ToolContext, mut a: JobArgs| {
            let c = c.clone();
            async move {
                let triggers = triggers_of(a.triggers.take().unwrap_or_default())?;
                add_actions(&c, &ctx, a, triggers).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        writer("FA_schedule_pipeline", "Register a pipeline definition as a job, on the schedule it declares plus any triggers given.")
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
        move |ctx: ToolContext, a: PipelineArgs| {
            let c = c.clone();
            async move {
                let definition = definition::load(&c, &ctx, a.definition).await?;
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
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world()
        // The call waits for the run, which its job's own timeout bounds.
        .timeout_s(3600),
        move |ctx: ToolContext, a: NameArgs| {
            let c = c.clone();
            async move {
                let spec = load_job(&c, &a.name).await?;
                fire(&c, spec, None, "manual", Some(&ctx)).await
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

/// Stores a job that runs an action list (FA_schedule_add, FA_schedule_job).
async fn add_actions(
    c: &Arc<Config>,
    ctx: &ToolContext,
    a: JobArgs,
    triggers: Vec<CronTrigger>,
) -> Result<JobOut, ToolError> {
    check_actions(c, ctx, &a.action_list)?;
    let spec = JobSpec {
        name: checked_name(&a.name)?.to_string(),
        triggers,
        target: Target::Actions {
            action_list: a.action_list,
        },
        allow_overlap: a.allow_overlap,
        timeout: checked_timeout(a.timeout)?,
    };
    add(c, spec).await
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

pub(super) async fn load_jobs(
    c: &Arc<Config>,
) -> Result<Vec<(JobSpec, Option<DateTime<Utc>>)>, ToolError> {
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

pub(super) async fn load_job(c: &Arc<Config>, name: &str) -> Result<JobSpec, ToolError> {
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
