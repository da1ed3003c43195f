//! The scheduler of FA_schedule_*: one task per server (started by the registry's start hook)
//! sleeps until the earliest due time, fires what is due and records every run
//! (`schedule_runs`: state, start, duration, error).
//!
//! Catch-up rule: a due time that passed while nothing could fire it (the server was down, the
//! host slept) fires the job once, as soon as the server runs again (trigger `catch_up`),
//! however many due times were missed; the next due time is then the first one after now. A
//! run still marked started when the server starts was cut off by the stop and is recorded as
//! failed. Overlap guard: unless `allow_overlap`, a firing while the job's previous run is
//! still going is recorded as `skipped`. `timeout` ends a run as `timeout`; FA_schedule_cancel
//! as `cancelled`.

use std::{collections::HashMap, sync::Arc, time::Instant};

use chrono::{DateTime, Utc};
use maljan_server::{ToolContext, ToolError};
use rusqlite::params;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{
    db, iso, pipeline,
    schedule::{JobSpec, Target, load_job, load_jobs},
};
use crate::{Config, executor};

#[derive(Default)]
pub(crate) struct Scheduler {
    /// Woken when a job is added or removed, so the loop recomputes its next wake-up.
    pub(super) changed: tokio::sync::Notify,
    /// The runs in progress of each job: their ids and how to cancel them.
    live: std::sync::Mutex<HashMap<String, Vec<(String, CancellationToken)>>>,
}

impl Scheduler {
    pub(super) fn live(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(String, CancellationToken)>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One firing of a job.
#[derive(Serialize, JsonSchema, Clone, Debug)]
pub(crate) struct RunRecord {
    run_id: String,
    job: String,
    /// cron, catch_up or manual.
    trigger: String,
    /// actions or pipeline.
    target: String,
    /// started, completed, failed, skipped, timeout, cancelled or refused (a loop, too deep, or
    /// fired too often: `error` says which).
    state: String,
    /// The due time it fired for (none for a manual run).
    scheduled_at: Option<String>,
    started_at: String,
    finished_at: Option<String>,
    duration_ms: Option<i64>,
    error: Option<String>,
    reason: Option<String>,
}

pub(super) fn record_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
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

pub(super) const RUN_COLUMNS: &str = "run_id, job, trigger, target, state, scheduled_at, started_at, finished_at, duration_ms, error, reason";

pub(super) async fn cancel(c: &Arc<Config>, name: &str) -> Result<Vec<RunRecord>, ToolError> {
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
/// `parent` is the call that fired it (FA_schedule_run), None for the timer: the run counts
/// one level deeper than that call and carries its origins, so a job that fires itself,
/// directly or through other jobs, watches or pipelines, is refused — and so is a job fired
/// more often than [`super::limits::RUNS_PER_WINDOW`] times a minute. A refusal is returned as
/// the error and recorded once as a `refused` run.
pub(super) async fn fire(
    c: &Arc<Config>,
    spec: JobSpec,
    scheduled: Option<DateTime<Utc>>,
    trigger: &str,
    parent: Option<&ToolContext>,
) -> Result<RunRecord, ToolError> {
    let handle = c.automation.handle()?.clone();
    if handle.stopped().is_cancelled() {
        return Err(ToolError::tool_failed(
            "the server is stopping; the run was not started",
        ));
    }
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let started = c.automation.clock.now();
    let token = handle.stopped().child_token();
    let origin = format!("schedule:{}", spec.name);
    let admitted = handle
        .context_for(parent, &origin, token.clone())
        .map_err(|e| (c.automation.limits.first_loop(&e.message), e))
        .and_then(|ctx| c.automation.limits.admit(&origin, started).map(|()| ctx));
    let ctx = match admitted {
        Ok(ctx) => ctx,
        Err((first, e)) => {
            if first {
                let row = RunRecord {
                    run_id,
                    job: spec.name.clone(),
                    trigger: trigger.to_string(),
                    target: spec.target_name().to_string(),
                    state: "refused".into(),
                    scheduled_at: scheduled.map(iso),
                    started_at: iso(started),
                    finished_at: Some(iso(started)),
                    duration_ms: Some(0),
                    error: Some(e.message.clone()),
                    reason: Some(e.remediation.clone()),
                };
                insert_run(c, row).await?;
            }
            return Err(e);
        }
    };
    let reason =
        (ctx.origin().len() > 1).then(|| format!("started by {}", ctx.origin().join(" → ")));
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
        reason: if overlapping {
            Some("overlap: the job's previous run is still going".to_string())
        } else {
            reason
        },
    };
    insert_run(c, record.clone()).await?;
    if overlapping {
        return Ok(record);
    }
    let c2 = c.clone();
    tokio::spawn(async move {
        let clock = Instant::now();
        let timeout = spec.timeout.map(std::time::Duration::from_secs_f64);
        let work = run_target(&c2, &ctx, &spec);
        let (state, error) = tokio::select! {
            outcome = async {
                match timeout {
                    Some(t) => tokio::time::timeout(t, work).await.unwrap_or_else(|_| Err(("timeout", format!("the run took longer than its timeout of {} s", t.as_secs_f64())))),
                    None => work.await,
                }
            } => match outcome {
                Ok(()) => ("completed", None),
                // Cancelled runs end their calls with an error ("the call was cancelled") as the
                // token fires; that is the cancel, whichever branch the select saw first.
                Err(_) if token.is_cancelled() => ("cancelled", None),
                Err((state, e)) => (state, Some(e)),
            },
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

async fn insert_run(c: &Arc<Config>, row: RunRecord) -> Result<(), ToolError> {
    db(c, move |conn| {
        conn.execute(
            &format!("INSERT INTO schedule_runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
            params![row.run_id, row.job, row.trigger, row.target, row.state, row.scheduled_at, row.started_at, row.finished_at, row.duration_ms, row.error, row.reason],
        )
    })
    .await
    .map(drop)
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
        // A stopped server fires nothing more: its state directory may already belong to the
        // server that replaced it, which must be the one to catch up. `biased` makes the stop
        // win over a wake that became due at the same moment.
        while !stopped.is_cancelled() {
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
                biased;
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
                // A stopping server leaves the due time as it is, for the next server to fire.
                if c.automation.handle()?.stopped().is_cancelled() {
                    return Ok(None);
                }
                // Once however many were missed; "catch_up" when it is late by a minute or more.
                let trigger = if now - due >= chrono::Duration::minutes(1) {
                    "catch_up"
                } else {
                    "cron"
                };
                // The next due time is stored first: a run that ends at once never sees it stale.
                let name = spec.name.clone();
                set_next_due(c, name.clone(), next).await?;
                if let Err(e) = fire(c, spec, Some(due), trigger, None).await {
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
