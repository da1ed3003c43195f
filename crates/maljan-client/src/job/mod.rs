//! A job: one sample (or none) and every call made for it. Each call gets an evidence id
//! (`ev_0001`, `ev_0002`, … in the order calls are issued), lands in the ledger, and a job
//! collects degradation reasons (a server unavailable, a server rested, staging that failed).
//!
//! ```no_run
//! # async fn demo(rt: std::sync::Arc<maljan_client::Runtime>) -> Result<(), Box<dyn std::error::Error>> {
//! use maljan_client::JobSpec;
//! let job = rt.new_job(JobSpec::for_sample("/tmp/sample.bin"))?;
//! let files = job.server("files")?;
//! let view = files.view().await?;               // tools + manifest, once per job
//! let rec = files.call("FA_file_checksum", serde_json::json!({"file_path": "/tmp/sample.bin"})).await;
//! println!("{} ok={} {:?}", rec.ev_id, rec.ok, rec.error);
//! job.finish();
//! # let _ = view; Ok(()) }
//! ```

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
};

use maljan_protocol::ErrorCode;
use tokio::sync::OnceCell;

pub mod events;
mod handle;
mod samples;

pub use crate::{outcome::CallRecord, sample::Sample};
pub use events::{Event, EventStream};
pub use handle::ServerHandle;
pub use samples::{SampleStore, StoredSample};

use crate::{
    manifest::ServerView,
    outcome::CallError,
    runtime::{Runtime, RuntimeError},
    staging::{self, Handover, UploadProgress},
};

// The job sits above the runtime: the runtime never names a job, and this is how it starts one.
impl Runtime {
    /// Starts a job: one sample (or none) and the calls made for it.
    pub fn new_job(self: &Arc<Self>, spec: JobSpec) -> Result<Arc<Job>, RuntimeError> {
        Job::start(self.clone(), spec)
    }
}

/// What a job is about.
#[derive(Debug, Clone, Default)]
pub struct JobSpec {
    /// A label for people ("analyze sample.exe", "maljan call").
    pub label: String,
    pub sample: Option<PathBuf>,
    /// Use this id instead of a generated one.
    pub id: Option<String>,
    /// Where the job's events go (see [`events`]); a fresh stream nobody hears by default.
    pub events: EventStream,
}

impl JobSpec {
    pub fn for_sample(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self {
            label: format!("sample {}", path.display()),
            sample: Some(path),
            id: None,
            events: EventStream::new(),
        }
    }
    pub fn labelled(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            ..Default::default()
        }
    }
}

/// One server's view for one job, read once.
type ViewCell = Arc<OnceCell<Result<Arc<ServerView>, CallError>>>;

/// A job in progress.
pub struct Job {
    id: String,
    label: String,
    runtime: Arc<Runtime>,
    sample: Option<Sample>,
    next_ev: AtomicU32,
    views: Mutex<HashMap<String, ViewCell>>,
    handovers: Mutex<HashMap<String, Arc<OnceCell<Handover>>>>,
    degradations: Mutex<Vec<String>>,
    finished: std::sync::atomic::AtomicBool,
    /// Copies on shared volumes (mirror_dir), removed when the job ends.
    mirrors: Mutex<Vec<PathBuf>>,
    events: EventStream,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("label", &self.label)
            .finish()
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Complete,
    Degraded,
    Failed,
    /// The operator cancelled it (Ctrl-C).
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Degraded => "degraded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl Job {
    pub(crate) fn start(runtime: Arc<Runtime>, spec: JobSpec) -> Result<Arc<Self>, RuntimeError> {
        let sample = match &spec.sample {
            Some(p) => Some(
                Sample::read(p)
                    .map_err(|e| RuntimeError::NoSample(format!("{}: {e}", p.display())))?,
            ),
            None => None,
        };
        let id = spec.id.clone().unwrap_or_else(new_job_id);
        runtime.ledger().create_job(
            &id,
            &spec.label,
            sample.as_ref().map(|s| {
                (
                    s.path.to_str().unwrap_or(""),
                    s.sha256.as_str(),
                    s.size as i64,
                )
            }),
        )?;
        Ok(Arc::new(Self {
            id,
            label: spec.label,
            runtime,
            sample,
            next_ev: AtomicU32::new(0),
            views: Mutex::default(),
            handovers: Mutex::default(),
            degradations: Mutex::default(),
            finished: Default::default(),
            mirrors: Mutex::default(),
            events: spec.events,
        }))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn sample(&self) -> Option<&Sample> {
        self.sample.as_ref()
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// A handle to one configured, enabled server for this job. Connecting waits for the first use.
    pub fn server(self: &Arc<Self>, name: &str) -> Result<ServerHandle, CallError> {
        match self.runtime.slot(name) {
            Some(slot) => Ok(ServerHandle {
                job: self.clone(),
                slot: slot.clone(),
            }),
            None => {
                let why = match self.runtime.config().servers.get(name) {
                    Some(_) => {
                        format!("server '{name}' is disabled (servers.{name}.enabled = false)")
                    }
                    None => format!("no server named '{name}' is configured"),
                };
                Err(CallError::new(ErrorCode::NotConfigured, why)
                    .with_remediation("list the servers with `maljan servers list`; add one with `maljan servers add`"))
            }
        }
    }

    /// Adds a degradation reason (each distinct reason once), in memory and in the ledger.
    pub fn degrade(&self, reason: impl Into<String>) {
        let reason = reason.into();
        {
            let mut d = self.degradations.lock().unwrap_or_else(|e| e.into_inner());
            if d.contains(&reason) {
                return;
            }
            d.push(reason.clone());
        }
        if let Err(e) = self.runtime.ledger().add_degradation(&self.id, &reason) {
            tracing::warn!(job = %self.id, "could not record a degradation reason: {e}");
        }
    }

    pub fn degradations(&self) -> Vec<String> {
        self.degradations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ends the job: complete, or degraded when it has degradation reasons.
    pub fn finish(&self) -> JobStatus {
        let status = if self.degradations().is_empty() {
            JobStatus::Complete
        } else {
            JobStatus::Degraded
        };
        self.finish_as(status);
        status
    }

    /// Ends the job with `status`; mirror copies are removed (also for a failed job).
    pub fn finish_as(&self, status: JobStatus) {
        staging::remove_mirrors(self.take_mirrors());
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.runtime.ledger().finish_job(&self.id, status.as_str()) {
            tracing::warn!(job = %self.id, "could not record the job's end: {e}");
        }
    }

    /// The job's event stream: subscribe to hear its progress (uploads here; the triage, the
    /// agent and the pipeline emit theirs on it too).
    pub fn events(&self) -> &EventStream {
        &self.events
    }

    pub(crate) fn report_progress(&self, p: &UploadProgress) {
        self.events.emit(Event::Upload(p.clone()));
    }

    /// Remembers a mirror copy, to be removed when the job ends.
    pub(crate) fn add_mirror(&self, path: PathBuf) {
        self.mirrors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path);
    }

    /// Takes the mirror copies still to be removed.
    pub(crate) fn take_mirrors(&self) -> Vec<PathBuf> {
        std::mem::take(&mut *self.mirrors.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn next_ev_id(&self) -> String {
        format!("ev_{:04}", self.next_ev.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn view_cell(&self, server: &str) -> ViewCell {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        // Every call comes here: look up before allocating the key.
        if let Some(cell) = views.get(server) {
            return cell.clone();
        }
        views.entry(server.to_string()).or_default().clone()
    }

    fn handover_cell(&self, server: &str) -> Arc<OnceCell<Handover>> {
        self.handovers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.finished.load(Ordering::SeqCst) {
            let status = if self.degradations().is_empty() {
                JobStatus::Complete
            } else {
                JobStatus::Degraded
            };
            self.finish_as(status);
        }
        staging::remove_mirrors(self.take_mirrors());
    }
}

/// `job-<time>-<random>`: sortable and unique.
pub fn new_job_id() -> String {
    let ms = crate::time::now_ms();
    let r: u32 = rand::random();
    format!(
        "job-{}-{r:08x}",
        crate::time::rfc3339_ms(ms)
            .replace([':', '.'], "")
            .replace('-', "")
            .trim_end_matches('Z')
    )
}
