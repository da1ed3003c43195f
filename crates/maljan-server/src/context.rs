//! What a running tool can reach: cancellation, progress, and the server's other tools.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Weak},
};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::{errors::ToolError, observe::CallRef};

/// Receives progress reports for one call (the protocol layer turns them into
/// notifications/progress when the request carried a progressToken).
pub trait ProgressSink: Send + Sync {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>);
}

/// What a running tool reaches of the server running it: its other tools. `ToolServer`
/// implements it; the context knows only this, so the server depends on the context and not
/// the other way round.
pub(crate) trait ToolHost: Send + Sync {
    fn invoke(
        self: Arc<Self>,
        tool: String,
        args: Map<String, Value>,
        ctx: ToolContext,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

    fn has_tool(&self, tool: &str) -> bool;
}

/// Handed to every tool call.
#[derive(Clone)]
pub struct ToolContext {
    cancel: CancellationToken,
    pub(crate) progress: Option<Arc<dyn ProgressSink>>,
    /// None outside a server ([`ToolContext::detached`]).
    host: Option<Weak<dyn ToolHost>>,
    depth: u32,
    /// The background runs (a schedule, a watch, a pipeline) this call descends from, outermost
    /// first (`schedule:nightly`, `pipeline:sync`): kept through nested calls and into the runs
    /// they start, so a run that would start itself again is seen as the loop it is.
    origin: Arc<[String]>,
    /// The observed call this context belongs to (None before the server observes it, and on a
    /// server without observers); a nested call's context starts with its parent's.
    pub(crate) call: Option<CallRef>,
}

/// How deep action lists may nest tool calls inside tool calls; a background run started by a
/// call counts one level deeper than that call, so runs that start runs share this limit.
pub const MAX_NESTING: u32 = 16;

impl ToolContext {
    pub(crate) fn new(
        cancel: CancellationToken,
        progress: Option<Arc<dyn ProgressSink>>,
        host: Option<Weak<dyn ToolHost>>,
        depth: u32,
    ) -> Self {
        Self {
            cancel,
            progress,
            host,
            depth,
            origin: Arc::from(Vec::new()),
            call: None,
        }
    }

    /// A context for calling a tool outside any protocol (tests, benches, the CLI).
    pub fn detached() -> Self {
        Self::new(CancellationToken::new(), None, None, 0)
    }

    fn host(&self) -> Option<Arc<dyn ToolHost>> {
        self.host.as_ref().and_then(Weak::upgrade)
    }

    /// Cancelled when the client cancels the call or its timeout expires. Long loops should check
    /// `is_cancelled()`; blocking work can hold a clone.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Reports progress; a no-op when the caller asked for none.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(sink) = &self.progress {
            sink.report(progress, total, message);
        }
    }

    /// The id the server's call observers know this run by: shared by a top-level call and
    /// every call nested inside it. None on a server without observers.
    pub fn correlation_id(&self) -> Option<&str> {
        self.call.as_ref().map(|c| &*c.correlation_id)
    }

    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    /// The same call without its progress reports: for a step of a longer job that reports
    /// its own progress, so the caller sees one count that only goes up.
    pub fn without_progress(&self) -> ToolContext {
        ToolContext {
            progress: None,
            ..self.clone()
        }
    }

    /// Calls another tool of the same server, under the same policy: a tool hidden by
    /// `--read-only` or `--allowed-actions` cannot be reached this way either.
    pub async fn invoke(&self, tool: &str, args: Map<String, Value>) -> Result<Value, ToolError> {
        let Some(host) = self.host() else {
            return Err(ToolError::not_configured(
                "nested tool calls need a running server",
            ));
        };
        if self.depth >= MAX_NESTING {
            return Err(ToolError::bad_argument(format!(
                "action lists nest deeper than {MAX_NESTING} levels"
            )));
        }
        let mut child = ToolContext::new(
            self.cancel.child_token(),
            self.progress.clone(),
            self.host.clone(),
            self.depth + 1,
        );
        child.call = self.call.clone();
        child.origin = self.origin.clone();
        host.invoke(tool.to_string(), args, child).await
    }

    /// How many calls deep this one is (0: a client's call or a background run's start).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The background runs this call descends from, outermost first.
    pub fn origin(&self) -> &[String] {
        &self.origin
    }

    /// This call, now inside the run `origin` (a pipeline run in the caller's own call): refused
    /// when that run is already one of its origins, since the run would then contain itself.
    pub fn within(&self, origin: &str) -> Result<ToolContext, ToolError> {
        let origin = extended(&self.origin, origin)?;
        Ok(ToolContext {
            origin,
            ..self.clone()
        })
    }

    /// Whether a tool of this name is served (for validating action lists before running them).
    pub fn has_tool(&self, tool: &str) -> bool {
        self.host().is_some_and(|host| host.has_tool(tool))
    }
}

/// A running server as background work sees it (a schedule firing, a watch seeing an event):
/// what a call's [`ToolContext`] gives a tool, without a call. A registry's start hooks
/// ([`Registry::on_start`](crate::Registry::on_start)) receive one when the server starts
/// serving, because background work needs the finished server (its policy-narrowed tools) and
/// the server does not exist yet while its registry is built.
#[derive(Clone)]
pub struct ServerHandle {
    host: Weak<dyn ToolHost>,
    stopped: CancellationToken,
}

impl ServerHandle {
    pub(crate) fn new(host: Weak<dyn ToolHost>, stopped: CancellationToken) -> Self {
        Self { host, stopped }
    }

    /// A context whose [`ToolContext::invoke`] reaches the server's tools under the same policy
    /// as a client's call (--read-only, --allowed-actions); `cancel` stops what it runs. Once
    /// the server is gone, invoking through it fails with not_configured.
    pub fn context(&self, cancel: CancellationToken) -> ToolContext {
        ToolContext::new(cancel, None, Some(self.host.clone()), 0)
    }

    /// The context of a background run `origin` (`schedule:NAME`, `watch:NAME`,
    /// `pipeline:NAME`) started by the call `parent` (None: by the server itself, a timer or a
    /// file event). The run counts one level deeper than its parent against [`MAX_NESTING`] and
    /// carries its origins, so a run that would start itself, directly or through others, is
    /// refused here with the chain that leads back to it.
    pub fn context_for(
        &self,
        parent: Option<&ToolContext>,
        origin: &str,
        cancel: CancellationToken,
    ) -> Result<ToolContext, ToolError> {
        let (depth, before) = match parent {
            Some(p) => (p.depth + 1, p.origin.clone()),
            None => (0, Arc::from(Vec::new())),
        };
        let origin = extended(&before, origin)?;
        if depth >= MAX_NESTING {
            return Err(ToolError::bad_argument(format!(
                "{} would start {} levels deep (the limit is {MAX_NESTING}): {}",
                origin.last().map(String::as_str).unwrap_or(""),
                depth,
                origin.join(" → ")
            ))
            .with_remediation(
                "runs that start runs (schedules, watches, pipelines) nest like action lists; \
                 start fewer from each other",
            ));
        }
        let mut ctx = ToolContext::new(cancel, None, Some(self.host.clone()), depth);
        ctx.origin = origin;
        Ok(ctx)
    }

    /// Cancelled when the server goes away: background work ends with it.
    pub fn stopped(&self) -> &CancellationToken {
        &self.stopped
    }
}

/// `before` followed by `origin`, or the loop error when `origin` is already in it.
fn extended(before: &[String], origin: &str) -> Result<Arc<[String]>, ToolError> {
    if before.iter().any(|o| o == origin) {
        let chain: Vec<&str> = before.iter().map(String::as_str).chain([origin]).collect();
        return Err(ToolError::bad_argument(format!(
            "a loop: {origin} would start itself again ({})",
            chain.join(" → ")
        ))
        .with_remediation(
            "a schedule, watch or pipeline must not start itself, directly or through another",
        ));
    }
    Ok(before.iter().cloned().chain([origin.to_string()]).collect())
}

/// Inputs up to this many bytes are worked on in place by [`blocking_unless_small`].
pub const IN_PLACE_BYTES: u64 = 64 * 1024;

/// [`blocking`], except that work on an input of at most [`IN_PLACE_BYTES`] runs at once on the
/// calling thread: the hop to the blocking pool and back costs more than reading and hashing
/// that much (tens of microseconds against a few), and holds the runtime no longer than that.
/// A panic is still contained: `ToolServer::invoke` polls every call inside `catch_unwind`.
pub async fn blocking_unless_small<T, F>(input_bytes: u64, work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    if input_bytes <= IN_PLACE_BYTES {
        return work();
    }
    blocking(work).await
}

/// Runs blocking work (file I/O, parsing) on the blocking pool; a panic becomes `tool_failed`.
pub async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(ToolError::tool_failed(format!(
            "the tool panicked: {}",
            panic_message(e.into_panic())
        ))),
        Err(e) => Err(ToolError::tool_failed(format!(
            "the tool's task was lost: {e}"
        ))),
    }
}

pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
