//! Terminal progress for `maljan analyze`: one line per server and per step, drawn on stderr with
//! indicatif (hidden automatically when stderr is not a terminal, so logs and pipes stay clean).
//! Every string that came from configuration, a server or a sample is passed through
//! [`visible`] first: a server's error message or a step title cannot move the cursor, retitle
//! the terminal or reverse a line.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use maljan_client::staging::UploadProgress;

use crate::{
    report::{ServerInfo, StepReport, StepStatus},
    run::Progress,
    visible::visible,
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
            bar.set_message(visible(&p.server).into_owned());
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
            visible(&servers.join(", "))
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
        let line = server_line(s);
        let _ = self.multi.println(line);
    }

    fn step_started(&self, index: usize, total: usize, title: &str) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(self.spinner(format!("[{index}/{total}] {}", visible(title))));
    }

    fn step_finished(&self, s: &StepReport, total: usize) {
        let bar = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| self.spinner(String::new()));
        Self::done(&bar, step_line(s, total));
    }
}

/// "✓ [3/9] Format structure (pe_info) — ev_0003 · 12 ms": a finished step's line, every part
/// a server or the plan wrote made visible.
pub fn step_line(s: &StepReport, total: usize) -> String {
    let evidence = visible(&s.evidence.join(",")).into_owned();
    let (mark, what) = match s.status {
        StepStatus::Ok => ("✓", format!("{evidence} · {:.0} ms", s.duration_ms)),
        StepStatus::Failed => (
            "✗",
            s.error
                .as_ref()
                .map(|e| format!("{}: {} · {evidence}", visible(&e.code), visible(&e.message)))
                .unwrap_or_default(),
        ),
        StepStatus::Skipped | StepStatus::NotApplicable => (
            "–",
            visible(s.reason.as_deref().unwrap_or_default()).into_owned(),
        ),
    };
    format!(
        "{mark} [{}/{total}] {} — {what}",
        s.index,
        visible(&s.title)
    )
}

/// The line shown when a server is reached or refused, every server-supplied part made visible.
pub fn server_line(s: &ServerInfo) -> String {
    match &s.error {
        Some(e) => format!(
            "✗ server {}: unavailable ({}): {}",
            visible(&s.name),
            visible(&e.code),
            visible(&e.message)
        ),
        None => format!(
            "✓ server {} via {} · {} tools ({} unavailable) · sample: {}",
            visible(&s.name),
            visible(s.via.as_deref().unwrap_or(&s.transport)),
            s.tools,
            s.tools_unavailable,
            visible(s.handover.as_deref().unwrap_or("–"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ErrorInfo;

    const HOSTILE: &str = "x\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}exe.txt\r\n";

    fn no_controls(line: &str) {
        assert!(
            !line.chars().any(crate::visible::is_hidden),
            "a control reached the terminal: {line:?}"
        );
    }

    #[test]
    fn server_and_step_lines_show_controls_as_escapes() {
        let error = Some(ErrorInfo {
            code: HOSTILE.into(),
            message: HOSTILE.into(),
            remediation: HOSTILE.into(),
        });
        let server = ServerInfo {
            name: HOSTILE.into(),
            transport: "stdio".into(),
            via: Some(HOSTILE.into()),
            server_name: None,
            server_version: None,
            protocol_version: None,
            manifest_declared: true,
            tools: 1,
            tools_unavailable: 0,
            handover: Some(HOSTILE.into()),
            steps: 0,
            error: None,
        };
        let line = server_line(&server);
        no_controls(&line);
        assert!(line.contains("\\x1b]0;pwned\\x07") && line.contains("\\u{202e}exe.txt"));
        no_controls(&server_line(&ServerInfo {
            error: error.clone(),
            ..server
        }));
        for status in [StepStatus::Ok, StepStatus::Failed, StepStatus::Skipped] {
            let step = StepReport {
                index: 1,
                title: HOSTILE.into(),
                tool: HOSTILE.into(),
                server: Some(HOSTILE.into()),
                status,
                evidence: vec![HOSTILE.into()],
                duration_ms: 1.0,
                error: error.clone(),
                reason: Some(HOSTILE.into()),
                remediation: None,
                result: None,
            };
            let line = step_line(&step, 3);
            no_controls(&line);
            assert!(line.contains("\\x1b[2J"), "{line}");
        }
    }
}
