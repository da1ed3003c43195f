//! Running a plan inside a job: connect the selected servers (each manifest read once), hand the
//! sample over, then the steps in order. A step's tool that a manifest marks unavailable is skipped
//! with its reason, never called; every call is an evidence entry in the ledger.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use maljan_client::{
    CallError, CallRecord, Event, Handover, Job, JobStatus, ServerHandle, ServerView,
};
use serde_json::Value;

use crate::{
    plan::{FORMAT_TOOL, IDENTIFY_TOOL, Plan, format_tool},
    recurse::{EXECUTABLE_KINDS, EXECUTABLE_TOOLS, EXTRACT_TOOL},
    report::{
        ErrorInfo, Failure, Report, SCHEMA, SampleInfo, ServerInfo, Status, StepReport, StepStatus,
        Unavailable,
    },
    tree::{ChildReport, Recursion, RecursionLimits},
};

/// The failure "tool" of a server that could not be reached at all.
pub const CONNECTING: &str = "(connecting)";

/// What the caller chooses about a run.
#[derive(Debug, Clone, Default)]
pub struct TriageOptions {
    pub plan: Plan,
    /// Servers to use, in order of preference; None = every enabled server (plus none else).
    pub servers: Option<Vec<String>>,
    /// Leave the job open at the end (the agent stages follow and end it).
    pub keep_job_open: bool,
    /// Cancels the run (Ctrl-C): the call in flight is cancelled, the steps left are skipped,
    /// and the report's status is `cancelled`.
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// The bounds of recursive analysis (members, attachments, embedded objects become child
    /// samples); `max_depth: 0` turns it off. It runs when a selected server offers
    /// `extract_members`.
    pub recursion: RecursionLimits,
}

struct Connected {
    handle: Option<ServerHandle>,
    view: Option<Arc<ServerView>>,
    info: ServerInfo,
}

/// Runs `opts.plan` for `job`'s sample and returns the report. Never fails: what goes wrong is in
/// the report (failures, degradations, step errors). Ends the job with the report's status.
/// Its progress (servers reached, each step started and finished) goes to the job's events
/// ([`Job::events`]).
pub async fn run_triage(job: &Arc<Job>, opts: &TriageOptions) -> Report {
    let started = Instant::now();
    let events = job.events();
    let selected = select_servers(job, opts);
    events.emit(Event::Connecting {
        servers: selected.clone(),
    });

    // Connect and hand over concurrently: a slow or dead server costs its own time, once.
    let connected: Vec<Connected> =
        futures::future::join_all(selected.iter().map(|name| connect(job, name))).await;
    for c in &connected {
        events.emit(c.info.event());
    }

    let mut state = RunState::default();
    let (path, name, sha256) = match job.sample() {
        Some(s) => (
            s.path.to_string_lossy().into_owned(),
            s.name.clone(),
            s.sha256.clone(),
        ),
        None => Default::default(),
    };
    let total = opts.plan.steps.len();
    let mut identify_server: Option<String> = None;
    let mut identify_answer: Option<Value> = None;

    let cancelled = || opts.cancel.as_ref().is_some_and(|c| c.is_cancelled());
    for (i, step) in opts.plan.steps.iter().enumerate() {
        let index = i + 1;
        if cancelled() {
            state.cancelled = true;
            break;
        }
        let mut report = StepReport {
            index,
            title: step.heading(),
            tool: step.tool.clone(),
            server: step.server.clone(),
            status: StepStatus::Skipped,
            evidence: vec![],
            duration_ms: 0.0,
            error: None,
            reason: None,
            remediation: None,
            result: None,
        };
        events.emit(Event::StepStarted {
            index,
            total,
            title: report.title.clone(),
        });

        // The format tool is what identify_file said, on the server that identified the sample.
        let (tool, preferred) = if step.tool == FORMAT_TOOL {
            let chosen = identify_answer.as_ref().and_then(format_tool);
            match chosen {
                // identify_file may point at a general tool (iocs_from_file for text): that is
                // already a step of its own, so there is no format-specific structure to read.
                Some(t) if opts.plan.steps.iter().any(|s| s.tool == t) => {
                    report.status = StepStatus::NotApplicable;
                    report.reason = Some(format!(
                        "no format-specific tool reads this type ({}); identify_file suggests {t}, which is a step of its own",
                        identify_answer
                            .as_ref()
                            .and_then(|a| a.get("kind"))
                            .and_then(Value::as_str)
                            .unwrap_or("unknown")
                    ));
                    events.emit(report.event(total));
                    state.steps.push(report);
                    continue;
                }
                Some(t) => {
                    report.title = format!("Format structure ({t})");
                    (t, identify_server.clone())
                }
                None => {
                    report.status = StepStatus::NotApplicable;
                    report.reason = Some(match &identify_answer {
                        Some(a) => format!(
                            "no format tool reads this type ({})",
                            a.get("kind").and_then(Value::as_str).unwrap_or("unknown")
                        ),
                        None => "identify_file gave no answer, so the format is unknown".into(),
                    });
                    events.emit(report.event(total));
                    state.steps.push(report);
                    continue;
                }
            }
        } else if EXECUTABLE_TOOLS.contains(&step.tool.as_str())
            && !identify_answer
                .as_ref()
                .and_then(|a| a.get("kind"))
                .and_then(Value::as_str)
                .is_some_and(|k| EXECUTABLE_KINDS.contains(&k))
        {
            report.status = StepStatus::NotApplicable;
            report.reason = Some(format!("{} reads executables only", step.tool));
            events.emit(report.event(total));
            state.steps.push(report);
            continue;
        } else {
            (step.tool.clone(), step.server.clone())
        };
        report.tool = tool.clone();

        let target = match pick_server(
            &connected,
            &tool,
            preferred.as_deref(),
            step.server.is_some(),
        ) {
            Ok(c) => c,
            Err(Pick::NotConfigured(server))
                if opts.servers.is_some() && job.runtime().slot(&server).is_some() =>
            {
                // Configured, but the operator left it out with --servers: their choice, not a fault.
                report.server = Some(server.clone());
                report.reason = Some(format!("server '{server}' was not selected (--servers)"));
                events.emit(report.event(total));
                state.steps.push(report);
                continue;
            }
            Err(Pick::NotConfigured(server)) => {
                let e = CallError::new(
                    maljan_client::ErrorCode::NotConfigured,
                    format!("the plan names server '{server}', which is not configured or not selected"),
                )
                .with_remediation(format!(
                    "add it with `maljan servers add {server} …`, or pass it in --servers; or remove the step"
                ));
                report.server = Some(server.clone());
                state.fail(&mut report, Some(&server), &tool, &e, None);
                events.emit(report.event(total));
                state.steps.push(report);
                continue;
            }
            Err(Pick::Unreachable(server, e)) => {
                // One server down is one failure, however many steps needed it.
                report.server = Some(server.clone());
                state.fail(&mut report, Some(&server), CONNECTING, &e, None);
                events.emit(report.event(total));
                state.steps.push(report);
                continue;
            }
            Err(Pick::NobodyOffers) => {
                report.reason = Some(format!("no selected server offers {tool}"));
                events.emit(report.event(total));
                state.steps.push(report);
                continue;
            }
        };
        let server_name = target.info.name.clone();
        report.server = Some(server_name.clone());
        let view = target.view.as_ref().expect("picked servers are connected");
        if let Some(t) = view.tool(&tool)
            && !t.available
        {
            // The manifest says it cannot answer on that host: say why instead of calling it.
            let reason = t
                .reason
                .clone()
                .unwrap_or_else(|| "unavailable on this host".into());
            report.reason = Some(format!("{tool} is unavailable on {server_name}: {reason}"));
            report.remediation = t.remediation.clone();
            state.unavailable.push(Unavailable {
                server: server_name,
                tool,
                reason,
                remediation: t.remediation.clone(),
                without: t.without.clone(),
            });
            events.emit(report.event(total));
            state.steps.push(report);
            continue;
        }

        let handle = target
            .handle
            .as_ref()
            .expect("picked servers have a handle");
        let args = step.arguments(&path, &name, &sha256);
        let rec = match &opts.cancel {
            Some(c) => handle.call_cancellable(&tool, args, c).await,
            None => handle.call(&tool, args).await,
        };
        if rec
            .error
            .as_ref()
            .is_some_and(|e| e.code.as_str() == "cancelled")
        {
            state.cancelled = true;
        }
        *state.per_server.entry(server_name.clone()).or_default() += 1;
        report.evidence.push(rec.ev_id.clone());
        report.duration_ms = to_microseconds(rec.duration_ms);
        match &rec.error {
            None => {
                report.status = StepStatus::Ok;
                report.result = answer(&rec);
                if step.tool == IDENTIFY_TOOL && identify_answer.is_none() {
                    identify_answer = report.result.clone();
                    identify_server = Some(server_name.clone());
                }
            }
            Some(e) => {
                // A tool's own error answer is still worth showing (it may name what it did read).
                report.result = rec
                    .result
                    .as_ref()
                    .and_then(|_| answer(&rec))
                    .filter(|v| !v.is_null());
                let e = e.clone();
                state.fail(&mut report, Some(&server_name), &tool, &e, Some(&rec.ev_id));
            }
        }
        events.emit(report.event(total));
        state.steps.push(report);
    }

    if !cancelled() && opts.recursion.max_depth > 0 {
        let cancel = || cancelled();
        if let Ok(target) = pick_server(&connected, EXTRACT_TOOL, identify_server.as_deref(), false)
            && let (Some(handle), Some(view)) = (&target.handle, &target.view)
            && view.tool(EXTRACT_TOOL).is_some_and(|t| t.available)
        {
            let (children, recursion) =
                crate::recurse::recurse(job, handle, view, &path, &sha256, opts.recursion, &cancel)
                    .await;
            *state
                .per_server
                .entry(target.info.name.clone())
                .or_default() += 1;
            state.children = children;
            state.recursion = Some(recursion);
        }
    }

    finish(job, connected, state, started, opts.keep_job_open)
}

fn finish(
    job: &Arc<Job>,
    connected: Vec<Connected>,
    state: RunState,
    started: Instant,
    keep_open: bool,
) -> Report {
    let servers: Vec<ServerInfo> = connected
        .into_iter()
        .map(|mut c| {
            c.info.steps = state.per_server.get(&c.info.name).copied().unwrap_or(0);
            c.info
        })
        .collect();
    let sample = sample_info(job, &state.steps);
    let degradations = job.degradations();
    let any_answer = state.steps.iter().any(|s| s.status == StepStatus::Ok);
    let status = if state.cancelled {
        Status::Cancelled
    } else if !any_answer && !state.steps.is_empty() {
        Status::Failed
    } else if !degradations.is_empty() || !state.failures.is_empty() {
        Status::Degraded
    } else {
        Status::Complete
    };
    if !keep_open {
        job.finish_as(job_status(status));
    }
    Report {
        schema: SCHEMA.to_string(),
        verdict: None,
        job_id: job.id().to_string(),
        generated_at: maljan_client::time::rfc3339_ms(maljan_client::time::now_ms()),
        maljan_version: env!("CARGO_PKG_VERSION").to_string(),
        status,
        duration_ms: to_microseconds(started.elapsed().as_secs_f64() * 1000.0),
        sample,
        servers,
        degradations,
        failures: state.failures,
        unavailable: state.unavailable,
        steps: state.steps,
        agent: None,
        children: state.children,
        recursion: state.recursion,
    }
}

/// The job status a report's status records in the ledger.
pub fn job_status(status: Status) -> JobStatus {
    match status {
        Status::Complete => JobStatus::Complete,
        Status::Degraded => JobStatus::Degraded,
        Status::Failed => JobStatus::Failed,
        Status::Cancelled => JobStatus::Cancelled,
    }
}

#[derive(Default)]
struct RunState {
    steps: Vec<StepReport>,
    failures: Vec<Failure>,
    unavailable: Vec<Unavailable>,
    per_server: BTreeMap<String, usize>,
    cancelled: bool,
    children: Vec<ChildReport>,
    recursion: Option<Recursion>,
}

impl RunState {
    /// Marks the step failed and counts the failure under its (code, server, tool, remedy) key:
    /// five timeouts of one tool are one line with a count of five.
    fn fail(
        &mut self,
        report: &mut StepReport,
        server: Option<&str>,
        tool: &str,
        e: &CallError,
        ev: Option<&str>,
    ) {
        report.status = StepStatus::Failed;
        report.error = Some(ErrorInfo {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            remediation: e.remediation.clone(),
        });
        let code = e.code.as_str();
        let existing = self.failures.iter_mut().find(|f| {
            f.code == code
                && f.server.as_deref() == server
                && f.tool == tool
                && f.remediation == e.remediation
        });
        let f = match existing {
            Some(f) => f,
            None => {
                self.failures.push(Failure {
                    code: code.to_string(),
                    server: server.map(str::to_string),
                    tool: tool.to_string(),
                    remediation: e.remediation.clone(),
                    message: e.message.clone(),
                    count: 0,
                    evidence: vec![],
                });
                self.failures.last_mut().expect("just pushed")
            }
        };
        f.count += 1;
        if let Some(ev) = ev {
            f.evidence.push(ev.to_string());
        }
    }
}

/// `--servers` in its order; else every enabled server, plus none the plan names that are missing
/// (those fail their step with not_configured).
fn select_servers(job: &Arc<Job>, opts: &TriageOptions) -> Vec<String> {
    match &opts.servers {
        Some(list) => {
            let mut out: Vec<String> = Vec::new();
            for s in list {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            out
        }
        None => job.runtime().server_names().map(str::to_string).collect(),
    }
}

async fn connect(job: &Arc<Job>, name: &str) -> Connected {
    let mut info = ServerInfo {
        name: name.to_string(),
        transport: job
            .runtime()
            .config()
            .server(name)
            .map(|c| c.transport.as_str().to_string())
            .unwrap_or_default(),
        via: None,
        server_name: None,
        server_version: None,
        protocol_version: None,
        manifest_declared: false,
        tools: 0,
        tools_unavailable: 0,
        handover: None,
        steps: 0,
        error: None,
    };
    let handle = match job.server(name) {
        Ok(h) => h,
        Err(e) => {
            info.error = Some(error_info(&e));
            return Connected {
                handle: None,
                view: None,
                info,
            };
        }
    };
    match handle.view().await {
        Ok(view) => {
            info.via = Some(view.via.clone());
            info.server_name = view.server_name.clone();
            info.server_version = view.server_version.clone();
            info.protocol_version = Some(view.protocol_version.clone());
            info.manifest_declared = view.manifest_declared;
            info.tools = view.tools.len();
            info.tools_unavailable = view.unavailable().count();
            info.handover = handle.handover().await.map(|h| {
                match h {
                    Handover::Local { .. } => "local path",
                    Handover::Uploaded { cached: false, .. } => "uploaded",
                    Handover::Uploaded { cached: true, .. } => "uploaded (cached)",
                    Handover::Mirrored { .. } => "mirrored",
                }
                .to_string()
            });
            Connected {
                handle: Some(handle),
                view: Some(view),
                info,
            }
        }
        Err(e) => {
            info.error = Some(error_info(&e));
            Connected {
                handle: Some(handle),
                view: None,
                info,
            }
        }
    }
}

enum Pick {
    NotConfigured(String),
    Unreachable(String, CallError),
    NobodyOffers,
}

/// The server a step runs on: the one it names; else `preferred` if it offers the tool; else the
/// first selected server offering it available, else the first offering it at all.
fn pick_server<'a>(
    connected: &'a [Connected],
    tool: &str,
    preferred: Option<&str>,
    pinned: bool,
) -> Result<&'a Connected, Pick> {
    let unreachable = |c: &Connected| {
        let e = c.info.error.clone().map(|e| {
            CallError::new(maljan_client::ErrorCode::parse(&e.code), e.message)
                .with_remediation(e.remediation)
        });
        Pick::Unreachable(
            c.info.name.clone(),
            e.unwrap_or_else(|| {
                CallError::new(maljan_client::ErrorCode::ToolFailed, "server not connected")
            }),
        )
    };
    if let Some(p) = preferred {
        match connected.iter().find(|c| c.info.name == p) {
            Some(c)
                if c.view.is_some()
                    && (pinned || c.view.as_ref().is_some_and(|v| v.tool(tool).is_some())) =>
            {
                return Ok(c);
            }
            Some(c) if pinned => return Err(unreachable(c)),
            None if pinned => return Err(Pick::NotConfigured(p.to_string())),
            _ => {}
        }
    }
    let offering = |want_available: bool| {
        connected.iter().find(|c| {
            c.view
                .as_ref()
                .and_then(|v| v.tool(tool))
                .is_some_and(|t| t.available || !want_available)
        })
    };
    if let Some(c) = offering(true).or_else(|| offering(false)) {
        return Ok(c);
    }
    // Nobody reachable offers it: if some selected server could not be reached, that is why.
    match connected.iter().find(|c| c.view.is_none()) {
        Some(c) => Err(unreachable(c)),
        None => Err(Pick::NobodyOffers),
    }
}

/// Milliseconds kept to the microsecond: finer digits are noise in a report, and a short decimal
/// reads back from JSON as exactly the same f64 (the schema promises a lossless round trip).
fn to_microseconds(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

fn error_info(e: &CallError) -> ErrorInfo {
    ErrorInfo {
        code: e.code.as_str().to_string(),
        message: e.message.clone(),
        remediation: e.remediation.clone(),
    }
}

/// The answer as JSON (structured content or JSON text), else the text itself.
fn answer(rec: &CallRecord) -> Option<Value> {
    rec.json().or_else(|| {
        let t = rec.text();
        (!t.is_empty()).then_some(Value::String(t))
    })
}

fn sample_info(job: &Arc<Job>, steps: &[StepReport]) -> SampleInfo {
    let s = job.sample();
    let mut info = SampleInfo {
        name: s.map(|s| s.name.clone()).unwrap_or_default(),
        path: s
            .map(|s| s.path.to_string_lossy().into_owned())
            .unwrap_or_default(),
        size: s.map(|s| s.size).unwrap_or(0),
        sha256: s.map(|s| s.sha256.clone()).unwrap_or_default(),
        hashes: BTreeMap::new(),
        kind: None,
        description: None,
        mime: None,
    };
    let ok = |tool: &str| {
        steps
            .iter()
            .find(|st| st.tool == tool && st.status == StepStatus::Ok)
            .and_then(|st| st.result.as_ref())
    };
    if let Some(id) = ok(IDENTIFY_TOOL) {
        let field = |k: &str| id.get(k).and_then(Value::as_str).map(str::to_string);
        info.kind = field("kind");
        info.description = field("description");
        info.mime = field("mime");
    }
    if let Some(Value::Object(h)) = ok("hashes") {
        for (k, v) in h {
            if let Some(v) = v.as_str().filter(|v| !v.is_empty())
                && k != "read_path"
            {
                info.hashes.insert(k.clone(), v.to_string());
            }
        }
    }
    info.hashes
        .entry("sha256".into())
        .or_insert_with(|| info.sha256.clone());
    info
}
