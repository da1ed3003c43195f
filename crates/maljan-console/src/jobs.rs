//! The console's jobs: a submitted sample (page or API) is stored and queued on the console's
//! database like `maljan submit`'s, and run by the console's embedded workers (maljan-agent's
//! worker pool, through the one pipeline `maljan analyze` runs) or by any `maljan worker` on the
//! same database. What is the console's own is the front end: the sample arrives as an upload,
//! progress goes to the ledger's job events (so an event stream can resume from
//! `Last-Event-ID`) and, for a job run in this process, to a broadcast for live watchers.

use std::{
    convert::Infallible,
    path::PathBuf,
    sync::{Arc, Weak},
};

use axum::{
    extract::Multipart,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::{Stream, StreamExt, stream};
use maljan_agent::{
    Analysis, Setup,
    pipeline::ModelChoice,
    worker::{self, Pool, PoolOptions},
};
use maljan_client::{CancelOutcome, JobEvent, NewQueuedJob, job::new_job_id};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;

use crate::{
    servers::FieldErrors,
    state::{AppState, LiveJob, Problem},
};

/// A submitted sample, stored, waiting for its job.
#[derive(Debug)]
pub struct Submission {
    pub job_id: String,
    pub dir: PathBuf,
    pub path: PathBuf,
    pub name: String,
    pub servers: Option<Vec<String>>,
    pub agent: bool,
}

/// Why a submission was refused: a problem (413, 403, 400) or errors per field (422).
#[derive(Debug)]
pub enum Refused {
    Problem(Problem),
    Fields(FieldErrors),
}

impl From<Problem> for Refused {
    fn from(p: Problem) -> Self {
        Self::Problem(p)
    }
}

fn field(name: &str, problem: impl Into<String>) -> Refused {
    Refused::Fields(FieldErrors::from([(name.to_string(), problem.into())]))
}

/// Reads the multipart form (`sample`, optional `servers`, `agent`, and a page's `_csrf`, which
/// the guard has checked before the body reached here), streaming the sample to its own 0700
/// directory. Anything refused leaves nothing behind.
pub async fn read_submission(state: &AppState, mut form: Multipart) -> Result<Submission, Refused> {
    let job_id = new_job_id();
    let dir = state.samples_dir.join(&job_id);
    let result = read_fields(state, &mut form, &job_id, &dir).await;
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

async fn read_fields(
    state: &AppState,
    form: &mut Multipart,
    job_id: &str,
    dir: &std::path::Path,
) -> Result<Submission, Refused> {
    let malformed = |e: axum::extract::multipart::MultipartError| {
        Refused::Problem(Problem::new(
            400,
            format!("malformed multipart form: {}", e.body_text()),
        ))
    };
    let (mut sample, mut servers, mut agent) = (None, None::<Vec<String>>, true);
    while let Some(mut part) = form.next_field().await.map_err(malformed)? {
        let name = part.name().unwrap_or("").to_string();
        match name.as_str() {
            "sample" => {
                let original = part.file_name().unwrap_or("sample").to_string();
                let safe = maljan_client::staging::safe_name(&original);
                maljan_client::paths::create_private_dir(dir)
                    .map_err(|e| Problem::new(500, format!("cannot store the sample: {e}")))?;
                let path = dir.join(if safe.is_empty() {
                    "sample".into()
                } else {
                    safe
                });
                let size = write_capped(&mut part, &path, state.opts.max_sample_bytes).await?;
                if size == 0 {
                    return Err(field("sample", "the sample is empty"));
                }
                sample = Some((path, original));
            }
            "servers" => {
                let text = part.text().await.map_err(malformed)?;
                let list = servers.get_or_insert_with(Vec::new);
                list.extend(
                    text.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                );
            }
            "agent" => {
                let text = part.text().await.map_err(malformed)?;
                agent = match text.trim() {
                    "on" | "true" | "1" | "yes" => true,
                    "off" | "false" | "0" | "no" => false,
                    other => return Err(field("agent", format!("'{other}': expected on or off"))),
                };
            }
            // Checked by the guard (the first field of a page's form).
            "_csrf" => {}
            other => {
                return Err(field(
                    other,
                    "unknown field (expected sample, servers, agent)",
                ));
            }
        }
    }
    let Some((path, name)) = sample else {
        return Err(field(
            "sample",
            "no sample file in the form (field `sample`)",
        ));
    };
    let config = state.config();
    if let Some(list) = &servers {
        if list.is_empty() {
            servers = None;
        } else if let Some(unknown) = list.iter().find(|n| config.server(n).is_none()) {
            let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
            return Err(field(
                "servers",
                format!(
                    "no server named '{unknown}' is configured (configured: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(Submission {
        job_id: job_id.to_string(),
        dir: dir.to_path_buf(),
        path,
        name,
        servers,
        agent,
    })
}

async fn write_capped(
    part: &mut axum::extract::multipart::Field<'_>,
    path: &std::path::Path,
    max: u64,
) -> Result<u64, Refused> {
    use std::os::unix::fs::OpenOptionsExt;
    use tokio::io::AsyncWriteExt;
    let io = |e: std::io::Error| Problem::new(500, format!("cannot store the sample: {e}"));
    let std_file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    let mut file = tokio::fs::File::from_std(std_file);
    let mut size = 0u64;
    while let Some(chunk) = part
        .chunk()
        .await
        .map_err(|e| Problem::new(400, format!("malformed multipart form: {}", e.body_text())))?
    {
        size += chunk.len() as u64;
        if size > max {
            return Err(Refused::Problem(Problem::new(
                413,
                format!(
                    "the sample is larger than this console accepts ({max} bytes; `maljan console --max-sample-bytes`)"
                ),
            )));
        }
        file.write_all(&chunk).await.map_err(io)?;
    }
    file.flush().await.map_err(io)?;
    Ok(size)
}

/// What the console's jobs run with: its embedded workers and where samples wait for them.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Workers run in the console's process on its database (0: a console-only node beside
    /// remote `maljan worker`s).
    pub workers: usize,
    /// How long a worker's claim holds without renewal.
    pub lease_s: u64,
    /// The sample store (`maljan worker --samples`): empty = the data directory's folder.
    pub samples_url: String,
}

impl Default for JobOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            lease_s: 15,
            samples_url: std::env::var("MALJAN_SAMPLES_URL").unwrap_or_default(),
        }
    }
}

/// Queues the submitted sample as a job (its ledger row exists when this returns): the sample
/// goes to the sample store, the job to the queue on the console's database, where this
/// console's workers (or any `maljan worker` on it) run it.
pub async fn start(state: &Arc<AppState>, sub: Submission) -> Result<String, Problem> {
    let stored = state.store.store(&sub.path).await;
    let _ = std::fs::remove_dir_all(&sub.dir);
    let stored = stored.map_err(|e| Problem::new(500, format!("cannot store the sample: {e}")))?;
    let job = NewQueuedJob {
        job_id: sub.job_id.clone(),
        label: format!("console: {}", sub.name),
        sample_sha256: stored.sha256,
        sample_name: sub.name,
        sample_size: stored.size as i64,
        servers: sub.servers.unwrap_or_default(),
        agent: sub.agent,
    };
    let ledger = state.ledger.clone();
    tokio::task::spawn_blocking(move || ledger.enqueue(job))
        .await
        .map_err(|e| Problem::new(500, e.to_string()))?
        .map_err(|e| Problem::new(500, e.to_string()))?;
    if let Some(pool) = state.pool.get() {
        pool.wake();
    }
    Ok(sub.job_id)
}

/// Starts the console's embedded workers (`JobOptions::workers`) on its database.
pub fn start_workers(state: &Arc<AppState>) {
    let jobs = &state.opts.jobs;
    if jobs.workers == 0 {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no async runtime: the console's workers are not started");
        return;
    };
    let pool = Pool::new(
        state.ledger.clone(),
        Arc::new(ConsoleJobs(Arc::downgrade(state))),
        Arc::new(ConsoleJobs(Arc::downgrade(state))),
        PoolOptions {
            name: worker::process_name("console"),
            concurrency: jobs.workers,
            lease_ms: (jobs.lease_s.max(1) * 1000) as i64,
            retries: 2,
            retry_after_ms: 10_000,
            exit_when_idle: false,
        },
    );
    if state.pool.set(pool.clone()).is_err() {
        return;
    }
    handle.spawn(async move {
        if let Err(e) = pool.run(CancellationToken::new()).await {
            tracing::warn!("the console's workers stopped: {e}");
        }
    });
}

/// The console's side of its workers: each job runs on the runtime and config of the moment
/// (a server added since is in the next job), and its events reach the watchers in this process.
struct ConsoleJobs(Weak<AppState>);

impl worker::JobSource for ConsoleJobs {
    fn analysis(&self) -> Result<Analysis, String> {
        let state = self.0.upgrade().ok_or("the console is stopping")?;
        let runtime = state.runtime();
        let setup = Setup::discover(runtime.config(), None, ModelChoice::Configured(None))?;
        Ok(Analysis {
            runtime,
            setup: Arc::new(setup),
            store: Some(state.store.clone()),
        })
    }
}

impl worker::Hooks for ConsoleJobs {
    fn started(&self, job_id: &str, cancel: &CancellationToken) {
        if let Some(state) = self.0.upgrade() {
            let live = Arc::new(LiveJob {
                cancel: cancel.clone(),
                events: broadcast::channel(1024).0,
            });
            state
                .live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(job_id.to_string(), live);
        }
    }
    fn event(&self, job_id: &str, event: JobEvent) {
        if let Some(state) = self.0.upgrade() {
            if let Some(live) = state.live_job(job_id) {
                let _ = live.events.send(event);
            }
            // Streams that began before the job was claimed follow it in the ledger.
            let _ = state.announced.send(job_id.to_string());
        }
    }
    fn ended(&self, job_id: &str) {
        if let Some(state) = self.0.upgrade() {
            state
                .live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(job_id);
        }
    }
}

/// Cancels a job: 202 when it was queued or running (here or on another worker), 409 when it
/// had ended, 404 when unknown.
pub async fn cancel(state: &AppState, id: &str) -> Result<(), Problem> {
    if let Some(live) = state.live_job(id) {
        live.cancel.cancel();
        return Ok(());
    }
    match worker::cancel(&state.ledger, id).await {
        Ok(CancelOutcome::Dequeued | CancelOutcome::Signalled) => Ok(()),
        Ok(CancelOutcome::Finished) => Err(Problem::new(409, format!("job {id} is not running"))),
        // Not a queue job (`maljan call`, say): known, and not running here.
        Ok(CancelOutcome::NotFound) => match state.ledger.has_job(id) {
            Ok(true) => Err(Problem::new(409, format!("job {id} is not running"))),
            Ok(false) => Err(Problem::new(404, format!("no job '{id}'"))),
            Err(e) => Err(Problem::new(500, e.to_string())),
        },
        Err(e) => Err(Problem::new(500, e)),
    }
}

/// The job's events after number `after`, then the live ones until it ends. A job this process
/// runs is followed through its broadcast; a job another process runs (a worker, another console)
/// is followed in the ledger, woken by its announcements on PostgreSQL and read again every few
/// seconds besides (on SQLite, and for what a listener reconnecting missed).
pub fn events(
    state: &Arc<AppState>,
    id: &str,
    after: i64,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, Problem> {
    if !state
        .ledger
        .has_job(id)
        .map_err(|e| Problem::new(500, e.to_string()))?
    {
        return Err(Problem::new(404, format!("no job '{id}'")));
    }
    // Subscribe before reading the past, so nothing falls between the two.
    let rx = state.live_job(id).map(|l| l.events.subscribe());
    let announced = state.announced.subscribe();
    let past = state
        .ledger
        .job_events(id, after)
        .map_err(|e| Problem::new(500, e.to_string()))?;
    let last = past.last().map_or(after, |e| e.seq);
    let to_sse = |e: JobEvent| {
        Ok(Event::default()
            .id(e.seq.to_string())
            .event(e.kind)
            .data(e.data))
    };
    let ended = past.iter().any(|e| e.kind == "done");
    let live = match rx {
        _ if ended => stream::empty().boxed(),
        Some(rx) => BroadcastStream::new(rx)
            .filter_map(move |r| {
                futures::future::ready(match r {
                    Ok(e) if e.seq > last => Some(e),
                    _ => None,
                })
            })
            .boxed(),
        None => follow(state.clone(), id.to_string(), last, announced).boxed(),
    };
    let stream = stream::iter(past).chain(live).map(to_sse);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// How often a followed job's events are read again without an announcement.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The events of a job run elsewhere, after `last`, until its `done`.
fn follow(
    state: Arc<AppState>,
    id: String,
    last: i64,
    announced: broadcast::Receiver<String>,
) -> impl Stream<Item = JobEvent> {
    struct Follow {
        state: Arc<AppState>,
        id: String,
        last: i64,
        announced: broadcast::Receiver<String>,
        ended: bool,
        /// The job was seen finished with no `done` (cancelled before it started, say): one
        /// more look, for a `done` written just after the status, and the stream ends.
        seen_finished: bool,
    }
    let start = Follow {
        state,
        id,
        last,
        announced,
        ended: false,
        seen_finished: false,
    };
    stream::unfold(start, |mut f| async move {
        if f.ended {
            return None;
        }
        // Woken by an announcement of this job, a lagging receiver (something was missed), or
        // the clock.
        let _ = tokio::time::timeout(FOLLOW_EVERY, async {
            loop {
                match f.announced.recv().await {
                    Ok(job) if job == f.id => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        })
        .await;
        let (ledger, id, after) = (f.state.ledger.clone(), f.id.clone(), f.last);
        let fresh = tokio::task::spawn_blocking(move || ledger.job_events(&id, after))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        if let Some(e) = fresh.last() {
            f.last = e.seq;
        }
        f.ended = fresh.iter().any(|e| e.kind == "done") || f.seen_finished;
        if fresh.is_empty() && !f.ended {
            let (ledger, id) = (f.state.ledger.clone(), f.id.clone());
            let status = tokio::task::spawn_blocking(move || ledger.job(&id))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten()
                .map(|j| j.status);
            f.seen_finished = status.is_none_or(|s| s != "running" && s != "queued");
        }
        Some((stream::iter(fresh), f))
    })
    .flatten()
}
