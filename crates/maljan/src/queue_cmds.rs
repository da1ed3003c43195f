//! `maljan db migrate`, `maljan submit`, `maljan worker` and `maljan jobs`: the queue's front
//! ends. The queue itself (claims, leases, cancel) is maljan-client's ledger; samples wait in its
//! sample store; a worker is maljan-agent's worker pool, running each job through the one
//! pipeline `maljan analyze` and the console run.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use maljan_agent::{
    pipeline::{ModelChoice, Scope, Setup, root_builtins},
    worker::{self, Fixed, NoHooks, Pool, PoolOptions},
};
use maljan_client::{CancelOutcome, Config, Ledger, NewQueuedJob, Runtime, SampleStore};
use tokio_util::sync::CancellationToken;

use crate::{
    client_cmds::ConfigArg,
    show::{self, visible},
};

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
        /// Only jobs in this state.
        #[arg(long, value_name = "S", value_parser = ["queued", "running", "complete", "degraded", "failed", "cancelled"])]
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

pub async fn jobs(cmd: JobsCommand) -> anyhow::Result<ExitCode> {
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
                println!("{}", show::json(&rows)?);
            } else {
                // A sample's name is its submitter's (or its archive's) to choose.
                for j in rows {
                    println!(
                        "{}  {:<9} attempts {}  {}  {}",
                        visible(&j.job_id),
                        visible(&j.state),
                        j.attempts,
                        visible(j.worker.as_deref().unwrap_or("-")),
                        visible(&j.sample_name)
                    );
                }
            }
        }
        JobsCommand::Show { id, json, config } => {
            let ledger = open_ledger(&Config::load(config.config.as_deref())?)?;
            let (Some(queued), job) = (ledger.queued_job(&id)?, ledger.job(&id)?) else {
                bail!("no queued job {}", visible(&id));
            };
            if json {
                let v = serde_json::json!({"queue": queued, "job": job});
                println!("{}", show::json(&v)?);
            } else {
                println!(
                    "{}  {}  attempts {}",
                    visible(&queued.job_id),
                    visible(&queued.state),
                    queued.attempts
                );
                println!(
                    "sample {} ({}, {} bytes)",
                    visible(&queued.sample_name),
                    visible(&queued.sample_sha256),
                    queued.sample_size
                );
                // A job's error and degradations quote servers and models.
                if let Some(e) = &queued.error {
                    println!("error: {}", visible(e));
                }
                if let Some(j) = job {
                    println!("calls {} (failed {})", j.calls, j.failed_calls);
                    for d in &j.degradations {
                        println!("    degraded: {}", visible(d));
                    }
                }
            }
        }
        JobsCommand::Cancel { id, config } => {
            let ledger = open_ledger(&Config::load(config.config.as_deref())?)?;
            let cancelled = worker::cancel(&ledger, &id)
                .await
                .map_err(anyhow::Error::msg)?;
            match cancelled {
                CancelOutcome::Dequeued => {
                    println!("{}: cancelled before it started", visible(&id))
                }
                CancelOutcome::Signalled => println!("{}: its worker is stopping it", visible(&id)),
                CancelOutcome::Finished => println!("{}: already finished", visible(&id)),
                CancelOutcome::NotFound => bail!("no queued job {}", visible(&id)),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config.config.as_deref())?;
    // The built-in servers reach every job's private directory.
    root_builtins(&mut config, Scope::Shared);
    let setup = Setup::discover(&config, None, ModelChoice::Configured(None))
        .map_err(anyhow::Error::msg)?;
    let store = SampleStore::from_url(&args.samples.url, &config.data_dir)?;
    let runtime = Runtime::open(config)?;
    if let Some(addr) = args.metrics_listen {
        crate::worker_metrics::serve(addr, runtime.clone()).await?;
    }
    let opts = PoolOptions {
        name: worker::process_name(""),
        concurrency: args.concurrency.max(1),
        lease_ms: (args.lease_s.max(1) * 1000) as i64,
        retries: args.retries.max(0),
        retry_after_ms: (args.retry_after_s * 1000) as i64,
        exit_when_idle: args.exit_when_idle,
    };
    eprintln!(
        "worker {}: {} at a time, lease {} s",
        opts.name, opts.concurrency, args.lease_s
    );
    let pool = Pool::new(
        runtime.ledger().clone(),
        Arc::new(Fixed(runtime.clone(), Arc::new(setup), store)),
        Arc::new(NoHooks),
        opts,
    );
    let stopped = pool.run(CancellationToken::new()).await;
    runtime.shutdown().await;
    stopped.map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}
