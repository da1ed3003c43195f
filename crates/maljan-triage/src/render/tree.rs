//! The child samples as a tree, in Markdown and in HTML: each child's path inside its parent,
//! type, size, SHA-256, verdict, what its own steps found, and their evidence ids (each anchored
//! once, so the verdict's claims link to them); then the limits the recursion reached.

use std::{collections::BTreeSet, fmt::Write};

use serde_json::Value;

use crate::{
    report::{Report, StepStatus},
    tree::{ChildReport, walk},
};

/// A one-line summary of what a child's steps found.
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

fn verdict_word(c: &ChildReport) -> &'static str {
    c.verdict.as_ref().map_or("–", |v| v.verdict.as_str())
}

fn evidence(c: &ChildReport) -> Vec<&str> {
    c.steps
        .iter()
        .flat_map(|s| s.evidence.iter().map(String::as_str))
        .collect()
}

/// The Markdown section ("## Contents"), when the recursion ran.
pub(crate) fn markdown(o: &mut String, r: &Report, cell: fn(&str) -> String) {
    let Some(rec) = &r.recursion else { return };
    if r.children.is_empty() && rec.findings.is_empty() && rec.skipped.is_empty() {
        let anchors: String = rec
            .evidence
            .iter()
            .map(|ev| format!("<a id=\"{ev}\"></a>"))
            .collect();
        let _ = writeln!(
            o,
            "{anchors}## Contents\n\nThe sample carries nothing to extract (extract_members, evidence {}).\n",
            rec.evidence.join(", ")
        );
        return;
    }
    let _ = writeln!(
        o,
        "## Contents: {} child sample{} ({} bytes, depth {})\n",
        rec.children,
        if rec.children == 1 { "" } else { "s" },
        rec.total_bytes,
        rec.depth
    );
    let mut anchored = BTreeSet::new();
    if !r.children.is_empty() {
        let _ = writeln!(
            o,
            "| # | Path inside the parent | Type | Size | SHA-256 | Verdict | Found | Evidence |\n|---|---|---|---|---|---|---|---|"
        );
        for c in walk(&r.children) {
            let mut anchors = String::new();
            for ev in c.extracted_by.iter().map(String::as_str).chain(evidence(c)) {
                if anchored.insert(ev.to_string()) {
                    let _ = write!(anchors, "<a id=\"{ev}\"></a>");
                }
            }
            let indent = "&nbsp;&nbsp;".repeat(c.depth.saturating_sub(1));
            let ev: Vec<String> = evidence(c).iter().map(|e| format!("`{e}`")).collect();
            let _ = writeln!(
                o,
                "| {anchors}{} | {indent}`{}` | {} (`{}`) | {} | `{}` | **{}** | {} | {} |",
                c.id,
                cell(&c.name).replace('`', "'"),
                cell(&c.description),
                cell(&c.kind),
                c.size,
                c.sha256,
                verdict_word(c),
                cell(&findings(c)),
                ev.join(" ")
            );
        }
        o.push('\n');
    }
    for f in &rec.findings {
        let _ = writeln!(
            o,
            "- **limit reached: {}** {}{} ({})",
            f.limit,
            f.member
                .as_deref()
                .map(|m| format!("`{}`: ", cell(m).replace('`', "'")))
                .unwrap_or_default(),
            cell(&f.detail),
            f.evidence.join(", ")
        );
    }
    for s in rec.skipped.iter().take(50) {
        let _ = writeln!(
            o,
            "- not extracted: `{}`: {}",
            cell(&s.name).replace('`', "'"),
            cell(&s.reason)
        );
    }
    // The extractions that gave nothing are evidence too.
    let rest: Vec<&String> = rec
        .evidence
        .iter()
        .filter(|ev| anchored.insert(ev.to_string()))
        .collect();
    if !rest.is_empty() {
        let anchors: String = rest
            .iter()
            .map(|ev| format!("<a id=\"{ev}\"></a>"))
            .collect();
        let list: Vec<&str> = rest.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(o, "\n{anchors}Extractions: {}", list.join(", "));
    }
    o.push('\n');
}

/// The HTML section, when the recursion ran.
pub(crate) fn html(o: &mut String, r: &Report, e: fn(&str) -> String) {
    let Some(rec) = &r.recursion else { return };
    let _ = write!(
        o,
        "<section class=\"card\" id=\"contents\"><h2>Contents <span class=\"more\">{} child samples · {} bytes · depth {}</span></h2>",
        rec.children, rec.total_bytes, rec.depth
    );
    let mut anchored = BTreeSet::new();
    if r.children.is_empty() {
        o.push_str("<p>The sample carries nothing to extract.</p>");
    } else {
        o.push_str("<ul class=\"tree\">");
        for c in &r.children {
            node(o, c, e, &mut anchored);
        }
        o.push_str("</ul>");
    }
    let rest: Vec<&String> = rec
        .evidence
        .iter()
        .filter(|ev| anchored.insert(ev.to_string()))
        .collect();
    if !rest.is_empty() {
        o.push_str("<div class=\"more\">Extractions:");
        for ev in rest {
            let _ = write!(o, "<span class=\"ev\" id=\"{0}\">{0}</span>", e(ev));
        }
        o.push_str("</div>");
    }
    for f in &rec.findings {
        let _ = write!(
            o,
            "<div class=\"err\"><b>limit reached: {}</b> {}{} <span class=\"ev\">{}</span></div>",
            e(&f.limit),
            f.member
                .as_deref()
                .map(|m| format!("<code>{}</code>: ", e(m)))
                .unwrap_or_default(),
            e(&f.detail),
            e(&f.evidence.join(", "))
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

fn node(o: &mut String, c: &ChildReport, e: fn(&str) -> String, anchored: &mut BTreeSet<String>) {
    let mut ids = String::new();
    for ev in c.extracted_by.iter().map(String::as_str).chain(evidence(c)) {
        let id = if anchored.insert(ev.to_string()) {
            format!(" id=\"{}\"", e(ev))
        } else {
            String::new()
        };
        let _ = write!(ids, "<span class=\"ev\"{id}>{}</span>", e(ev));
    }
    let word = verdict_word(c);
    let _ = write!(
        o,
        "<li><b>{}</b> <code>{}</code> · {} · {} bytes · <span class=\"v-{word}\">{word}</span><div class=\"mono more\">sha256 {}</div><div class=\"more\">{}</div>{ids}",
        e(&c.id),
        e(&c.name),
        e(&c.description),
        c.size,
        e(&c.sha256),
        e(&findings(c)),
    );
    if !c.children.is_empty() {
        o.push_str("<ul class=\"tree\">");
        for k in &c.children {
            node(o, k, e, anchored);
        }
        o.push_str("</ul>");
    }
    o.push_str("</li>");
}
