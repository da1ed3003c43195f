//! Terminal progress for `maljan analyze`: one line per server and per step, a line per agent
//! stage and a byte bar per upload, drawn on stderr with indicatif (hidden automatically when
//! stderr is not a terminal, so logs and pipes stay clean). It is a subscriber of the job's
//! event stream ([`TerminalProgress::attach`]), like the ledger's record of the job.
//! Every string that came from configuration, a server or a sample is passed through
//! [`visible`] first: a server's error message or a step title cannot move the cursor, retitle
//! the terminal or reverse a line.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use maljan_client::{
    Event, EventStream,
    job::events::{CallFinished, ServerReached},
    staging::UploadProgress,
};

use crate::visible::visible;

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

    /// Draws every event of `events` from now on.
    pub fn attach(self: &Arc<Self>, events: &EventStream) {
        let me = self.clone();
        events.subscribe(move |e| me.show(e));
    }

    /// Draws one event of the job.
    pub fn show(&self, event: &Event) {
        match event {
            Event::Connecting { servers } => self.connecting(servers),
            Event::Connected(s) => self.connected(s),
            Event::StepStarted {
                index,
                total,
                title,
            } => self.step_started(*index, *total, title),
            // A call the model made is in the report; the terminal draws the plan's steps.
            Event::CallFinished(c) if c.stage.is_none() => self.step_finished(c),
            Event::Stage { stage } if stage != "triage" && self.is_visible() => {
                eprintln!("{} stage…", visible(stage));
            }
            Event::Upload(p) if self.is_visible() => self.upload(p),
            _ => {}
        }
    }

    /// Draws the sample's upload to a server as a byte bar.
    fn upload(&self, p: &UploadProgress) {
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

impl TerminalProgress {
    fn connecting(&self, servers: &[String]) {
        let bar = self.spinner(format!(
            "connecting to {} and handing over the sample",
            visible(&servers.join(", "))
        ));
        *self.connecting.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn connected(&self, s: &ServerReached) {
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

    fn step_finished(&self, s: &CallFinished) {
        let bar = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| self.spinner(String::new()));
        Self::done(&bar, step_line(s));
    }
}

/// "✓ [3/9] Format structure (pe_info) — ev_0003 · 12 ms": a finished step's line, every part
/// a server or the plan wrote made visible.
pub fn step_line(s: &CallFinished) -> String {
    let evidence = visible(&s.evidence.join(",")).into_owned();
    let (mark, what) = match s.status.as_str() {
        "ok" => ("✓", format!("{evidence} · {:.0} ms", s.duration_ms)),
        "failed" => (
            "✗",
            s.error
                .as_ref()
                .map(|e| format!("{}: {} · {evidence}", visible(&e.code), visible(&e.message)))
                .unwrap_or_default(),
        ),
        // Skipped, not applicable.
        _ => (
            "–",
            visible(s.reason.as_deref().unwrap_or_default()).into_owned(),
        ),
    };
    format!(
        "{mark} [{}/{}] {} — {what}",
        s.index.unwrap_or_default(),
        s.total.unwrap_or_default(),
        visible(&s.title)
    )
}

/// The line shown when a server is reached or refused, every server-supplied part made visible.
pub fn server_line(s: &ServerReached) -> String {
    match &s.error {
        Some(e) => format!(
            "✗ server {}: unavailable ({}): {}",
            visible(&s.server),
            visible(&e.code),
            visible(&e.message)
        ),
        None => format!(
            "✓ server {} via {} · {} tools ({} unavailable) · sample: {}",
            visible(&s.server),
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
    use crate::report::{ErrorInfo, ServerInfo, StepReport, StepStatus};

    // The lines are drawn from the events a run emits: built here as the run builds them.
    fn reached(s: &ServerInfo) -> ServerReached {
        match s.event() {
            Event::Connected(r) => r,
            other => panic!("{other:?}"),
        }
    }

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
        let line = server_line(&reached(&server));
        no_controls(&line);
        assert!(line.contains("\\x1b]0;pwned\\x07") && line.contains("\\u{202e}exe.txt"));
        no_controls(&server_line(&reached(&ServerInfo {
            error: error.clone(),
            ..server
        })));
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
            let Event::CallFinished(finished) = step.event(3) else {
                panic!("a step's event is call_finished")
            };
            let line = step_line(&finished);
            no_controls(&line);
            assert!(line.contains("\\x1b[2J"), "{line}");
        }
    }
}
