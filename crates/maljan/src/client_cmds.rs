//! `maljan servers|call|ledger`: thin wrappers over maljan-client (argument parsing and printing
//! only). Nothing here prints an auth token, tool arguments in logs, or a URL's query string.

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use maljan_client::{
    CallRecord, Config, JobSpec, Ledger, Runtime, ServerConfig, TransportKind,
    config::valid_server_name, redact::scrub_url, secrets,
};
use serde_json::{Value, json};

use crate::show::{self, visible, visible_multiline};

/// Where the config is (shared by every client command).
#[derive(Args, Clone, Default)]
pub struct ConfigArg {
    /// The config file (default: $MALJAN_CONFIG, else $MALJAN_HOME/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

// Parsed once per process: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum ServersCommand {
    /// List the configured servers.
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add (or with --replace, change) a server entry; takes the same fields as the TOML.
    ///
    /// Example: maljan servers add everything --command node -- /path/server-everything/dist/index.js stdio
    Add(AddArgs),
    /// Remove a server entry.
    Remove {
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Connect, perform the handshake, and show the protocol version, tools and manifest (exit
    /// status 1 when the server cannot be reached).
    Test {
        name: String,
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign in to an OAuth 2.1 server once: prints the address to open in a browser and takes
    /// the redirect on 127.0.0.1 (or, with --client-credentials, stores the client's secret
    /// sealed). Tokens are stored sealed and refreshed without you.
    Login(crate::login_cmd::LoginArgs),
    /// Store a server's auth token, sealed (enc:v1), read from stdin or a prompt.
    SetToken {
        name: String,
        #[command(flatten)]
        config: ConfigArg,
        /// Remove the stored token instead.
        #[arg(long)]
        clear: bool,
    },
}

#[derive(Args)]
pub struct AddArgs {
    /// The server's name: a lower-case letter, then at most 31 lower-case letters, digits, '-'
    /// or '_'.
    #[arg(value_parser = server_name)]
    pub name: String,
    #[command(flatten)]
    pub config: ConfigArg,
    #[arg(long, default_value = "stdio", value_parser = ["stdio", "http", "streamable-http", "sse"])]
    pub transport: String,
    /// The command that starts a stdio server.
    #[arg(long)]
    pub command: Option<String>,
    /// One argument of the command (repeatable); or put them after `--`.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub arg: Vec<String>,
    /// KEY=VALUE set in the server's environment (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
    pub env: Vec<(String, String)>,
    /// A parent environment variable to pass through (repeatable).
    #[arg(long = "env-allow", value_name = "NAME")]
    pub env_allow: Vec<String>,
    /// Working directory of a stdio server.
    #[arg(long)]
    pub cwd: Option<String>,
    /// URL of an HTTP server.
    #[arg(long)]
    pub url: Option<String>,
    /// Shared volume the sample is copied to for this server.
    #[arg(long)]
    pub mirror_dir: Option<String>,
    /// Allow only these tools (repeatable; default all).
    #[arg(long = "tool", value_name = "TOOL")]
    pub tools: Vec<String>,
    /// A label for people.
    #[arg(long)]
    pub label: Option<String>,
    /// Add it disabled.
    #[arg(long)]
    pub disabled: bool,
    /// Replace an existing entry of that name.
    #[arg(long)]
    pub replace: bool,
    /// The command's arguments.
    #[arg(last = true)]
    pub rest: Vec<String>,
}

/// Exit status 1 when the call fails (the error's code and remedy are printed on stderr).
#[derive(Args)]
pub struct CallArgs {
    pub server: String,
    pub tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = json_object)]
    pub args: Value,
    /// Print the whole call record as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Args)]
pub struct LedgerArgs {
    /// Show one job's calls (with messages and remedies).
    #[arg(long)]
    pub job: Option<String>,
    /// List jobs instead of calls.
    #[arg(long, conflicts_with = "job")]
    pub jobs: bool,
    /// How many rows (the most recent).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Print JSON (arguments and results included).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArg,
}

pub async fn servers(cmd: ServersCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ServersCommand::List { config, json } => list(config, json),
        ServersCommand::Add(a) => add(a),
        ServersCommand::Remove { name, config } => {
            let mut c = Config::load_for_edit(config.config.as_deref())?;
            if c.core.builtin_servers && Config::builtin().servers.contains_key(&name) {
                // A built-in would come back on the next load: it is turned off instead.
                let Some(entry) = c.servers.get_mut(&name) else {
                    bail!("no server named '{name}' in {}", c.path.display());
                };
                entry.enabled = false;
                c.save()?;
                println!(
                    "disabled the built-in server '{name}' in {} (servers.{name}.enabled = false)",
                    c.path.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            if c.servers.remove(&name).is_none() {
                bail!("no server named '{name}' in {}", c.path.display());
            }
            c.save()?;
            println!("removed '{name}' from {}", c.path.display());
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Test { name, config, json } => test(&name, config, json).await,
        ServersCommand::Login(a) => crate::login_cmd::login(a).await,
        ServersCommand::SetToken {
            name,
            config,
            clear,
        } => set_token(&name, config, clear),
    }
}

fn auth_state(s: &ServerConfig) -> &'static str {
    if s.oauth.is_some() {
        "auth: OAuth 2.1 (sign in once: maljan servers login NAME)"
    } else if s.auth_token.is_empty() {
        ""
    } else if secrets::is_sealed(&s.auth_token) {
        "token: sealed"
    } else {
        "token: PLAIN TEXT in the file (seal it: maljan servers set-token NAME)"
    }
}

fn where_(s: &ServerConfig) -> String {
    match s.transport {
        TransportKind::Stdio => {
            let mut w = s.command.clone();
            for a in &s.args {
                w.push(' ');
                w.push_str(a);
            }
            w
        }
        _ => scrub_url(&s.url),
    }
}

fn list(config: ConfigArg, as_json: bool) -> anyhow::Result<ExitCode> {
    let c = Config::load(config.config.as_deref())?;
    if as_json {
        let servers: Vec<Value> = c
            .servers
            .iter()
            .map(|(name, s)| {
                json!({
                    "name": name, "transport": s.transport.as_str(), "enabled": s.enabled,
                    "target": where_(s), "label": s.label, "env_allow": s.env_allow,
                    "env": s.env.keys().collect::<Vec<_>>(), "tools": s.tools, "mirror_dir": s.mirror_dir,
                    "auth_token": if s.auth_token.is_empty() { "none" } else if secrets::is_sealed(&s.auth_token) { "sealed" } else { "plain" },
                    "oauth": s.oauth.as_ref().map(|o| o.grant.as_str()),
                })
            })
            .collect();
        println!(
            "{}",
            show::json(&json!({"config": c.path, "from_file": c.from_file, "servers": servers}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if c.from_file {
        println!("config: {}", c.path.display());
    } else {
        println!(
            "config: {} (not created yet: the built-in servers are configured)",
            c.path.display()
        );
    }
    for (name, s) in &c.servers {
        let state = if s.enabled { "" } else { " (disabled)" };
        println!(
            "{}{state}  [{}]  {}",
            visible(name),
            s.transport,
            visible(&where_(s))
        );
        let auth = auth_state(s);
        if !auth.is_empty() {
            println!("    {auth}");
        }
        if let Some(tools) = &s.tools {
            println!("    tools: {}", visible(&tools.join(", ")));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn add(a: AddArgs) -> anyhow::Result<ExitCode> {
    let mut c = Config::load_for_edit(a.config.config.as_deref())?;
    if c.servers.contains_key(&a.name) && !a.replace {
        bail!(
            "a server named '{}' exists in {}; use --replace to change it",
            a.name,
            c.path.display()
        );
    }
    let transport = TransportKind::parse(&a.transport).with_context(|| {
        format!(
            "--transport {}: expected stdio, http, streamable-http or sse",
            a.transport
        )
    })?;
    let env: BTreeMap<String, String> = a.env.into_iter().collect();
    let (old_token, old_oauth) = c
        .servers
        .get(&a.name)
        .map(|s| (s.auth_token.clone(), s.oauth.clone()))
        .unwrap_or_default();
    let entry = ServerConfig {
        transport,
        command: a.command.unwrap_or_default(),
        args: a.arg.into_iter().chain(a.rest).collect(),
        env,
        env_allow: a.env_allow,
        cwd: a.cwd.unwrap_or_default(),
        url: a.url.unwrap_or_default(),
        auth_token: old_token,
        oauth: old_oauth,
        mirror_dir: a.mirror_dir.unwrap_or_default(),
        enabled: !a.disabled,
        tools: (!a.tools.is_empty()).then_some(a.tools),
        label: a.label.unwrap_or_default(),
        ..Default::default()
    };
    c.servers.insert(a.name.clone(), entry);
    c.save()?;
    println!(
        "added '{}' to {}; check it with: maljan servers test {}",
        a.name,
        c.path.display(),
        a.name
    );
    if transport.is_http() {
        println!(
            "if it needs a bearer token: maljan servers set-token {}",
            a.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn set_token(name: &str, config: ConfigArg, clear: bool) -> anyhow::Result<ExitCode> {
    let mut c = Config::load_for_edit(config.config.as_deref())?;
    let keys = maljan_client::KeySource::in_dir(&c.data_dir);
    let Some(entry) = c.servers.get_mut(name) else {
        bail!("no server named '{name}' in {}", c.path.display());
    };
    if clear {
        entry.auth_token.clear();
        c.save()?;
        println!("removed the token of '{name}'");
        return Ok(ExitCode::SUCCESS);
    }
    let token = secrets::read_secret_line(&format!("token for '{name}': "))?;
    if token.is_empty() {
        bail!("no token given (it is read from stdin or the prompt)");
    }
    entry.auth_token = keys.seal(&token)?;
    c.save()?;
    let key = if std::env::var_os("MALJAN_SECRET_KEY").is_some_and(|v| !v.is_empty()) {
        "MALJAN_SECRET_KEY".to_string()
    } else {
        keys.key_file.display().to_string()
    };
    println!(
        "stored the token of '{name}' sealed (enc:v1) in {}; key: {key}",
        c.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

async fn test(name: &str, config: ConfigArg, as_json: bool) -> anyhow::Result<ExitCode> {
    let c = Config::load(config.config.as_deref())?;
    let Some(entry) = c.servers.get(name) else {
        bail!("no server named '{name}' in {}", c.path.display());
    };
    let transport = entry.transport;
    let target = where_(entry);
    let rt = Runtime::new(c.clone(), Ledger::open_in_memory());
    let result = rt.test_server(name).await;
    let report = match result {
        Ok(r) => r,
        Err(why) => {
            if as_json {
                println!(
                    "{}",
                    show::json(
                        &json!({"ok": false, "server": name, "transport": transport.as_str(), "detail": why})
                    )?
                );
            } else {
                // The reason may carry the server's own words (its stderr, an HTTP body).
                eprintln!(
                    "maljan: cannot reach server '{}' ({transport}, {}): {}",
                    visible(name),
                    visible(&target),
                    visible_multiline(&why)
                );
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let v = &report.view;
    if as_json {
        let mut out = serde_json::to_value(v)?;
        out["ok"] = json!(true);
        out["handshake_ms"] = json!(report.handshake_ms);
        out["transport"] = json!(transport.as_str());
        println!("{}", show::json(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    // Everything below but the timings is the server's to say: shown with controls visible.
    println!(
        "{}: connected over {} in {:.0} ms",
        visible(name),
        v.via,
        report.handshake_ms
    );
    println!(
        "  protocol {}, server {} {}",
        visible(&v.protocol_version),
        visible(v.server_name.as_deref().unwrap_or("?")),
        show::opt(v.server_version.as_deref())
    );
    match (&v.manifest_declared, &v.manifest_error) {
        (true, _) => println!(
            "  manifest: declared by the server ({} tools)",
            v.manifest.tools.len()
        ),
        (false, Some(e)) => {
            println!(
                "  manifest: unreadable ({}); all listed tools count as available",
                visible(e)
            )
        }
        (false, None) => {
            println!("  manifest: none; all listed tools count as available, default timeouts")
        }
    }
    let names: Vec<_> = v.tools.iter().map(|t| visible(&t.name)).collect();
    println!("  tools ({}): {}", names.len(), names.join(", "));
    // From the manifest itself: a server may leave an unavailable tool out of tools/list.
    let unavailable: Vec<_> = v.manifest.tools.iter().filter(|t| !t.available).collect();
    if !unavailable.is_empty() {
        println!("  unavailable on this host:");
        for t in unavailable {
            println!(
                "    {}: {}",
                visible(&t.name),
                visible(t.reason.as_deref().unwrap_or("no reason given"))
            );
            if let Some(w) = &t.without {
                println!("      still answers: {}", visible(w));
            }
            if let Some(r) = &t.remediation {
                println!("      remedy: {}", visible(r));
            }
        }
    }
    if !v.staging_tools.is_empty() {
        println!(
            "  staging primitives: {}",
            visible(&v.staging_tools.join(", "))
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A server name as the config takes it (a bad one is a bad command line: status 2).
fn server_name(s: &str) -> Result<String, String> {
    if valid_server_name(s) {
        Ok(s.to_string())
    } else {
        Err(
            "not a server name: a lower-case letter first, then at most 31 lower-case letters, digits, '-' or '_'"
                .into(),
        )
    }
}

/// `KEY=VALUE`, the key not empty.
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// A JSON object, like `{"path": "."}`.
fn json_object(s: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(s) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(r#"not a JSON object; write the arguments like '{"path": "."}'"#.into()),
        Err(e) => Err(format!(
            "not JSON ({e}); write the arguments like '{{\"path\": \".\"}}'"
        )),
    }
}

pub async fn call(args: CallArgs) -> anyhow::Result<ExitCode> {
    let parsed = args.args;
    let c = Config::load(args.config.config.as_deref())?;
    let rt = Runtime::open(c)?;
    let job = rt.new_job(JobSpec::labelled(format!(
        "maljan call {} {}",
        args.server, args.tool
    )))?;
    let server = match job.server(&args.server) {
        Ok(s) => s,
        Err(e) => bail!("{}; {}", e.message, e.remediation),
    };
    let rec = server.call(&args.tool, parsed).await;
    job.finish();
    rt.shutdown().await;
    print_call(&rec, args.json)?;
    Ok(if rec.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_call(rec: &CallRecord, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        println!("{}", show::json(rec)?);
        return Ok(());
    }
    // The answer is the server's: its lines are kept, its controls shown (--json has the value).
    if let Some(r) = &rec.result {
        let text = rec.text();
        if !text.is_empty() && rec.ok {
            println!("{}", visible_multiline(&text));
        } else if rec.ok {
            println!("{}", show::json(r.get("structuredContent").unwrap_or(r))?);
        }
    }
    if let Some(e) = &rec.error {
        eprintln!(
            "error [{}] in {} {}: {}",
            visible(e.code.as_str()),
            visible(&rec.server),
            visible(&rec.tool),
            visible_multiline(&e.message)
        );
        eprintln!("remedy: {}", visible_multiline(&e.remediation));
    }
    eprintln!(
        "({} of job {}, {:.1} ms)",
        rec.ev_id, rec.job_id, rec.duration_ms
    );
    if let Some(e) = &rec.ledger_error {
        eprintln!("warning: the ledger could not record this call: {e}");
    }
    Ok(())
}

pub async fn ledger(args: LedgerArgs) -> anyhow::Result<ExitCode> {
    let c = Config::load(args.config.config.as_deref())?;
    let url = c.database_url();
    let path = c.ledger_path();
    // An SQLite ledger that was never written is reported as empty, not created.
    if url == format!("sqlite:{}", path.display()) && !path.exists() {
        if let Some(job) = &args.job {
            bail!(
                "no job '{}': the ledger {} does not exist yet",
                visible(job),
                path.display()
            );
        }
        if args.json {
            println!("[]");
        } else {
            println!(
                "the ledger is empty ({} does not exist yet)",
                path.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let l = Ledger::connect(&url, c.core.ledger.result_cap_bytes)?;
    if args.jobs {
        let jobs = l.jobs(args.limit)?;
        if args.json {
            println!("{}", show::json(&jobs)?);
        } else {
            // A job's label names its sample, and a degradation quotes a server: both shown
            // with their controls visible.
            for j in jobs {
                println!(
                    "{}  {}  {:<9} calls {} (failed {})  {}",
                    visible(&j.job_id),
                    j.created_at,
                    visible(&j.status),
                    j.calls,
                    j.failed_calls,
                    visible(&j.label)
                );
                for d in &j.degradations {
                    println!("    degraded: {}", visible(d));
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(job) = &args.job
        && !l.has_job(job)?
    {
        bail!("no job '{}' in the ledger {}", visible(job), path.display());
    }
    let calls = l.calls(args.job.as_deref(), args.limit)?;
    if args.json {
        println!("{}", show::json(&calls)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(job) = &args.job
        && let Some(j) = l.job(job)?
    {
        println!(
            "job {}  {}  {}  {}",
            visible(&j.job_id),
            visible(&j.status),
            j.created_at,
            visible(&j.label)
        );
        if let (Some(p), Some(h)) = (&j.sample_path, &j.sample_sha256) {
            println!("  sample {}  sha256 {}", visible(p), visible(h));
        }
        for d in &j.degradations {
            println!("  degraded: {}", visible(d));
        }
    }
    // A call's tool may be a model's choice, its code and message a server's.
    for e in calls {
        let status = if e.ok {
            "ok".to_string()
        } else {
            visible(e.error_code.as_deref().unwrap_or("error")).into_owned()
        };
        let mut line = format!(
            "{}  {}  {:<8} {}.{}  {:.1} ms",
            e.started_at,
            e.ev_id,
            status,
            visible(&e.server),
            visible(&e.tool),
            e.duration_ms
        );
        if e.wait_ms >= 1.0 {
            line.push_str(&format!(" (waited {:.1} ms)", e.wait_ms));
        }
        if args.job.is_none() {
            line.push_str(&format!("  job {}", visible(&e.job_id)));
        }
        println!("{line}");
        if args.job.is_some()
            && let Some(m) = &e.message
        {
            println!("      {}", visible(m));
            if let Some(r) = &e.remediation {
                println!("      remedy: {}", visible(r));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
