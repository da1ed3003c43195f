//! The Markdown report (CommonMark with GFM tables): the verdict and its facts first, then the
//! sample, its children as a tree, the servers, degradations and failures, then one section per
//! step with the tool's raw answer, one section per child sample, and the agent's conversation.
//!
//! Every heading is a CommonMark heading (its anchors are inline HTML after the `## `), every
//! evidence chip links to the one anchor of its call, and every string from a sample, a server
//! or a model goes through `escape` (`md_text`, `md_code`, `md_fence`): none can add a link, an
//! image, raw HTML or a code span of its own.

use std::fmt::Write;

use super::{
    blocks::{Block, blocks},
    escape::{anchor, md_code, md_fence, md_text},
    evidence::Evidence,
    facts::{self, md_links},
    failure_where, human_size, ms,
};
use crate::report::{Report, Status, StepReport, StepStatus, VerdictSource};

pub fn markdown(r: &Report) -> String {
    let mut ev = Evidence::of(r);
    let mut o = String::new();
    let _ = writeln!(o, "# Triage report: {}\n", md_text(&r.sample.name));
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
    verdict(&mut o, r, &ev);
    header(&mut o, r);
    super::tree::markdown(&mut o, r, &mut ev);
    servers(&mut o, r);
    problems(&mut o, r, &ev);
    for s in &r.steps {
        step(&mut o, s, "##", "", &mut ev);
    }
    super::tree::markdown_sections(&mut o, r, &mut ev);
    agent(&mut o, r, &mut ev);
    o
}

fn header(o: &mut String, r: &Report) {
    let _ = writeln!(o, "## Sample\n\n| | |\n|---|---|");
    let _ = writeln!(o, "| Status | **{}** |", r.status.as_str());
    let _ = writeln!(o, "| File name | {} |", md_code(&r.sample.name));
    let _ = writeln!(o, "| Size | {} |", human_size(r.sample.size));
    if let Some(d) = &r.sample.description {
        let _ = writeln!(
            o,
            "| Type | {} ({}) |",
            md_text(d),
            md_code(r.sample.kind.as_deref().unwrap_or(""))
        );
    }
    if let Some(m) = &r.sample.mime {
        let _ = writeln!(o, "| MIME | {} |", md_text(m));
    }
    for (k, v) in &r.sample.hashes {
        let _ = writeln!(o, "| {} | {} |", md_text(&k.to_uppercase()), md_code(v));
    }
    let _ = writeln!(o, "| Job | {} |", md_code(&r.job_id));
    let _ = writeln!(
        o,
        "| Generated | {} (took {}) |",
        md_text(&r.generated_at),
        ms(r.duration_ms)
    );
    let _ = writeln!(o, "| maljan | {} |\n", md_text(&r.maljan_version));
}

fn servers(o: &mut String, r: &Report) {
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
            Some(e) => format!(
                "unavailable: {} ({})",
                md_text(&e.message),
                md_code(&e.code)
            ),
            None if s.manifest_declared => "ok".into(),
            None => "ok (no manifest: all tools assumed available)".into(),
        };
        let _ = writeln!(
            o,
            "| **{}** {} | {} | {} | {} ({} unavailable) | {} | {} | {} |",
            md_text(&s.name),
            md_text(&who),
            md_text(&s.transport),
            md_text(s.via.as_deref().unwrap_or("–")),
            s.tools,
            s.tools_unavailable,
            md_text(s.handover.as_deref().unwrap_or("–")),
            s.steps,
            state
        );
    }
    o.push('\n');
}

fn problems(o: &mut String, r: &Report, ev: &Evidence) {
    let _ = writeln!(o, "## Degradation reasons\n");
    if r.degradations.is_empty() {
        let _ = writeln!(o, "None.\n");
    } else {
        for d in &r.degradations {
            let _ = writeln!(o, "- {}", md_text(d));
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
                "| {}× | {} | {} | {} | {} | {} |",
                f.count,
                md_code(&f.code),
                md_text(&failure_where(f)),
                md_text(&f.remediation),
                md_text(&f.message),
                md_links(&f.evidence, ev)
            );
        }
        o.push('\n');
    }

    if !r.unavailable.is_empty() {
        let _ = writeln!(o, "## Not run on this host\n");
        for u in &r.unavailable {
            let _ = write!(
                o,
                "- **{}** on {}: {}",
                md_text(&u.tool),
                md_text(&u.server),
                md_text(&u.reason)
            );
            if let Some(w) = &u.without {
                let _ = write!(o, "; still answers {}", md_text(w));
            }
            if let Some(rem) = &u.remediation {
                let _ = write!(o, " — remedy: {}", md_text(rem));
            }
            o.push('\n');
        }
        o.push('\n');
    }
}

/// One step as a section: `level` is the heading's `#`s, `label` what precedes its number (a
/// child's id). Its evidence ids are anchored in the heading, once each.
pub(crate) fn step(o: &mut String, s: &StepReport, level: &str, label: &str, ev: &mut Evidence) {
    let anchors: String = s
        .evidence
        .iter()
        .filter(|id| ev.place(id))
        .map(|id| format!("<a id=\"{}\"></a>", anchor(id)))
        .collect();
    let _ = writeln!(
        o,
        "{level} {anchors}{label}{}. {}\n",
        s.index,
        md_text(&s.title)
    );
    let _ = writeln!(
        o,
        "*{}* · tool {}{} · evidence {} · {}\n",
        s.status.as_str(),
        md_code(&s.tool),
        s.server
            .as_ref()
            .map(|x| format!(" on {}", md_text(x)))
            .unwrap_or_default(),
        if s.evidence.is_empty() {
            "none (not called)".to_string()
        } else {
            md_links(&s.evidence, ev)
        },
        ms(s.duration_ms)
    );
    if let Some(e) = &s.error {
        let _ = writeln!(
            o,
            "> **{}**: {}  \n> Remedy: {}\n",
            md_code(&e.code),
            md_text(&e.message),
            md_text(&e.remediation)
        );
    }
    if let Some(reason) = &s.reason {
        let _ = writeln!(o, "{}", md_text(reason));
        if let Some(rem) = &s.remediation {
            let _ = writeln!(o, "Remedy: {}", md_text(rem));
        }
        o.push('\n');
    }
    if s.status == StepStatus::Ok
        && let Some(answer) = &s.result
    {
        for b in blocks(answer) {
            render_block(o, &b);
        }
    }
}

fn render_block(o: &mut String, b: &Block) {
    match b {
        Block::Fields(fields) => {
            let _ = writeln!(o, "| Field | Value |\n|---|---|");
            for (k, v) in fields {
                let _ = writeln!(o, "| {} | {} |", md_text(k), md_text(v));
            }
            o.push('\n');
        }
        Block::List { title, items, more } => {
            let _ = writeln!(o, "**{}** ({}):\n", md_text(title), items.len() + more);
            for i in items {
                let _ = writeln!(o, "- {}", md_code(i));
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
            let _ = writeln!(o, "**{}** ({}):\n", md_text(title), rows.len() + more);
            let line = |cells: &[String]| {
                cells
                    .iter()
                    .map(|c| md_text(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            };
            let _ = writeln!(o, "| {} |", line(columns));
            let _ = writeln!(o, "|{}", "---|".repeat(columns.len()));
            for row in rows {
                let _ = writeln!(o, "| {} |", line(row));
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
            let _ = writeln!(o, "{}", md_fence(t));
        }
    }
}

/// The verdict first: word, confidence, source, the facts it rests on, the claims and
/// techniques, each with links to their evidence.
fn verdict(o: &mut String, r: &Report, ev: &Evidence) {
    let Some(v) = &r.verdict else { return };
    let _ = write!(
        o,
        "## Verdict: **{}** (confidence {:.2})",
        v.verdict.as_str().to_uppercase(),
        v.confidence
    );
    if let Some(f) = &v.family {
        let _ = write!(o, " · family {}", md_text(f));
    }
    if let Some(d) = &v.disagreement {
        let _ = write!(
            o,
            " · the facts alone: **{}**",
            d.facts_verdict.as_str().to_uppercase()
        );
    }
    let _ = writeln!(o, "\n");
    let by = match (&v.source, &v.model) {
        (VerdictSource::Agent, Some(m)) => format!("the judge model {}", md_code(m)),
        (VerdictSource::Agent, None) => "the judge model".into(),
        (VerdictSource::Heuristic, _) => "the deterministic scoring of the facts".into(),
    };
    let _ = writeln!(o, "*Source: {} — {by}.*\n", v.source.as_str());
    if let Some(d) = &v.degradation {
        let _ = writeln!(o, "> {}\n", md_text(d));
    }
    if !v.summary.is_empty() {
        let _ = writeln!(o, "{}\n", md_text(&v.summary));
    }
    let _ = writeln!(o, "### Facts\n");
    facts::markdown(o, v, ev);
    if !v.claims.is_empty() {
        let _ = writeln!(o, "### Claims\n");
        for c in &v.claims {
            let _ = writeln!(
                o,
                "- {} — evidence {}",
                md_text(&c.text),
                md_links(&c.evidence, ev)
            );
        }
        o.push('\n');
    }
    if !v.techniques.is_empty() {
        let _ = writeln!(o, "| Technique | Name | Evidence |\n|---|---|---|");
        for t in &v.techniques {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                md_code(&t.id),
                md_text(&t.name),
                md_links(&t.evidence, ev)
            );
        }
        o.push('\n');
    }
}

/// The agent stages: budgets and tokens, withheld tools, and the conversation.
fn agent(o: &mut String, r: &Report, ev: &mut Evidence) {
    let Some(a) = &r.agent else { return };
    let _ = writeln!(o, "## Agent ({})\n", md_code(&a.model));
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
            md_text(&s.name),
            md_text(&s.status),
            s.requests,
            s.tool_calls,
            s.input_tokens,
            s.output_tokens,
            ms(s.duration_ms),
            md_text(s.ended_because.as_deref().unwrap_or(""))
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
                md_text(&u.stage),
                md_code(&u.model),
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
                md_code(&w.tool),
                md_text(&w.server),
                md_text(&w.reason)
            );
        }
        o.push('\n');
    }
    let _ = writeln!(o, "### Conversation\n");
    for t in &a.conversation {
        match t.role.as_str() {
            "tool" => {
                // A collapsed block whose summary holds only what the report writes itself
                // (raw HTML is not escaped by Markdown); the tool's name and answer follow
                // in Markdown, after the blank line that ends the HTML block.
                let id = t.evidence.as_deref();
                let _ = writeln!(
                    o,
                    "<details><summary>{} result {}</summary>\n",
                    anchor(&t.stage),
                    id.map_or("(no call)".into(), anchor)
                );
                let here = id
                    .filter(|id| ev.place(id))
                    .map(|id| format!("<a id=\"{}\"></a>", anchor(id)))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "{here}Result of {} — evidence {}\n",
                    md_code(t.tool.as_deref().unwrap_or("")),
                    id.map_or("none".into(), |id| md_links(&[id.to_string()], ev))
                );
                for n in &t.notes {
                    let _ = writeln!(o, "> {}\n", md_text(n));
                }
                let _ = writeln!(
                    o,
                    "{}\n</details>\n",
                    md_fence(t.text.as_deref().unwrap_or(""))
                );
            }
            role => {
                let _ = writeln!(o, "**{}** ({}):\n", md_text(&t.stage), md_text(role));
                if let Some(text) = &t.text {
                    let _ = writeln!(o, "{}", md_fence(text));
                }
                for c in &t.tool_calls {
                    let _ = writeln!(
                        o,
                        "- calls {} with {}",
                        md_code(&c.name),
                        md_code(&c.arguments)
                    );
                }
                if !t.tool_calls.is_empty() {
                    o.push('\n');
                }
            }
        }
    }
}
