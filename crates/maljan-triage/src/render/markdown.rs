//! The Markdown report: a header a person reads first (sample, servers, degradations, failures),
//! then one section per step with its evidence ids.

use std::fmt::Write;

use super::{
    blocks::{Block, blocks},
    failure_where, human_size, ms,
};
use crate::report::{Report, Status, StepStatus, VerdictSource};

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
                Status::Cancelled =>
                    "Cancelled by the operator; below is what was done until then.",
                _ => "Some steps did not answer; everything else below is whole.",
            }
        );
    }
    verdict(&mut o, r);
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

    super::tree::markdown(&mut o, r, cell);

    for s in &r.steps {
        for ev in &s.evidence {
            let _ = write!(o, "<a id=\"{ev}\"></a>");
        }
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
    agent(&mut o, r);
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

fn links(ids: &[String]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(|id| format!("[{0}](#{0})", code(id)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The verdict header: word, confidence, source, the claims with links to their evidence.
fn verdict(o: &mut String, r: &Report) {
    let Some(v) = &r.verdict else { return };
    let _ = write!(
        o,
        "## Verdict: **{}** (confidence {:.2})",
        v.verdict.as_str().to_uppercase(),
        v.confidence
    );
    if let Some(f) = &v.family {
        let _ = write!(o, " · family {}", cell(f));
    }
    let _ = writeln!(o, "\n");
    let by = match (&v.source, &v.model) {
        (VerdictSource::Agent, Some(m)) => format!("the judge model {}", code(m)),
        (VerdictSource::Agent, None) => "the judge model".into(),
        (VerdictSource::Heuristic, _) => "the deterministic scoring of the triage findings".into(),
    };
    let _ = writeln!(o, "*Source: {} — {by}.*\n", v.source.as_str());
    if let Some(d) = &v.degradation {
        let _ = writeln!(o, "> {}\n", cell(d));
    }
    if !v.summary.is_empty() {
        let _ = writeln!(o, "{}\n", cell(&v.summary));
    }
    for c in &v.claims {
        let _ = writeln!(o, "- {} — evidence {}", cell(&c.text), links(&c.evidence));
    }
    if !v.claims.is_empty() {
        o.push('\n');
    }
    if !v.techniques.is_empty() {
        let _ = writeln!(o, "| Technique | Name | Evidence |\n|---|---|---|");
        for t in &v.techniques {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                code(&t.id),
                cell(&t.name),
                links(&t.evidence)
            );
        }
        o.push('\n');
    }
}

/// The agent stages: budgets and tokens, withheld tools, and the conversation.
fn agent(o: &mut String, r: &Report) {
    let Some(a) = &r.agent else { return };
    let _ = writeln!(o, "## Agent ({})\n", code(&a.model));
    if a.cancelled {
        let _ = writeln!(o, "> Cancelled by the operator.\n");
    }
    let _ = writeln!(
        o,
        "| Stage | Status | Requests | Tool calls | Tokens in / out | Took | Ended because |\n|---|---|---|---|---|---|---|"
    );
    for s in &a.stages {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} / {} | {} | {} |",
            s.name,
            s.status,
            s.requests,
            s.tool_calls,
            s.input_tokens,
            s.output_tokens,
            ms(s.duration_ms),
            cell(s.ended_because.as_deref().unwrap_or(""))
        );
    }
    o.push('\n');
    if !a.usage.is_empty() {
        let _ = writeln!(
            o,
            "| Stage | Model | Requests | Input tokens | Output tokens |\n|---|---|---|---|---|"
        );
        for u in &a.usage {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                u.stage,
                code(&u.model),
                u.requests,
                u.input_tokens,
                u.output_tokens
            );
        }
        o.push('\n');
    }
    if !a.withheld.is_empty() {
        let _ = writeln!(o, "Tools not offered to the model:\n");
        for w in &a.withheld {
            let _ = writeln!(
                o,
                "- {} on {}: {}",
                code(&w.tool),
                w.server,
                cell(&w.reason)
            );
        }
        o.push('\n');
    }
    let _ = writeln!(o, "### Conversation\n");
    // One anchor per id: the triage steps have theirs, and a repeat answered from the ledger
    // carries the earlier call's.
    let mut anchored: std::collections::HashSet<&str> = r
        .steps
        .iter()
        .flat_map(|s| s.evidence.iter().map(String::as_str))
        .collect();
    for t in &a.conversation {
        match t.role.as_str() {
            "tool" => {
                if let Some(ev) = t.evidence.as_deref().filter(|ev| anchored.insert(ev)) {
                    let _ = write!(o, "<a id=\"{ev}\"></a>");
                }
                let _ = writeln!(
                    o,
                    "<details><summary>{} result {} ({})</summary>\n",
                    t.stage,
                    code(t.tool.as_deref().unwrap_or("")),
                    t.evidence.as_deref().unwrap_or("no call")
                );
                for n in &t.notes {
                    let _ = writeln!(o, "> {}\n", cell(n));
                }
                let _ = writeln!(
                    o,
                    "```text\n{}\n```\n\n</details>\n",
                    t.text.as_deref().unwrap_or("").replace("```", "'''")
                );
            }
            role => {
                let _ = writeln!(o, "**{}** ({role}):\n", t.stage);
                if let Some(text) = &t.text {
                    let _ = writeln!(o, "```text\n{}\n```\n", text.replace("```", "'''"));
                }
                for c in &t.tool_calls {
                    let _ = writeln!(
                        o,
                        "- calls `{}` with `{}`",
                        code(&c.name),
                        code(&c.arguments)
                    );
                }
                if !t.tool_calls.is_empty() {
                    o.push('\n');
                }
            }
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
