//! `maljan db migrate`, `maljan submit`, `maljan worker` and `maljan jobs`: the queue's front
//! ends. The queue itself (claims, leases, cancel) is maljan-client's ledger; samples wait in its
//! sample store; a worker runs each job as `maljan analyze` does.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use maljan_agent::{AgentOptions, JobEvents, Models, Stages, llm};
use maljan_client::{
    CancelOutcome, Config, JobSpec, KeySource, Lease, Ledger, NewQueuedJob, QueuedJob, Runtime,
    SampleStore,
};
use maljan_triage::{Plan, TriageOptions, render};
use tokio_util::sync::CancellationToken;

use crate::client_cmds::ConfigArg;

#[derive(Subcommand)]
pub enum DbCommand {
    /// Bring the schema up to date (also done whenever a command opens a database behind).
    Migrate(ConfigArg),
}

#[derive(Args)]
pub struct SubmitArgs {
    /// The sample file.
    pub sample: PathBuf,
    /// Servers to use, comma-separated (default: every enabled server).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub servers: Option<Vec<String>>,
    /// Run the agent stages (the configured model) after triage.
    #[arg(long)]
    pub agent: bool,
    #[command(flatten)]
    pub samples: SamplesArg,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Args)]
pub struct SamplesArg {
    /// Where samples wait for their workers: s3://BUCKET/PREFIX, gs://…, az://… (credentials and
    /// endpoint from AWS_* / GOOGLE_* / AZURE_*); default: the data directory's samples folder.
    #[arg(
        long = "samples",
        env = "MALJAN_SAMPLES_URL",
        default_value = "",
        value_name = "URL"
    )]
    pub url: String,
}

#[derive(Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub samples: SamplesArg,
    /// Jobs run at once by this worker.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub concurrency: usize,
    /// How long a claim holds without renewal; renewed every third of it.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    pub lease_s: u64,
    /// How many times a job is tried again when its sample cannot be fetched (the store away or
    /// unreachable), before it fails with the reason.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub retries: i64,
    /// The wait before such a retry, times the attempt (10 s, then 20 s, …).
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub retry_after_s: u64,
    /// Stop once no job is queued or running anywhere (tests, batch runs).
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Serve Prometheus `/metrics` here (calls, errors by code, breaker rests, queue depth,
    /// upload bytes), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Subcommand)]
pub enum JobsCommand {
    /// The queue, newest first.
    List {
        /// Only jobs in this state (queued, running, complete, degraded, failed, cancelled).
        #[arg(long, value_name = "S")]
        status: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// One job: its queue state and its ledger summary.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Cancel a job: dequeued if it has not started, else its worker stops it.
    Cancel {
        id: String,
        #[command(flatten)]
        config: ConfigArg,
    },
}

fn open_ledger(config: &Config) -> anyhow::Result<Ledger> {
    Ok(Ledger::connect(
        &config.database_url(),
        config.core.ledger.result_cap_bytes,
    )?)
}

pub fn db(cmd: DbCommand) -> anyhow::Result<ExitCode> {
    let DbCommand::Migrate(c) = cmd;
    let config = Config::load(c.config.as_deref())?;
    let url = config.database_url();
    let (before, now) = Ledger::migrate(&url)?;
    let shown = maljan_client::DatabaseUrl::parse(&url)
        .map(|u| u.redacted())
        .unwrap_or_default();
    if before == now {
        println!("{shown}: schema at version {now}, nothing to do");
    } else {
        println!("{shown}: schema migrated to version {now} (from {before})");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(args.config.config.as_deref())?;
    let meta = std::fs::metadata(&args.sample)
        .with_context(|| format!("cannot read the sample {}", args.sample.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", args.sample.display());
    }
    if let Some(list) = &args.servers
        && let Some(bad) = list.iter().find(|n| config.server(n).is_none())
    {
        bail!("--servers: no server named '{bad}' is configured");
    }
    let ledger = open_ledger(&config)?;
    let stored = SampleStore::from_url(&args.samples.url, &config.data_dir)?
        .store(&args.sample)
        .await?;
    let name = args
        .sample
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sample".into());
    let job_id = format!("job_{}", uuid::Uuid::new_v4().simple());
    ledger.enqueue(NewQueuedJob {
        job_id: job_id.clone(),
        label: format!("sample {name}"),
        sample_sha256: stored.sha256,
        sample_name: name,
        sample_size: stored.size as i64,
        servers: args.servers.unwrap_or_default(),
        agent: args.agent,
    })?;
    // The id on stdout: what a script wants from this command.
    println!("{job_id}");
    Ok(ExitCode::SUCCESS)
}

pub fn jobs(cmd: JobsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        JobsCommand::List {
            status,
            limit,
            json,
            config,
        } => {
            let ledger = open_ledger(&Config::load(config.config.as_deref())?)?;
            let rows = ledger.queued_jobs(status.as_deref(), limit)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for j in rows {
                    println!(
                        "{}  {:<9} attempts {}  {}  {}",
                        j.job_id,
                        j.state,
                        j.attempts,
                        j.worker.as_deref().unwrap_or("-"),
                        j.sample_name
                    );
                }
            }
        }
        JobsCommand::Show { id, json, config } => {
            let ledger = open_ledger(&Config::load(config.config.as_deref())?)?;
            let (Some(queued), job) = (ledger.queued_job(&id)?, ledger.job(&id)?) else {
                bail!("no queued job {id}");
            };
            if json {
                let v = serde_json::json!({"queue": queued, "job": job});
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "{}  {}  attempts {}",
                    queued.job_id, queued.state, queued.attempts
                );
                println!(
                    "sample {} ({}, {} bytes)",
                    queued.sample_name, queued.sample_sha256, queued.sample_size
                );
                if let Some(e) = &queued.error {
                    println!("error: {e}");
                }
                if let Some(j) = job {
                    println!("calls {} (failed {})", j.calls, j.failed_calls);
                    for d in &j.degradations {
                        println!("    degraded: {d}");
                    }
                }
            }
        }
        JobsCommand::Cancel { id, config } => {
            let ledger = open_ledger(&Config::load(config.config.as_deref())?)?;
            match ledger.cancel_queued(&id)? {
                CancelOutcome::Dequeued => println!("{id}: cancelled before it started"),
                CancelOutcome::Signalled => println!("{id}: its worker is stopping it"),
                CancelOutcome::Finished => println!("{id}: already finished"),
                CancelOutcome::NotFound => bail!("no queued job {id}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What every job of one worker shares.
struct Shared {
    runtime: Arc<Runtime>,
    store: SampleStore,
    work_dir: PathBuf,
    plan: Plan,
    stages: Stages,
    models: Option<Arc<Models>>,
    worker: String,
    lease_ms: i64,
    retries: i64,
    retry_after_ms: i64,
    /// The cancel token of each job this worker runs, by job id.
    running: Mutex<HashMap<String, CancellationToken>>,
}

pub async fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config.config.as_deref())?;
    let work_dir = maljan_client::paths::work_dir(&config.data_dir).join("jobs");
    maljan_client::paths::ensure_private_dir(&work_dir)?;
    if !config.from_file {
        // The built-in analysis server reads samples from this worker's job directories.
        crate::analyze::allow_sample_dir(&mut config, &work_dir.join("sample"));
    }
    let (plan, _) = Plan::discover(None, &config.path)?;
    let stages = Stages::discover(&config.path).map_err(anyhow::Error::msg)?;
    let keys = KeySource::in_dir(&config.data_dir);
    let models = llm::resolve(&config, &keys, &llm::Overrides::from_env(), None)?
        .map(|e| Arc::new(Models::new(e)));
    let store = SampleStore::from_url(&args.samples.url, &config.data_dir)?;
    let runtime = Runtime::open(config)?;
    if let Some(addr) = args.metrics_listen {
        crate::worker_metrics::serve(addr, runtime.clone()).await?;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let shared = Arc::new(Shared {
        runtime,
        store,
        work_dir,
        plan,
        stages,
        models,
        worker: format!("{}-{}", host.trim(), std::process::id()),
        lease_ms: (args.lease_s.max(1) * 1000) as i64,
        retries: args.retries.max(0),
        retry_after_ms: (args.retry_after_s * 1000) as i64,
        running: Mutex::new(HashMap::new()),
    });
    let listener = shared.clone();
    shared.runtime.ledger().listen_for_cancels(move |id| {
        if let Some(t) = listener.running.lock().expect("running").get(id) {
            t.cancel();
        }
    })?;
    eprintln!(
        "worker {}: {} at a time, lease {} s",
        shared.worker, args.concurrency, args.lease_s
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let permit = slots.clone().acquire_owned().await?;
        let ledger = shared.runtime.ledger().clone();
        let (worker, lease) = (shared.worker.clone(), shared.lease_ms);
        let claimed = tokio::task::spawn_blocking(move || ledger.claim(&worker, lease)).await?;
        match claimed {
            Ok(Some(job)) => {
                let shared = shared.clone();
                tasks.spawn(async move {
                    run_job(&shared, job).await;
                    drop(permit);
                });
            }
            Ok(None) => {
                drop(permit);
                while tasks.try_join_next().is_some() {}
                if args.exit_when_idle && tasks.is_empty() {
                    // Idle means nothing left anywhere: a job running under another worker's
                    // lease may still come back (its worker died).
                    let ledger = shared.runtime.ledger().clone();
                    let active =
                        tokio::task::spawn_blocking(move || ledger.active_queued_jobs()).await?;
                    if active.is_ok_and(|n| n == 0) {
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                // The database is away (restarting, unreachable): wait and try again.
                drop(permit);
                tracing::warn!("claiming a job: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    shared.runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn run_job(shared: &Arc<Shared>, job: QueuedJob) {
    let cancel = CancellationToken::new();
    shared
        .running
        .lock()
        .expect("running")
        .insert(job.job_id.clone(), cancel.clone());
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renewer = tokio::spawn(renew_lease(
        shared.clone(),
        job.job_id.clone(),
        cancel.clone(),
        lost.clone(),
    ));
    let dir = shared.work_dir.join(&job.job_id);
    // The job's progress, for every console watching it (through the ledger).
    let (events, recorder) =
        JobEvents::record(shared.runtime.ledger().clone(), job.job_id.clone(), |_| {});
    let outcome = run_in(shared, &job, &dir, cancel, &events).await;
    // A sample that could not be fetched is the store's failure, not the sample's: tried again.
    let retry = match &outcome {
        Err(e) if e.is::<SampleUnavailable>() && job.attempts <= shared.retries => {
            let after_ms = shared.retry_after_ms * job.attempts;
            events.send(
                "retry",
                serde_json::json!({"attempt": job.attempts, "reason": format!("{e:#}"), "after_s": after_ms / 1000}),
            );
            Some((format!("{e:#}"), after_ms))
        }
        Err(e) => {
            events.failed(&format!("{e:#}"));
            None
        }
        Ok(_) => None,
    };
    drop(events);
    let _ = recorder.await;
    let _ = std::fs::remove_dir_all(&dir);
    renewer.abort();
    shared.running.lock().expect("running").remove(&job.job_id);
    if lost.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("job {}: lease lost, its result is not kept", job.job_id);
        return;
    }
    if let Some((reason, after_ms)) = retry {
        tracing::warn!(
            "job {}: attempt {} failed ({reason}); tried again in {} s",
            job.job_id,
            job.attempts,
            after_ms / 1000
        );
        let ledger = shared.runtime.ledger().clone();
        let (id, worker) = (job.job_id.clone(), shared.worker.clone());
        let not_before = maljan_client::time::now_ms() + after_ms;
        let put_back = tokio::task::spawn_blocking(move || {
            ledger.retry_queued(&id, &worker, &reason, not_before)
        })
        .await;
        if !matches!(put_back, Ok(Ok(true))) {
            tracing::warn!(
                "job {}: could not be queued again: {put_back:?}",
                job.job_id
            );
        }
        return;
    }
    let (state, error) = match &outcome {
        Ok(state) => (state.as_str(), None),
        Err(e) => ("failed", Some(format!("{e:#}"))),
    };
    let ledger = shared.runtime.ledger().clone();
    let (id, worker) = (job.job_id.clone(), shared.worker.clone());
    let error2 = error.clone();
    let state = state.to_string();
    let done = tokio::task::spawn_blocking(move || {
        if error2.is_some() {
            let _ = ledger.finish_job(&id, "failed");
        }
        ledger.finish_queued(&id, &worker, &state, error2.as_deref())
    })
    .await;
    if let Some(e) = error {
        tracing::warn!("job {}: failed: {e}", job.job_id);
    }
    if !matches!(done, Ok(Ok(true))) {
        tracing::warn!("job {}: could not be marked finished: {done:?}", job.job_id);
    }
}

/// Renews the lease every third of it; a cancel asked for, or the lease lost, cancels the run.
async fn renew_lease(
    shared: Arc<Shared>,
    job_id: String,
    cancel: CancellationToken,
    lost: Arc<std::sync::atomic::AtomicBool>,
) {
    let every = Duration::from_millis((shared.lease_ms / 3).max(100) as u64);
    loop {
        tokio::time::sleep(every).await;
        let ledger = shared.runtime.ledger().clone();
        let (id, worker, lease) = (job_id.clone(), shared.worker.clone(), shared.lease_ms);
        match tokio::task::spawn_blocking(move || ledger.renew(&id, &worker, lease)).await {
            Ok(Ok(Lease::Held)) => {}
            Ok(Ok(Lease::CancelRequested)) => cancel.cancel(),
            Ok(Ok(Lease::Lost)) => {
                lost.store(true, std::sync::atomic::Ordering::Relaxed);
                cancel.cancel();
                return;
            }
            // Not renewed this time (the database is away); the next tick tries again.
            Ok(Err(e)) => tracing::warn!("renewing the lease of {job_id}: {e}"),
            Err(_) => return,
        }
    }
}

/// Why a job's sample could not be fetched into its directory (the store away, unreachable or
/// refusing): an attempt that fails so is tried again (`--retries`).
#[derive(Debug)]
struct SampleUnavailable(String);

impl std::fmt::Display for SampleUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fetching the sample: {}", self.0)
    }
}

impl std::error::Error for SampleUnavailable {}

async fn run_in(
    shared: &Arc<Shared>,
    job: &QueuedJob,
    dir: &Path,
    cancel: CancellationToken,
    events: &JobEvents,
) -> anyhow::Result<String> {
    let _ = std::fs::remove_dir_all(dir);
    maljan_client::paths::ensure_private_dir(dir)?;
    // Only the name's last part, and never one that could climb: the name is the submitter's.
    let name = Path::new(&job.sample_name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n != ".." && n != ".")
        .unwrap_or_else(|| "sample".into());
    let sample = dir.join(name);
    if let Err(e) = shared.store.retrieve(&job.sample_sha256, &sample).await {
        return Err(anyhow::Error::new(SampleUnavailable(format!("{e:#}"))));
    }
    let spec = JobSpec {
        label: format!("sample {}", job.sample_name),
        sample: Some(sample),
        id: Some(job.job_id.clone()),
    };
    let run = shared.runtime.new_job(spec)?;
    events.watch_uploads(&run);
    let servers = (!job.servers.is_empty()).then(|| job.servers.clone());
    let report = maljan_agent::analyze(
        &run,
        AgentOptions {
            triage: TriageOptions {
                plan: shared.plan.clone(),
                servers,
                ..Default::default()
            },
            models: if job.agent {
                shared.models.clone()
            } else {
                None
            },
            stages: shared.stages.clone(),
            cancel,
        },
        events,
    )
    .await;
    drop(run);
    let ledger = shared.runtime.ledger().clone();
    let (id, json) = (report.job_id.clone(), render::json(&report));
    tokio::task::spawn_blocking(move || ledger.save_report(&id, &json)).await??;
    events.done(&report);
    Ok(report.status.as_str().to_string())
}
