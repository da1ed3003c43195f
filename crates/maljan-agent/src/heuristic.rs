//! The deterministic verdict, computed from the triage findings alone through the facts table
//! ([`crate::facts`]). It stands when no model is configured and when the judge's answer cannot be
//! used; the judge is shown the same facts. The same rules give each child sample (archive
//! member, attachment, embedded object) its own verdict, and a child's verdict and top facts
//! appear among its parent's facts with the child's path.
//!
//! How the verdict is reached (each fact counted once, see the table for weights):
//!
//! - **malicious**: two independent strong facts (two different strong fact ids), or a known-bad
//!   signature that names a family, or a child sample that is malicious (a container is at least
//!   as bad as its worst member, through every level of nesting). Packing alone never is: `packed`
//!   is neutral; a packed program's unpacked image (a child unpacked from it) is judged on its own
//!   facts, and its verdict comes up like any child's.
//! - **suspicious**: one strong fact, or malicious-leaning facts weighing 4 or more together, or a
//!   suspicious child.
//! - **benign**: nothing leans malicious, at least one fact speaks for a benign reading (its basis
//!   is stated), and the evidence is thick (for the sample: identify_file, the format's own tool,
//!   strings, iocs and a YARA scan with rules all answered; for a child: iocs and a YARA scan).
//! - **unknown** otherwise: the honest answer when the evidence is thin.
//!
//! Every fact cites the evidence ids of the calls that show it, and an observation whose ids are
//! not in the job's ledger is dropped, so a verdict never rests on a call that was not made. The
//! claims are the facts, one claim each (the judge's citation checks and the renderers read them);
//! the techniques are the ATT&CK ids of the discriminating capabilities (and T1027.002 for
//! packing), each with its evidence id.

use std::collections::BTreeSet;

use maljan_triage::{
    ChildReport, Report, StepReport, StepStatus,
    report::{Claim, Fact, Leaning, Technique, Verdict, VerdictSource, VerdictWord},
    tree::walk_mut,
};
use serde_json::Value;

use crate::facts::{Carrier, Facts, carries_executable, is_executable, lookup};

const FORMAT_TOOLS: &[&str] = &[
    "pe_info",
    "elf_info",
    "macho_info",
    "document_info",
    "archive_list",
];
const NETWORK_KINDS: &[&str] = &["url", "domain", "ipv4", "ipv6", "email"];
const DECEPTIVE_FLAGS: &[&str] = &["double_extension", "right_to_left_override"];
/// extract_members' source of a packed program's unpacked image (maljan-analysis's `unpack`).
const UNPACKED_SOURCE: &str = "unpacked";
/// An import table at least this long is an ordinary program's, not a loader stub's.
pub(crate) const ORDINARY_IMPORTS: u64 = 20;
/// Malicious-leaning facts weighing this much together make a sample suspicious.
const SUSPICIOUS_SCORE: u32 = 4;

/// What one sample (the job's, or a child) offers the rules.
struct Findings<'a> {
    steps: &'a [StepReport],
    children: &'a [ChildReport],
    /// identify_file's kind of this sample (what carries its children).
    kind: Option<&'a str>,
    /// The calls that found this sample (extract_members for a child; empty for the job's).
    found_by: &'a [String],
    /// Extraction limits met while opening this sample: (limit, member, evidence).
    limits: Vec<(String, Option<String>, Vec<String>)>,
    is_child: bool,
}

/// The heuristic verdict for `report`'s findings; `ledger_ids` are the evidence ids of the job.
/// Children without a verdict yet are judged on the way (see [`fill_children`]).
pub fn verdict(report: &Report, ledger_ids: &BTreeSet<String>) -> Verdict {
    let mut children = report.children.clone();
    fill(&mut children, report, ledger_ids);
    let kind = report
        .sample
        .kind
        .as_deref()
        .or_else(|| step_kind(&report.steps));
    judge(
        &Findings {
            steps: &report.steps,
            children: &children,
            kind,
            found_by: &[],
            limits: limits_of(report, &report.sample.sha256),
            is_child: false,
        },
        ledger_ids,
    )
}

/// Gives every child sample of `report` its own heuristic verdict (deepest first, so that a
/// member's verdict counts for its container).
pub fn fill_children(report: &mut Report, ledger_ids: &BTreeSet<String>) {
    let mut children = std::mem::take(&mut report.children);
    fill(&mut children, report, ledger_ids);
    report.children = children;
}

fn fill(children: &mut [ChildReport], report: &Report, ledger_ids: &BTreeSet<String>) {
    walk_mut(children, &mut |c: &mut ChildReport| {
        if c.verdict.is_some() {
            return;
        }
        let v = judge(
            &Findings {
                steps: &c.steps,
                children: &c.children,
                kind: Some(c.kind.as_str()),
                found_by: &c.extracted_by,
                limits: limits_of(report, &c.sha256),
                is_child: true,
            },
            ledger_ids,
        );
        c.verdict = Some(v);
    });
}

fn limits_of(report: &Report, sha256: &str) -> Vec<(String, Option<String>, Vec<String>)> {
    report
        .recursion
        .as_ref()
        .map(|r| {
            r.findings
                .iter()
                .filter(|f| f.parent_sha256 == sha256)
                .map(|f| (f.limit.clone(), f.member.clone(), f.evidence.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn step_kind(steps: &[StepReport]) -> Option<&str> {
    ok(steps, "identify_file")
        .and_then(|s| s.result.as_ref())
        .and_then(|r| r.get("kind"))
        .and_then(Value::as_str)
}

pub(crate) fn ok<'a>(steps: &'a [StepReport], tool: &str) -> Option<&'a StepReport> {
    steps
        .iter()
        .find(|s| s.tool == tool && s.status == StepStatus::Ok && s.result.is_some())
}

pub(crate) fn list<'a>(v: Option<&'a Value>, key: &str) -> Vec<&'a Value> {
    v.and_then(|r| r.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

pub(crate) fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The facts of one sample and the verdict they give.
fn judge(f: &Findings, ledger_ids: &BTreeSet<String>) -> Verdict {
    let mut facts = Facts::new(ledger_ids);
    let mut techniques: Vec<Technique> = Vec::new();
    crate::facts_from::yara(f.steps, f.kind, &mut facts);
    crate::facts_from::document(f.steps, &mut facts);
    crate::facts_from::packer(f.steps, &mut facts);
    crate::facts_from::capabilities(f.steps, &mut facts, &mut techniques);
    crate::facts_from::format(f.steps, &mut facts);
    crate::facts_from::iocs(f.steps, &mut facts);
    children_facts(f, &mut facts);
    // An ordinary import table speaks for a benign reading only when nothing leans malicious
    // and the program is not packed (a stub's imports say nothing of the program inside).
    if !facts.has("packed") && !facts.list.iter().any(|x| x.leaning == Leaning::Malicious) {
        crate::facts_from::ordinary_imports(f.steps, &mut facts);
    }
    // Plain text (not a script, HTML or XML: identify_file names those apart) carries nothing
    // that runs.
    if f.kind == Some("text") {
        let evidence = ok(f.steps, "identify_file")
            .map(|s| s.evidence.clone())
            .unwrap_or_else(|| f.found_by.to_vec());
        facts.add("inert_content", "identify_file: plain text", &evidence);
    }
    techniques
        .retain(|t| !t.evidence.is_empty() && t.evidence.iter().all(|e| ledger_ids.contains(e)));

    let yara_with_rules = ok(f.steps, "yara_scan")
        .and_then(|s| s.result.as_ref())
        .map(|r| {
            let n = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
            n("rule_files") + n("builtin_rule_files")
        })
        .unwrap_or(0)
        > 0;
    let thick = if f.is_child {
        ok(f.steps, "iocs_from_file").is_some() && yara_with_rules
    } else {
        ["identify_file", "strings", "iocs_from_file", "yara_scan"]
            .iter()
            .all(|t| ok(f.steps, t).is_some())
            && FORMAT_TOOLS.iter().any(|t| ok(f.steps, t).is_some())
            && yara_with_rules
    };
    let family = facts.family.take();
    let mut list = std::mem::take(&mut facts.list);
    for x in &mut list {
        // In call order (ev_0002 before ev_0010), whichever tool was read first.
        x.evidence.sort_by_key(|e| (e.len(), e.clone()));
    }
    order(&mut list);
    decide(list, family, techniques, thick)
}

/// Strong malicious facts first, then by leaning and weight: the order they are shown in.
fn order(list: &mut [Fact]) {
    let rank = |x: &Fact| match (x.leaning, x.strong) {
        (Leaning::Malicious, true) => 0,
        (Leaning::Malicious, false) => 1,
        (Leaning::Benign, _) => 2,
        (Leaning::Neutral, _) => 3,
    };
    list.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.weight.cmp(&a.weight)));
}

/// The verdict the facts give (the rules are in the module documentation).
pub fn decide(
    facts: Vec<Fact>,
    family: Option<String>,
    techniques: Vec<Technique>,
    thick: bool,
) -> Verdict {
    let reading = Reading::of(&facts, family.is_some());
    let (word, confidence) = reading.word(thick);
    let summary = reading.summary(word, &facts, family.as_deref());
    let claims = facts
        .iter()
        .map(|x| Claim {
            text: claim_text(x),
            evidence: x.evidence.clone(),
        })
        .collect();
    Verdict {
        verdict: word,
        confidence,
        family: if word == VerdictWord::Malicious {
            family
        } else {
            None
        },
        summary,
        claims,
        techniques,
        source: VerdictSource::Heuristic,
        model: None,
        degradation: None,
        facts,
        disagreement: None,
    }
}

fn claim_text(x: &Fact) -> String {
    let strength = match (x.leaning, x.strong) {
        (Leaning::Malicious, true) => "strong, ",
        _ => "",
    };
    let leaning = match x.leaning {
        Leaning::Malicious => "leans malicious",
        Leaning::Benign => "leans benign",
        Leaning::Neutral => "neutral",
    };
    let child = x
        .child
        .as_deref()
        .map(|c| format!(" [{c}]"))
        .unwrap_or_default();
    format!(
        "{}{child} ({strength}{leaning}, weight {}): {}",
        x.name,
        x.weight,
        x.observations.join("; ")
    )
}

/// What the facts add up to.
pub struct Reading<'a> {
    /// Distinct ids of the strong malicious-leaning facts.
    pub strong: BTreeSet<&'a str>,
    /// The weight of the malicious-leaning facts, each once.
    pub score: u32,
    pub benign: Vec<&'a Fact>,
    pub family_signature: bool,
    pub child_malicious: bool,
    pub child_suspicious: bool,
}

impl<'a> Reading<'a> {
    pub fn of(facts: &'a [Fact], family: bool) -> Self {
        let malicious = facts.iter().filter(|x| x.leaning == Leaning::Malicious);
        Self {
            strong: malicious
                .clone()
                .filter(|x| x.strong)
                .map(|x| x.id.as_str())
                .collect(),
            score: malicious.map(|x| x.weight).sum(),
            benign: facts
                .iter()
                .filter(|x| x.leaning == Leaning::Benign)
                .collect(),
            family_signature: family && facts.iter().any(|x| x.id == "known_bad_signature"),
            child_malicious: facts.iter().any(|x| x.id == "child_malicious"),
            child_suspicious: facts.iter().any(|x| x.id == "child_suspicious"),
        }
    }

    pub fn word(&self, thick: bool) -> (VerdictWord, f64) {
        if self.family_signature {
            (VerdictWord::Malicious, 0.9)
        } else if self.strong.len() >= 2 {
            let extra = (self.strong.len() - 2) as f64;
            (VerdictWord::Malicious, (0.7 + 0.05 * extra).min(0.85))
        } else if self.child_malicious {
            (VerdictWord::Malicious, 0.7)
        } else if !self.strong.is_empty() || self.score >= SUSPICIOUS_SCORE || self.child_suspicious
        {
            let extra = f64::from(self.score.saturating_sub(2));
            (VerdictWord::Suspicious, (0.4 + 0.03 * extra).min(0.6))
        } else if self.score == 0 && !self.benign.is_empty() && thick {
            let basis: u32 = self.benign.iter().map(|x| x.weight).sum();
            (VerdictWord::Benign, (0.3 + 0.1 * f64::from(basis)).min(0.6))
        } else {
            (VerdictWord::Unknown, 0.0)
        }
    }

    fn summary(&self, word: VerdictWord, facts: &[Fact], family: Option<&str>) -> String {
        let names = |pred: &dyn Fn(&Fact) -> bool| {
            facts
                .iter()
                .filter(|x| pred(x))
                .map(|x| match &x.child {
                    Some(c) => format!("{} [{c}]", x.name),
                    None => x.name.clone(),
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let strong = names(&|x| x.leaning == Leaning::Malicious && x.strong);
        let leaning = names(&|x| x.leaning == Leaning::Malicious);
        let neutral = names(&|x| x.leaning == Leaning::Neutral && x.weight > 0);
        let also = if neutral.is_empty() {
            String::new()
        } else {
            format!(" Neutral: {neutral}.")
        };
        match word {
            VerdictWord::Malicious if self.family_signature => format!(
                "Malicious: a known-bad signature names the family {}.{also}",
                family.unwrap_or("?")
            ),
            VerdictWord::Malicious if self.strong.len() >= 2 => format!(
                "Malicious: {} independent strong facts — {strong}.{also}",
                self.strong.len()
            ),
            VerdictWord::Malicious => {
                let paths = names(&|x| x.id == "child_malicious");
                format!("Malicious: a child sample is malicious — {paths}.{also}")
            }
            VerdictWord::Suspicious if !self.strong.is_empty() => format!(
                "Suspicious: one strong fact — {strong} (malicious needs two independent ones).{also}"
            ),
            VerdictWord::Suspicious => format!(
                "Suspicious: facts leaning malicious weigh {} together — {leaning}.{also}",
                self.score
            ),
            VerdictWord::Benign => format!(
                "Benign, on this basis: {}; nothing leans malicious.{also} A heuristic cannot prove a file harmless.",
                names(&|x| x.leaning == Leaning::Benign)
            ),
            VerdictWord::Unknown if self.score > 0 => format!(
                "Unknown: no strong fact, and what leans malicious weighs {} (suspicious needs {SUSPICIOUS_SCORE}) — {leaning}.{also}",
                self.score
            ),
            VerdictWord::Unknown if !self.benign.is_empty() => format!(
                "Unknown: facts speak for a benign reading, but not every check could run.{also}"
            ),
            VerdictWord::Unknown => format!(
                "Unknown: the facts are too thin for a verdict: nothing leans malicious or benign.{also}"
            ),
        }
    }
}

/// What the sample's children and its extraction say about it.
fn children_facts(f: &Findings, facts: &mut Facts) {
    let mut all_benign = !f.children.is_empty();
    let mut benign_evidence = Vec::new();
    for c in f.children {
        // The image a packer hid is the sample itself, not a program it carries: its own facts
        // come up through its verdict below.
        if is_executable(&c.kind) && c.source != UNPACKED_SOURCE {
            let def = carries_executable(Carrier::of(f.kind, &c.source));
            facts.add_def(
                def,
                None,
                format!(
                    "extract_members: {} ({}, {} bytes) from {}",
                    c.name, c.kind, c.size, c.source
                ),
                &c.extracted_by,
            );
        }
        if let Some(flag) = c
            .flags
            .iter()
            .find(|fl| DECEPTIVE_FLAGS.contains(&fl.as_str()))
        {
            facts.add(
                "deceptive_name",
                format!("{} ({flag})", c.name),
                &c.extracted_by,
            );
        }
        if let Some(pw) = &c.password {
            facts.add(
                "encrypted_member",
                format!("{} opened with the password \"{pw}\"", c.name),
                &c.extracted_by,
            );
        }
        let Some(v) = &c.verdict else {
            all_benign = false;
            continue;
        };
        if v.verdict != VerdictWord::Benign {
            all_benign = false;
        } else {
            benign_evidence.extend(v.facts.iter().flat_map(|x| x.evidence.iter().cloned()));
        }
        let id = match v.verdict {
            VerdictWord::Malicious => "child_malicious",
            VerdictWord::Suspicious => "child_suspicious",
            _ => continue,
        };
        // The child's path down to where its verdict comes from (zip → doc → exe).
        let path = match v.facts.iter().find(|x| x.id == id && x.child.is_some()) {
            Some(inner) => format!("{} → {}", c.name, inner.child.as_deref().unwrap_or("")),
            None => c.name.clone(),
        };
        let evidence: Vec<String> = v
            .facts
            .iter()
            .flat_map(|x| x.evidence.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let def = *lookup(id).expect("in the table");
        facts.add_def(
            def,
            Some(path.clone()),
            format!(
                "{} ({}) is {} ({:.2}): {}",
                c.name,
                c.kind,
                v.verdict.as_str(),
                v.confidence,
                v.summary
            ),
            &evidence,
        );
        // Its top facts, each named with the child's path.
        for x in v
            .facts
            .iter()
            .filter(|x| x.leaning == Leaning::Malicious)
            .take(5)
        {
            // A grandchild's verdict comes up as it was written; the child's own facts by name.
            let lines = if x.id.starts_with("child_") {
                x.observations.clone()
            } else {
                vec![format!("{}: {}", x.name, x.observations.join("; "))]
            };
            for line in lines {
                facts.add_def(def, Some(path.clone()), line, &evidence);
            }
        }
    }
    if all_benign && !benign_evidence.is_empty() {
        let names: Vec<&str> = f.children.iter().map(|c| c.name.as_str()).collect();
        facts.add(
            "members_benign",
            format!("benign: {}", names.join(", ")),
            &benign_evidence,
        );
    }
    for (limit, member, evidence) in &f.limits {
        if limit == "ratio" {
            facts.add(
                "decompression_bomb",
                format!(
                    "{} expands past the ratio limit",
                    member.as_deref().unwrap_or("a member")
                ),
                evidence,
            );
        }
    }
}

/// The network kinds iocs_from_file counted (confident ones: see iocs.rs), as "2 url, 1 ipv4".
pub(crate) fn network_counts(steps: &[StepReport]) -> Option<(&StepReport, Vec<(String, u64)>)> {
    let step = ok(steps, "iocs_from_file")?;
    let Some(Value::Object(counts)) = step.result.as_ref().and_then(|r| r.get("counts")) else {
        return None;
    };
    let found: Vec<(String, u64)> = NETWORK_KINDS
        .iter()
        .filter_map(|k| {
            let n = counts.get(*k).and_then(Value::as_u64).unwrap_or(0);
            (n > 0).then(|| (k.to_string(), n))
        })
        .collect();
    Some((step, found))
}

#[cfg(test)]
#[path = "heuristic_tests.rs"]
mod tests;
