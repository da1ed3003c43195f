//! The HTML report: one self-contained page (inline CSS, no scripts, no external assets, so it
//! opens offline and is safe to mail around). Every string from the sample or a server is escaped.

use std::fmt::Write;

use super::{
    blocks::{Block, blocks},
    escape::{anchor, html as e},
    evidence::Evidence,
    facts::{self, html_links},
    failure_where, human_size, ms,
};
use crate::report::{Report, Status, StepReport, StepStatus, VerdictSource};

const CSS: &str = r#"
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--mute:#5f6b7a;--line:#e3e7ec;--ok:#1f8a4c;--warn:#b7791f;--bad:#c53030;--acc:#2b6cb0}
@media (prefers-color-scheme:dark){:root{--bg:#12151b;--card:#1b2029;--ink:#e6e9ef;--mute:#9aa5b4;--line:#2b3240;--acc:#63b3ed}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:1.6rem;margin:0 0 4px;word-break:break-all}h2{font-size:1.15rem;margin:0 0 12px}
.sub{color:var(--mute);margin-bottom:18px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:14px 0;box-shadow:0 1px 2px rgba(0,0,0,.04)}
.banner{border-radius:10px;padding:12px 16px;margin:14px 0;font-weight:600;color:#fff}
.banner.complete{background:var(--ok)}.banner.degraded,.banner.cancelled{background:var(--warn)}.banner.failed{background:var(--bad)}
.verdict h2{font-size:1.4rem}.v-malicious{color:var(--bad)}.v-suspicious{color:var(--warn)}.v-benign{color:var(--ok)}.v-unknown{color:var(--mute)}
details{border:1px solid var(--line);border-radius:8px;padding:6px 10px;margin:6px 0}summary{cursor:pointer}
.turn{margin:8px 0}.turn pre{white-space:pre-wrap}
.grid{display:grid;grid-template-columns:160px 1fr;gap:4px 14px}.grid div:nth-child(odd){color:var(--mute)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em;word-break:break-all}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--mute);font-weight:600;font-size:.85em;text-transform:uppercase;letter-spacing:.03em}
.pill{display:inline-block;border-radius:999px;padding:1px 10px;font-size:.8em;font-weight:600;color:#fff}
.pill.ok{background:var(--ok)}.pill.failed{background:var(--bad)}.pill.skipped,.pill.na{background:var(--mute)}
.ev{font-family:ui-monospace,monospace;font-size:.8em;background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:0 6px;margin-left:4px}
.err{border-left:4px solid var(--bad);padding:6px 12px;margin:8px 0;background:rgba(197,48,48,.07)}
.note{border-left:4px solid var(--mute);padding:6px 12px;margin:8px 0}
.count{font-weight:700;color:var(--bad)}
.step h2{display:flex;gap:10px;align-items:center;flex-wrap:wrap}.step .meta{color:var(--mute);font-size:.85em;margin-bottom:8px}
ul.items{columns:2;margin:4px 0 12px}.more{color:var(--mute);font-size:.85em}
ul.tree{list-style:none;padding-left:18px;margin:4px 0}ul.tree li{margin:6px 0;border-left:2px solid var(--line);padding-left:8px}
nav a{color:var(--acc);text-decoration:none;margin-right:12px;font-size:.9em}
a.ev{color:var(--acc);text-decoration:none}.l-malicious{color:var(--bad)}.l-benign{color:var(--ok)}.l-neutral{color:var(--mute)}
.child .step{border-top:1px solid var(--line);margin-top:12px;padding-top:8px}
"#;

pub fn html(r: &Report) -> String {
    let mut ev = Evidence::of(r);
    let mut o = String::with_capacity(32 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>maljan triage: {}</title><style>{CSS}</style></head><body><main>\n",
        e(&r.sample.name)
    );
    let _ = writeln!(o, "<h1>{}</h1>", e(&r.sample.name));
    let _ = writeln!(
        o,
        "<div class=\"sub\">Triage report · job <code>{}</code> · {} · took {} · maljan {}</div>",
        e(&r.job_id),
        e(&r.generated_at),
        ms(r.duration_ms),
        e(&r.maljan_version)
    );
    let banner = match r.status {
        Status::Complete => "Complete: every step answered or was rightly skipped.",
        Status::Degraded => "Degraded: some steps did not answer; everything else is whole.",
        Status::Failed => "Failed: no step produced an answer.",
        Status::Cancelled => "Cancelled by the operator: below is what was done until then.",
    };
    let _ = writeln!(
        o,
        "<div class=\"banner {}\">{}</div>",
        r.status.as_str(),
        banner
    );

    verdict(&mut o, r, &ev);

    // Sample.
    o.push_str("<section class=\"card\"><h2>Sample</h2><div class=\"grid\">");
    let mut row = |k: &str, v: String| {
        let _ = write!(o, "<div>{}</div><div>{}</div>", e(k), v);
    };
    row("Name", format!("<code>{}</code>", e(&r.sample.name)));
    row("Size", e(&human_size(r.sample.size)));
    if let Some(d) = &r.sample.description {
        row(
            "Type",
            format!(
                "{} <code>{}</code>",
                e(d),
                e(r.sample.kind.as_deref().unwrap_or(""))
            ),
        );
    }
    if let Some(m) = &r.sample.mime {
        row("MIME", e(m));
    }
    for (k, v) in &r.sample.hashes {
        row(&k.to_uppercase(), format!("<code>{}</code>", e(v)));
    }
    o.push_str("</div></section>\n");

    // Servers.
    o.push_str("<section class=\"card\"><h2>Servers</h2><table><tr><th>Server</th><th>Transport</th><th>Tools</th><th>Sample</th><th>Steps</th><th>State</th></tr>");
    for s in &r.servers {
        let who = [s.server_name.as_deref(), s.server_version.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        let state = match &s.error {
            Some(er) => format!(
                "<span class=\"count\">unavailable</span> <code>{}</code> {}",
                e(&er.code),
                e(&er.message)
            ),
            None if s.manifest_declared => "ok".into(),
            None => "ok (no manifest)".into(),
        };
        let _ = write!(
            o,
            "<tr><td><b>{}</b><br><span class=\"more\">{}</span></td><td>{}{}</td><td>{} <span class=\"more\">({} unavailable)</span></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e(&s.name),
            e(&who),
            e(&s.transport),
            s.via
                .as_ref()
                .filter(|v| **v != s.transport)
                .map(|v| format!(" → {}", e(v)))
                .unwrap_or_default(),
            s.tools,
            s.tools_unavailable,
            e(s.handover.as_deref().unwrap_or("–")),
            s.steps,
            state
        );
    }
    o.push_str("</table></section>\n");

    // Degradations and failures.
    o.push_str("<section class=\"card\"><h2>Degradation reasons</h2>");
    if r.degradations.is_empty() {
        o.push_str("<p>None.</p>");
    } else {
        o.push_str("<ul>");
        for d in &r.degradations {
            let _ = write!(o, "<li>{}</li>", e(d));
        }
        o.push_str("</ul>");
    }
    o.push_str("<h2>Failures</h2>");
    if r.failures.is_empty() {
        o.push_str("<p>None.</p>");
    } else {
        o.push_str("<table><tr><th>Count</th><th>Code</th><th>Tool</th><th>Remedy</th><th>First message</th><th>Evidence</th></tr>");
        for f in &r.failures {
            let _ = write!(
                o,
                "<tr><td class=\"count\">{}×</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f.count,
                e(&f.code),
                e(&failure_where(f)),
                e(&f.remediation),
                e(&f.message),
                html_links(&f.evidence, &ev)
            );
        }
        o.push_str("</table>");
    }
    if !r.unavailable.is_empty() {
        o.push_str("<h2>Not run on this host</h2><ul>");
        for u in &r.unavailable {
            let _ = write!(
                o,
                "<li><b>{}</b> on {}: {}",
                e(&u.tool),
                e(&u.server),
                e(&u.reason)
            );
            if let Some(w) = &u.without {
                let _ = write!(o, "; still answers {}", e(w));
            }
            if let Some(rem) = &u.remediation {
                let _ = write!(o, " <span class=\"more\">Remedy: {}</span>", e(rem));
            }
            o.push_str("</li>");
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n<nav>");
    if r.recursion.is_some() {
        o.push_str("<a href=\"#contents\">Contents</a>");
    }
    for s in &r.steps {
        let _ = write!(
            o,
            "<a href=\"#step-{}\">{}. {}</a>",
            s.index,
            s.index,
            e(&s.title)
        );
    }
    o.push_str("</nav>\n");
    super::tree::html(&mut o, r, &mut ev);
    for s in &r.steps {
        step(&mut o, s, "", &format!("step-{}", s.index), &mut ev);
    }
    super::tree::html_sections(&mut o, r, &mut ev);
    agent(&mut o, r, &mut ev);
    o.push_str("</main></body></html>\n");
    o
}

/// An evidence chip: a link to the call's anchor, and the anchor itself the first time.
fn chip(id: &str, ev: &mut Evidence) -> String {
    if !ev.exists(id) {
        return format!("<span class=\"ev\">{}</span>", e(id));
    }
    let here = if ev.place(id) {
        format!(" id=\"{}\"", anchor(id))
    } else {
        String::new()
    };
    format!(
        "<a class=\"ev\"{here} href=\"#{}\">{}</a>",
        anchor(id),
        e(id)
    )
}

/// One step: a card for the sample's own steps, a block inside its card for a child's
/// (`label` is then the child's id). Its evidence chips anchor its calls.
pub(crate) fn step(o: &mut String, s: &StepReport, label: &str, id: &str, ev: &mut Evidence) {
    let pill = match s.status {
        StepStatus::Ok => "ok",
        StepStatus::Failed => "failed",
        StepStatus::Skipped => "skipped",
        StepStatus::NotApplicable => "na",
    };
    let (open, h, close) = if label.is_empty() {
        ("<section class=\"card step\"", "h2", "</section>\n")
    } else {
        ("<div class=\"step\"", "h3", "</div>")
    };
    let chips: String = s.evidence.iter().map(|x| chip(x, ev)).collect();
    let _ = write!(
        o,
        "{open} id=\"{}\"><{h}>{label}{}. {} <span class=\"pill {pill}\">{}</span>{chips}</{h}>",
        anchor(id),
        s.index,
        e(&s.title),
        s.status.as_str(),
    );
    let _ = write!(
        o,
        "<div class=\"meta\">tool <code>{}</code>{} · {}</div>",
        e(&s.tool),
        s.server
            .as_ref()
            .map(|x| format!(" on {}", e(x)))
            .unwrap_or_default(),
        ms(s.duration_ms)
    );
    if let Some(er) = &s.error {
        let _ = write!(
            o,
            "<div class=\"err\"><b><code>{}</code></b> {}<br>Remedy: {}</div>",
            e(&er.code),
            e(&er.message),
            e(&er.remediation)
        );
    }
    if let Some(reason) = &s.reason {
        let _ = write!(o, "<div class=\"note\">{}", e(reason));
        if let Some(rem) = &s.remediation {
            let _ = write!(o, "<br>Remedy: {}", e(rem));
        }
        o.push_str("</div>");
    }
    if s.status == StepStatus::Ok
        && let Some(answer) = &s.result
    {
        for b in blocks(answer) {
            block(o, &b);
        }
    }
    o.push_str(close);
}

/// The verdict card: word, confidence, source, the facts, claims linked to their evidence,
/// techniques.
fn verdict(o: &mut String, r: &Report, ev: &Evidence) {
    let Some(v) = &r.verdict else { return };
    let _ = write!(
        o,
        "<section class=\"card verdict\"><h2>Verdict: <span class=\"v-{0}\">{0}</span> <span class=\"more\">confidence {1:.2}</span>{2}</h2>",
        v.verdict.as_str(),
        v.confidence,
        v.family
            .as_ref()
            .map(|f| format!(" · family <code>{}</code>", e(f)))
            .unwrap_or_default()
    );
    let by = match (&v.source, &v.model) {
        (VerdictSource::Agent, Some(m)) => format!("the judge model <code>{}</code>", e(m)),
        (VerdictSource::Agent, None) => "the judge model".into(),
        (VerdictSource::Heuristic, _) => "the deterministic scoring of the facts".into(),
    };
    let _ = write!(
        o,
        "<div class=\"meta\">source <b>{}</b> — {by}{}</div>",
        v.source.as_str(),
        v.disagreement
            .as_ref()
            .map(|d| format!(
                " · the facts alone: <b class=\"v-{0}\">{0}</b>",
                d.facts_verdict.as_str()
            ))
            .unwrap_or_default()
    );
    if let Some(d) = &v.degradation {
        let _ = write!(o, "<div class=\"note\">{}</div>", e(d));
    }
    if !v.summary.is_empty() {
        let _ = write!(o, "<p>{}</p>", e(&v.summary));
    }
    o.push_str("<h3>Facts</h3>");
    facts::html(o, v, ev);
    if !v.claims.is_empty() {
        o.push_str("<h3>Claims</h3><ul>");
        for c in &v.claims {
            let _ = write!(o, "<li>{} {}</li>", e(&c.text), html_links(&c.evidence, ev));
        }
        o.push_str("</ul>");
    }
    if !v.techniques.is_empty() {
        o.push_str("<table><tr><th>Technique</th><th>Name</th><th>Evidence</th></tr>");
        for t in &v.techniques {
            let _ = write!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                e(&t.id),
                e(&t.name),
                html_links(&t.evidence, ev)
            );
        }
        o.push_str("</table>");
    }
    o.push_str("</section>\n");
}

/// The agent stages, tokens, withheld tools and the conversation (each tool result collapsible).
fn agent(o: &mut String, r: &Report, ev: &mut Evidence) {
    let Some(a) = &r.agent else { return };
    let _ = write!(
        o,
        "<section class=\"card\"><h2>Agent <code>{}</code>{}</h2>",
        e(&a.model),
        if a.cancelled {
            " <span class=\"pill failed\">cancelled</span>"
        } else {
            ""
        }
    );
    o.push_str("<table><tr><th>Stage</th><th>Status</th><th>Requests</th><th>Tool calls</th><th>Tokens in / out</th><th>Took</th><th>Ended because</th></tr>");
    for s in &a.stages {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td></tr>",
            e(&s.name),
            e(&s.status),
            s.requests,
            s.tool_calls,
            s.input_tokens,
            s.output_tokens,
            ms(s.duration_ms),
            e(s.ended_because.as_deref().unwrap_or(""))
        );
    }
    o.push_str("</table>");
    if !a.usage.is_empty() {
        o.push_str("<table><tr><th>Stage</th><th>Model</th><th>Requests</th><th>Input tokens</th><th>Output tokens</th></tr>");
        for u in &a.usage {
            let _ = write!(
                o,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e(&u.stage),
                e(&u.model),
                u.requests,
                u.input_tokens,
                u.output_tokens
            );
        }
        o.push_str("</table>");
    }
    if !a.withheld.is_empty() {
        o.push_str("<p>Tools not offered to the model:</p><ul>");
        for w in &a.withheld {
            let _ = write!(
                o,
                "<li><code>{}</code> on {}: {}</li>",
                e(&w.tool),
                e(&w.server),
                e(&w.reason)
            );
        }
        o.push_str("</ul>");
    }
    o.push_str("<h2>Conversation</h2>");
    // A repeat answered from the ledger carries the earlier call's id: one anchor per id
    // (a triage step may have placed it already).
    for t in &a.conversation {
        if t.role == "tool" {
            let id = t
                .evidence
                .as_deref()
                .filter(|id| ev.place(id))
                .map(|id| format!(" id=\"{}\"", anchor(id)))
                .unwrap_or_default();
            let _ = write!(
                o,
                "<details class=\"turn\"{id}><summary>{} · result of <code>{}</code> {}</summary>",
                e(&t.stage),
                e(t.tool.as_deref().unwrap_or("")),
                t.evidence
                    .as_ref()
                    .map(|id| html_links(std::slice::from_ref(id), ev))
                    .unwrap_or_default()
            );
            for n in &t.notes {
                let _ = write!(o, "<div class=\"note\">{}</div>", e(n));
            }
            let _ = write!(
                o,
                "<pre class=\"mono\">{}</pre></details>",
                e(t.text.as_deref().unwrap_or(""))
            );
        } else {
            let _ = write!(
                o,
                "<details class=\"turn\" open><summary>{} · {}</summary>",
                e(&t.stage),
                e(&t.role)
            );
            if let Some(text) = &t.text {
                let _ = write!(o, "<pre class=\"mono\">{}</pre>", e(text));
            }
            for c in &t.tool_calls {
                let _ = write!(
                    o,
                    "<div>calls <code>{}</code> with <code>{}</code></div>",
                    e(&c.name),
                    e(&c.arguments)
                );
            }
            o.push_str("</details>");
        }
    }
    o.push_str("</section>\n");
}

fn block(o: &mut String, b: &Block) {
    match b {
        Block::Fields(fields) => {
            o.push_str("<div class=\"grid\">");
            for (k, v) in fields {
                let _ = write!(o, "<div>{}</div><div class=\"mono\">{}</div>", e(k), e(v));
            }
            o.push_str("</div>");
        }
        Block::List { title, items, more } => {
            let _ = write!(
                o,
                "<h3>{} <span class=\"more\">({})</span></h3><ul class=\"items\">",
                e(title),
                items.len() + more
            );
            for i in items {
                let _ = write!(o, "<li><code>{}</code></li>", e(i));
            }
            o.push_str("</ul>");
            if *more > 0 {
                let _ = write!(
                    o,
                    "<div class=\"more\">… {more} more in the JSON report and the ledger</div>"
                );
            }
        }
        Block::Table {
            title,
            columns,
            rows,
            more,
        } => {
            let _ = write!(
                o,
                "<h3>{} <span class=\"more\">({})</span></h3><table><tr>",
                e(title),
                rows.len() + more
            );
            for c in columns {
                let _ = write!(o, "<th>{}</th>", e(c));
            }
            o.push_str("</tr>");
            for row in rows {
                o.push_str("<tr>");
                for c in row {
                    let _ = write!(o, "<td class=\"mono\">{}</td>", e(c));
                }
                o.push_str("</tr>");
            }
            o.push_str("</table>");
            if *more > 0 {
                let _ = write!(
                    o,
                    "<div class=\"more\">… {more} more rows in the JSON report and the ledger</div>"
                );
            }
        }
        Block::Text(t) => {
            let _ = write!(o, "<pre class=\"mono\">{}</pre>", e(t));
        }
    }
}
