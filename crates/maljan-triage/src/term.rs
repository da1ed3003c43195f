//! Terminal progress for `maljan analyze`: one line per server and per step, drawn on stderr with
//! indicatif (hidden automatically when stderr is not a terminal, so logs and pipes stay clean).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use maljan_client::staging::UploadProgress;

use crate::{
    report::{ServerInfo, StepReport, StepStatus},
    run::Progress,
};

/// Progress lines on stderr.
pub struct TerminalProgress {
    multi: MultiProgress,
    connecting: Mutex<Option<ProgressBar>>,
    current: Mutex<Option<ProgressBar>>,
    /// One byte bar per server receiving an upload.
    uploads: Mutex<HashMap<String, ProgressBar>>,
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl TerminalProgress {
    pub fn new() -> Self {
        Self {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            connecting: Mutex::new(None),
            current: Mutex::new(None),
            uploads: Mutex::new(HashMap::new()),
        }
    }

    /// Draws the sample's upload to a server as a byte bar (hook it with `Job::on_upload_progress`).
    pub fn upload(&self, p: &UploadProgress) {
        let mut uploads = self.uploads.lock().unwrap_or_else(|e| e.into_inner());
        let bar = uploads.entry(p.server.clone()).or_insert_with(|| {
            let bar = self.multi.add(ProgressBar::new(p.total));
            bar.set_style(
                ProgressStyle::with_template(
                    "  uploading to {msg} [{bar:30.cyan/blue}] {bytes}/{total_bytes} {bytes_per_sec}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(p.server.clone());
            bar
        });
        bar.set_position(p.sent);
        if p.sent >= p.total {
            bar.finish_and_clear();
        }
    }

    /// True when the lines are actually drawn (stderr is a terminal).
    pub fn is_visible(&self) -> bool {
        !self.multi.is_hidden()
    }

    fn spinner(&self, msg: String) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(msg);
        bar.enable_steady_tick(Duration::from_millis(90));
        bar
    }

    fn done(bar: &ProgressBar, line: String) {
        bar.set_style(
            ProgressStyle::with_template("{msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.finish_with_message(line);
    }
}

impl Progress for TerminalProgress {
    fn connecting(&self, servers: &[String]) {
        let bar = self.spinner(format!(
            "connecting to {} and handing over the sample",
            servers.join(", ")
        ));
        *self.connecting.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn connected(&self, s: &ServerInfo) {
        if let Some(bar) = self
            .connecting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            bar.finish_and_clear();
        }
        let line = match &s.error {
            Some(e) => format!(
                "✗ server {}: unavailable ({}): {}",
                s.name, e.code, e.message
            ),
            None => format!(
                "✓ server {} via {} · {} tools ({} unavailable) · sample: {}",
                s.name,
                s.via.as_deref().unwrap_or(&s.transport),
                s.tools,
                s.tools_unavailable,
                s.handover.as_deref().unwrap_or("–")
            ),
        };
        let _ = self.multi.println(line);
    }

    fn step_started(&self, index: usize, total: usize, title: &str) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(self.spinner(format!("[{index}/{total}] {title}")));
    }

    fn step_finished(&self, s: &StepReport, total: usize) {
        let bar = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| self.spinner(String::new()));
        let (mark, what) = match s.status {
            StepStatus::Ok => (
                "✓",
                format!("{} · {:.0} ms", s.evidence.join(","), s.duration_ms),
            ),
            StepStatus::Failed => (
                "✗",
                s.error
                    .as_ref()
                    .map(|e| format!("{}: {} · {}", e.code, e.message, s.evidence.join(",")))
                    .unwrap_or_default(),
            ),
            StepStatus::Skipped | StepStatus::NotApplicable => {
                ("–", s.reason.clone().unwrap_or_default())
            }
        };
        Self::done(
            &bar,
            format!("{mark} [{}/{total}] {} — {}", s.index, s.title, what),
        );
    }
}
