//! `maljan console [--listen ADDR]`, `maljan console set-password` and `maljan console token`:
//! thin wrappers over maljan-console (options and printing only). The console is served by
//! maljan-server's accept loop, so it has the same connection cap and head deadline as
//! `maljan serve --http`.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Subcommand};
use maljan_client::{Config, secrets};
use maljan_console::{AuthStore, ConsoleOptions, Scope};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConsoleArgs {
    #[command(subcommand)]
    pub command: Option<ConsoleCommand>,
    /// Where to serve the console. Every request is authenticated: at start the console prints
    /// a login URL (also kept in <data dir>/console-login.url, 0600). Off loopback the admin
    /// password is required too (set-password first).
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
    /// Connections served at once; more wait in the listen queue until one closes.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections: usize,
    /// Seconds a client has to send a request's head; an idle kept-alive connection is closed
    /// after as long.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub header_timeout_secs: u64,
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

/// A token's scope on the command line.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ScopeArg {
    /// Read pages, jobs, reports and the ledger.
    Read,
    /// Read, submit and cancel jobs.
    Submit,
    /// Everything, servers (programs the console starts) and settings included.
    Admin,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Read => Scope::Read,
            ScopeArg::Submit => Scope::Submit,
            ScopeArg::Admin => Scope::Admin,
        }
    }
}

#[derive(Subcommand)]
pub enum ConsoleCommand {
    /// Set the admin password (read from stdin or a prompt; stored as an argon2 hash). Every
    /// session opened before ends, on a running console too.
    SetPassword,
    /// Create an API token for scripts (printed once; only its digest is kept), list the
    /// tokens, or revoke one. A change takes effect on a running console at once.
    Token {
        /// A label to tell tokens apart.
        #[arg(long, default_value = "")]
        label: String,
        /// What the token may do: read; submit (and cancel) jobs; or admin (servers — programs
        /// the console starts — and settings too).
        #[arg(long, value_enum, default_value = "submit")]
        scope: ScopeArg,
        /// List the tokens: id, scope, created, last used, label (never the token).
        #[arg(long, conflicts_with_all = ["revoke", "label", "scope"])]
        list: bool,
        /// Revoke the token with this id (from --list); its sessions end with it.
        #[arg(long, value_name = "ID", conflicts_with_all = ["label", "scope"])]
        revoke: Option<String>,
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
                "stored the console's admin password (argon2) in {}; older sessions have ended",
                AuthStore::file_in(&data_dir).display()
            );
        }
        Some(ConsoleCommand::Token { list: true, .. }) => {
            let tokens = AuthStore::load(&data_dir)?.tokens();
            if tokens.is_empty() {
                eprintln!("no API tokens: make one with `maljan console token --scope …`");
            } else {
                println!(
                    "{:<12}  {:<6}  {:<20}  {:<20}  LABEL",
                    "ID", "SCOPE", "CREATED", "LAST USED"
                );
                for t in tokens {
                    println!(
                        "{:<12}  {:<6}  {:<20}  {:<20}  {}",
                        t.id(),
                        t.scope,
                        t.created_at,
                        t.last_used.as_deref().unwrap_or("never"),
                        t.label.escape_debug()
                    );
                }
            }
        }
        Some(ConsoleCommand::Token {
            revoke: Some(id), ..
        }) => {
            let removed = AuthStore::load(&data_dir)?.revoke_token(&id)?;
            println!(
                "revoked token {} ({}, {}); a running console refuses it now",
                removed.id(),
                removed.scope,
                if removed.label.is_empty() {
                    "no label".to_string()
                } else {
                    removed.label.escape_debug().to_string()
                }
            );
        }
        Some(ConsoleCommand::Token { label, scope, .. }) => {
            let store = AuthStore::load(&data_dir)?;
            let scope = Scope::from(scope);
            let (id, token) = store.create_token(&label, scope)?;
            eprintln!(
                "a new API token {id} with scope {scope} (shown once; send it as `Authorization: Bearer …`):"
            );
            println!("{token}");
        }
        None => {
            let bound = maljan_console::bind(ConsoleOptions {
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
            // The one place the login secret is shown, as Jupyter does: the owner's terminal.
            eprintln!(
                "maljan console: open this URL to log in (also in {}, readable by you only):\n    {}",
                bound.login_file.display(),
                bound.login_url
            );
            let mut limits = maljan_server::HttpOptions::new(bound.addr);
            limits.max_connections = args.max_connections;
            limits.header_timeout = Duration::from_secs(args.header_timeout_secs);
            maljan_server::http::accept_loop(
                bound.listener,
                bound.app,
                &limits,
                Default::default(),
            )
            .await;
        }
    }
    Ok(ExitCode::SUCCESS)
}
