//! One server for one job: the handle a caller calls tools through, and where each call is
//! recorded in the ledger.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use maljan_protocol::ErrorCode;
use serde_json::Value;

use super::{CallRecord, Job};
use crate::{
    config::ServerConfig,
    ledger::LedgerEntry,
    manifest::ServerView,
    outcome::CallError,
    runtime::{ServerSlot, read_reply, read_view},
    staging::{self, Handover, StagingTarget, UploadCache, UploadProgress},
};

/// result, error, wait for a slot, duration, trial.
type Outcome = (Option<Value>, Option<CallError>, Duration, Duration, bool);

/// One server, for one job.
#[derive(Clone)]
pub struct ServerHandle {
    pub(super) job: Arc<Job>,
    pub(super) slot: Arc<ServerSlot>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("job", &self.job.id)
            .field("server", &self.slot.name)
            .finish()
    }
}

impl ServerHandle {
    pub fn name(&self) -> &str {
        &self.slot.name
    }

    pub fn job(&self) -> &Arc<Job> {
        &self.job
    }

    pub fn slot(&self) -> &Arc<ServerSlot> {
        &self.slot
    }

    /// Tools and manifest, read once per job (the first call also connects). A server that cannot
    /// be reached makes the job degraded: "mcp server '<name>' unavailable: <why>".
    pub async fn view(&self) -> Result<Arc<ServerView>, CallError> {
        let cell = self.job.view_cell(&self.slot.name);
        cell.get_or_init(|| async {
            let slot = self.slot.clone();
            let g = self.slot.guarded(|conn| async move { read_view(&slot, &conn).await }).await;
            if let Some(rest) = &g.rest {
                self.note_rest(rest);
            }
            match g.value {
                Ok(v) => {
                    if let Some(why) = &v.manifest_error {
                        tracing::info!(server = %self.slot.name, "manifest unreadable ({why}); all listed tools count as available");
                    }
                    Ok(Arc::new(v))
                }
                Err(e) => {
                    self.job.degrade(format!("mcp server '{}' unavailable: {}", self.slot.name, e.message));
                    Err(e)
                }
            }
        })
        .await
        .clone()
    }

    fn note_rest(&self, rest: &crate::breaker::RestEvent) {
        let reason = format!(
            "Tool server {} was rested for {} after {} calls in a row it did not answer (the last: {}).",
            rest.server,
            crate::transport::human_secs(rest.cooldown),
            rest.failures,
            rest.reason
        );
        self.job.degrade(reason);
        let _ = self.job.runtime.ledger().record_rest(
            &rest.server,
            Some(&self.job.id),
            rest.failures,
            rest.cooldown.as_secs_f64(),
            &rest.reason,
        );
    }

    /// How the sample reaches this server (the local path for stdio; issue 5: an upload or a
    /// mirror copy for HTTP servers). Computed once per job, before the first call.
    pub async fn handover(&self) -> Option<Handover> {
        let sample = self.job.sample.as_ref()?;
        let cell = self.job.handover_cell(&self.slot.name);
        Some(
            cell.get_or_init(|| async { staging::hand_over(self, sample).await })
                .await
                .clone(),
        )
    }

    /// Calls one tool: under the breaker and the cap, with the tool's real timeout, recorded in the
    /// ledger before it returns. Never panics, never returns early without a record.
    pub async fn call(&self, tool: &str, args: Value) -> CallRecord {
        let ev_id = self.job.next_ev_id();
        let started = SystemTime::now();
        let outcome = self.call_inner(tool, &args).await;
        self.record(ev_id, started, tool, args, outcome).await
    }

    /// [`Self::call`], ended early when `cancel` fires: the request is cancelled on the server
    /// (`notifications/cancelled`, as for any abandoned call) and the call is recorded with the
    /// error code `cancelled`.
    pub async fn call_cancellable(
        &self,
        tool: &str,
        args: Value,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> CallRecord {
        let ev_id = self.job.next_ev_id();
        let started = SystemTime::now();
        let began = std::time::Instant::now();
        let outcome = tokio::select! {
            o = self.call_inner(tool, &args) => o,
            () = cancel.cancelled() => (
                None,
                Some(CallError::new(
                    ErrorCode::Other("cancelled".into()),
                    "the job was cancelled while this call was in flight",
                ).with_remediation("run the job again")),
                Duration::ZERO,
                began.elapsed(),
                false,
            ),
        };
        self.record(ev_id, started, tool, args, outcome).await
    }

    /// Records a call its caller refused and never sent (a tool the agent withheld from the
    /// model): a ledger row like any call's, not ok, with `error`'s code and remedy and the
    /// arguments as written (secrets the schema marks write-only kept out), so the report and
    /// `maljan ledger` show what was asked for and why it did not run.
    pub async fn record_refused(&self, tool: &str, args: Value, error: CallError) -> CallRecord {
        let ev_id = self.job.next_ev_id();
        let outcome = (None, Some(error), Duration::ZERO, Duration::ZERO, false);
        self.record(ev_id, SystemTime::now(), tool, args, outcome)
            .await
    }

    async fn record(
        &self,
        ev_id: String,
        started_wall: SystemTime,
        tool: &str,
        args: Value,
        outcome: Outcome,
    ) -> CallRecord {
        let schema = match self.view().await {
            Ok(view) => view.tool(tool).map(|t| t.input_schema.clone()),
            Err(_) => None,
        };
        let args_text = ledger_args(&args, schema.as_ref());
        let (result, error, wait, duration, trial) = outcome;
        let ok = error.is_none();
        let (result_text, truncated) = match &result {
            Some(v) => {
                let (t, cut) = self
                    .job
                    .runtime
                    .ledger()
                    .cap_result(serde_json::to_string(v).unwrap_or_default());
                (Some(t), cut)
            }
            None => (None, false),
        };
        let started_ms = crate::time::unix_ms(started_wall);
        let entry = LedgerEntry {
            job_id: self.job.id.clone(),
            ev_id: ev_id.clone(),
            server: self.slot.name.clone(),
            tool: tool.to_string(),
            args: args_text,
            result: result_text,
            result_truncated: truncated,
            ok,
            error_code: error.as_ref().map(|e| e.code.as_str().to_string()),
            message: error.as_ref().map(|e| e.message.clone()),
            remediation: error.as_ref().map(|e| e.remediation.clone()),
            started_at: String::new(),
            started_at_ms: started_ms,
            wait_ms: wait.as_secs_f64() * 1000.0,
            duration_ms: duration.as_secs_f64() * 1000.0,
            trial,
        };
        let ledger_error = match self.job.runtime.ledger().append(entry).await {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!(job = %self.job.id, ev = %ev_id, "ledger: {e}");
                Some(e.to_string())
            }
        };
        CallRecord {
            ev_id,
            job_id: self.job.id.clone(),
            server: self.slot.name.clone(),
            tool: tool.to_string(),
            args,
            ok,
            result,
            error,
            started_at: crate::time::rfc3339_ms(started_ms),
            wait_ms: wait.as_secs_f64() * 1000.0,
            duration_ms: duration.as_secs_f64() * 1000.0,
            trial,
            ledger_error,
        }
    }

    async fn call_inner(&self, tool: &str, args: &Value) -> Outcome {
        let fail = |e: CallError| (None, Some(e), Duration::ZERO, Duration::ZERO, false);
        if let Some(allowed) = &self.slot.cfg.tools
            && !allowed.iter().any(|t| t == tool)
        {
            return fail(
                CallError::new(
                    ErrorCode::NotConfigured,
                    format!(
                        "tool '{tool}' is not enabled for server '{}'",
                        self.slot.name
                    ),
                )
                .with_remediation(format!(
                    "add it to servers.{}.tools in the config",
                    self.slot.name
                )),
            );
        }
        let arguments = match args {
            Value::Object(m) => Some(m.clone()),
            Value::Null => None,
            _ => {
                return fail(CallError::new(
                    ErrorCode::BadArgument,
                    "tool arguments must be a JSON object".to_string(),
                ));
            }
        };
        let view = match self.view().await {
            Ok(v) => v,
            Err(e) => return fail(e),
        };
        // Not sent: an unlisted tool, or arguments its inputSchema refuses (recorded like any
        // call, with its code and remedy).
        let schemas = (!self.slot.cfg.send_unchecked_arguments).then_some(&self.slot.schemas);
        if let Err(e) = crate::precheck::check(schemas, &view, tool, arguments.as_ref()) {
            return fail(e);
        }
        if let Some(t) = view.tool(tool)
            && !t.available
        {
            let mut e = CallError::new(
                ErrorCode::MissingDependency,
                format!(
                    "{tool} is unavailable on this host: {}",
                    t.reason.clone().unwrap_or_default()
                ),
            );
            if let Some(r) = &t.remediation {
                e = e.with_remediation(r.clone());
            }
            // Not sent: the manifest says it cannot answer (recorded, so the report shows why).
            return fail(e);
        }
        let timeout = view.timeout_for(tool, &self.slot.breaker_cfg);
        let arguments = match self.handover().await {
            Some(h) => {
                // The one rule for the sample argument: declared by the tool's schema, or named
                // in the config (`pin_sample = "NAME"`).
                let named = self.slot.cfg.pin_sample.as_ref().and_then(|p| p.param());
                let param = view
                    .tool(tool)
                    .and_then(|t| maljan_protocol::sample_param(&t.input_schema, named));
                staging::rewrite_arguments(arguments, self.job.sample.as_ref(), &h, param)
            }
            None => arguments,
        };
        self.send(tool, arguments, timeout).await
    }

    /// One tools/call under the breaker and the cap.
    async fn send(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        timeout: Duration,
    ) -> Outcome {
        let tool_owned = tool.to_string();
        // The call's one measurement, taken by the transport (and given to OpenTelemetry there):
        // the runtime's Prometheus histogram and the ledger's duration are filled from it too.
        let measured = Mutex::new(None);
        let slot = &measured;
        let g = self
            .slot
            .guarded(|conn| async move {
                let (result, m) = conn.call_tool(&tool_owned, arguments, timeout).await;
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
                result
            })
            .await;
        let measured = measured.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(rest) = &g.rest {
            self.note_rest(rest);
        }
        let (result, error) = match g.value {
            Ok(reply) => read_reply(reply),
            Err(e) => (None, Some(e)),
        };
        self.job.runtime.metrics().call(
            &self.slot.name,
            error.as_ref().map(|e| e.code.as_str()),
            measured.as_ref(),
        );
        // Not sent (resting, refused, not connected): the time the runtime spent deciding so.
        let duration = measured.as_ref().map_or(g.duration, |m| m.took);
        (result, error, g.wait, duration, g.trial)
    }
}

/// Staging hands the job's sample to this server through these.
impl StagingTarget for ServerHandle {
    fn server(&self) -> &str {
        &self.slot.name
    }

    fn config(&self) -> &ServerConfig {
        &self.slot.cfg
    }

    fn base_dir(&self) -> PathBuf {
        self.job.runtime.config().base_dir()
    }

    fn job_id(&self) -> &str {
        &self.job.id
    }

    fn uploads(&self) -> &UploadCache {
        self.job.runtime.uploads()
    }

    fn call_cap(&self) -> usize {
        self.slot.breaker_cfg.max_concurrent_calls
    }

    fn degrade(&self, reason: String) {
        self.job.degrade(reason);
    }

    fn uploaded(&self, bytes: u64) {
        self.job.runtime.metrics().uploaded(bytes);
    }

    fn keep_mirror(&self, path: PathBuf) {
        self.job.add_mirror(path);
    }

    fn report_progress(&self, progress: &UploadProgress) {
        self.job.report_progress(progress);
    }

    async fn staging_tools(&self) -> Option<Vec<String>> {
        self.view().await.ok().map(|v| v.staging_tools.clone())
    }

    /// Sent as given under the breaker and the cap, with the tool's timeout, recorded with
    /// `summary` in place of the arguments (the ledger never holds the content).
    async fn call_staging(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        summary: Value,
    ) -> CallRecord {
        let ev_id = self.job.next_ev_id();
        let started = SystemTime::now();
        let timeout = match self.view().await {
            Ok(v) => v.timeout_for(tool, &self.slot.breaker_cfg),
            Err(_) => self.slot.breaker_cfg.call_timeout(),
        };
        let outcome = self.send(tool, Some(arguments), timeout).await;
        self.record(ev_id, started, tool, summary, outcome).await
    }
}

/// The arguments as the ledger keeps them: a value whose property the tool's input schema marks
/// `writeOnly` (a secret, such as the keys `FA_s3_later_init` takes) is replaced by a note, so no
/// secret is written to the ledger in clear. Everything else is kept as the caller wrote it.
fn ledger_args(args: &Value, schema: Option<&Value>) -> String {
    let write_only = |name: &str| {
        schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("writeOnly"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let kept = match args {
        Value::Object(map) if map.keys().any(|k| write_only(k)) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if write_only(k) && !v.is_null() {
                        Value::String("[write-only: not recorded]".into())
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        _ => return serde_json::to_string(args).unwrap_or_else(|_| "null".into()),
    };
    serde_json::to_string(&kept).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::ledger_args;
    use serde_json::json;

    #[test]
    fn write_only_arguments_never_reach_the_ledger() {
        let schema = json!({"properties": {
            "bucket": {"type": "string"},
            "aws_secret_access_key": {"type": "string", "writeOnly": true},
        }});
        let args = json!({"bucket": "b", "aws_secret_access_key": "SECRET"});
        let kept = ledger_args(&args, Some(&schema));
        assert!(!kept.contains("SECRET"), "{kept}");
        assert!(kept.contains(r#""bucket":"b""#), "{kept}");
        assert!(kept.contains("write-only"), "{kept}");
        // No schema, or nothing write-only: kept exactly as written.
        assert_eq!(ledger_args(&args, None), args.to_string());
        assert_eq!(
            ledger_args(&json!({"bucket": "b"}), Some(&schema)),
            r#"{"bucket":"b"}"#
        );
    }
}
