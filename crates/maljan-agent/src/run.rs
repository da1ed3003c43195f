//! A whole run: triage → analyst → judge, in one job, ending with a report whose `verdict` is the
//! judge's (checked) or the heuristic's, with a degradation reason saying why when a model was
//! configured but its verdict could not be used. Never fails: what goes wrong is in the report.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use maljan_client::{Job, ModelUsage, ServerHandle};
use maljan_triage::{
    Progress, Report, Status, StepStatus, TriageOptions,
    report::{AgentReport, StageReport, TokenUsage, Turn, Verdict},
    run::job_status,
    run_triage,
};
use tokio_util::sync::CancellationToken;

use crate::{
    analyst::Analyst,
    catalog::{Catalog, Source},
    guards::{BYTES_PER_TOKEN, cut_to_fit, delimit},
    heuristic,
    judge::{self, check},
    llm::{Attempt, Message, Models, Reply},
    stages::Stages,
};

/// What the caller chooses about a run.
pub struct AgentOptions {
    pub triage: TriageOptions,
    /// None: no model configured — triage and the heuristic verdict only.
    pub models: Option<Arc<Models>>,
    pub stages: Stages,
    /// Cancels the run (Ctrl-C): calls in flight are cancelled and the report is marked so.
    pub cancel: CancellationToken,
}

/// Progress of the agent stages, beside the triage's (all default to nothing).
pub trait AgentProgress: Progress {
    fn stage_started(&self, _stage: &str) {}
    fn model_answered(&self, _stage: &str, _tool_calls: usize) {}
}

impl AgentProgress for maljan_triage::Quiet {}

// The terminal shows each agent stage as one line.
impl AgentProgress for maljan_triage::term::TerminalProgress {
    fn stage_started(&self, stage: &str) {
        if stage != "triage" && self.is_visible() {
            eprintln!("{stage} stage…");
        }
    }
}

/// Figures of one run the bench reads (not part of the report).
#[derive(Debug, Clone, Default)]
pub struct RunFigures {
    /// Per analyst step: the agent's own time (the step minus the model's latency and the tools').
    pub step_overhead: Vec<Duration>,
    /// Bytes of the tools' raw answers, and of what the model was sent for them.
    pub raw_bytes: usize,
    pub sent_bytes: usize,
    /// Bytes of every request body sent to a model.
    pub request_bytes: usize,
}

/// Writes what the agent does to the ledger (tokens per request, notes on calls) and counts bytes.
#[derive(Default)]
pub struct Ledgered {
    pub figures: RunFigures,
}

impl Ledgered {
    pub fn usage(&mut self, job: &Arc<Job>, stage: &str, reply: &Reply) {
        self.figures.request_bytes += reply.request_bytes;
        let u = ModelUsage {
            job_id: job.id().to_string(),
            stage: stage.to_string(),
            provider: reply.provider.to_string(),
            model: reply.model.clone(),
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            duration_ms: reply.latency.as_secs_f64() * 1000.0,
        };
        if let Err(e) = job.runtime().ledger().record_model_usage(u) {
            tracing::warn!(job = %job.id(), "ledger: {e}");
        }
    }

    pub fn note(&mut self, job: &Arc<Job>, ev_id: &str, note: &str) {
        if let Err(e) = job.runtime().ledger().add_call_note(job.id(), ev_id, note) {
            tracing::warn!(job = %job.id(), "ledger: {e}");
        }
    }

    pub fn bytes(&mut self, raw: usize, sent: usize) {
        self.figures.raw_bytes += raw;
        self.figures.sent_bytes += sent;
    }
}

/// One stage as it ran.
#[derive(Debug, Clone)]
pub struct StageOutcome {
    pub name: String,
    pub status: String,
    pub ended_because: Option<String>,
    pub requests: usize,
    pub tool_calls: usize,
    pub duration: Duration,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub conversation: Vec<Turn>,
    /// `provider/model` → (requests, input, output).
    pub usage: BTreeMap<String, (usize, u64, u64)>,
    /// Degradation reasons: fallbacks used, providers that failed.
    pub fallbacks: Vec<String>,
    pub step_overhead: Vec<Duration>,
}

impl StageOutcome {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            status: "complete".into(),
            ended_because: None,
            requests: 0,
            tool_calls: 0,
            duration: Duration::ZERO,
            input_tokens: 0,
            output_tokens: 0,
            conversation: vec![],
            usage: BTreeMap::new(),
            fallbacks: vec![],
            step_overhead: vec![],
        }
    }

    pub fn count(&mut self, reply: &Reply) {
        self.requests += 1;
        self.input_tokens += reply.usage.input_tokens;
        self.output_tokens += reply.usage.output_tokens;
        let e = self
            .usage
            .entry(format!("{}/{}", reply.provider, reply.model))
            .or_default();
        e.0 += 1;
        e.1 += reply.usage.input_tokens;
        e.2 += reply.usage.output_tokens;
    }

    pub fn note_fallbacks(&mut self, failed: &[Attempt], answered: Option<&Reply>) {
        if failed.is_empty() {
            return;
        }
        let what = failed
            .iter()
            .map(Attempt::describe)
            .collect::<Vec<_>>()
            .join("; ");
        self.fallbacks.push(match answered {
            Some(r) => format!(
                "model provider failed ({what}); the {} stage fell back to {}/{}",
                self.name, r.provider, r.model
            ),
            None => format!("no model answered in the {} stage ({what})", self.name),
        });
    }

    fn report(&self) -> StageReport {
        StageReport {
            name: self.name.clone(),
            status: self.status.clone(),
            ended_because: self.ended_because.clone(),
            requests: self.requests,
            tool_calls: self.tool_calls,
            duration_ms: self.duration.as_secs_f64() * 1000.0,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        }
    }
}

/// Runs the job's stages and returns the report (its job ended with the report's status).
pub async fn analyze(job: &Arc<Job>, opts: AgentOptions, progress: &dyn AgentProgress) -> Report {
    analyze_with_figures(job, opts, progress).await.0
}

/// [`analyze`], with the figures the bench reads.
pub async fn analyze_with_figures(
    job: &Arc<Job>,
    opts: AgentOptions,
    progress: &dyn AgentProgress,
) -> (Report, RunFigures) {
    let mut triage = opts.triage.clone();
    triage.keep_job_open = true;
    triage.cancel = Some(opts.cancel.clone());
    progress.stage_started("triage");
    let mut report = run_triage(job, &triage, progress).await;
    let mut ledger = Ledgered::default();
    let ids = ledger_ids(job);
    heuristic::fill_children(&mut report, &ids);
    let mut verdict = heuristic::verdict(&report, &ids);

    if let Some(models) = &opts.models
        && report.status != Status::Cancelled
    {
        let mut agent = AgentReport {
            model: models.endpoints()[0].label(),
            ..Default::default()
        };
        let stages = run_model_stages(
            job,
            &opts,
            models,
            &report,
            &mut ledger,
            &mut agent,
            progress,
        )
        .await;
        match stages.verdict {
            Ok(v) => verdict = v,
            Err(why) => verdict.degradation = Some(why),
        }
        for reason in stages.degradations {
            job.degrade(reason);
        }
        if agent.cancelled {
            report.status = Status::Cancelled;
        }
        report.agent = Some(agent);
    }
    if report.status == Status::Cancelled {
        verdict.degradation.get_or_insert_with(|| {
            "the run was cancelled: the heuristic verdict of what was done stands".into()
        });
    }
    report.degradations = job.degradations();
    if report.status == Status::Complete && !report.degradations.is_empty() {
        report.status = Status::Degraded;
    }
    report.verdict = Some(verdict);
    job.finish_as(job_status(report.status));
    (report, ledger.figures)
}

struct ModelStages {
    /// The judge's checked verdict, or why the heuristic one stands.
    verdict: Result<Verdict, String>,
    degradations: Vec<String>,
}

async fn run_model_stages(
    job: &Arc<Job>,
    opts: &AgentOptions,
    models: &Models,
    report: &Report,
    ledger: &mut Ledgered,
    agent: &mut AgentReport,
    progress: &dyn AgentProgress,
) -> ModelStages {
    let mut degradations = Vec::new();
    let mut outcomes = Vec::new();
    let nonce = format!("{:016x}", rand::random::<u64>());
    let ctx = models.current().context_window as usize;
    let (brief, raw, sent) = brief(report, &nonce, ctx / 3 * BYTES_PER_TOKEN);
    ledger.bytes(raw, sent);

    let mut notes = None;
    if opts.stages.analyst {
        progress.stage_started("analyst");
        let (catalog, handles) = catalog_for(job, report).await;
        agent.withheld = catalog.withheld.clone();
        let sample_path = job
            .sample()
            .map(|s| s.path.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (outcome, write_up) = Analyst {
            job,
            models,
            catalog: &catalog,
            handles: &handles,
            budgets: &opts.stages.budgets,
            cancel: &opts.cancel,
            nonce: &nonce,
            sample_path,
            ledger,
        }
        .run(brief.clone())
        .await;
        ledger
            .figures
            .step_overhead
            .extend(outcome.step_overhead.iter().copied());
        progress.model_answered("analyst", outcome.tool_calls);
        notes = write_up;
        if outcome.status == "cancelled" {
            agent.cancelled = true;
        }
        outcomes.push(outcome);
    }

    let verdict = if agent.cancelled {
        Err("the run was cancelled before the judge answered: the heuristic verdict stands".into())
    } else if !opts.stages.judge {
        Err("no judge stage is configured (agent.toml): the heuristic verdict stands".into())
    } else {
        progress.stage_started("judge");
        let (outcome, v) =
            judge_stage(job, opts, models, &brief, notes.as_deref(), &nonce, ledger).await;
        if outcome.status == "cancelled" {
            agent.cancelled = true;
        }
        outcomes.push(outcome);
        v
    };

    for o in &outcomes {
        degradations.extend(o.fallbacks.iter().cloned());
        if o.status == "failed"
            && let Some(why) = &o.ended_because
        {
            degradations.push(format!("the {} stage failed: {why}", o.name));
        }
        agent.stages.push(o.report());
        agent.conversation.extend(o.conversation.iter().cloned());
        for (model, (requests, input, output)) in &o.usage {
            agent.usage.push(TokenUsage {
                stage: o.name.clone(),
                model: model.clone(),
                requests: *requests,
                input_tokens: *input,
                output_tokens: *output,
            });
        }
    }
    if let Err(why) = &verdict
        && !agent.cancelled
        && opts.stages.judge
    {
        degradations.push(why.clone());
    }
    ModelStages {
        verdict,
        degradations,
    }
}

async fn judge_stage(
    job: &Arc<Job>,
    opts: &AgentOptions,
    models: &Models,
    brief: &str,
    notes: Option<&str>,
    nonce: &str,
    ledger: &mut Ledgered,
) -> (StageOutcome, Result<Verdict, String>) {
    let started = Instant::now();
    let mut out = StageOutcome::new("judge");
    let ids = ledger_ids(job);
    let listing = ledger_listing(job);
    let notes = match notes {
        Some(n) => delimit(nonce, "The analyst's notes:", n),
        None => "The analyst left no notes.".into(),
    };
    let mut messages = vec![
        Message::System {
            content: judge::SYSTEM_PROMPT.into(),
        },
        Message::User {
            content: format!(
                "{brief}\n\n{notes}\n\nThe evidence ids of this job (cite only these):\n{listing}\n\nAnswer with the JSON object."
            ),
        },
    ];
    let mut last_fault = String::new();
    for attempt in 0..opts.stages.judge_attempts {
        let answer = tokio::select! {
            a = models.complete(&messages, &[]) => a,
            () = opts.cancel.cancelled() => {
                out.status = "cancelled".into();
                out.ended_because = Some("cancelled by the operator".into());
                out.duration = started.elapsed();
                return (out, Err("cancelled".into()));
            }
        };
        let reply = match answer {
            Ok((reply, failed)) => {
                out.note_fallbacks(&failed, Some(&reply));
                reply
            }
            Err(e) => {
                out.note_fallbacks(&e.attempts, None);
                out.status = "failed".into();
                out.ended_because = Some(e.to_string());
                out.duration = started.elapsed();
                return (
                    out,
                    Err(format!(
                        "the judge could not be asked ({e}): the heuristic verdict stands"
                    )),
                );
            }
        };
        out.count(&reply);
        ledger.usage(job, "judge", &reply);
        let text = reply.text.clone().unwrap_or_default();
        let checked = check(&text, &ids);
        let mut turn = Turn {
            stage: "judge".into(),
            role: "assistant".into(),
            text: Some(text.clone()),
            tool_calls: vec![],
            evidence: None,
            tool: None,
            notes: vec![],
        };
        match checked {
            Ok(mut v) => {
                v.model = Some(format!("{}/{}", reply.provider, reply.model));
                out.conversation.push(turn);
                out.duration = started.elapsed();
                return (out, Ok(v));
            }
            Err(fault) => {
                turn.notes.push(format!("refused: {fault}"));
                out.conversation.push(turn);
                last_fault = fault.clone();
                if attempt + 1 < opts.stages.judge_attempts {
                    let again = format!(
                        "Your answer was refused: {fault}. Answer again with exactly one JSON object."
                    );
                    out.conversation.push(Turn {
                        stage: "judge".into(),
                        role: "user".into(),
                        text: Some(again.clone()),
                        tool_calls: vec![],
                        evidence: None,
                        tool: None,
                        notes: vec![],
                    });
                    messages.push(Message::Assistant {
                        content: Some(text),
                        tool_calls: vec![],
                    });
                    messages.push(Message::User { content: again });
                }
            }
        }
    }
    out.status = "failed".into();
    out.ended_because = Some(format!("the verdict was refused: {last_fault}"));
    out.duration = started.elapsed();
    (
        out,
        Err(format!(
            "the judge's verdict was refused {} time{} (last: {last_fault}): the heuristic verdict stands",
            opts.stages.judge_attempts,
            if opts.stages.judge_attempts == 1 {
                ""
            } else {
                "s"
            }
        )),
    )
}

/// The evidence ids in this job's ledger.
pub fn ledger_ids(job: &Arc<Job>) -> BTreeSet<String> {
    job.runtime()
        .ledger()
        .calls(Some(job.id()), usize::MAX / 2)
        .map(|calls| calls.into_iter().map(|c| c.ev_id).collect())
        .unwrap_or_default()
}

fn ledger_listing(job: &Arc<Job>) -> String {
    job.runtime()
        .ledger()
        .calls(Some(job.id()), usize::MAX / 2)
        .map(|calls| {
            calls
                .iter()
                .filter(|c| !maljan_client::manifest::is_staging_tool(&c.tool))
                .map(|c| {
                    format!(
                        "- {}: {} on {} ({})",
                        c.ev_id,
                        c.tool,
                        c.server,
                        if c.ok { "answered" } else { "failed" }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The triage findings as the models read them: each step with its evidence id, its answer cut
/// to a share of `max_bytes`, inside the UNTRUSTED fence. Also the raw and sent byte counts.
pub fn brief(report: &Report, nonce: &str, max_bytes: usize) -> (String, usize, usize) {
    let s = &report.sample;
    let mut out = format!(
        "The sample: {} ({} bytes, sha256 {}, type {}).\nThe triage ran these steps:\n",
        s.name,
        s.size,
        s.sha256,
        s.description.as_deref().unwrap_or("unknown")
    );
    let answered = report
        .steps
        .iter()
        .filter(|st| st.status == StepStatus::Ok)
        .count()
        .max(1);
    let share = (max_bytes / answered).max(512);
    let (mut raw, mut sent) = (0, 0);
    for st in &report.steps {
        let ev = st.evidence.first().map(String::as_str).unwrap_or("no call");
        match (&st.status, &st.result) {
            (StepStatus::Ok, Some(result)) => {
                let (text, how) = cut_to_fit(result, share, &[]);
                raw += result.to_string().len();
                sent += text.len();
                let header = format!(
                    "[{ev}] {} on {} — ok{}",
                    st.tool,
                    st.server.as_deref().unwrap_or("?"),
                    how.map(|h| format!(" ({h})")).unwrap_or_default()
                );
                out.push_str(&delimit(nonce, &header, &text));
                out.push('\n');
            }
            _ => {
                let why = st
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.code, e.message))
                    .or_else(|| st.reason.clone())
                    .unwrap_or_default();
                out.push_str(&format!(
                    "[{ev}] {} — {}: {why}\n",
                    st.tool,
                    st.status.as_str()
                ));
            }
        }
    }
    (out, raw, sent)
}

/// The catalog for the job's connected servers (their views are cached from the triage).
pub async fn catalog_for(
    job: &Arc<Job>,
    report: &Report,
) -> (Catalog, HashMap<String, ServerHandle>) {
    let mut handles = HashMap::new();
    let mut views = Vec::new();
    for s in report.servers.iter().filter(|s| s.error.is_none()) {
        let Ok(h) = job.server(&s.name) else { continue };
        if let Ok(v) = h.view().await {
            views.push((s.name.clone(), v));
            handles.insert(s.name.clone(), h);
        }
    }
    let config = job.runtime().config();
    let sources: Vec<Source<'_>> = views
        .iter()
        .map(|(name, view)| Source {
            server: name,
            view: view.clone(),
            config: config.server(name),
        })
        .collect();
    (Catalog::build(&sources), handles)
}

/// `maljan agent tools`: the catalog the model would get for `servers` (None = all enabled).
pub async fn catalog_of(job: &Arc<Job>, servers: Option<&[String]>) -> (Catalog, Vec<String>) {
    let names: Vec<String> = match servers {
        Some(list) => list.to_vec(),
        None => job.runtime().server_names().map(str::to_string).collect(),
    };
    let mut views = Vec::new();
    let mut unreachable = Vec::new();
    for name in &names {
        match job.server(name) {
            Ok(h) => match h.view().await {
                Ok(v) => views.push((name.clone(), v)),
                Err(e) => unreachable.push(format!("{name}: {}", e.message)),
            },
            Err(e) => unreachable.push(format!("{name}: {}", e.message)),
        }
    }
    let config = job.runtime().config();
    let sources: Vec<Source<'_>> = views
        .iter()
        .map(|(name, view)| Source {
            server: name,
            view: view.clone(),
            config: config.server(name),
        })
        .collect();
    (Catalog::build(&sources), unreachable)
}
