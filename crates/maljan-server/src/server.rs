//! A tool server independent of any transport: the served registry, its manifest, and the one
//! place a call runs — argument validation, the tool's timeout, cancellation, panic containment.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::FutureExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::{
    context::{ProgressSink, ToolContext, ToolHost, panic_message},
    errors::ToolError,
    manifest::{Manifest, ManifestTool},
    observe::{CallEnd, CallRef, CallStart, ObservedProgress, Observers},
    registry::{RegisteredTool, Registry, ToolMeta},
};

/// The name of the manifest tool every maljan server answers (fixed by the shared conventions).
pub use maljan_protocol::CAPABILITIES_TOOL;

/// The outcome of one call, as the protocol layer will send it.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub value: Value,
    pub is_error: bool,
}

/// A built server: name, version, tools and the manifest probed at start-up.
pub struct ToolServer {
    name: String,
    version: String,
    instructions: Option<String>,
    registry: Registry,
    manifest: Manifest,
    /// The manifest's entry of each tool that is unavailable here (usually none), by name.
    unavailable: HashMap<String, usize>,
    /// Whether the registry's start hooks have run (they run once, on the first `start`).
    started: std::sync::Once,
    /// Cancelled when the server is dropped, ending the background work its hooks started.
    stopped: CancellationToken,
    /// The next id of an observed call.
    next_call: AtomicU64,
}

impl Drop for ToolServer {
    fn drop(&mut self) {
        self.stopped.cancel();
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArguments {}

impl ToolServer {
    /// Builds a server from a registry. The `capabilities` tool is added here, and every tool's
    /// optional dependency is probed now, once.
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        registry: Registry,
    ) -> Arc<Self> {
        let name = name.into();
        let version = version.into();
        let manifest = Manifest {
            server: name.clone(),
            version: version.clone(),
            tools: registry
                .tools()
                .iter()
                .filter(|t| !t.meta.staging_primitive && !t.meta.unlisted)
                .map(|t| probe(&t.meta))
                .collect(),
        };
        let mut registry = registry;
        let published = manifest.clone();
        registry.add(
            ToolMeta::new(
                CAPABILITIES_TOOL,
                "What this server can do on this host: each tool, whether it is available, why not, \
                 how to fix it, and its timeout in seconds.",
            )
            .title("Capability manifest"),
            move |_ctx, _args: NoArguments| {
                let manifest = published.clone();
                async move { Ok::<_, ToolError>(manifest) }
            },
        );
        let unavailable = (manifest.tools.iter().enumerate())
            .filter(|(_, t)| !t.available)
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Arc::new(Self {
            name,
            version,
            instructions: None,
            registry,
            manifest,
            unavailable,
            started: std::sync::Once::new(),
            stopped: CancellationToken::new(),
            next_call: AtomicU64::new(1),
        })
    }

    /// Starts the background work of the registry's start hooks, once (later calls do nothing).
    /// The transports call it when they begin serving; a server built only to list its tools
    /// (`maljan tools`) never starts anything. Must be called inside a Tokio runtime.
    pub fn start(self: &Arc<Self>) {
        self.started.call_once(|| {
            let host: Arc<dyn ToolHost> = self.clone();
            let handle =
                crate::context::ServerHandle::new(Arc::downgrade(&host), self.stopped.clone());
            for hook in self.registry.start_hooks() {
                hook(handle.clone());
            }
        });
    }

    pub fn with_instructions(self: Arc<Self>, instructions: impl Into<String>) -> Arc<Self> {
        let mut this = Arc::try_unwrap(self)
            .unwrap_or_else(|_| panic!("with_instructions on a shared server"));
        this.instructions = Some(instructions.into());
        Arc::new(this)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn version(&self) -> &str {
        &self.version
    }
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Tools a client sees in tools/list: all but the unlisted ones, staging primitives included
    /// (a client learns from tools/list that this server receives samples; the maljan runtime
    /// hides them).
    pub fn listed_tools(&self) -> impl Iterator<Item = &crate::registry::RegisteredTool> {
        self.registry.tools().iter().filter(|t| !t.meta.unlisted)
    }

    /// Runs one call to completion. Never panics and never returns a protocol error for a tool's
    /// own trouble: unknown tools are the caller's to report (see `call`).
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: Map<String, Value>,
        cancel: CancellationToken,
        progress: Option<Arc<dyn ProgressSink>>,
    ) -> Option<CallOutcome> {
        if self.registry.get(tool)?.meta.unlisted {
            return None;
        }
        let host: Arc<dyn ToolHost> = self.clone();
        let ctx = ToolContext::new(cancel, progress, Some(Arc::downgrade(&host)), 0);
        Some(match self.invoke(tool, args, ctx).await {
            Ok(value) => CallOutcome {
                value,
                is_error: false,
            },
            Err(err) => CallOutcome {
                value: err.to_json(tool),
                is_error: true,
            },
        })
    }

    pub(crate) async fn invoke(
        self: &Arc<Self>,
        tool: &str,
        args: Map<String, Value>,
        ctx: ToolContext,
    ) -> Result<Value, ToolError> {
        let Some(registered) = self.registry.get(tool) else {
            return Err(ToolError::bad_argument(format!("unknown tool '{tool}'")));
        };
        if self.registry.observers.0.is_empty() {
            return self.run(registered, tool, args, ctx).await;
        }
        let mut ctx = ctx;
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let parent = ctx.call.as_ref().map(|c| c.id);
        let correlation_id: Arc<str> = match &ctx.call {
            Some(call) => call.correlation_id.clone(),
            None => uuid::Uuid::new_v4().simple().to_string().into(),
        };
        ctx.call = Some(CallRef {
            id,
            correlation_id: correlation_id.clone(),
        });
        let observers = self.registry.observers.clone();
        ctx.progress = Some(Arc::new(ObservedProgress {
            inner: ctx.progress.take(),
            id,
            observers: observers.clone(),
        }));
        let start = CallStart {
            id,
            parent,
            correlation_id: &correlation_id,
            tool,
            arguments: &args,
            cancel: ctx.cancellation(),
        };
        for o in &observers.0 {
            o.started(&start);
        }
        let mut ending = Ending {
            observers,
            id,
            correlation_id,
            tool: tool.to_string(),
            began: Instant::now(),
            result: None,
        };
        let result = self.run(registered, tool, args, ctx).await;
        ending.result = Some(result.as_ref().err().cloned());
        result
    }

    /// Runs a looked-up tool: its availability, its timeout, cancellation, panics.
    async fn run(
        self: &Arc<Self>,
        registered: &RegisteredTool,
        tool: &str,
        args: Map<String, Value>,
        ctx: ToolContext,
    ) -> Result<Value, ToolError> {
        if let Some(entry) = self.unavailable.get(tool).map(|&i| &self.manifest.tools[i]) {
            return Err(ToolError::missing_dependency(
                entry
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("{tool} is unavailable on this host")),
            )
            .with_remediation(entry.remediation.clone().unwrap_or_default()));
        }
        let cancel = ctx.cancellation().clone();
        let timeout = registered.meta.timeout;
        // The tool's future is polled here, inside `catch_unwind`, so a panic is contained;
        // cancellation or the timeout stop waiting for it at once by dropping it (blocking work it
        // handed to the pool sees the token cancelled). Polled first (`biased`): a tool that
        // finishes on its first poll never arms the timeout's timer.
        let work = std::panic::AssertUnwindSafe((registered.handler)(ctx, args)).catch_unwind();
        let guard = cancel.clone().drop_guard();
        let result = tokio::select! {
            biased;
            finished = work => match finished {
                Ok(result) => result,
                Err(panic) => Err(ToolError::tool_failed(format!(
                    "the tool panicked: {}", panic_message(panic)))),
            },
            _ = cancel.cancelled() => {
                Err(ToolError::tool_failed("the call was cancelled").with_remediation("none needed: the caller cancelled it"))
            }
            _ = sleep_or_forever(timeout) => {
                Err(ToolError::timeout(format!(
                    "{tool} did not finish within its timeout of {} s",
                    timeout.map(|t| t.as_secs_f64()).unwrap_or_default()
                )))
            }
        };
        // Dropping the guard cancels the token, telling blocking work that held a clone to stop.
        drop(guard);
        result
    }
}

/// Tells the observers a call ended, also when its future is dropped unfinished (its caller's
/// timeout or cancellation stopped waiting for it).
struct Ending {
    observers: Observers,
    id: u64,
    correlation_id: Arc<str>,
    tool: String,
    began: Instant,
    /// Some(None): succeeded; Some(Some(e)): failed; None: dropped unfinished.
    result: Option<Option<ToolError>>,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let dropped;
        let error = match &self.result {
            Some(e) => e.as_ref(),
            None => {
                dropped = ToolError::tool_failed("the call was stopped before it finished");
                Some(&dropped)
            }
        };
        let end = CallEnd {
            id: self.id,
            correlation_id: &self.correlation_id,
            tool: &self.tool,
            duration: self.began.elapsed(),
            error,
        };
        for o in &self.observers.0 {
            o.finished(&end);
        }
    }
}

impl ToolHost for ToolServer {
    fn invoke(
        self: Arc<Self>,
        tool: String,
        args: Map<String, Value>,
        ctx: ToolContext,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>> {
        Box::pin(async move { ToolServer::invoke(&self, &tool, args, ctx).await })
    }

    fn has_tool(&self, tool: &str) -> bool {
        self.registry.get(tool).is_some()
    }
}

async fn sleep_or_forever(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

fn probe(meta: &ToolMeta) -> ManifestTool {
    let found = meta.probe.as_ref().map(|p| (p.dependency.clone(), p.run()));
    let (optional_dependency, missing) = match found {
        Some((dep, Err(missing))) => (Some(dep), Some(missing)),
        Some((dep, Ok(()))) => (Some(dep), None),
        None => (None, None),
    };
    ManifestTool {
        name: meta.name.clone(),
        optional_dependency,
        available: missing.is_none(),
        reason: missing.as_ref().map(|m| m.reason.clone()),
        timeout_s: meta.timeout.map(|t| t.as_secs_f64()),
        remediation: missing.as_ref().map(|m| m.remediation.clone()),
        without: missing.and_then(|m| m.without),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    struct Depth {
        left: u32,
    }

    fn nesting_server() -> Arc<ToolServer> {
        let mut registry = Registry::new();
        registry.add(
            ToolMeta::new("nest", "Calls itself `left` more times"),
            |ctx, a: Depth| async move {
                if a.left == 0 {
                    return Ok(json!({"bottom": true, "sees_itself": ctx.has_tool("nest")}));
                }
                let mut args = Map::new();
                args.insert("left".into(), json!(a.left - 1));
                ctx.invoke("nest", args).await
            },
        );
        ToolServer::new("t", "1", registry)
    }

    fn left(n: u32) -> Map<String, Value> {
        let mut args = Map::new();
        args.insert("left".into(), json!(n));
        args
    }

    #[tokio::test]
    async fn a_tool_reaches_the_other_tools_of_its_server_up_to_the_nesting_limit() {
        let server = nesting_server();
        let call = |n| server.call("nest", left(n), CancellationToken::new(), None);
        let deep = call(crate::context::MAX_NESTING).await.unwrap();
        assert_eq!(deep.value, json!({"bottom": true, "sees_itself": true}));
        let too_deep = call(crate::context::MAX_NESTING + 1).await.unwrap();
        assert!(too_deep.is_error, "{:?}", too_deep.value);
        assert_eq!(too_deep.value["error"]["code"], "bad_argument");
    }

    /// Records what an observer hears, as (event, id, parent, correlation, tool, error code).
    #[derive(Default)]
    struct Heard(std::sync::Mutex<Vec<Row>>);
    type Row = (String, u64, Option<u64>, String, String, Option<String>);

    impl crate::observe::CallObserver for Heard {
        fn started(&self, c: &CallStart<'_>) {
            let row = (
                "start".into(),
                c.id,
                c.parent,
                c.correlation_id.into(),
                c.tool.into(),
                None,
            );
            self.0.lock().unwrap().push(row);
        }
        fn progressed(&self, id: u64, _p: f64, _t: Option<f64>, _m: Option<&str>) {
            self.0.lock().unwrap().push((
                "progress".into(),
                id,
                None,
                String::new(),
                String::new(),
                None,
            ));
        }
        fn finished(&self, c: &CallEnd<'_>) {
            let code = c.error.map(|e| e.code.as_str().to_string());
            let row = (
                "end".into(),
                c.id,
                None,
                c.correlation_id.into(),
                c.tool.into(),
                code,
            );
            self.0.lock().unwrap().push(row);
        }
    }

    #[tokio::test]
    async fn an_observer_hears_every_call_of_a_run_under_one_correlation_id() {
        let mut registry = Registry::new();
        registry.add(
            ToolMeta::new("nest", "Calls itself `left` more times"),
            |ctx, a: Depth| async move {
                ctx.progress(1.0, Some(2.0), None);
                if a.left == 0 {
                    return Err(ToolError::bad_argument("bottom"));
                }
                let mut args = Map::new();
                args.insert("left".into(), json!(a.left - 1));
                let _ = ctx.invoke("nest", args).await;
                Ok(json!({"correlation": ctx.correlation_id()}))
            },
        );
        let heard = Arc::new(Heard::default());
        registry.observe(heard.clone());
        let server = ToolServer::new("t", "1", registry);
        let out = server
            .call("nest", left(2), CancellationToken::new(), None)
            .await
            .unwrap();
        let rows = heard.0.lock().unwrap().clone();
        let starts: Vec<_> = rows.iter().filter(|r| r.0 == "start").collect();
        let ends: Vec<_> = rows.iter().filter(|r| r.0 == "end").collect();
        assert_eq!((starts.len(), ends.len()), (3, 3), "{rows:?}");
        assert_eq!(
            rows.iter().filter(|r| r.0 == "progress").count(),
            3 + 2 + 1,
            "{rows:?}"
        );
        let correlation = &starts[0].3;
        assert!(
            rows.iter()
                .filter(|r| r.0 != "progress")
                .all(|r| &r.3 == correlation)
        );
        assert_eq!(out.value["correlation"], json!(correlation));
        assert_eq!(
            (starts[0].2, starts[1].2, starts[2].2),
            (None, Some(starts[0].1), Some(starts[1].1))
        );
        // The innermost call ends first, with its error code; the outer ones succeed.
        assert_eq!(ends[0].5.as_deref(), Some("bad_argument"));
        assert_eq!(ends[2].5, None);
        // Another top-level call is another run.
        server
            .call("nest", left(0), CancellationToken::new(), None)
            .await
            .unwrap();
        let last = heard.0.lock().unwrap().last().cloned().unwrap();
        assert_ne!(&last.3, correlation);
    }

    /// Outside a server there is nothing to reach: a nested call says so, it does not panic.
    #[tokio::test]
    async fn a_detached_context_reaches_no_tools() {
        let ctx = ToolContext::detached();
        assert!(!ctx.has_tool("nest"));
        let err = ctx.invoke("nest", left(0)).await.unwrap_err();
        assert_eq!(err.code, crate::errors::ErrorCode::NotConfigured);
    }

    /// Start hooks run once, when the server starts, with a handle that reaches its tools; the
    /// handle's `stopped` fires when the server is dropped.
    #[tokio::test]
    async fn a_start_hook_reaches_the_started_server_and_sees_it_stop() {
        let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut registry = Registry::new();
        registry.add(
            ToolMeta::new("echo", "Answers 1"),
            |_ctx, _a: NoArguments| async { Ok::<_, ToolError>(json!(1)) },
        );
        registry.on_start(move |handle| {
            let seen = seen_tx.clone();
            tokio::spawn(async move {
                let answer = handle
                    .context(CancellationToken::new())
                    .invoke("echo", Map::new())
                    .await;
                seen.send(format!("{answer:?}")).unwrap();
                handle.stopped().cancelled().await;
                seen.send("stopped".to_string()).unwrap();
            });
        });
        let server = ToolServer::new("t", "1", registry);
        server.start();
        server.start();
        assert_eq!(seen_rx.recv().await.unwrap(), "Ok(Number(1))");
        drop(server);
        assert_eq!(seen_rx.recv().await.unwrap(), "stopped");
        assert!(seen_rx.recv().await.is_none(), "the hook ran once");
    }
}
