//! `maljan analyze SAMPLE`: a front end of the one job pipeline (`maljan_agent::pipeline`) —
//! options, the runtime of this one job, its hold on the queue row, progress on the terminal,
//! the report file and the exit status.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use anyhow::{Context, bail};
use clap::Args;
use maljan_agent::pipeline::{self, Analysis, ModelChoice, Request, SampleSource, Scope, Setup};
use maljan_client::{Config, NewQueuedJob, Runtime, Sample, job::new_job_id};
use maljan_triage::{Format, render, term::TerminalProgress};
use tokio_util::sync::CancellationToken;

/// How long this process's hold on its job lasts without renewal (renewed every third of it).
const LEASE_MS: i64 = 15_000;

const EXIT_HELP: &str = "\
Exit status:
  0  complete: every step answered (or was rightly skipped: a tool unavailable on its host)
  3  degraded: the report is written and whole, but some step failed or a server was unavailable,
     rested or could not be handed the sample (the header lists each failure once, with its remedy)
  4  failed: no step produced an answer (the report is still written and says why)
  1  no report could be written (unreadable sample, bad config or plan, unwritable report path)
  2  bad command line

The steps: identify_file, hashes, the format's own tool (pe_info, elf_info, macho_info,
document_info or archive_list, chosen from identify_file's answer), strings, iocs_from_file,
detect_packer and code_capabilities (executables), yara_scan, then any extra steps of a
triage.toml beside the config file (or --steps FILE). Then what the sample carries (archive
members, mail attachments, embedded objects, carved payloads) is extracted and analysed as child
samples, to --max-depth levels, at most --max-children of them and 256 MiB in all; a limit
reached (a decompression bomb) is a finding in the report.
With no config file the built-in `analysis` and `files` servers are used, offline.

With a model configured ([llm] in config.toml, or MALJAN_LLM_PROVIDER / MALJAN_LLM_BASE_URL /
MALJAN_LLM_MODEL / MALJAN_LLM_API_KEY for one run), the analyst stage lets the model call the tools
and the judge stage gives a verdict citing evidence ids; stages and budgets: agent.toml beside the
config file. Without one (or with --no-agent) the verdict is the heuristic one. Ctrl-C cancels the
run: the report is still written, marked cancelled (exit status 130).";

#[derive(Args)]
#[command(after_long_help = EXIT_HELP)]
pub struct AnalyzeArgs {
    /// The sample file to analyse.
    pub sample: PathBuf,
    /// Servers to use, comma-separated, in order of preference (default: every enabled server).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub servers: Option<Vec<String>>,
    /// Where to write the report (default: ./maljan-report-<sample>-<sha256 prefix>.<ext>).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Report format: md, json, html, stix (a STIX 2.1 bundle) or csv (the IOCs) (default: from
    /// --report's extension, else md).
    #[arg(long, value_name = "md|json|html|stix|csv")]
    pub format: Option<String>,
    /// How deep members of members are analysed (archives, attachments, embedded objects); 0
    /// analyses the sample alone.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_depth: usize,
    /// Most child samples in the whole tree.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_children: usize,
    /// The runtime config file (default: MALJAN_CONFIG, else <data dir>/config.toml; none = built-ins).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A triage plan (TOML: `steps`, `extra_steps`); default: triage.toml beside the config file.
    #[arg(long, value_name = "FILE")]
    pub steps: Option<PathBuf>,
    /// Triage only (and the heuristic verdict), even when a model is configured.
    #[arg(long)]
    pub no_agent: bool,
    /// The model to use instead of the configured one (same provider and base_url).
    #[arg(long, value_name = "M", conflicts_with = "no_agent")]
    pub model: Option<String>,
    /// Keep what was extracted or carved from the sample: each child is copied here, named by
    /// its sha256 (otherwise it is removed with the job's private directory).
    #[arg(long, value_name = "DIR")]
    pub keep_artifacts: Option<PathBuf>,
}

pub async fn analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let format = match (&args.format, &args.report) {
        (Some(f), _) => Format::parse(f)
            .with_context(|| format!("--format {f}: expected md, json, html, stix or csv"))?,
        (None, Some(p)) => p
            .extension()
            .and_then(|e| e.to_str())
            .and_then(Format::parse)
            .unwrap_or(Format::Markdown),
        (None, None) => Format::Markdown,
    };
    let meta = std::fs::metadata(&args.sample)
        .with_context(|| format!("cannot read the sample {}", args.sample.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", args.sample.display());
    }
    let sample = Sample::read(&args.sample)
        .with_context(|| format!("cannot read the sample {}", args.sample.display()))?;

    let mut config = Config::load(args.config.as_deref())?;
    if let Some(list) = &args.servers {
        for name in list {
            if config.server(name).is_none() {
                let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
                bail!(
                    "--servers: no server named '{name}' is configured (configured: {})",
                    known.join(", ")
                );
            }
        }
    }
    // This process runs one job: its built-in servers work in that job's directory.
    let job_id = new_job_id();
    let dir = pipeline::job_dir(&config.data_dir, &job_id);
    pipeline::root_builtins(&mut config, Scope::Dedicated(&dir));
    let model = if args.no_agent {
        eprintln!("--no-agent: triage only, with the heuristic verdict");
        ModelChoice::Off
    } else {
        ModelChoice::Configured(args.model.as_deref())
    };
    let setup =
        Setup::discover(&config, args.steps.as_deref(), model).map_err(anyhow::Error::msg)?;
    if !args.no_agent && setup.models.is_none() {
        eprintln!(
            "no model configured ([llm] in config.toml, or MALJAN_LLM_MODEL): triage only, with the heuristic verdict"
        );
    }
    let runtime = Runtime::open(config)?;

    // A queue job like any other (`maljan jobs list`, the console), run here under a lease.
    let worker = maljan_agent::worker::process_name("analyze");
    runtime.ledger().enqueue_running(
        NewQueuedJob {
            job_id: job_id.clone(),
            label: format!("sample {}", sample.path.display()),
            sample_sha256: sample.sha256.clone(),
            sample_name: sample.name.clone(),
            sample_size: sample.size as i64,
            servers: args.servers.clone().unwrap_or_default(),
            agent: setup.models.is_some(),
        },
        &worker,
        LEASE_MS,
    )?;
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("cancelling: the calls in flight are cancelled, the report is still written");
            on_interrupt.cancel();
        }
    });
    let lease = maljan_agent::worker::hold_lease(
        runtime.ledger().clone(),
        job_id.clone(),
        worker.clone(),
        LEASE_MS,
        cancel.clone(),
    );
    let analysis = Analysis {
        runtime: runtime.clone(),
        setup: Arc::new(setup),
        store: None,
    };
    let request = Request {
        job_id: job_id.clone(),
        label: format!("sample {}", sample.path.display()),
        sample: SampleSource::Local(sample.path.clone()),
        servers: args.servers.clone(),
        agent: true,
        recursion: maljan_triage::RecursionLimits {
            max_depth: args.max_depth,
            max_children: args.max_children,
            ..Default::default()
        },
        keep_artifacts: args.keep_artifacts.clone(),
        cancel,
    };
    let outcome = analysis
        .run(request, Arc::new(TerminalProgress::new()))
        .await;
    lease.stop();
    let (state, error) = match &outcome {
        Ok(o) => (o.report.status.as_str(), None),
        Err(e) => ("failed", Some(e.to_string())),
    };
    if error.is_some() {
        let _ = runtime.ledger().finish_job(&job_id, "failed");
    }
    if let Err(e) = runtime
        .ledger()
        .finish_queued(&job_id, &worker, state, error.as_deref())
    {
        tracing::warn!("job {job_id}: could not be marked finished: {e}");
    }
    runtime.shutdown().await;
    let outcome = outcome?;
    let report = outcome.report;
    if let Some(to) = &args.keep_artifacts {
        eprintln!(
            "kept {} artifact{} in {}",
            outcome.kept.len(),
            if outcome.kept.len() == 1 { "" } else { "s" },
            to.display()
        );
    }

    let path = match &args.report {
        Some(p) => p.clone(),
        None => default_report_path(&report.sample.name, &report.sample.sha256, format),
    };
    write_report(&path, &render::render(&report, format))?;

    let failures: usize = report.failures.iter().map(|f| f.count).sum();
    eprintln!(
        "{}: {} steps, {} failed call{}, {} degradation reason{} · job {}",
        report.status.as_str(),
        report.steps.len(),
        failures,
        if failures == 1 { "" } else { "s" },
        report.degradations.len(),
        if report.degradations.len() == 1 {
            ""
        } else {
            "s"
        },
        report.job_id
    );
    for f in &report.failures {
        eprintln!("  {}× {} {}: {}", f.count, f.code, f.tool, f.remediation);
    }
    if let Some(v) = &report.verdict {
        eprintln!(
            "verdict: {} (confidence {:.2}, {}{}), {} claim{}",
            v.verdict.as_str(),
            v.confidence,
            v.source.as_str(),
            v.model
                .as_ref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default(),
            v.claims.len(),
            if v.claims.len() == 1 { "" } else { "s" }
        );
        if let Some(d) = &v.degradation {
            eprintln!("  {d}");
        }
    }
    // The path on stdout: the one thing a script wants from this command.
    println!("{}", path.display());
    Ok(ExitCode::from(report.status.exit_code()))
}

/// The built-in analysis server confines paths to its roots (by default its working directory);
/// a sample elsewhere would be refused with path_outside_roots on first run. Adding the sample's
/// directory as a root keeps the no-config path working from anywhere — only for the built-ins:
/// a config file is the operator's whole truth.
pub(crate) fn allow_sample_dir(config: &mut Config, sample: &Path) {
    let (Some(dir), Ok(cwd)) = (sample.parent(), std::env::current_dir()) else {
        return;
    };
    if let Some(server) = config.servers.get_mut("analysis")
        && server.args.first().is_some_and(|a| a == "serve")
        && !server.args.iter().any(|a| a == "--root")
    {
        for root in [cwd.as_path(), dir] {
            server.args.push("--root".into());
            server.args.push(root.to_string_lossy().into_owned());
        }
    }
}

fn default_report_path(name: &str, sha256: &str, format: Format) -> PathBuf {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    let short = sha256.get(..12).unwrap_or(sha256);
    PathBuf::from(format!(
        "maljan-report-{stem}-{short}.{}",
        format.extension()
    ))
}

/// Writes atomically (a temp file renamed into place) so a reader never sees half a report.
fn write_report(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("report"),
        std::process::id()
    ));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot write the report {}", path.display()))?;
    Ok(())
}
