//! Progress tracking (FA_progress_list, _cancel, _clear) over the server's own calls: a call
//! observer keeps every call in flight with the last progress it reported
//! (`ToolContext::progress`, the same reports MCP progress notifications carry), and
//! FA_progress_cancel fires the call's cancellation token — what notifications/cancelled does.
//!
//! A call is named by its `progress_name` argument when it has one (FA_download_file's), else
//! `TOOL#ID`. A finished call is kept (until FA_progress_clear) when it reported progress, was
//! named, was cancelled or ran a second or more; the others are forgotten as they end, so the
//! list is not every quick call the server ever answered. At most `MAX_FINISHED` are kept.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use maljan_server::{CallEnd, CallObserver, CallStart, Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{Config, NoArgs};

const MAX_FINISHED: usize = 1000;
const LONG_CALL: Duration = Duration::from_secs(1);

#[derive(Clone, Serialize, JsonSchema)]
pub(crate) struct Snapshot {
    name: String,
    tool: String,
    correlation_id: String,
    /// What the call last reported: progress so far, and the total when it knows one.
    transferred: f64,
    total: Option<f64>,
    message: Option<String>,
    /// running, done, error or cancelled.
    status: &'static str,
    /// Seconds since the epoch.
    started_at: f64,
    finished_at: Option<f64>,
}

struct Entry {
    snapshot: Snapshot,
    cancel: CancellationToken,
    named: bool,
    reported: bool,
    cancel_requested: bool,
}

#[derive(Default)]
pub(crate) struct Progress {
    entries: Mutex<BTreeMap<u64, Entry>>,
}

fn now() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

impl Progress {
    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct ProgressObserver(Arc<Config>);

impl CallObserver for ProgressObserver {
    fn started(&self, call: &CallStart<'_>) {
        if call.tool.starts_with("FA_progress_") {
            return;
        }
        let given = call.arguments.get("progress_name").and_then(|v| v.as_str());
        let snapshot = Snapshot {
            name: given.map_or_else(|| format!("{}#{}", call.tool, call.id), str::to_string),
            tool: call.tool.to_string(),
            correlation_id: call.correlation_id.to_string(),
            transferred: 0.0,
            total: None,
            message: None,
            status: "running",
            started_at: now(),
            finished_at: None,
        };
        self.0.progress.entries().insert(
            call.id,
            Entry {
                snapshot,
                cancel: call.cancel.clone(),
                named: given.is_some(),
                reported: false,
                cancel_requested: false,
            },
        );
    }

    fn progressed(&self, id: u64, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(e) = self.0.progress.entries().get_mut(&id) {
            e.reported = true;
            e.snapshot.transferred = progress;
            e.snapshot.total = total;
            e.snapshot.message = message.map(str::to_string);
        }
    }

    fn finished(&self, call: &CallEnd<'_>) {
        let mut entries = self.0.progress.entries();
        let Some(e) = entries.get_mut(&call.id) else {
            return;
        };
        if !(e.reported || e.named || e.cancel_requested || call.duration >= LONG_CALL) {
            entries.remove(&call.id);
            return;
        }
        e.snapshot.status = match (e.cancel_requested, call.error) {
            (true, _) => "cancelled",
            (false, None) => "done",
            (false, Some(_)) => "error",
        };
        e.snapshot.finished_at = Some(now());
        let finished: Vec<u64> = (entries.iter())
            .filter(|(_, e)| e.snapshot.finished_at.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in finished
            .iter()
            .take(finished.len().saturating_sub(MAX_FINISHED))
        {
            entries.remove(id);
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    /// The call's name, as FA_progress_list shows it.
    name: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    reg.observe(Arc::new(ProgressObserver(cfg.clone())));
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_progress_list",
            "The server's calls in flight, and the finished long ones until cleared: name, tool, \
             correlation id, the progress last reported (transferred of total), status \
             (running, done, error, cancelled), start and end times.",
        )
        .title("List calls in progress")
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                let list: Vec<Snapshot> = c
                    .progress
                    .entries()
                    .values()
                    .map(|e| e.snapshot.clone())
                    .collect();
                Ok::<_, ToolError>(list)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_progress_cancel",
            "Cancel the running call `name` (as notifications/cancelled would); false when no \
             running call has that name.",
        )
        .title("Cancel a call")
        .writes()
        .timeout_s(60),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move {
                let mut entries = c.progress.entries();
                let found = entries
                    .values_mut()
                    .find(|e| e.snapshot.name == a.name && e.snapshot.finished_at.is_none());
                Ok::<_, ToolError>(match found {
                    Some(e) => {
                        e.cancel_requested = true;
                        e.cancel.cancel();
                        true
                    }
                    None => false,
                })
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_progress_clear",
            "Forget every finished call FA_progress_list shows; returns how many.",
        )
        .title("Clear finished calls")
        .writes()
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                let mut entries = c.progress.entries();
                let before = entries.len();
                entries.retain(|_, e| e.snapshot.finished_at.is_none());
                Ok::<_, ToolError>(before - entries.len())
            }
        },
    );
}
