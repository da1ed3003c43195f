//! The queue's workers: claim a job under a lease, run it through the one pipeline
//! ([`crate::pipeline::Analysis`]), mark it finished. `maljan worker` runs a pool of them, and so
//! does `maljan console` (`--workers N`) on its own database; `maljan analyze` holds a lease on its
//! own job the same way ([`hold_lease`]), so every job is a queue job whoever runs it.
//!
//! A worker that dies (kill -9) stops renewing: when its lease runs out any worker (a console
//! started again, say) takes the job over; the dead attempt's rows are kept aside by the ledger,
//! so the finishing attempt's calls are each in the job's ledger once.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use maljan_client::{
    CancelOutcome, Event, EventStream, JobEvent, Lease, Ledger, QueuedJob, Runtime,
};
use tokio_util::sync::CancellationToken;

use crate::{
    JobEvents,
    pipeline::{Analysis, Request, SampleSource, Setup, StartError},
};

/// What each job of a pool runs with, read when it starts: a console reloads its config (a
/// server added) and the next job sees it, while the jobs running keep theirs.
pub trait JobSource: Send + Sync {
    fn analysis(&self) -> Result<Analysis, String>;
}

/// A fixed runtime and setup (`maljan worker`).
pub struct Fixed(
    pub Arc<Runtime>,
    pub Arc<Setup>,
    pub maljan_client::SampleStore,
);

impl JobSource for Fixed {
    fn analysis(&self) -> Result<Analysis, String> {
        Ok(Analysis {
            runtime: self.0.clone(),
            setup: self.1.clone(),
            store: Some(self.2.clone()),
        })
    }
}

/// What a front end hears of the jobs its pool runs (all default to nothing).
pub trait Hooks: Send + Sync {
    /// A job starts in this process; `cancel` stops it.
    fn started(&self, _job_id: &str, _cancel: &CancellationToken) {}
    /// One of its events was stored.
    fn event(&self, _job_id: &str, _event: JobEvent) {}
    /// It has ended here (finished, given back, or lost).
    fn ended(&self, _job_id: &str) {}
}

/// No hooks.
pub struct NoHooks;
impl Hooks for NoHooks {}

/// How a pool works.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// This pool's name in the queue (`host-pid`, `console-host-pid`).
    pub name: String,
    pub concurrency: usize,
    pub lease_ms: i64,
    /// Times a job is tried again when its sample cannot be fetched.
    pub retries: i64,
    /// The wait before such a retry, times the attempt.
    pub retry_after_ms: i64,
    /// Stop once no job is queued or running anywhere.
    pub exit_when_idle: bool,
}

/// A worker pool on one ledger.
pub struct Pool {
    ledger: Ledger,
    source: Arc<dyn JobSource>,
    hooks: Arc<dyn Hooks>,
    opts: PoolOptions,
    /// The cancel token of each job this pool runs, by job id.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Woken when a job is enqueued in this process: claimed at once, not at the next poll.
    wake: tokio::sync::Notify,
}

/// `host-pid`: a name for this process in the queue.
pub fn process_name(prefix: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    if prefix.is_empty() {
        format!("{host}-{}", std::process::id())
    } else {
        format!("{prefix}-{host}-{}", std::process::id())
    }
}

impl Pool {
    pub fn new(
        ledger: Ledger,
        source: Arc<dyn JobSource>,
        hooks: Arc<dyn Hooks>,
        opts: PoolOptions,
    ) -> Arc<Self> {
        Arc::new(Self {
            ledger,
            source,
            hooks,
            opts,
            running: Mutex::default(),
            wake: tokio::sync::Notify::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.opts.name
    }

    /// A job was enqueued: look for it now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Cancels a job this pool runs; false when it runs none by that id.
    pub fn cancel_here(&self, job_id: &str) -> bool {
        match self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(job_id)
        {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Claims and runs jobs until `stop` (or, with `exit_when_idle`, until the queue is empty).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let listener = self.clone();
        self.ledger
            .listen_for_cancels(move |id| {
                listener.cancel_here(id);
            })
            .map_err(|e| e.to_string())?;
        let slots = Arc::new(tokio::sync::Semaphore::new(self.opts.concurrency.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        while !stop.is_cancelled() {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
                _ = stop.cancelled() => break,
            };
            let ledger = self.ledger.clone();
            let (name, lease) = (self.opts.name.clone(), self.opts.lease_ms);
            let claimed = tokio::task::spawn_blocking(move || ledger.claim(&name, lease))
                .await
                .map_err(|e| e.to_string())?;
            match claimed {
                Ok(Some(job)) => {
                    let pool = self.clone();
                    tasks.spawn(async move {
                        pool.run_job(job).await;
                        drop(permit);
                    });
                }
                Ok(None) => {
                    drop(permit);
                    while tasks.try_join_next().is_some() {}
                    if self.opts.exit_when_idle && tasks.is_empty() {
                        // Idle means nothing left anywhere: a job running under another
                        // worker's lease may still come back (its worker died).
                        let ledger = self.ledger.clone();
                        let active =
                            tokio::task::spawn_blocking(move || ledger.active_queued_jobs())
                                .await
                                .map_err(|e| e.to_string())?;
                        if active.is_ok_and(|n| n == 0) {
                            break;
                        }
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                        _ = self.wake.notified() => {}
                        _ = stop.cancelled() => {}
                    }
                }
                Err(e) => {
                    // The database is away (restarting, unreachable): wait and try again.
                    drop(permit);
                    tracing::warn!("claiming a job: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        while tasks.join_next().await.is_some() {}
        Ok(())
    }

    async fn run_job(self: &Arc<Self>, job: QueuedJob) {
        let id = job.job_id.clone();
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), cancel.clone());
        self.hooks.started(&id, &cancel);
        let lease = hold_lease(
            self.ledger.clone(),
            id.clone(),
            self.opts.name.clone(),
            self.opts.lease_ms,
            cancel.clone(),
        );
        let hooks = self.hooks.clone();
        let hook_id = id.clone();
        let events = EventStream::new();
        let recording = JobEvents::record(self.ledger.clone(), id.clone(), &events, move |e| {
            hooks.event(&hook_id, e)
        });
        let outcome = match self.source.analysis() {
            Ok(analysis) => {
                let req = Request {
                    job_id: id.clone(),
                    label: format!("sample {}", job.sample_name),
                    sample: SampleSource::Stored {
                        sha256: job.sample_sha256.clone(),
                        name: job.sample_name.clone(),
                    },
                    servers: (!job.servers.is_empty()).then(|| job.servers.clone()),
                    agent: job.agent,
                    recursion: Default::default(),
                    keep_artifacts: None,
                    cancel,
                };
                analysis
                    .run(req, events.clone())
                    .await
                    .map(|o| o.report.status.as_str().to_string())
            }
            Err(e) => Err(StartError::Other(e)),
        };
        // A sample that could not be fetched is the store's failure, not the sample's: tried again.
        let retry = match &outcome {
            Err(StartError::SampleUnavailable(why)) if job.attempts <= self.opts.retries => {
                let after_ms = self.opts.retry_after_ms * job.attempts;
                events.emit(Event::Retry {
                    attempt: job.attempts,
                    reason: format!("fetching the sample: {why}"),
                    after_s: after_ms / 1000,
                });
                Some((format!("fetching the sample: {why}"), after_ms))
            }
            Err(e) => {
                events.emit(crate::events::failed(&e.to_string()));
                None
            }
            Ok(_) => None,
        };
        recording.finish().await;
        let lost = lease.stop();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        let ledger = self.ledger.clone();
        let worker = self.opts.name.clone();
        if lost {
            tracing::warn!("job {id}: lease lost, its result is not kept");
        } else if let Some((reason, after_ms)) = retry {
            tracing::warn!(
                "job {id}: attempt {} failed ({reason}); tried again in {} s",
                job.attempts,
                after_ms / 1000
            );
            let not_before = maljan_client::time::now_ms() + after_ms;
            let id2 = id.clone();
            let put_back = tokio::task::spawn_blocking(move || {
                ledger.retry_queued(&id2, &worker, &reason, not_before)
            })
            .await;
            if !matches!(put_back, Ok(Ok(true))) {
                tracing::warn!("job {id}: could not be queued again: {put_back:?}");
            }
        } else {
            let (state, error) = match &outcome {
                Ok(state) => (state.clone(), None),
                Err(e) => ("failed".to_string(), Some(e.to_string())),
            };
            if let Some(e) = &error {
                tracing::warn!("job {id}: failed: {e}");
            }
            let id2 = id.clone();
            let done = tokio::task::spawn_blocking(move || {
                if error.is_some() {
                    let _ = ledger.finish_job(&id2, "failed");
                }
                ledger.finish_queued(&id2, &worker, &state, error.as_deref())
            })
            .await;
            if !matches!(done, Ok(Ok(true))) {
                tracing::warn!("job {id}: could not be marked finished: {done:?}");
            }
        }
        self.hooks.ended(&id);
    }
}

/// A lease being renewed for a running job.
pub struct LeaseHolder {
    task: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl LeaseHolder {
    /// Stops renewing; says whether the lease was lost meanwhile (another worker has the job).
    pub fn stop(self) -> bool {
        self.task.abort();
        self.lost.load(Ordering::Relaxed)
    }
}

/// Renews `worker`'s lease on `job_id` every third of it; a cancel asked for (`maljan jobs
/// cancel`, the console) or the lease lost cancels the run through `cancel`.
pub fn hold_lease(
    ledger: Ledger,
    job_id: String,
    worker: String,
    lease_ms: i64,
    cancel: CancellationToken,
) -> LeaseHolder {
    let lost = Arc::new(AtomicBool::new(false));
    let flag = lost.clone();
    let task = tokio::spawn(async move {
        let every = Duration::from_millis((lease_ms / 3).max(100) as u64);
        // The first look is at once: a cancel asked for between the claim and this run's start
        // (when no listener knew the job yet) must still reach a run shorter than `every`.
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                tokio::time::sleep(every).await;
            }
            let (l, id, w) = (ledger.clone(), job_id.clone(), worker.clone());
            match tokio::task::spawn_blocking(move || l.renew(&id, &w, lease_ms)).await {
                Ok(Ok(Lease::Held)) => {}
                Ok(Ok(Lease::CancelRequested)) => cancel.cancel(),
                Ok(Ok(Lease::Lost)) => {
                    flag.store(true, Ordering::Relaxed);
                    cancel.cancel();
                    return;
                }
                // Not renewed this time (the database is away); the next tick tries again.
                Ok(Err(e)) => tracing::warn!("renewing the lease of {job_id}: {e}"),
                Err(_) => return,
            }
        }
    });
    LeaseHolder { task, lost }
}

/// Cancels a queued job: dequeued if no worker has it yet (its event stream then ends with a
/// `done` saying so), else its worker is told.
pub async fn cancel(ledger: &Ledger, job_id: &str) -> Result<CancelOutcome, String> {
    let (l, id) = (ledger.clone(), job_id.to_string());
    let outcome = tokio::task::spawn_blocking(move || l.cancel_queued(&id))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if outcome == CancelOutcome::Dequeued {
        // The job's report and last event say so, as for a job that ran.
        let (l, id) = (ledger.clone(), job_id.to_string());
        let _ = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let q = l
                .queued_job(&id)
                .map_err(|e| e.to_string())?
                .ok_or("gone")?;
            let report = unstarted_report(&q, "cancelled before it started");
            l.save_report(&id, &maljan_triage::render::json(&report))
                .map_err(|e| e.to_string())?;
            let done = Event::Done {
                status: "cancelled".into(),
                verdict: None,
                error: Some("cancelled before it started".into()),
            };
            l.append_job_event(&id, done.kind(), &done.data().to_string())
                .map_err(|e| e.to_string())?;
            Ok(())
        })
        .await;
    }
    Ok(outcome)
}

/// The report of a queued job that never ran: cancelled, no step, the reason as its one
/// degradation.
pub fn unstarted_report(q: &QueuedJob, why: &str) -> maljan_triage::Report {
    use maljan_triage::report::{SCHEMA, SampleInfo, Status};
    maljan_triage::Report {
        schema: SCHEMA.to_string(),
        verdict: None,
        job_id: q.job_id.clone(),
        generated_at: maljan_client::time::rfc3339_ms(maljan_client::time::now_ms()),
        maljan_version: env!("CARGO_PKG_VERSION").to_string(),
        status: Status::Cancelled,
        duration_ms: 0.0,
        sample: SampleInfo {
            name: q.sample_name.clone(),
            path: q.sample_name.clone(),
            size: q.sample_size.max(0) as u64,
            sha256: q.sample_sha256.clone(),
            hashes: Default::default(),
            kind: None,
            description: None,
            mime: None,
        },
        servers: Vec::new(),
        degradations: vec![why.to_string()],
        failures: Vec::new(),
        unavailable: Vec::new(),
        steps: Vec::new(),
        agent: None,
        children: Vec::new(),
        recursion: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_held_is_renewed_and_a_cancel_asked_for_reaches_the_run() {
        let ledger = Ledger::open_in_memory();
        ledger
            .enqueue_running(
                maljan_client::NewQueuedJob {
                    job_id: "j".into(),
                    label: "t".into(),
                    sample_sha256: "a".repeat(64),
                    sample_name: "s".into(),
                    sample_size: 1,
                    servers: vec![],
                    agent: false,
                },
                "me",
                300,
            )
            .unwrap();
        let cancel = CancellationToken::new();
        let held = hold_lease(ledger.clone(), "j".into(), "me".into(), 300, cancel.clone());
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Renewed: nobody else can claim it although 300 ms have passed.
        assert!(ledger.claim("other", 1000).unwrap().is_none());
        assert_eq!(cancel_outcome(&ledger, "j").await, CancelOutcome::Signalled);
        tokio::time::timeout(Duration::from_secs(2), cancel.cancelled())
            .await
            .expect("the cancel reaches the run at the next renewal");
        assert!(!held.stop());
    }

    async fn cancel_outcome(ledger: &Ledger, id: &str) -> CancelOutcome {
        cancel(ledger, id).await.unwrap()
    }

    #[tokio::test]
    async fn a_job_cancelled_before_it_starts_ends_its_event_stream() {
        let ledger = Ledger::open_in_memory();
        ledger
            .enqueue(maljan_client::NewQueuedJob {
                job_id: "q".into(),
                label: "t".into(),
                sample_sha256: "a".repeat(64),
                sample_name: "s".into(),
                sample_size: 1,
                servers: vec![],
                agent: false,
            })
            .unwrap();
        assert_eq!(cancel_outcome(&ledger, "q").await, CancelOutcome::Dequeued);
        let events = ledger.job_events("q", 0).unwrap();
        assert_eq!(events.last().unwrap().kind, "done");
        assert_eq!(ledger.job("q").unwrap().unwrap().status, "cancelled");
        let report: maljan_triage::Report =
            serde_json::from_str(&ledger.report("q").unwrap().unwrap()).unwrap();
        assert_eq!(report.status, maljan_triage::Status::Cancelled);
    }
}
