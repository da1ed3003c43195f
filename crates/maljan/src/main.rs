//! The `maljan` command: argument parsing, wiring and printing only. Everything a library user
//! could want lives in the crates (maljan-server, maljan-files, maljan-analysis, maljan-client).

mod agent_cmds;
mod analyze;
mod bulk;
mod client_cmds;
mod console_cmd;
mod index;
mod login_cmd;
mod queue_cmds;
mod report_file;
mod serve;
mod serve_jobs;
mod show;
mod worker_metrics;

use clap::{Parser, Subcommand};

/// The exit status of every command, as `maljan --help` prints it. A bad command line is clap's
/// error (status 2) before anything runs; an error while running is status 1, whatever caused it.
const EXIT_HELP: &str = "\
Exit status:
  0  done
  1  the command could not do its work: an unreadable config, a server that cannot be reached
     (`servers test`), a failed call (`call`), a job or server that does not exist; the reason is
     printed on stderr as `maljan: …`
  2  bad command line: an unknown command or option, a missing argument, an invalid value (such
     as `servers add --transport ftp`, `jobs list --status done`, `call --args '[1]'`), found
     before anything runs; clap says what is wrong on stderr
  3  `llm test`: the model answered but did not call the tool
`maljan analyze` has statuses of its own for a report written (0 complete, 3 degraded, 4 failed):
see `maljan analyze --help`.";

/// MCP tool servers that are fast, typed and safe, and a client runtime you can trust with many.
#[derive(Parser)]
#[command(
    name = "maljan",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = EXIT_HELP
)]
struct Cli {
    /// Where jobs and the ledger live: sqlite:PATH (default: the data directory's ledger) or
    /// postgres://USER@HOST:PORT/DB.
    #[arg(long, global = true, value_name = "URL", env = "MALJAN_DATABASE_URL")]
    database: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse a sample (or many: files and folders) with every configured tool server and write
    /// a report for each (the main job).
    Analyze(analyze::AnalyzeArgs),
    /// Serve a built-in tool server over stdio (default) or streamable HTTP (--http ADDR):
    /// files, analysis, or jobs (maljan's whole analysis as tools for other agents).
    // `--version` here is the server's version in serverInfo (as hosts copy it from
    // automation-file's command), not maljan's: the flag clap would propagate is turned off.
    #[command(disable_version_flag = true)]
    Serve(Box<serve::ServeArgs>),
    /// Print a built-in server's tool descriptors exactly as tools/list gives them, as JSON.
    Tools(serve::ToolsArgs),
    /// Manage and test the configured MCP servers.
    #[command(subcommand)]
    Servers(client_cmds::ServersCommand),
    /// Call one tool on a configured server (recorded in the ledger).
    Call(client_cmds::CallArgs),
    /// Show the ledger of recorded tool calls.
    Ledger(client_cmds::LedgerArgs),
    /// The model the agent stages use: store its key, test it.
    #[command(subcommand)]
    Llm(agent_cmds::LlmCommand),
    /// The agent: the tool catalog a model gets.
    #[command(subcommand)]
    Agent(agent_cmds::AgentCommand),
    /// The web console over the same runtime (default http://127.0.0.1:8700/).
    Console(console_cmd::ConsoleArgs),
    /// The database of jobs and the ledger.
    #[command(subcommand)]
    Db(queue_cmds::DbCommand),
    /// Store a sample and queue a job for it; a `maljan worker` runs it.
    Submit(queue_cmds::SubmitArgs),
    /// Claim queued jobs and run them, N at a time.
    Worker(queue_cmds::WorkerArgs),
    /// The queued, running and finished jobs: list, show, cancel.
    #[command(subcommand)]
    Jobs(queue_cmds::JobsCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(url) = &cli.database {
        // Every part of the process reads the database URL from the config's one place
        // (`Config::database_url`), which honours MALJAN_DATABASE_URL.
        // SAFETY: no other thread exists yet (the async runtime is built below).
        unsafe { std::env::set_var("MALJAN_DATABASE_URL", url) };
    }
    init_logging();
    // A stdio server answers one client over one pipe: a single runtime thread serves it with no
    // cross-thread wake-ups per message (blocking work still goes to the blocking pool). Everything
    // else — HTTP serving, the client runtime (the jobs server runs it) — gets a worker per core.
    let runtime = match &cli.command {
        Command::Serve(args) if args.http.is_none() && args.server != serve::BuiltIn::Jobs => {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("maljan: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Analyze(args) => analyze::analyze(args).await,
            Command::Serve(args) => serve::serve(*args).await,
            Command::Tools(args) => serve::tools(args),
            Command::Servers(cmd) => client_cmds::servers(cmd).await,
            Command::Call(args) => client_cmds::call(args).await,
            Command::Ledger(args) => client_cmds::ledger(args).await,
            Command::Llm(cmd) => agent_cmds::llm_cmd(cmd).await,
            Command::Agent(cmd) => agent_cmds::agent_cmd(cmd).await,
            Command::Console(args) => console_cmd::console(args).await,
            Command::Db(cmd) => queue_cmds::db(cmd),
            Command::Submit(args) => queue_cmds::submit(args).await,
            Command::Worker(args) => queue_cmds::worker(args).await,
            Command::Jobs(cmd) => queue_cmds::jobs(cmd).await,
        }
    });
    // Blocking work still running (a read from a FIFO, a tool whose caller is gone) is not
    // waited for: its answer has nowhere to go, and a server must exit soon after stdin closes.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    maljan_telemetry::shutdown();
    match result {
        Ok(code) => code,
        Err(e) => {
            // An error may quote a sample's name or a server's words.
            eprintln!("maljan: {}", show::visible_multiline(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr only: on stdio, stdout carries nothing but protocol messages. rmcp's own
/// logging is off by default: on a failed connection it prints full URLs, query strings included.
/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set, the MCP spans are exported too (maljan-telemetry);
/// they stay out of the log unless MALJAN_LOG asks for target `mcp`.
fn init_logging() {
    use tracing_subscriber::{Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _};
    let filter = tracing_subscriber::EnvFilter::try_from_env("MALJAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=off,mcp=off"));
    if let Err(e) = maljan_telemetry::init_from_env("maljan") {
        eprintln!("maljan: telemetry export is off: {e}");
    }
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .compact()
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(maljan_telemetry::layer())
        .with(log)
        .try_init();
}
