//! The Markdown report: a header a person reads first (sample, servers, degradations, failures),
//! then one section per step with its evidence ids.

use std::fmt::Write;

use super::{
    blocks::{Block, blocks},
    failure_where, human_size, ms,
};
use crate::report::{Report, Status, StepStatus};

pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Triage report: {}\n", cell(&r.sample.name));
    if r.status != Status::Complete {
        let _ = writeln!(
            o,
            "> **[{} RUN]** {}\n",
            r.status.as_str().to_uppercase(),
            match r.status {
                Status::Failed => "No step produced an answer; see the failures below.",
                _ => "Some steps did not answer; everything else below is whole.",
            }
        );
    }
    let _ = writeln!(o, "| | |\n|---|---|");
    let _ = writeln!(o, "| Status | **{}** |", r.status.as_str());
    let _ = writeln!(o, "| File name | `{}` |", cell(&r.sample.name));
    let _ = writeln!(o, "| Size | {} |", human_size(r.sample.size));
    if let Some(d) = &r.sample.description {
        let _ = writeln!(
            o,
            "| Type | {} (`{}`) |",
            cell(d),
            cell(r.sample.kind.as_deref().unwrap_or(""))
        );
    }
    if let Some(m) = &r.sample.mime {
        let _ = writeln!(o, "| MIME | {} |", cell(m));
    }
    for (k, v) in &r.sample.hashes {
        let _ = writeln!(o, "| {} | `{}` |", k.to_uppercase(), cell(v));
    }
    let _ = writeln!(o, "| Job | `{}` |", r.job_id);
    let _ = writeln!(
        o,
        "| Generated | {} (took {}) |",
        r.generated_at,
        ms(r.duration_ms)
    );
    let _ = writeln!(o, "| maljan | {} |\n", r.maljan_version);

    let _ = writeln!(o, "## Servers\n");
    let _ = writeln!(
        o,
        "| Server | Transport | Speaks | Tools | Sample | Steps | State |\n|---|---|---|---|---|---|---|"
    );
    for s in &r.servers {
        let who = match (&s.server_name, &s.server_version) {
            (Some(n), Some(v)) => format!("{n} {v}"),
            (Some(n), None) => n.clone(),
            _ => String::new(),
        };
        let state = match &s.error {
            Some(e) => format!("unavailable: {} ({})", cell(&e.message), e.code),
            None if s.manifest_declared => "ok".into(),
            None => "ok (no manifest: all tools assumed available)".into(),
        };
        let _ = writeln!(
            o,
            "| **{}** {} | {} | {} | {} ({} unavailable) | {} | {} | {} |",
            s.name,
            cell(&who),
            s.transport,
            s.via.as_deref().unwrap_or("–"),
            s.tools,
            s.tools_unavailable,
            s.handover.as_deref().unwrap_or("–"),
            s.steps,
            state
        );
    }
    o.push('\n');

    let _ = writeln!(o, "## Degradation reasons\n");
    if r.degradations.is_empty() {
        let _ = writeln!(o, "None.\n");
    } else {
        for d in &r.degradations {
            let _ = writeln!(o, "- {}", cell(d));
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Failures\n");
    if r.failures.is_empty() {
        let _ = writeln!(o, "None.\n");
    } else {
        let _ = writeln!(
            o,
            "| Count | Code | Tool | Remedy | First message | Evidence |\n|---|---|---|---|---|---|"
        );
        for f in &r.failures {
            let _ = writeln!(
                o,
                "| {}× | `{}` | {} | {} | {} | {} |",
                f.count,
                f.code,
                cell(&failure_where(f)),
                cell(&f.remediation),
                cell(&f.message),
                f.evidence.join(", ")
            );
        }
        o.push('\n');
    }

    if !r.unavailable.is_empty() {
        let _ = writeln!(o, "## Not run on this host\n");
        for u in &r.unavailable {
            let _ = write!(o, "- **{}** on {}: {}", u.tool, u.server, cell(&u.reason));
            if let Some(w) = &u.without {
                let _ = write!(o, "; still answers {}", cell(w));
            }
            if let Some(rem) = &u.remediation {
                let _ = write!(o, " — remedy: {}", cell(rem));
            }
            o.push('\n');
        }
        o.push('\n');
    }

    for s in &r.steps {
        let _ = writeln!(o, "## {}. {}\n", s.index, cell(&s.title));
        let ev = if s.evidence.is_empty() {
            "none (not called)".to_string()
        } else {
            s.evidence.join(", ")
        };
        let _ = writeln!(
            o,
            "*{}* · tool `{}`{} · evidence {} · {}\n",
            s.status.as_str(),
            s.tool,
            s.server
                .as_ref()
                .map(|x| format!(" on {x}"))
                .unwrap_or_default(),
            ev,
            ms(s.duration_ms)
        );
        if let Some(e) = &s.error {
            let _ = writeln!(
                o,
                "> **{}**: {}  \n> Remedy: {}\n",
                e.code,
                cell(&e.message),
                cell(&e.remediation)
            );
        }
        if let Some(reason) = &s.reason {
            let _ = writeln!(o, "{}", cell(reason));
            if let Some(rem) = &s.remediation {
                let _ = writeln!(o, "Remedy: {}", cell(rem));
            }
            o.push('\n');
        }
        if s.status == StepStatus::Ok
            && let Some(answer) = &s.result
        {
            for b in blocks(answer) {
                render_block(&mut o, &b);
            }
        }
    }
    o
}

fn render_block(o: &mut String, b: &Block) {
    match b {
        Block::Fields(fields) => {
            let _ = writeln!(o, "| Field | Value |\n|---|---|");
            for (k, v) in fields {
                let _ = writeln!(o, "| {} | {} |", cell(k), cell(v));
            }
            o.push('\n');
        }
        Block::List { title, items, more } => {
            let _ = writeln!(o, "**{}** ({}):\n", cell(title), items.len() + more);
            for i in items {
                let _ = writeln!(o, "- `{}`", code(i));
            }
            if *more > 0 {
                let _ = writeln!(o, "- … {more} more (in the JSON report and the ledger)");
            }
            o.push('\n');
        }
        Block::Table {
            title,
            columns,
            rows,
            more,
        } => {
            let _ = writeln!(o, "**{}** ({}):\n", cell(title), rows.len() + more);
            let _ = writeln!(
                o,
                "| {} |",
                columns
                    .iter()
                    .map(|c| cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(o, "|{}", "---|".repeat(columns.len()));
            for row in rows {
                let _ = writeln!(
                    o,
                    "| {} |",
                    row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
                );
            }
            if *more > 0 {
                let _ = writeln!(
                    o,
                    "\n… {more} more rows (in the JSON report and the ledger)"
                );
            }
            o.push('\n');
        }
        Block::Text(t) => {
            let _ = writeln!(o, "```text\n{}\n```\n", t.replace("```", "'''"));
        }
    }
}

/// Text safe inside a Markdown table cell: pipes escaped, newlines flattened, no raw HTML.
fn cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text inside inline code: backticks would end it early.
fn code(s: &str) -> String {
    s.replace('`', "'")
        .replace(['\n', '\r'], " ")
        .replace('|', "\\|")
}
