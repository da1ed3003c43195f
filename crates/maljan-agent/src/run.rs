//! The stages of a job: triage → analyst → judge, in one job, giving a report whose `verdict` is
//! the judge's (checked) or the heuristic's, with a degradation reason saying why when a model was
//! configured but its verdict could not be used. Never fails: what goes wrong is in the report.
//! The job around them (its directory, the sample, the report kept, its end) is the pipeline's
//! ([`crate::pipeline::Analysis`]).

use std::{collections::HashMap, sync::Arc};

use maljan_client::{Event, Job, ServerHandle};
use maljan_triage::{
    Report, Status, StepStatus, TriageOptions,
    report::{AgentReport, TokenUsage, Verdict},
    run::job_status,
    run_triage,
};
use tokio_util::sync::CancellationToken;

use crate::{
    analyst::Analyst,
    catalog::{Catalog, Source},
    guards::{BYTES_PER_TOKEN, cut_to_fit, delimit},
    heuristic,
    judge::judge_stage,
    llm::Models,
    record::{Ledgered, ledger_ids},
    stages::Stages,
};

pub use crate::record::RunFigures;

/// What the caller chooses about a run.
pub struct AgentOptions {
    pub triage: TriageOptions,
    /// None: no model configured — triage and the heuristic verdict only.
    pub models: Option<Arc<Models>>,
    pub stages: Stages,
    /// Cancels the run (Ctrl-C): calls in flight are cancelled and the report is marked so.
    pub cancel: CancellationToken,
}

/// Runs the stages on a job made by the caller and ends it with the report's status (the agent's
/// own tests and bench; a front end runs [`crate::pipeline::Analysis`]). Progress goes to the
/// job's events ([`Job::events`]).
pub async fn analyze(job: &Arc<Job>, opts: AgentOptions) -> Report {
    analyze_with_figures(job, opts).await.0
}

/// [`analyze`], with the figures the bench reads.
pub async fn analyze_with_figures(job: &Arc<Job>, opts: AgentOptions) -> (Report, RunFigures) {
    let (report, figures) = run_stages(job, opts).await;
    job.finish_as(job_status_of(&report));
    (report, figures)
}

/// How the job ends for this report.
pub fn job_status_of(report: &Report) -> maljan_client::JobStatus {
    job_status(report.status)
}

/// Triage → analyst → judge on `job`, leaving it open (the pipeline keeps the report, then ends
/// it). Each stage, and each of its steps and calls, is an event of the job.
pub async fn run_stages(job: &Arc<Job>, opts: AgentOptions) -> (Report, RunFigures) {
    let mut triage = opts.triage.clone();
    triage.keep_job_open = true;
    triage.cancel = Some(opts.cancel.clone());
    stage_started(job, "triage");
    let mut report = run_triage(job, &triage).await;
    let mut ledger = Ledgered::default();
    let ids = ledger_ids(job);
    heuristic::fill_children(&mut report, &ids);
    let mut verdict = heuristic::verdict(&report, &ids);
    // The judge reads the facts this verdict rests on (and is weighed against them).
    report.verdict = Some(verdict.clone());

    if let Some(models) = &opts.models
        && report.status != Status::Cancelled
    {
        let mut agent = AgentReport {
            model: models.endpoints()[0].label(),
            ..Default::default()
        };
        let stages = run_model_stages(job, &opts, models, &report, &mut ledger, &mut agent).await;
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
    (report, ledger.figures)
}

fn stage_started(job: &Job, stage: &str) {
    job.events().emit(Event::Stage {
        stage: stage.to_string(),
    });
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
) -> ModelStages {
    let mut degradations = Vec::new();
    let mut outcomes = Vec::new();
    let nonce = format!("{:016x}", rand::random::<u64>());
    let ctx = models.current().context_window as usize;
    let (brief, raw, sent) = brief(report, &nonce, ctx / 3 * BYTES_PER_TOKEN);
    ledger.bytes(raw, sent);

    let mut notes = None;
    if opts.stages.analyst {
        stage_started(job, "analyst");
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
        job.events().emit(Event::ModelAnswered {
            stage: "analyst".into(),
            tool_calls: outcome.tool_calls,
        });
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
        stage_started(job, "judge");
        let (outcome, v) = judge_stage(
            job,
            opts,
            models,
            &brief,
            notes.as_deref(),
            report.verdict.as_ref(),
            &nonce,
            ledger,
        )
        .await;
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
