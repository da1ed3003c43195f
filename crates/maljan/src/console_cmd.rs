//! `maljan console [--listen ADDR]`, `maljan console set-password` and `maljan console token`:
//! thin wrappers over maljan-console (options and printing only).

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Args, Subcommand};
use maljan_client::{Config, secrets};
use maljan_console::{AuthStore, ConsoleOptions};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConsoleArgs {
    #[command(subcommand)]
    pub command: Option<ConsoleCommand>,
    /// Where to serve the console. Off loopback a login is required (set-password first).
    #[arg(long, default_value = "127.0.0.1:8700", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The runtime config file (default: MALJAN_CONFIG, else <data dir>/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The largest sample a job accepts, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    pub max_sample_bytes: u64,
    /// Serve Prometheus `/metrics` (calls, errors by code, breaker rests, upload bytes) on the
    /// console's listener, behind its login.
    #[arg(long)]
    pub metrics: bool,
    /// Workers run in the console's process on its database (each job through the same pipeline
    /// as `maljan analyze`); 0 for a console-only node beside remote `maljan worker`s.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub workers: usize,
    /// How long a worker's claim on a job holds without renewal: a console killed mid-job has
    /// its job taken over (by itself started again, or any worker) once this has run out.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    pub lease_s: u64,
    #[command(flatten)]
    pub samples: crate::queue_cmds::SamplesArg,
}

#[derive(Subcommand)]
pub enum ConsoleCommand {
    /// Set the admin password (read from stdin or a prompt; stored as an argon2 hash).
    SetPassword,
    /// Create an API token for scripts (printed once; only its hash is kept).
    Token {
        /// A label to tell tokens apart.
        #[arg(long, default_value = "")]
        label: String,
    },
}

pub async fn console(args: ConsoleArgs) -> anyhow::Result<ExitCode> {
    let data_dir = Config::load(args.config.as_deref())?.data_dir;
    match args.command {
        Some(ConsoleCommand::SetPassword) => {
            let store = AuthStore::load(&data_dir)?;
            let password = secrets::read_secret_line("console admin password: ")?;
            store.set_password(password.expose())?;
            println!(
                "stored the console's admin password (argon2) in {}",
                AuthStore::file_in(&data_dir).display()
            );
        }
        Some(ConsoleCommand::Token { label }) => {
            let store = AuthStore::load(&data_dir)?;
            let token = store.create_token(&label)?;
            eprintln!("a new API token (shown once; send it as `Authorization: Bearer …`):");
            println!("{token}");
        }
        None => {
            maljan_console::serve(ConsoleOptions {
                listen: args.listen,
                config: args.config,
                max_sample_bytes: args.max_sample_bytes,
                metrics: args.metrics,
                jobs: maljan_console::jobs::JobOptions {
                    workers: args.workers,
                    lease_s: args.lease_s,
                    samples_url: args.samples.url,
                },
            })
            .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
