//! Watching the calls a server runs: a [`CallObserver`] registered on the [`Registry`]
//! (`Registry::observe`) hears every call start, report progress and end — top-level calls and
//! the nested ones action lists make through `ToolContext::invoke` alike, since both pass through
//! `ToolServer::invoke`. It is how a server keeps an audit trail or lists its in-flight calls;
//! the protocol-level counters of `/metrics` are a different thing (`metrics`).
//!
//! Observers are called on the call's own task: they must return at once (hand slow work, such
//! as a database write, to a thread of their own).
//!
//! [`Registry`]: crate::Registry

use std::{sync::Arc, time::Duration};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::{context::ProgressSink, errors::ToolError};

/// A call as it starts.
pub struct CallStart<'a> {
    /// Unique within the server's process.
    pub id: u64,
    /// The call whose action list made this one, if any.
    pub parent: Option<u64>,
    /// Shared by a top-level call and every call nested inside it.
    pub correlation_id: &'a str,
    pub tool: &'a str,
    /// The arguments as the caller sent them (an observer that keeps them must redact them).
    pub arguments: &'a Map<String, Value>,
    /// Cancels this call (and the calls nested in it), as notifications/cancelled does.
    pub cancel: &'a CancellationToken,
}

/// A call as it ends.
pub struct CallEnd<'a> {
    pub id: u64,
    pub correlation_id: &'a str,
    pub tool: &'a str,
    pub duration: Duration,
    /// None when the call succeeded.
    pub error: Option<&'a ToolError>,
}

/// Hears every call of the server it is registered with.
pub trait CallObserver: Send + Sync {
    fn started(&self, call: &CallStart<'_>);
    /// What the call reported through `ToolContext::progress`.
    fn progressed(&self, _id: u64, _progress: f64, _total: Option<f64>, _message: Option<&str>) {}
    fn finished(&self, call: &CallEnd<'_>);
}

/// The observers of one registry (a newtype so the registry stays `Debug`).
#[derive(Clone, Default)]
pub(crate) struct Observers(pub(crate) Vec<Arc<dyn CallObserver>>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} observer(s)", self.0.len())
    }
}

/// Which call a context belongs to: its id and its run's correlation id.
#[derive(Clone)]
pub(crate) struct CallRef {
    pub(crate) id: u64,
    pub(crate) correlation_id: Arc<str>,
}

/// The progress sink of an observed call: the caller's sink (if it asked for progress) and the
/// observers both hear each report.
pub(crate) struct ObservedProgress {
    pub(crate) inner: Option<Arc<dyn ProgressSink>>,
    pub(crate) id: u64,
    pub(crate) observers: Observers,
}

impl ProgressSink for ObservedProgress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        for o in &self.observers.0 {
            o.progressed(self.id, progress, total, message.as_deref());
        }
        if let Some(inner) = &self.inner {
            inner.report(progress, total, message);
        }
    }
}
