//! The verdict's facts, in Markdown and in HTML: the table (fact, leaning, weight, strong,
//! evidence, child path), then the facts for each reading with what shows them, then a model's
//! disagreement with the facts, if any. The sample's verdict and each child's use the same code,
//! so they read alike.

use std::fmt::Write;

use super::{
    escape::{anchor, html as e, md_code, md_text},
    evidence::Evidence,
};
use crate::verdict::{Disagreement, Fact, Leaning, Verdict};

/// Facts in reading order: those for a malicious reading first, then benign, then neutral;
/// strong before weak, heavier before lighter.
pub fn ordered(facts: &[Fact]) -> Vec<&Fact> {
    let mut out: Vec<&Fact> = facts.iter().collect();
    out.sort_by_key(|f| {
        let side = match f.leaning {
            Leaning::Malicious => 0,
            Leaning::Benign => 1,
            Leaning::Neutral => 2,
        };
        (side, !f.strong, std::cmp::Reverse(f.weight))
    });
    out
}

/// The first few facts, for a one-line summary (the child tree).
pub(crate) fn top(v: Option<&Verdict>, n: usize) -> Vec<&Fact> {
    v.map(|v| ordered(&v.facts).into_iter().take(n).collect())
        .unwrap_or_default()
}

pub(crate) fn leaning(l: Leaning) -> &'static str {
    match l {
        Leaning::Malicious => "malicious",
        Leaning::Benign => "benign",
        Leaning::Neutral => "neutral",
    }
}

/// "packed or protected (strong)" — a fact named in a line.
pub(crate) fn short(f: &Fact) -> String {
    if f.strong {
        format!("{} (strong)", f.name)
    } else {
        f.name.clone()
    }
}

/// Markdown evidence chips: each a link to its anchor, or its id marked when no part of this
/// report shows that call.
pub(crate) fn md_links(ids: &[String], ev: &Evidence) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(|id| {
            if ev.exists(id) {
                format!("[{}](#{})", md_code(id), anchor(id))
            } else {
                format!("{} (not in this report)", md_code(id))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// HTML evidence chips, linked the same way.
pub(crate) fn html_links(ids: &[String], ev: &Evidence) -> String {
    if ids.is_empty() {
        return "<span class=\"more\">no evidence</span>".into();
    }
    ids.iter()
        .map(|id| {
            if ev.exists(id) {
                format!("<a class=\"ev\" href=\"#{}\">{}</a>", anchor(id), e(id))
            } else {
                format!(
                    "<span class=\"ev\" title=\"not in this report\">{}</span>",
                    e(id)
                )
            }
        })
        .collect()
}

fn side_title(l: Leaning) -> &'static str {
    match l {
        Leaning::Malicious => "For a malicious reading",
        Leaning::Benign => "For a benign reading",
        Leaning::Neutral => "Describing the sample",
    }
}

/// The facts table, the facts for and against, and the disagreement, in Markdown.
pub(crate) fn markdown(o: &mut String, v: &Verdict, ev: &Evidence) {
    if v.facts.is_empty() {
        let _ = writeln!(o, "No fact was established.\n");
    } else {
        let _ = writeln!(
            o,
            "| Fact | Leaning | Weight | Strong | Evidence | Child |\n|---|---|---|---|---|---|"
        );
        let facts = ordered(&v.facts);
        for f in &facts {
            let _ = writeln!(
                o,
                "| {} ({}) | {} | {} | {} | {} | {} |",
                md_text(&f.name),
                md_code(&f.id),
                leaning(f.leaning),
                f.weight,
                if f.strong { "**strong**" } else { "no" },
                md_links(&f.evidence, ev),
                f.child.as_deref().map_or("–".into(), md_text)
            );
        }
        o.push('\n');
        for side in [Leaning::Malicious, Leaning::Benign, Leaning::Neutral] {
            let of_side: Vec<&&Fact> = facts.iter().filter(|f| f.leaning == side).collect();
            if of_side.is_empty() {
                continue;
            }
            let _ = writeln!(o, "**{}:**\n", side_title(side));
            for f in of_side {
                let _ = write!(
                    o,
                    "- **{}** (weight {}{})",
                    md_text(&f.name),
                    f.weight,
                    if f.strong { ", strong" } else { "" }
                );
                if let Some(c) = &f.child {
                    let _ = write!(o, " in {}", md_text(c));
                }
                let seen: Vec<String> = f.observations.iter().map(|x| md_text(x)).collect();
                if !seen.is_empty() {
                    let _ = write!(o, ": {}", seen.join("; "));
                }
                let _ = writeln!(o, " — evidence {}", md_links(&f.evidence, ev));
            }
            o.push('\n');
        }
    }
    if let Some(d) = &v.disagreement {
        md_disagreement(o, v, d);
    }
}

fn md_disagreement(o: &mut String, v: &Verdict, d: &Disagreement) {
    let _ = writeln!(
        o,
        "> **Disagreement:** the model says **{}**; the facts alone say **{}**. {}\n",
        v.verdict.as_str(),
        d.facts_verdict.as_str(),
        md_text(&d.reason)
    );
}

/// The same, in HTML.
pub(crate) fn html(o: &mut String, v: &Verdict, ev: &Evidence) {
    if v.facts.is_empty() {
        o.push_str("<p class=\"more\">No fact was established.</p>");
    } else {
        o.push_str("<table class=\"facts\"><tr><th>Fact</th><th>Leaning</th><th>Weight</th><th>Strong</th><th>Evidence</th><th>Child</th></tr>");
        let facts = ordered(&v.facts);
        for f in &facts {
            let l = leaning(f.leaning);
            let _ = write!(
                o,
                "<tr><td>{} <code class=\"more\">{}</code></td><td class=\"l-{l}\">{l}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e(&f.name),
                e(&f.id),
                f.weight,
                if f.strong { "<b>strong</b>" } else { "no" },
                html_links(&f.evidence, ev),
                f.child.as_deref().map_or("–".into(), e)
            );
        }
        o.push_str("</table>");
        for side in [Leaning::Malicious, Leaning::Benign, Leaning::Neutral] {
            let of_side: Vec<&&Fact> = facts.iter().filter(|f| f.leaning == side).collect();
            if of_side.is_empty() {
                continue;
            }
            let _ = write!(o, "<h3>{}</h3><ul>", side_title(side));
            for f in of_side {
                let _ = write!(
                    o,
                    "<li><b>{}</b> <span class=\"more\">weight {}{}</span>",
                    e(&f.name),
                    f.weight,
                    if f.strong { ", strong" } else { "" }
                );
                if let Some(c) = &f.child {
                    let _ = write!(o, " in <code>{}</code>", e(c));
                }
                let seen: Vec<String> = f.observations.iter().map(|x| e(x)).collect();
                if !seen.is_empty() {
                    let _ = write!(o, ": {}", seen.join("; "));
                }
                let _ = write!(o, " {}</li>", html_links(&f.evidence, ev));
            }
            o.push_str("</ul>");
        }
    }
    if let Some(d) = &v.disagreement {
        let _ = write!(
            o,
            "<div class=\"err\"><b>Disagreement:</b> the model says <b class=\"v-{0}\">{0}</b>; the facts alone say <b class=\"v-{1}\">{1}</b>. {2}</div>",
            v.verdict.as_str(),
            d.facts_verdict.as_str(),
            e(&d.reason)
        );
    }
}
