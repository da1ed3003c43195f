//! The child samples, in Markdown and in HTML: first the tree ("Contents": each child's place,
//! path inside its parent, type, size, SHA-256, verdict and top facts, linked to its section),
//! then one section per child with its details, its verdict and facts, and its own steps (each
//! evidence id anchored once, so the verdict's facts and claims link to them); then the limits
//! the recursion reached.

use std::{collections::BTreeSet, fmt::Write};

use serde_json::Value;

use super::{
    escape::{anchor, html as e, md_code, md_text},
    evidence::Evidence,
    facts::{self, html_links, md_links},
    human_size,
};
use crate::{
    report::{Report, StepStatus},
    tree::ChildReport,
    verdict::Verdict,
};

/// Top facts shown per child in the tree.
const TOP_FACTS: usize = 3;

/// A one-line summary of what a child's steps found (shown when its verdict names no fact).
pub(crate) fn findings(c: &ChildReport) -> String {
    let mut out = Vec::new();
    let ok = |tool: &str| {
        c.step(tool)
            .filter(|s| s.status == StepStatus::Ok)
            .and_then(|s| s.result.as_ref())
    };
    if let Some(r) = ok("yara_scan") {
        let rules: Vec<&str> = r["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["rule"].as_str())
            .collect();
        if !rules.is_empty() {
            out.push(format!("YARA: {}", rules.join(", ")));
        }
    }
    if let Some(r) = ok("detect_packer") {
        let names: Vec<String> = r["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| {
                Some(format!(
                    "{} {}",
                    f["category"].as_str().unwrap_or("packer"),
                    f["name"].as_str()?
                ))
            })
            .collect();
        if !names.is_empty() {
            out.push(names.join(", "));
        }
    }
    if let Some(r) = ok("code_capabilities") {
        let ids: BTreeSet<&str> = r["capabilities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["attack_id"].as_str().or(c["technique"].as_str()))
            .collect();
        if !ids.is_empty() {
            out.push(format!(
                "ATT&CK: {}",
                ids.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if let Some(Value::Object(counts)) = ok("iocs_from_file").and_then(|r| r.get("counts")) {
        let n: u64 = counts.values().filter_map(Value::as_u64).sum();
        if n > 0 {
            out.push(format!("{n} IOCs"));
        }
    }
    if !c.flags.is_empty() {
        out.push(format!("flags: {}", c.flags.join(", ")));
    }
    if let Some(p) = &c.password {
        out.push(format!("opened with password \"{p}\""));
    }
    out.join("; ")
}

/// What the tree says a child is about: its top facts, else what its steps found.
fn about(c: &ChildReport) -> String {
    let top = facts::top(c.verdict.as_ref(), TOP_FACTS);
    if top.is_empty() {
        findings(c)
    } else {
        let names: Vec<String> = top.iter().map(|f| facts::short(f)).collect();
        format!("facts: {}", names.join(", "))
    }
}

fn verdict_word(c: &ChildReport) -> &'static str {
    c.verdict.as_ref().map_or("–", |v| v.verdict.as_str())
}

/// The anchor of a child's section (`child-1-2` for child 1.2).
pub(crate) fn section_id(c: &ChildReport) -> String {
    anchor(&format!("child-{}", c.id.replace('.', "-")))
}

/// A child in reading order, with what its section shows about its place.
struct Placed<'a> {
    child: &'a ChildReport,
    parent: Option<&'a ChildReport>,
    /// The names from the sample down to it (`a.zip → b.doc → c.exe`).
    path: String,
    /// 1 for the sample's own members.
    level: usize,
}

fn depth_first<'a>(
    children: &'a [ChildReport],
    parent: Option<&'a ChildReport>,
    path: &mut Vec<&'a str>,
    out: &mut Vec<Placed<'a>>,
) {
    for c in children {
        path.push(&c.name);
        out.push(Placed {
            child: c,
            parent,
            path: path.join(" → "),
            level: path.len() - 1,
        });
        depth_first(&c.children, Some(c), path, out);
        path.pop();
    }
}

/// Every child, depth first.
fn placed(r: &Report) -> Vec<Placed<'_>> {
    let mut out = Vec::new();
    let mut path = vec![r.sample.name.as_str()];
    depth_first(&r.children, None, &mut path, &mut out);
    out
}

/// The Markdown "Contents" section, when the recursion ran: the tree as a nested list.
pub(crate) fn markdown(o: &mut String, r: &Report, ev: &mut Evidence) {
    let Some(rec) = &r.recursion else { return };
    let anchors: String = rec
        .evidence
        .iter()
        .filter(|id| ev.place(id))
        .map(|id| format!("<a id=\"{}\"></a>", anchor(id)))
        .collect();
    if r.children.is_empty() && rec.findings.is_empty() && rec.skipped.is_empty() {
        let _ = writeln!(
            o,
            "## {anchors}Contents\n\nThe sample carries nothing to extract (extract\\_members, evidence {}).\n",
            md_links(&rec.evidence, ev)
        );
        return;
    }
    let _ = writeln!(
        o,
        "## {anchors}Contents: {} child sample{} ({} bytes, depth {})\n",
        rec.children,
        if rec.children == 1 { "" } else { "s" },
        rec.total_bytes,
        rec.depth
    );
    for p in placed(r) {
        let c = p.child;
        let _ = writeln!(
            o,
            "{}- [{}](#{}) {} — {} ({}) · {} · sha256 {} · **{}**{}",
            "  ".repeat(p.level - 1),
            md_text(&c.id),
            section_id(c),
            md_code(&c.name),
            md_text(&c.description),
            md_code(&c.kind),
            human_size(c.size),
            md_code(&c.sha256),
            verdict_word(c),
            match about(c) {
                a if a.is_empty() => String::new(),
                a => format!(" · {}", md_text(&a)),
            }
        );
    }
    if !r.children.is_empty() {
        o.push('\n');
    }
    if !rec.findings.is_empty() {
        let _ = writeln!(o, "Limits reached:\n");
        for f in &rec.findings {
            let _ = writeln!(
                o,
                "- **{}** {}{} (evidence {})",
                md_text(&f.limit),
                f.member
                    .as_deref()
                    .map(|m| format!("{}: ", md_code(m)))
                    .unwrap_or_default(),
                md_text(&f.detail),
                md_links(&f.evidence, ev)
            );
        }
        o.push('\n');
    }
    if !rec.skipped.is_empty() {
        let _ = writeln!(o, "Not extracted:\n");
        for s in rec.skipped.iter().take(50) {
            let _ = writeln!(o, "- {}: {}", md_code(&s.name), md_text(&s.reason));
        }
        o.push('\n');
    }
    if !rec.evidence.is_empty() {
        let _ = writeln!(o, "Extractions: {}\n", md_links(&rec.evidence, ev));
    }
}

fn md_verdict_line(v: &Verdict) -> String {
    format!(
        "**{}** (confidence {:.2}, {})",
        v.verdict.as_str(),
        v.confidence,
        v.source.as_str()
    )
}

/// One Markdown section per child: its details, verdict and facts, then its own steps.
pub(crate) fn markdown_sections(o: &mut String, r: &Report, ev: &mut Evidence) {
    for Placed {
        child: c,
        parent,
        path,
        ..
    } in placed(r)
    {
        let extra: String = c
            .extracted_by
            .iter()
            .filter(|id| ev.place(id))
            .map(|id| format!("<a id=\"{}\"></a>", anchor(id)))
            .collect();
        let _ = writeln!(
            o,
            "## <a id=\"{}\"></a>{extra}Child {}: {}\n",
            section_id(c),
            md_text(&c.id),
            md_code(&c.name)
        );
        let _ = writeln!(o, "| | |\n|---|---|");
        let _ = writeln!(o, "| Path | {} |", md_text(&path));
        let _ = writeln!(
            o,
            "| Parent | {} |",
            parent.map_or("the sample".into(), |p| format!(
                "[{}](#{}) {}",
                md_text(&p.id),
                section_id(p),
                md_code(&p.name)
            ))
        );
        let _ = writeln!(
            o,
            "| Type | {} ({}) |",
            md_text(&c.description),
            md_code(&c.kind)
        );
        let _ = writeln!(o, "| Size | {} |", human_size(c.size));
        for (k, v) in [("SHA-256", &c.sha256), ("SHA-1", &c.sha1), ("MD5", &c.md5)] {
            if !v.is_empty() {
                let _ = writeln!(o, "| {k} | {} |", md_code(v));
            }
        }
        let _ = writeln!(
            o,
            "| From | {}{} · extracted by {} |",
            md_text(&c.source),
            match (&c.encrypted, &c.password) {
                (_, Some(p)) => format!(", encrypted, opened with {}", md_code(p)),
                (true, None) => ", encrypted".into(),
                _ => String::new(),
            },
            md_links(&c.extracted_by, ev)
        );
        if !c.flags.is_empty() {
            let _ = writeln!(o, "| Flags | {} |", md_text(&c.flags.join(", ")));
        }
        let _ = writeln!(
            o,
            "| Verdict | {} |\n",
            c.verdict.as_ref().map_or("none".into(), md_verdict_line)
        );
        if let Some(v) = &c.verdict {
            if !v.summary.is_empty() {
                let _ = writeln!(o, "{}\n", md_text(&v.summary));
            }
            facts::markdown(o, v, ev);
        }
        let label = format!("{} · ", md_text(&c.id));
        for s in &c.steps {
            super::markdown::step(o, s, "###", &label, ev);
        }
    }
}

/// The HTML "Contents" card, when the recursion ran: the tree as nested lists.
pub(crate) fn html(o: &mut String, r: &Report, ev: &mut Evidence) {
    let Some(rec) = &r.recursion else { return };
    let _ = write!(
        o,
        "<section class=\"card\" id=\"contents\"><h2>Contents <span class=\"more\">{} child samples · {} bytes · depth {}</span></h2>",
        rec.children, rec.total_bytes, rec.depth
    );
    if r.children.is_empty() {
        o.push_str("<p>The sample carries nothing to extract.</p>");
    } else {
        o.push_str("<ul class=\"tree\">");
        for c in &r.children {
            node(o, c);
        }
        o.push_str("</ul>");
    }
    if !rec.evidence.is_empty() {
        o.push_str("<div class=\"more\">Extractions:");
        for id in &rec.evidence {
            let here = if ev.place(id) {
                format!(" id=\"{}\"", anchor(id))
            } else {
                String::new()
            };
            let _ = write!(
                o,
                "<a class=\"ev\"{here} href=\"#{}\">{}</a>",
                anchor(id),
                e(id)
            );
        }
        o.push_str("</div>");
    }
    for f in &rec.findings {
        let _ = write!(
            o,
            "<div class=\"err\"><b>limit reached: {}</b> {}{} {}</div>",
            e(&f.limit),
            f.member
                .as_deref()
                .map(|m| format!("<code>{}</code>: ", e(m)))
                .unwrap_or_default(),
            e(&f.detail),
            html_links(&f.evidence, ev)
        );
    }
    for s in rec.skipped.iter().take(50) {
        let _ = write!(
            o,
            "<div class=\"note\">not extracted: <code>{}</code>: {}</div>",
            e(&s.name),
            e(&s.reason)
        );
    }
    o.push_str("</section>\n");
}

fn node(o: &mut String, c: &ChildReport) {
    let word = verdict_word(c);
    let _ = write!(
        o,
        "<li><a href=\"#{}\"><b>{}</b></a> <code>{}</code> · {} <code>{}</code> · {} · <span class=\"v-{word}\">{word}</span><div class=\"mono more\">sha256 {}</div><div class=\"more\">{}</div>",
        section_id(c),
        e(&c.id),
        e(&c.name),
        e(&c.description),
        e(&c.kind),
        e(&human_size(c.size)),
        e(&c.sha256),
        e(&about(c)),
    );
    if !c.children.is_empty() {
        o.push_str("<ul class=\"tree\">");
        for k in &c.children {
            node(o, k);
        }
        o.push_str("</ul>");
    }
    o.push_str("</li>");
}

/// One HTML card per child: details, verdict and facts, then its own steps.
pub(crate) fn html_sections(o: &mut String, r: &Report, ev: &mut Evidence) {
    for Placed {
        child: c,
        parent,
        path,
        ..
    } in placed(r)
    {
        let word = verdict_word(c);
        let _ = write!(
            o,
            "<section class=\"card child\" id=\"{}\"><h2>Child {} <code>{}</code> <span class=\"v-{word}\">{word}</span></h2><div class=\"grid\">",
            section_id(c),
            e(&c.id),
            e(&c.name)
        );
        let mut row = |k: &str, v: String| {
            let _ = write!(o, "<div>{k}</div><div>{v}</div>");
        };
        row("Path", format!("<code>{}</code>", e(&path)));
        row(
            "Parent",
            parent.map_or("the sample".into(), |p| {
                format!(
                    "<a href=\"#{}\">{}</a> <code>{}</code>",
                    section_id(p),
                    e(&p.id),
                    e(&p.name)
                )
            }),
        );
        row(
            "Type",
            format!("{} <code>{}</code>", e(&c.description), e(&c.kind)),
        );
        row("Size", e(&human_size(c.size)));
        for (k, v) in [("SHA-256", &c.sha256), ("SHA-1", &c.sha1), ("MD5", &c.md5)] {
            if !v.is_empty() {
                row(k, format!("<span class=\"mono\">{}</span>", e(v)));
            }
        }
        row(
            "From",
            format!(
                "{}{} · extracted by {}",
                e(&c.source),
                match (&c.encrypted, &c.password) {
                    (_, Some(p)) => format!(", encrypted, opened with <code>{}</code>", e(p)),
                    (true, None) => ", encrypted".into(),
                    _ => String::new(),
                },
                html_links(&c.extracted_by, ev)
            ),
        );
        if !c.flags.is_empty() {
            row("Flags", e(&c.flags.join(", ")));
        }
        o.push_str("</div>");
        if let Some(v) = &c.verdict {
            let _ = write!(
                o,
                "<h3>Verdict: <span class=\"v-{0}\">{0}</span> <span class=\"more\">confidence {1:.2} · {2}</span></h3>",
                v.verdict.as_str(),
                v.confidence,
                v.source.as_str()
            );
            if !v.summary.is_empty() {
                let _ = write!(o, "<p>{}</p>", e(&v.summary));
            }
            facts::html(o, v, ev);
        }
        let label = format!("{} · ", e(&c.id));
        for s in &c.steps {
            let id = format!("{}-step-{}", section_id(c), s.index);
            super::html::step(o, s, &label, &id, ev);
        }
        o.push_str("</section>\n");
    }
}
