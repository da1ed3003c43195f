//! FA_pipeline_*: automation-file's pipeline definitions (`schema_version: 1`, named tasks with
//! an action, depends_on, retry, timeout, when, `${params.x}` / `${tasks.id.result}`), run over
//! the DAG executor of FA_execute_action_dag and recorded task by task in the state database:
//! each task's row is written when it starts and when it ends, so a run whose server was
//! killed halfway keeps what finished, and FA_pipeline_resume runs only the rest.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Instant,
};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    corrupt, db,
    definition::{
        checked, depends_on, levels, load, merged_params, problems, substitute, tasks_of,
    },
    iso,
};
use crate::{Config, dag};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The definition: a mapping, or the path of a JSON or YAML file under the roots.
    definition: Value,
    /// Values for the definition's `params`.
    params: Option<Map<String, Value>>,
    /// Plan the run without running or recording anything.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DefinitionArgs {
    definition: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunIdArgs {
    run_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResumeArgs {
    run_id: String,
    /// The same definition the run was started with (a mapping or a file path).
    definition: Value,
}

fn default_limit() -> i64 {
    20
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HistoryArgs {
    /// Only this pipeline's runs.
    pipeline: Option<String>,
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    limit: i64,
}

#[derive(Serialize, JsonSchema)]
struct ValidateOut {
    valid: bool,
    errors: Vec<String>,
}

/// One task's state, with automation-file's keys.
#[derive(Serialize, JsonSchema, Clone, Debug)]
pub(crate) struct TaskOut {
    task: String,
    /// pending, running, succeeded, failed, skipped, timeout, cancelled or planned.
    status: String,
    level: usize,
    attempts: i64,
    result: Option<Value>,
    result_is_repr: bool,
    error: Option<String>,
    reason: Option<String>,
    idempotency_key: Option<String>,
    started_at: Option<String>,
    finished_at: Option<String>,
    duration_ms: Option<i64>,
}

/// A run and its tasks.
#[derive(Serialize, JsonSchema, Debug)]
pub(crate) struct RunOut {
    run_id: String,
    pipeline: String,
    /// running, succeeded, failed or cancelled.
    pub(crate) status: String,
    dry_run: bool,
    params: Map<String, Value>,
    started_at: String,
    finished_at: Option<String>,
    pub(crate) error: Option<String>,
    tasks: BTreeMap<String, TaskOut>,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new("FA_pipeline_run", "Run a pipeline definition (a mapping or a JSON/YAML file) and return the run; each task is recorded as it ends, so FA_pipeline_resume can finish a run cut short.")
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
            .destructive()
            .not_idempotent()
            .timeout_s(3600),
        move |ctx: ToolContext, a: RunArgs| {
            let c = c.clone();
            async move {
                let definition = load(&c, &ctx, a.definition).await?;
                let params = a.params.unwrap_or_default();
                if a.dry_run {
                    return plan(&c, &ctx, &definition, params);
                }
                run_new(&c, &ctx, definition, params).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_pipeline_validate",
            "Check a pipeline definition: {\"valid\", \"errors\"} with the path of each problem.",
        )
        .timeout_s(60),
        move |ctx: ToolContext, a: DefinitionArgs| {
            let c = c.clone();
            async move {
                let errors = match load(&c, &ctx, a.definition).await {
                    Ok(definition) => problems(&ctx, &definition),
                    Err(e) => vec![e.message],
                };
                Ok::<_, ToolError>(ValidateOut {
                    valid: errors.is_empty(),
                    errors,
                })
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_pipeline_status",
            "The recorded state of a pipeline run and of each of its tasks.",
        )
        .timeout_s(60),
        move |_ctx, a: RunIdArgs| {
            let c = c.clone();
            async move {
                read_run(&c, &a.run_id)
                    .await?
                    .ok_or_else(|| ToolError::bad_argument(format!("unknown run '{}'", a.run_id)))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_pipeline_history",
            "The latest recorded pipeline runs, newest first, of one pipeline or of all.",
        )
        .timeout_s(60),
        move |_ctx, a: HistoryArgs| {
            let c = c.clone();
            async move {
                if !(1..=10_000).contains(&a.limit) {
                    return Err(ToolError::bad_argument("limit must be between 1 and 10000"));
                }
                history(&c, a.pipeline, a.limit).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_pipeline_resume",
            "Continue a recorded run: keep the tasks that succeeded and run the rest.",
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world()
        .destructive()
        .not_idempotent()
        .timeout_s(3600),
        move |ctx: ToolContext, a: ResumeArgs| {
            let c = c.clone();
            async move {
                let definition = load(&c, &ctx, a.definition).await?;
                resume(&c, &ctx, &a.run_id, definition).await
            }
        },
    );
}

fn task_out(id: &str, level: usize, task: &Value, status: &str) -> TaskOut {
    TaskOut {
        task: id.to_string(),
        status: status.to_string(),
        level,
        attempts: 0,
        result: None,
        result_is_repr: false,
        error: None,
        reason: None,
        idempotency_key: task
            .get("idempotency_key")
            .and_then(Value::as_str)
            .map(str::to_string),
        started_at: None,
        finished_at: None,
        duration_ms: None,
    }
}

pub(crate) fn plan(
    c: &Arc<Config>,
    ctx: &ToolContext,
    d: &Value,
    params: Map<String, Value>,
) -> Result<RunOut, ToolError> {
    checked(ctx, d)?;
    let levels = levels(tasks_of(d));
    Ok(RunOut {
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        pipeline: d["name"].as_str().unwrap_or_default().to_string(),
        status: "planned".into(),
        dry_run: true,
        params: merged_params(d, params),
        started_at: iso(c.automation.clock.now()),
        finished_at: None,
        error: None,
        tasks: (tasks_of(d).iter())
            .map(|(id, t)| (id.clone(), task_out(id, levels[id], t, "planned")))
            .collect(),
    })
}

/// Starts and records a new run of a valid definition.
pub(crate) async fn run_new(
    c: &Arc<Config>,
    ctx: &ToolContext,
    d: Value,
    params: Map<String, Value>,
) -> Result<RunOut, ToolError> {
    // Inside the caller's call, but a run of its own: a pipeline that runs itself again,
    // directly or through a schedule or another pipeline, is refused as the loop it is.
    let ctx = &ctx.within(&origin_of(&d))?;
    let (run_id, params) = record_new(c, ctx, &d, params).await?;
    execute_recorded(c, ctx, &run_id, &d, params).await
}

/// How a run of the pipeline `d` is named among a call's origins.
pub(crate) fn origin_of(d: &Value) -> String {
    format!("pipeline:{}", d["name"].as_str().unwrap_or_default())
}

/// Records a new run of a valid definition, every task pending; returns its run_id and its
/// parameters (the definition's defaults with `params` over them).
pub(crate) async fn record_new(
    c: &Arc<Config>,
    ctx: &ToolContext,
    d: &Value,
    params: Map<String, Value>,
) -> Result<(String, Map<String, Value>), ToolError> {
    checked(ctx, d)?;
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let params = merged_params(d, params);
    let row = (
        run_id.clone(),
        d["name"].as_str().unwrap_or_default().to_string(),
        d.to_string(),
        Value::Object(params.clone()).to_string(),
        iso(c.automation.clock.now()),
        tasks_of(d).keys().cloned().collect::<Vec<_>>(),
    );
    db(c, move |conn| {
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO pipeline_runs (run_id, pipeline, status, definition, params, started_at) VALUES (?1, ?2, 'running', ?3, ?4, ?5)",
            params![row.0, row.1, row.2, row.3, row.4],
        )?;
        for task in &row.5 {
            tx.execute("INSERT INTO pipeline_tasks (run_id, task, status, attempts) VALUES (?1, ?2, 'pending', 0)", params![row.0, task])?;
        }
        tx.commit()
    })
    .await?;
    Ok((run_id, params))
}

/// Runs a run [`record_new`] recorded, from its first task.
pub(crate) async fn execute_recorded(
    c: &Arc<Config>,
    ctx: &ToolContext,
    run_id: &str,
    d: &Value,
    params: Map<String, Value>,
) -> Result<RunOut, ToolError> {
    execute_run(c, ctx, run_id, d, params, HashMap::new()).await
}

async fn resume(
    c: &Arc<Config>,
    ctx: &ToolContext,
    run_id: &str,
    d: Value,
) -> Result<RunOut, ToolError> {
    checked(ctx, &d)?;
    let ctx = &ctx.within(&origin_of(&d))?;
    let Some(before) = read_run(c, run_id).await? else {
        return Err(ToolError::bad_argument(format!("unknown run '{run_id}'")));
    };
    let name = d["name"].as_str().unwrap_or_default();
    if before.pipeline != name {
        return Err(ToolError::bad_argument(format!(
            "run '{run_id}' is of pipeline '{}', not '{name}'",
            before.pipeline
        )));
    }
    if before.status == "succeeded" {
        return Ok(before);
    }
    let kept: HashMap<String, Outcome> = (before.tasks.iter())
        .filter(|(id, t)| t.status == "succeeded" && tasks_of(&d).contains_key(*id))
        .map(|(id, t)| {
            (
                id.clone(),
                Outcome {
                    status: "succeeded",
                    result: t.result.clone(),
                },
            )
        })
        .collect();
    let (id, tasks) = (
        run_id.to_string(),
        tasks_of(&d).keys().cloned().collect::<Vec<_>>(),
    );
    let keep: Vec<String> = kept.keys().cloned().collect();
    db(c, move |conn| {
        let tx = conn.transaction()?;
        tx.execute("UPDATE pipeline_runs SET status = 'running', finished_at = NULL, error = NULL WHERE run_id = ?1", [&id])?;
        for task in &tasks {
            if keep.contains(task) {
                continue;
            }
            tx.execute(
                "INSERT INTO pipeline_tasks (run_id, task, status, attempts) VALUES (?1, ?2, 'pending', 0)
                 ON CONFLICT (run_id, task) DO UPDATE SET status = 'pending', result = NULL, error = NULL, reason = NULL",
                params![id, task],
            )?;
        }
        tx.commit()
    })
    .await?;
    execute_run(c, ctx, run_id, &d, before.params, kept).await
}

/// How a task ended, as the tasks after it see it.
#[derive(Clone)]
struct Outcome {
    status: &'static str,
    result: Option<Value>,
}

async fn execute_run(
    c: &Arc<Config>,
    ctx: &ToolContext,
    run_id: &str,
    d: &Value,
    params: Map<String, Value>,
    mut settled: HashMap<String, Outcome>,
) -> Result<RunOut, ToolError> {
    let tasks = tasks_of(d);
    let deps: Vec<(&str, Vec<String>)> = tasks
        .iter()
        .map(|(id, t)| (id.as_str(), depends_on(t)))
        .collect();
    let g = dag::graph(deps.iter().map(|(id, d)| (*id, d.as_slice())))
        .map_err(ToolError::bad_argument)?;
    let workers = d.get("max_workers").and_then(Value::as_u64).unwrap_or(4) as usize;
    let params = &params;
    let walked = dag::execute(&g, workers, &mut settled, ctx, |id, done| {
        let task = &tasks[id];
        let upstream: Vec<&'static str> = depends_on(task).iter().map(|d| done[d].status).collect();
        let results: HashMap<String, Option<Value>> = done
            .iter()
            .map(|(k, o)| (k.clone(), o.result.clone()))
            .collect();
        let ctx = ctx.clone();
        async move { run_task(c, &ctx, run_id, id, task, &upstream, params, &results).await }
    })
    .await;
    let failed = settled
        .values()
        .any(|o| matches!(o.status, "failed" | "timeout"));
    let (status, error) = match walked {
        Err(_) => ("cancelled", Some("the run was cancelled".to_string())),
        Ok(()) if failed => ("failed", Some("a task failed".to_string())),
        Ok(()) => ("succeeded", None),
    };
    let (id, now) = (run_id.to_string(), iso(c.automation.clock.now()));
    db(c, move |conn| {
        conn.execute(
            "UPDATE pipeline_runs SET status = ?2, finished_at = ?3, error = ?4 WHERE run_id = ?1",
            params![id, status, now, error],
        )
    })
    .await?;
    read_run(c, run_id)
        .await?
        .ok_or_else(|| ToolError::tool_failed("the run's record vanished"))
}

#[allow(clippy::too_many_arguments)]
async fn run_task(
    c: &Arc<Config>,
    ctx: &ToolContext,
    run_id: &str,
    id: &str,
    task: &Value,
    upstream: &[&'static str],
    params: &Map<String, Value>,
    results: &HashMap<String, Option<Value>>,
) -> Outcome {
    let when = task
        .get("when")
        .and_then(Value::as_str)
        .unwrap_or("on_success");
    let all_ok = upstream.iter().all(|s| *s == "succeeded");
    let any_failed = upstream.iter().any(|s| matches!(*s, "failed" | "timeout"));
    let skip = match when {
        "always" => None,
        "on_failure" if any_failed => None,
        "on_failure" => Some("condition"),
        _ if all_ok => None,
        _ if any_failed => Some("upstream_failed"),
        _ => Some("upstream_skipped"),
    };
    let record = |status: &'static str,
                  attempts: i64,
                  result: Option<Value>,
                  error: Option<String>,
                  reason: Option<&str>,
                  started: Option<String>,
                  ms: Option<i64>| {
        let row = (
            run_id.to_string(),
            id.to_string(),
            result.as_ref().map(Value::to_string),
            reason.map(str::to_string),
            iso(c.automation.clock.now()),
        );
        db(c, move |conn| {
            conn.execute(
                "UPDATE pipeline_tasks SET status = ?3, attempts = ?4, result = ?5, error = ?6, reason = ?7,
                 started_at = COALESCE(?8, started_at), finished_at = CASE WHEN ?3 = 'running' THEN NULL ELSE ?9 END,
                 duration_ms = ?10 WHERE run_id = ?1 AND task = ?2",
                params![row.0, row.1, status, attempts, row.2, error, row.3, started, row.4, ms],
            )
        })
    };
    if let Some(reason) = skip {
        if let Err(e) = record("skipped", 0, None, None, Some(reason), None, None).await {
            tracing::warn!(error = %e.message, "pipeline: a task's state was not recorded");
        }
        return Outcome {
            status: "skipped",
            result: None,
        };
    }
    let started = iso(c.automation.clock.now());
    let clock = Instant::now();
    let retry = task.get("retry");
    let attempts = retry
        .and_then(|r| r.get("max_attempts"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    let backoff = retry
        .and_then(|r| r.get("backoff"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let cap = retry
        .and_then(|r| r.get("backoff_cap"))
        .and_then(Value::as_f64)
        .unwrap_or(60.0);
    let timeout = task
        .get("timeout")
        .and_then(Value::as_f64)
        .map(std::time::Duration::from_secs_f64);
    let action = substitute(&task["action"], params, results);
    let mut last: (&'static str, Option<Value>, Option<String>) = ("failed", None, None);
    let mut tried = 0;
    for attempt in 1..=attempts {
        tried = attempt as i64;
        let _ = record(
            "running",
            tried,
            None,
            None,
            None,
            Some(started.clone()),
            None,
        )
        .await;
        let call = async {
            let act = c.parse_action(ctx, &action, 0)?;
            ctx.invoke(&act.name, act.args).await
        };
        let outcome = match timeout {
            Some(t) => tokio::time::timeout(t, call).await.map_err(|_| ()),
            None => Ok(call.await),
        };
        last = match outcome {
            Ok(Ok(v)) => ("succeeded", Some(v), None),
            Ok(Err(e)) if ctx.is_cancelled() => ("cancelled", None, Some(e.message)),
            Ok(Err(e)) => (
                "failed",
                None,
                Some(format!("{}: {}", e.code.as_str(), e.message)),
            ),
            Err(()) => (
                "timeout",
                None,
                Some(format!(
                    "the task took longer than its timeout of {} s",
                    timeout.unwrap_or_default().as_secs_f64()
                )),
            ),
        };
        if matches!(last.0, "succeeded" | "cancelled") || attempt == attempts {
            break;
        }
        let wait = (backoff * 2f64.powi(attempt as i32 - 1)).min(cap);
        tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
    }
    let (status, result, error) = last;
    let ms = clock.elapsed().as_millis() as i64;
    if let Err(e) = record(status, tried, result.clone(), error, None, None, Some(ms)).await {
        tracing::warn!(error = %e.message, "pipeline: a task's state was not recorded");
    }
    Outcome { status, result }
}

/// The latest `limit` runs, newest first, of one pipeline or of all.
pub(crate) async fn history(
    c: &Arc<Config>,
    pipeline: Option<String>,
    limit: i64,
) -> Result<Vec<RunOut>, ToolError> {
    let ids: Vec<String> = db(c, move |conn| {
        let mut stmt = conn.prepare(
            "SELECT run_id FROM pipeline_runs WHERE (?1 IS NULL OR pipeline = ?1)
             ORDER BY started_at DESC, rowid DESC LIMIT ?2",
        )?;
        stmt.query_map(params![pipeline, limit], |r| r.get(0))?
            .collect()
    })
    .await?;
    let mut out = Vec::new();
    for id in ids {
        out.extend(read_run(c, &id).await?);
    }
    Ok(out)
}

pub(crate) async fn read_run(c: &Arc<Config>, run_id: &str) -> Result<Option<RunOut>, ToolError> {
    let id = run_id.to_string();
    type Row = (
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        String,
    );
    type TaskRow = (
        String,
        String,
        i64,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<i64>,
    );
    let found: Option<(Row, Vec<TaskRow>)> = db(c, move |conn| {
        let run = conn
            .query_row(
                "SELECT pipeline, status, definition, started_at, finished_at, error, params FROM pipeline_runs WHERE run_id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
            )
            .optional()?;
        let Some(run) = run else { return Ok(None) };
        let mut stmt = conn.prepare(
            "SELECT task, status, attempts, result, error, reason, started_at, finished_at, duration_ms FROM pipeline_tasks WHERE run_id = ?1",
        )?;
        let tasks = stmt
            .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Some((run, tasks)))
    })
    .await?;
    let Some(((pipeline, status, definition, started_at, finished_at, error, params), rows)) =
        found
    else {
        return Ok(None);
    };
    let d: Value = serde_json::from_str(&definition).map_err(|e| corrupt("pipeline run", e))?;
    let levels = levels(tasks_of(&d));
    let params = match serde_json::from_str(&params) {
        Ok(Value::Object(p)) => p,
        _ => return Err(corrupt("pipeline run", "its params are not a mapping")),
    };
    let tasks = rows
        .into_iter()
        .map(
            |(
                task,
                status,
                attempts,
                result,
                error,
                reason,
                started_at,
                finished_at,
                duration_ms,
            )| {
                let spec = tasks_of(&d).get(&task).cloned().unwrap_or_default();
                let mut out = task_out(
                    &task,
                    levels.get(&task).copied().unwrap_or(0),
                    &spec,
                    &status,
                );
                out.attempts = attempts;
                out.result = result.and_then(|r| serde_json::from_str(&r).ok());
                out.error = error;
                out.reason = reason;
                out.started_at = started_at;
                out.finished_at = finished_at;
                out.duration_ms = duration_ms;
                (task, out)
            },
        )
        .collect();
    Ok(Some(RunOut {
        run_id: run_id.to_string(),
        pipeline,
        status,
        dry_run: false,
        params,
        started_at,
        finished_at,
        error,
        tasks,
    }))
}
