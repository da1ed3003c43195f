//! `maljan serve files|analysis|jobs` and `maljan tools files|analysis|jobs`.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use maljan_server::{
    HttpOptions, Registry, Roots, StagingOptions, StagingStore, StdioOptions, ToolServer,
};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuiltIn {
    /// The file-automation actions (FA_*), as in the Python package automation-file.
    Files,
    /// Static analysis of a sample file.
    Analysis,
    /// maljan's whole analysis job, for other agents: analyze_sample (the verdict with its
    /// evidence), get_report, list_jobs, cancel_job, on the same pipeline, queue and database
    /// as `maljan analyze` and the console.
    Jobs,
}

impl BuiltIn {
    fn default_name(self) -> &'static str {
        match self {
            BuiltIn::Files => "maljan-files",
            BuiltIn::Analysis => "maljan-analysis",
            BuiltIn::Jobs => "maljan-jobs",
        }
    }
}

/// Which tools a server exposes and where they may reach.
#[derive(Args)]
pub struct PolicyArgs {
    /// A directory the tools may touch, or a storage URI (s3://bucket/prefix, sftp://host/dir,
    /// memory://name) the semantic tools may reach (repeatable). Every path argument, after
    /// resolving `..` and symlinks, must lie under one, else the call fails with
    /// path_outside_roots (outside_root for the semantic tools). Default for the FA_* tools: the
    /// current directory; the semantic tools reach nothing until a root is given.
    #[arg(long = "root", value_name = "DIR|URI")]
    pub roots: Vec<String>,
    /// Expose only these tools (exact names, comma-separated).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub allowed_actions: Vec<String>,
    /// List and allow only tools that change nothing: none that writes, overwrites, deletes or
    /// starts a watch.
    #[arg(long)]
    pub read_only: bool,
    /// Let FA_download_file reach loopback addresses (for local tests only; off by default).
    #[arg(long, hide = true)]
    pub allow_loopback_downloads: bool,
    /// The most bytes one FA_unzip_file / FA_unzip_all may write (files).
    #[arg(long, default_value_t = 4 << 30, value_name = "BYTES")]
    pub max_extracted_bytes: u64,
    /// The most members one zip extraction may write (files).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub max_extracted_files: u64,
    /// The most a zip may expand to, as a multiple of its own size (files).
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub max_expansion_ratio: u64,
    /// The remote storage profiles (TOML: `[s3.NAME]`, `[azure_blob.NAME]`, `[gcs.NAME]`) the
    /// FA_s3_*, FA_azure_blob_* and FA_gcs_* actions use (files). Read once at start-up.
    #[arg(long, value_name = "FILE", env = "MALJAN_STORAGE_CONFIG")]
    pub storage_config: Option<PathBuf>,
    /// Where the server keeps what outlives it: schedules, watches, pipeline runs and the audit
    /// trail, in files.sqlite3 (files). Default: <data dir>/files-state.
    #[arg(long, value_name = "DIR", env = "MALJAN_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// The most audit records the files server keeps; older ones are deleted as new ones come.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub audit_max_rows: u64,
    /// The oldest audit record the files server keeps, in days.
    #[arg(long, default_value_t = 30, value_name = "DAYS")]
    pub audit_max_age_days: u64,
    /// The notification sinks FA_notify_* deliver to (TOML: `[sinks.NAME]` tables of type
    /// webhook, slack, email, telegram, discord, teams or pagerduty; secrets inline, `_file` or
    /// `_env`) (files). Read once at start-up.
    #[arg(long, value_name = "FILE", env = "MALJAN_NOTIFY_CONFIG")]
    pub notify_config: Option<PathBuf>,
    /// An environment variable FA_run_shell passes on to the programs it runs, besides PATH
    /// (repeatable; nothing else is inherited) (files). FA_run_shell is served only when named
    /// in --allowed-actions.
    #[arg(long = "shell-env", value_name = "NAME")]
    pub shell_env: Vec<String>,
    /// Directory of YARA rules for yara_scan (analysis).
    #[arg(long, value_name = "DIR", env = "MALJAN_YARA_RULES")]
    pub rules_dir: Option<PathBuf>,
    /// Leave out yara_scan's built-in rules (EICAR, packers, installers, droppers, suspicious API
    /// sets), so that --rules-dir replaces them instead of adding to them (analysis).
    #[arg(long)]
    pub no_builtin_rules: bool,
    /// Where the server writes what it carves and extracts (analysis): made 0700 if missing,
    /// one of the roots, kept when the server stops (its owner, e.g. a job, removes it). Default:
    /// a private directory made for this process under <data dir>/work, removed when it stops.
    /// Never the sample's own folder.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    #[command(flatten)]
    pub semantic: SemanticArgs,
    #[command(flatten)]
    pub jobs: crate::serve_jobs::JobsArgs,
}

/// What automation-file's semantic tools (file_read, file_write, storage_copy, pipeline_run,
/// ...) may do: the flags of `python -m automation_file mcp`.
#[derive(Args, Clone, Default)]
pub struct SemanticArgs {
    /// Let the semantic tools create files and pipelines (file_write, file_copy, storage_copy,
    /// pipeline_create, pipeline_run). Off: they answer read_only.
    #[arg(long)]
    pub allow_write: bool,
    /// Let a call that asks for it (overwrite=true) replace an existing file; needs --allow-write.
    #[arg(long, requires = "allow_write")]
    pub allow_overwrite: bool,
    /// Let file_move and pipeline tasks delete; needs --allow-write.
    #[arg(long, requires = "allow_write")]
    pub allow_delete: bool,
    /// The most bytes one file_read returns (default 256 KiB).
    #[arg(long, value_name = "BYTES")]
    pub max_read_bytes: Option<u64>,
    /// The most bytes one file_write or stored pipeline holds (default 1 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_write_bytes: Option<u64>,
    /// The most entries one listing or search returns (default 200).
    #[arg(long, value_name = "N")]
    pub max_results: Option<usize>,
    /// The most bytes one content search reads (default 8 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_search_bytes: Option<u64>,
    /// Where pipeline_create keeps definitions (default: in memory, gone when the server stops).
    #[arg(long, value_name = "DIR")]
    pub pipeline_dir: Option<PathBuf>,
    /// The actions a stored pipeline may name (comma-separated). Default: the FA_storage_*
    /// actions the --allow-* flags cover.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub pipeline_actions: Option<Vec<String>>,
    /// Offer only these semantic tools (comma-separated), or `none` for none of them.
    #[arg(long, value_name = "A,B|none", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Do not offer the FA_* actions as tools: only the semantic tools (and `capabilities`) are
    /// listed and callable, while stored pipelines still run the FA_storage_* actions they name.
    #[arg(long)]
    pub no_bridge: bool,
}

impl SemanticArgs {
    fn policy(&self, roots: &[String]) -> maljan_files::SemanticPolicy {
        let d = maljan_files::SemanticPolicy::default();
        maljan_files::SemanticPolicy {
            roots: roots.to_vec(),
            allow_write: self.allow_write,
            allow_overwrite: self.allow_overwrite,
            allow_delete: self.allow_delete,
            max_read_bytes: self.max_read_bytes.unwrap_or(d.max_read_bytes),
            max_write_bytes: self.max_write_bytes.unwrap_or(d.max_write_bytes),
            max_results: self.max_results.unwrap_or(d.max_results),
            max_search_bytes: self.max_search_bytes.unwrap_or(d.max_search_bytes),
            pipeline_dir: self.pipeline_dir.clone(),
            pipeline_actions: self.pipeline_actions.clone(),
        }
    }
}

/// `--tools` and `--no-bridge`, as automation-file's server applies them.
fn narrow_semantic(registry: &mut Registry, args: &SemanticArgs) -> anyhow::Result<()> {
    if let Some(wanted) = &args.tools {
        let none = wanted.len() == 1 && wanted[0] == "none";
        let names = maljan_files::SEMANTIC_TOOLS;
        if !none {
            let unknown: Vec<&String> = (wanted.iter())
                .filter(|w| !names.contains(&w.as_str()))
                .collect();
            if !unknown.is_empty() {
                bail!(
                    "--tools: unknown semantic tool(s) {unknown:?}; they are {}",
                    names.join(", ")
                );
            }
        }
        registry
            .retain(|m| !names.contains(&m.name.as_str()) || (!none && wanted.contains(&m.name)));
    }
    if args.no_bridge {
        registry.unlist(|m| m.name.starts_with("FA_"));
    }
    Ok(())
}

/// What `maljan serve --help` says of each server beyond its flags.
const SERVE_HELP: &str = "\
files     the FA_* actions of automation-file and its semantic tools, confined to --root.
analysis  static analysis of one sample file (identify_file, hashes, strings, iocs, pe/elf/macho
          info, archive_list, document_info, yara_scan, ...), confined to --root.
jobs      maljan's whole analysis job as tools for other agents (Claude Code, Claude Desktop, any
          MCP host), on the same pipeline, queue and database as `maljan analyze` and the console:
            analyze_sample  path (under --root, or what put_sample returned over --http),
                            servers, agent, depth, wait -> the verdict with its evidence and
                            the job id; progress notifications while it runs; a task for a host
                            that declares the tasks extension
            get_report      job_id, format md|json, offset/limit or cursor -> one page
            list_jobs       status, limit, page or cursor -> the jobs, newest first
            cancel_job      job_id
          Limits: --max-sample-bytes, --max-depth, --max-running, --max-waiting; the model and
          servers from --config (default: MALJAN_CONFIG, else the data directory's config.toml,
          else the built-in servers, offline). The sample's folder is never written to.
          Claude Code: `claude mcp add maljan -- maljan serve jobs --root ~/samples`.";

#[derive(Args)]
#[command(after_long_help = SERVE_HELP)]
pub struct ServeArgs {
    /// Which built-in server to run.
    pub server: BuiltIn,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The name the server gives in initialize's serverInfo.
    #[arg(long)]
    pub name: Option<String>,
    /// The version the server gives in serverInfo (default: maljan's version). Here, as in
    /// automation-file's own command line, `--version` names the server's version; `maljan
    /// --version` prints maljan's.
    #[arg(
        long = "version",
        visible_aliases = ["server-version", "version-string"],
        value_name = "VERSION"
    )]
    pub server_version: Option<String>,
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) at /mcp instead of stdio.
    /// A bare port means 127.0.0.1:PORT.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Accepted Host header values when serving HTTP (repeatable).
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Accepted browser Origins when serving HTTP (repeatable), e.g. https://app.example:443.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// A file holding the bearer token every HTTP request must carry.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// Answer HTTP POSTs with application/json instead of an SSE stream where possible.
    #[arg(long)]
    pub json_response: bool,
    /// Also serve Prometheus metrics (OpenMetrics text) at GET /metrics on the --http listener:
    /// calls, errors by code, mcp_server_operation_duration_seconds. Names and counts only.
    #[arg(long, requires = "http")]
    pub metrics: bool,
    /// The longest message accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    pub max_message_bytes: usize,
    #[command(flatten)]
    pub http_limits: HttpLimitArgs,
    #[command(flatten)]
    pub staging: StagingArgs,
}

/// What one HTTP client can hold open, authenticated or not.
#[derive(Args)]
pub struct HttpLimitArgs {
    /// Connections served at once; more wait in the listen queue until one closes.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections: usize,
    /// Seconds a client has to send a request's head; an idle kept-alive connection is closed
    /// after as long.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub header_timeout_secs: u64,
    /// Seconds after which a session that has seen no request is closed (its client then
    /// gets 404 and starts a new one, as the MCP transport says).
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub session_idle_secs: u64,
    /// Sessions kept open at once; an initialize beyond them gets 503 with Retry-After.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub max_sessions: usize,
}

/// put_sample: how a client on another host hands this server a sample (on by default for --http).
#[derive(Args)]
pub struct StagingArgs {
    /// Do not offer put_sample / put_sample_begin / _chunk / _finish over HTTP.
    #[arg(long)]
    pub no_put_sample: bool,
    /// Where received samples are stored (0700; it becomes one of the roots).
    /// Default: a per-user directory under $XDG_RUNTIME_DIR or the temp dir.
    #[arg(long, value_name = "DIR")]
    pub staging_dir: Option<PathBuf>,
    /// The largest sample accepted through put_sample, in bytes (jobs: also the largest
    /// analyze_sample takes by path).
    #[arg(long, default_value_t = 2 * 1024 * 1024 * 1024, value_name = "BYTES")]
    pub max_sample_bytes: u64,
    /// Chunked uploads in flight at once.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_uploads: usize,
}

#[derive(Args)]
pub struct ToolsArgs {
    /// Which built-in server's tools to print.
    pub server: BuiltIn,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// Builds the registry for a built-in server under a policy; unknown allowed names stop here.
/// A staging store, when given, adds its put_sample tools and its directory to the roots.
pub fn build_server(
    which: BuiltIn,
    policy: &PolicyArgs,
    name: Option<String>,
    version: Option<String>,
    staging: Option<Arc<StagingStore>>,
) -> anyhow::Result<Arc<ToolServer>> {
    let mut dirs: Vec<PathBuf> = policy
        .roots
        .iter()
        .filter_map(|r| maljan_files::local_root(r))
        .collect();
    if dirs.is_empty() {
        dirs.push(std::env::current_dir().context("cannot read the current directory")?);
    }
    dirs.extend(staging.as_ref().map(|s| s.dir().to_path_buf()));
    let roots = Roots::new(&dirs)?;
    let mut registry: Registry = match which {
        BuiltIn::Files => maljan_files::registry(maljan_files::FilesConfig {
            roots,
            allow_loopback_downloads: policy.allow_loopback_downloads,
            extraction: maljan_files::ExtractionLimits {
                max_bytes: policy.max_extracted_bytes,
                max_files: policy.max_extracted_files,
                max_ratio: policy.max_expansion_ratio,
            },
            storage: match &policy.storage_config {
                Some(path) => maljan_files::StorageConfig::load(path)
                    .map_err(|e| anyhow::anyhow!("--storage-config: {e}"))?,
                None => Default::default(),
            },
            state_dir: Some(
                policy
                    .state_dir
                    .clone()
                    .unwrap_or_else(|| maljan_client::paths::data_dir().join("files-state")),
            ),
            automation: maljan_files::AutomationConfig {
                notify: match &policy.notify_config {
                    Some(path) => maljan_files::notify::NotifyConfig::load(path)
                        .map_err(|e| anyhow::anyhow!("--notify-config: {e}"))?,
                    None => Default::default(),
                },
                shell_env: policy.shell_env.clone(),
            },
            semantic: policy.semantic.policy(&policy.roots),
            audit: maljan_files::AuditRetention {
                max_rows: policy.audit_max_rows,
                max_age: std::time::Duration::from_secs(
                    policy.audit_max_age_days.saturating_mul(24 * 3600),
                ),
            },
        }),
        BuiltIn::Jobs => {
            crate::serve_jobs::check_roots(&policy.roots)?;
            crate::serve_jobs::registry(roots, &policy.jobs)?
        }
        BuiltIn::Analysis => maljan_analysis::registry(maljan_analysis::AnalysisConfig {
            roots,
            work_dir: match &policy.work_dir {
                Some(dir) => maljan_analysis::WorkDir::given(dir)
                    .with_context(|| format!("--work-dir {}", dir.display()))?,
                None => {
                    let parent = maljan_client::paths::work_dir(&maljan_client::paths::data_dir());
                    maljan_analysis::WorkDir::private_under(&parent).with_context(|| {
                        format!("cannot make a work directory under {}", parent.display())
                    })?
                }
            },
            rules_dir: policy.rules_dir.clone(),
            builtin_rules: !policy.no_builtin_rules,
        }),
    };
    if !policy.allowed_actions.is_empty() {
        check_allowed(&registry, &policy.allowed_actions)?;
        let allowed = policy.allowed_actions.clone();
        registry.retain(|meta| allowed.iter().any(|a| a == &meta.name));
    } else {
        // An opt-in tool (FA_run_shell) is served only when the operator names it.
        registry.retain(|meta| !meta.opt_in);
    }
    if which == BuiltIn::Files {
        narrow_semantic(&mut registry, &policy.semantic)?;
    }
    // Read-only keeps exactly the tools whose annotations say they change nothing (readOnlyHint),
    // so a tool that only adds (a directory, a line, a watch) is hidden as well as one that
    // overwrites or deletes.
    if policy.read_only {
        registry.retain(|meta| meta.read_only);
    }
    if let Some(store) = staging {
        maljan_server::staging::register(&mut registry, store);
    }
    let name = name.unwrap_or_else(|| which.default_name().to_string());
    let version = version.unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    Ok(ToolServer::new(name, version, registry))
}

/// Every allowed name must be a real tool: a typo would otherwise silently expose nothing.
fn check_allowed(registry: &Registry, allowed: &[String]) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for name in allowed {
        if registry.get(name).is_none() {
            let mut near: Vec<(usize, &str)> = registry
                .names()
                .map(|real| {
                    let distance = strsim::levenshtein(&name.to_lowercase(), &real.to_lowercase());
                    (distance, real)
                })
                .collect();
            near.sort();
            let suggestions: Vec<&str> = near.iter().take(3).map(|(_, n)| *n).collect();
            problems.push(format!(
                "unknown action '{name}' (nearest: {})",
                suggestions.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("--allowed-actions: {}", problems.join("; "))
    }
}

fn parse_addr(text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse()
        .with_context(|| format!("--http {text}: expected HOST:PORT, e.g. 127.0.0.1:8765"))
}

pub async fn serve(mut args: ServeArgs) -> anyhow::Result<ExitCode> {
    args.policy.jobs.max_sample_bytes = args.staging.max_sample_bytes;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| args.server.default_name().to_string());
    let staging = match (&args.http, args.staging.no_put_sample) {
        (Some(_), false) => {
            let dir = args
                .staging
                .staging_dir
                .clone()
                .unwrap_or_else(|| StagingOptions::default_dir(&name));
            let mut options = StagingOptions::new(&dir);
            options.max_sample_bytes = args.staging.max_sample_bytes;
            options.max_open_uploads = args.staging.max_uploads;
            let store = StagingStore::open(options)
                .with_context(|| format!("staging directory {}", dir.display()))?;
            store.spawn_sweeper();
            Some(store)
        }
        _ => None,
    };
    let server = build_server(
        args.server,
        &args.policy,
        Some(name),
        args.server_version,
        staging.clone(),
    )?;
    match &args.http {
        None => {
            maljan_server::serve_stdio(
                server,
                StdioOptions {
                    max_line_bytes: args.max_message_bytes,
                },
            )
            .await?;
        }
        Some(addr) => {
            let mut options = HttpOptions::new(parse_addr(addr)?);
            options.allowed_hosts = args.allowed_hosts;
            options.allowed_origins = args.allowed_origins;
            options.max_body_bytes = args.max_message_bytes;
            options.json_response = args.json_response;
            options.auth_token = read_token(args.auth_token_file.as_deref())?;
            options.staging = staging;
            options.metrics = args.metrics.then(maljan_server::Metrics::new);
            let limits = args.http_limits;
            options.max_connections = limits.max_connections;
            options.header_timeout = std::time::Duration::from_secs(limits.header_timeout_secs);
            options.session_idle = std::time::Duration::from_secs(limits.session_idle_secs);
            options.max_sessions = limits.max_sessions;
            maljan_server::serve_http(server, options, Default::default()).await?;
        }
    }
    // The jobs server's jobs end with it (each keeps its report); nothing for the others.
    crate::serve_jobs::shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// The bearer token comes from a file or MALJAN_AUTH_TOKEN, never from the command line, where
/// other users could read it.
fn read_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    if let Some(file) = file {
        let token = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --auth-token-file {}", file.display()))?;
        let token = token.trim().to_string();
        if token.is_empty() {
            bail!("--auth-token-file {} is empty", file.display());
        }
        return Ok(Some(token));
    }
    Ok(std::env::var("MALJAN_AUTH_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.trim().to_string()))
}

pub fn tools(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let server = build_server(args.server, &args.policy, None, None, None)?;
    let descriptors = maljan_server::tool_descriptors(&server);
    println!("{}", crate::show::json(&descriptors)?);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(allowed: &[&str]) -> anyhow::Result<Arc<ToolServer>> {
        let policy = PolicyArgs {
            roots: vec![std::env::temp_dir().to_string_lossy().into_owned()],
            allowed_actions: allowed.iter().map(|a| a.to_string()).collect(),
            read_only: false,
            allow_loopback_downloads: false,
            max_extracted_bytes: 4 << 30,
            max_extracted_files: 100_000,
            max_expansion_ratio: 200,
            storage_config: None,
            state_dir: None,
            audit_max_rows: 100_000,
            audit_max_age_days: 30,
            notify_config: None,
            shell_env: Vec::new(),
            rules_dir: None,
            no_builtin_rules: false,
            work_dir: None,
            semantic: Default::default(),
            jobs: Default::default(),
        };
        build_server(BuiltIn::Files, &policy, None, None, None)
    }

    #[test]
    fn an_unknown_action_names_the_nearest_real_ones_first() {
        let error = files(&["fa_copy_fil"]).err().expect("refused").to_string();
        let nearest = error
            .split("(nearest: ")
            .nth(1)
            .and_then(|rest| rest.split(", ").next())
            .unwrap_or_default();
        assert_eq!(nearest, "FA_copy_file", "{error}");
        let error = files(&["FA_list_dir", "FA_line_cuont"])
            .err()
            .expect("refused");
        let error = error.to_string();
        assert!(
            error.contains("unknown action 'FA_line_cuont' (nearest: FA_line_count"),
            "{error}"
        );
        assert!(
            !error.contains("'FA_list_dir'"),
            "a real name is not refused: {error}"
        );
        assert!(files(&["FA_list_dir"]).is_ok());
    }
}
