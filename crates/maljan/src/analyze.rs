//! `maljan analyze SAMPLE…`: a front end of the one job pipeline (`maljan_agent::pipeline`) —
//! options, the runtime of the command's jobs, each job's hold on its queue row, progress on the
//! terminal, the report files and the exit status. One file is analysed here, synchronously;
//! several (or a folder) go to [`crate::bulk`], which runs them through the same [`Jobs`].

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use anyhow::bail;
use clap::Args;
use maljan_agent::{
    JobEvents,
    pipeline::{self, Analysis, ModelChoice, Outcome, Request, SampleSource, Scope, Setup},
};
use maljan_client::{Config, EventStream, NewQueuedJob, Runtime, Sample, job::new_job_id};
use maljan_triage::{Format, RecursionLimits, render, term::TerminalProgress, visible};
use tokio_util::sync::CancellationToken;

use crate::report_file::{check_writable, io_reason, shown, write_atomically};

/// How long this process's hold on a job lasts without renewal (renewed every third of it).
const LEASE_MS: i64 = 15_000;

const EXIT_HELP: &str = "\
Exit status:
  0  complete: every step answered (or was rightly skipped: a tool unavailable on its host)
  3  degraded: the report is written and whole, but some step failed or a server was unavailable,
     rested or could not be handed the sample (the header lists each failure once, with its remedy)
  4  failed: no step produced an answer (the report is still written and says why)
  1  no report could be written (unreadable or empty sample, bad config or plan, unwritable report
     path: checked before the analysis runs)
  2  bad command line (an unknown --format, an --index that is not .md, .json, .csv or .html)
With several samples the status is the worst of theirs, in the order 0, 3, 4, 1 (130 when
cancelled); the index lists each sample's own.

Several samples: `maljan analyze A B DIR… [--recursive] [--jobs N] [--index FILE]` analyses every
file given and every regular file in each folder given (with --recursive, in its subfolders too;
symbolic links to folders are not followed), --jobs at a time, sharing the tool-server processes
(each job keeps its own private directory and files root). A file whose sha256 was already seen
is analysed once: the index lists it as a duplicate with the first one's report. The reports are
named as for one sample (maljan-report-<name>-<sha256 prefix>.<ext>) in --report DIR (an existing
folder), else in the index's folder, else in the current folder. The index (--index FILE, else
maljan-index.md beside the reports) has one row per sample: sample, type, size, sha256, verdict,
status, top facts and report; its format is FILE's extension (md, json, csv or html). A progress
bar is drawn on a terminal; stdout gets the index's path.

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
    /// The sample file to analyse; or several files and folders (see "Several samples" below).
    #[arg(required = true, value_name = "SAMPLE")]
    pub samples: Vec<PathBuf>,
    /// Servers to use, comma-separated, in order of preference (default: every enabled server).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub servers: Option<Vec<String>>,
    /// Where to write the report (default: ./maljan-report-<sample>-<sha256 prefix>.<ext>); its
    /// folder must exist. With several samples: an existing folder for the reports.
    #[arg(long, value_name = "FILE|DIR")]
    pub report: Option<PathBuf>,
    /// Report format: md, json, html, stix (a STIX 2.1 bundle) or csv (the IOCs) (default: from
    /// --report's extension, else md).
    #[arg(long, value_name = "md|json|html|stix|csv", value_parser = parse_format)]
    pub format: Option<Format>,
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
    /// Several samples: analyse the files in the given folders' subfolders too.
    #[arg(long, short = 'r')]
    pub recursive: bool,
    /// Several samples: how many are analysed at once (default: the cores, at most 4).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Several samples: the index to write (md, json, csv or html, by its extension; default:
    /// maljan-index.md beside the reports). Given with one file, that file is indexed too.
    #[arg(long, value_name = "FILE", value_parser = crate::index::parse_index_path)]
    pub index: Option<PathBuf>,
}

/// `--format`: a bad value is a bad command line (exit status 2, from clap).
fn parse_format(s: &str) -> Result<Format, String> {
    Format::parse(s).ok_or_else(|| "expected md, json, html, stix or csv".to_string())
}

pub async fn analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let several =
        args.samples.len() > 1 || args.index.is_some() || args.samples.iter().any(|p| p.is_dir());
    if several {
        crate::bulk::analyze_many(args).await
    } else {
        analyze_one(args).await
    }
}

/// Reads a sample's size and sha256, or says in one line why it cannot be analysed.
pub(crate) fn read_sample(path: &Path) -> Result<Sample, String> {
    let name = shown(path);
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("no sample at {name}"));
        }
        Err(e) => return Err(format!("cannot read the sample {name}: {}", io_reason(&e))),
    };
    if !meta.is_file() {
        return Err(format!("{name} is not a regular file"));
    }
    let sample = Sample::read(path)
        .map_err(|e| format!("cannot read the sample {name}: {}", io_reason(&e)))?;
    if sample.size == 0 {
        return Err(format!("{name} is empty (0 bytes): nothing to analyse"));
    }
    Ok(sample)
}

/// What the command's jobs share: the runtime (and so the tool-server processes), the pipeline,
/// and the options every job gets.
pub(crate) struct Jobs {
    pub runtime: Arc<Runtime>,
    pub analysis: Analysis,
    /// This process's name in the queue.
    pub worker: String,
    pub servers: Option<Vec<String>>,
    pub recursion: RecursionLimits,
    pub keep_artifacts: Option<PathBuf>,
}

impl Jobs {
    /// The config with the built-in servers rooted for the jobs (for one job only, `dedicated`,
    /// in that job's directory; else in every job's), the setup (plan, stages, model) and the
    /// runtime over them. Says on stderr when the verdict will be the heuristic one.
    pub fn open(args: &AnalyzeArgs, dedicated: Option<&str>) -> anyhow::Result<Self> {
        let mut config = Config::load(args.config.as_deref())?;
        if let Some(list) = &args.servers {
            for name in list {
                if config.server(name).is_none() {
                    let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
                    bail!(
                        "--servers: no server named '{}' is configured (configured: {})",
                        visible(name),
                        visible(&known.join(", "))
                    );
                }
            }
        }
        match dedicated {
            Some(job_id) => {
                let dir = pipeline::job_dir(&config.data_dir, job_id);
                pipeline::root_builtins(&mut config, Scope::Dedicated(&dir));
            }
            None => pipeline::root_builtins(&mut config, Scope::Shared),
        }
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
        Ok(Self {
            analysis: Analysis {
                runtime: runtime.clone(),
                setup: Arc::new(setup),
                store: None,
            },
            runtime,
            worker: maljan_agent::worker::process_name("analyze"),
            servers: args.servers.clone(),
            recursion: RecursionLimits {
                max_depth: args.max_depth,
                max_children: args.max_children,
                ..Default::default()
            },
            keep_artifacts: args.keep_artifacts.clone(),
        })
    }

    /// Runs `sample` as job `job_id`, a queue job like any other (`maljan jobs list`, the
    /// console): enqueued as running under this process's lease, run through the pipeline, marked
    /// finished. Its progress goes to `events` (the caller subscribes what it shows before) and
    /// is kept in the ledger as the job's events, where the console's job page follows it. Err
    /// only when the job could not start (its stream then ends with a failed `done`).
    pub async fn run(
        &self,
        job_id: String,
        sample: &Sample,
        cancel: CancellationToken,
        events: EventStream,
    ) -> anyhow::Result<Outcome> {
        let label = format!("sample {}", sample.path.display());
        let ledger = self.runtime.ledger().clone();
        let queued = NewQueuedJob {
            job_id: job_id.clone(),
            label: label.clone(),
            sample_sha256: sample.sha256.clone(),
            sample_name: sample.name.clone(),
            sample_size: sample.size as i64,
            servers: self.servers.clone().unwrap_or_default(),
            agent: self.analysis.setup.models.is_some(),
        };
        let worker = self.worker.clone();
        tokio::task::spawn_blocking(move || ledger.enqueue_running(queued, &worker, LEASE_MS))
            .await??;
        let lease = maljan_agent::worker::hold_lease(
            self.runtime.ledger().clone(),
            job_id.clone(),
            self.worker.clone(),
            LEASE_MS,
            cancel.clone(),
        );
        let request = Request {
            job_id: job_id.clone(),
            label,
            sample: SampleSource::Local(sample.path.clone()),
            servers: self.servers.clone(),
            agent: true,
            recursion: self.recursion,
            keep_artifacts: self.keep_artifacts.clone(),
            cancel,
        };
        let kept = JobEvents::record(
            self.runtime.ledger().clone(),
            job_id.clone(),
            &events,
            |_| {},
        );
        let outcome = self.analysis.run(request, events.clone()).await;
        if let Err(e) = &outcome {
            events.emit(maljan_agent::events::failed(&e.to_string()));
        }
        kept.finish().await;
        lease.stop();
        let (state, error) = match &outcome {
            Ok(o) => (o.report.status.as_str().to_string(), None),
            Err(e) => ("failed".to_string(), Some(e.to_string())),
        };
        let (ledger, worker) = (self.runtime.ledger().clone(), self.worker.clone());
        let id = job_id.clone();
        let done = tokio::task::spawn_blocking(move || {
            if error.is_some() {
                let _ = ledger.finish_job(&id, "failed");
            }
            ledger.finish_queued(&id, &worker, &state, error.as_deref())
        })
        .await;
        if !matches!(done, Ok(Ok(_))) {
            tracing::warn!("job {job_id}: could not be marked finished: {done:?}");
        }
        Ok(outcome?)
    }
}

/// Cancels `cancel` on Ctrl-C, saying so once.
pub(crate) fn cancel_on_interrupt(cancel: &CancellationToken) {
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "cancelling: the calls in flight are cancelled, the reports are still written"
            );
            on_interrupt.cancel();
        }
    });
}

/// One sample, synchronously, with its steps drawn on the terminal.
async fn analyze_one(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let format = args.format.unwrap_or_else(|| {
        args.report
            .as_ref()
            .and_then(|p| p.extension())
            .and_then(|e| e.to_str())
            .and_then(Format::parse)
            .unwrap_or(Format::Markdown)
    });
    let sample = read_sample(&args.samples[0]).map_err(anyhow::Error::msg)?;
    // Found before the analysis runs, not after it.
    let path = match &args.report {
        Some(p) => p.clone(),
        None => default_report_path(&sample.name, &sample.sha256, format),
    };
    check_writable(&path, "the report")?;

    // This process runs one job: its built-in servers work in that job's directory.
    let job_id = new_job_id();
    let jobs = Jobs::open(&args, Some(&job_id))?;
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    // The job's one event stream, drawn on the terminal (and kept in the ledger by `run`).
    let events = EventStream::new();
    Arc::new(TerminalProgress::new()).attach(&events);
    let outcome = jobs.run(job_id, &sample, cancel, events).await;
    jobs.runtime.shutdown().await;
    let outcome = outcome?;
    let report = outcome.report;
    if let Some(to) = &args.keep_artifacts {
        eprintln!(
            "kept {} artifact{} in {}",
            outcome.kept.len(),
            if outcome.kept.len() == 1 { "" } else { "s" },
            shown(to)
        );
    }
    write_atomically(&path, &render::render(&report, format), "the report")?;

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
        visible(&report.job_id)
    );
    for f in &report.failures {
        eprintln!(
            "  {}× {} {}: {}",
            f.count,
            visible(&f.code),
            visible(&f.tool),
            visible(&f.remediation)
        );
    }
    if let Some(v) = &report.verdict {
        eprintln!(
            "verdict: {} (confidence {:.2}, {}{}), {} claim{}",
            v.verdict.as_str(),
            v.confidence,
            v.source.as_str(),
            v.model
                .as_ref()
                .map(|m| format!(" {}", visible(m)))
                .unwrap_or_default(),
            v.claims.len(),
            if v.claims.len() == 1 { "" } else { "s" }
        );
        if let Some(d) = &v.degradation {
            eprintln!("  {}", visible(d));
        }
    }
    // The path on stdout: the one thing a script wants from this command.
    println!("{}", shown(&path));
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

/// `maljan-report-<name>-<sha256 prefix>.<ext>`, the name made of `[A-Za-z0-9._-]` only.
pub(crate) fn default_report_path(name: &str, sha256: &str, format: Format) -> PathBuf {
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
