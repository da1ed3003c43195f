//! bench/verdicts.md: the target table first, then the confusion matrices, the misclassified
//! files with the facts their verdict rested on, the random set's indicators and the capa table.

use std::{collections::BTreeMap, fmt::Write, path::Path, time::Duration};

use crate::{Outcome, capa::Comparison, tally};

pub struct Run<'a> {
    pub outcomes: &'a [Outcome],
    pub wall: Duration,
    pub jobs: usize,
    pub commit: String,
    pub maljan: &'a Path,
    pub manifest: &'a Path,
    pub reused: bool,
    pub capa: Option<Comparison>,
}

const WORDS: [&str; 5] = ["malicious", "suspicious", "benign", "unknown", "error"];

fn pct(n: usize, d: usize) -> String {
    if d == 0 {
        "–".into()
    } else {
        format!("{:.1}%", 100.0 * n as f64 / d as f64)
    }
}

fn flagged(o: &Outcome) -> bool {
    matches!(o.verdict.as_str(), "malicious" | "suspicious")
}

/// A target row: the figure, the target, what was measured, and whether it is met.
struct Row {
    figure: &'static str,
    target: &'static str,
    measured: String,
    met: bool,
}

fn targets(out: &[Outcome]) -> Vec<Row> {
    let benign: Vec<&Outcome> = out.iter().filter(|o| o.entry.corpus == "benign").collect();
    let mal: Vec<&Outcome> = out
        .iter()
        .filter(|o| o.entry.label == "malicious")
        .collect();
    let carriers: Vec<&&Outcome> = mal.iter().filter(|o| o.entry.container != "none").collect();
    let docs: Vec<&&Outcome> = mal
        .iter()
        .filter(|o| {
            matches!(
                o.entry.container.as_str(),
                "mail" | "pdf" | "doc" | "rtf" | "html"
            ) && o.entry.carries.as_deref() == Some("windows-program")
        })
        .collect();
    let packed: Vec<&&Outcome> = benign.iter().filter(|o| o.entry.packed).collect();
    let random: Vec<&Outcome> = out.iter().filter(|o| o.entry.corpus == "random").collect();
    let b_flag = benign.iter().filter(|o| flagged(o)).count();
    let b_mal = benign.iter().filter(|o| o.verdict == "malicious").count();
    let b_benign = benign
        .iter()
        .filter(|o| o.verdict == "benign" && o.basis)
        .count();
    let b_benign_any = benign.iter().filter(|o| o.verdict == "benign").count();
    let m_flag = mal.iter().filter(|o| flagged(o)).count();
    let c_flag = carriers.iter().filter(|o| flagged(o)).count();
    let d_flag = docs.iter().filter(|o| flagged(o)).count();
    let p_mal = packed.iter().filter(|o| o.verdict == "malicious").count();
    let r_scored: u64 = random.iter().map(|o| o.iocs_scored).sum();
    let r_all: u64 = random.iter().map(|o| o.iocs_all).sum();
    let share = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    vec![
        Row {
            figure: "benign files called suspicious or malicious",
            target: "≤ 1%, and 0 called malicious",
            measured: format!(
                "{} ({b_flag} of {}), {b_mal} malicious",
                pct(b_flag, benign.len()),
                benign.len()
            ),
            met: share(b_flag, benign.len()) <= 0.01 && b_mal == 0,
        },
        Row {
            figure: "benign files called benign (with a stated basis)",
            target: "≥ 30%",
            measured: format!(
                "{} ({b_benign} of {}; {b_benign_any} benign in all)",
                pct(b_benign, benign.len()),
                benign.len()
            ),
            met: share(b_benign, benign.len()) >= 0.30,
        },
        Row {
            figure: "malicious-like files called suspicious or malicious",
            target: "≥ 95%",
            measured: format!("{} ({m_flag} of {})", pct(m_flag, mal.len()), mal.len()),
            met: share(m_flag, mal.len()) >= 0.95,
        },
        Row {
            figure: "every container carrying one",
            target: "100%",
            measured: format!(
                "{} ({c_flag} of {})",
                pct(c_flag, carriers.len()),
                carriers.len()
            ),
            met: c_flag == carriers.len(),
        },
        Row {
            figure: "documents, mails and pages carrying a Windows program: suspicious or worse",
            target: "100%",
            measured: format!("{} ({d_flag} of {})", pct(d_flag, docs.len()), docs.len()),
            met: d_flag == docs.len(),
        },
        Row {
            figure: "packed-only benign programs called malicious",
            target: "never",
            measured: format!("{p_mal} of {}", packed.len()),
            met: p_mal == 0,
        },
        Row {
            figure: "random or compressed bytes (1 KiB … 50 MiB): scored IOCs",
            target: "0",
            measured: format!(
                "{r_scored} ({r_all} indicators in all, {} files)",
                random.len()
            ),
            met: r_scored == 0,
        },
    ]
}

fn matrix(s: &mut String, title: &str, groups: &BTreeMap<String, Vec<&Outcome>>) {
    let _ = writeln!(s, "| {title} | files | {} |", WORDS.join(" | "));
    let _ = writeln!(s, "|---|---:|{}", "---:|".repeat(WORDS.len()));
    for (k, v) in groups {
        let t = tally(v.iter().copied());
        let cells: Vec<String> = WORDS
            .iter()
            .map(|w| {
                let n = t.get(w).copied().unwrap_or(0);
                if n == 0 { "·".into() } else { n.to_string() }
            })
            .collect();
        let _ = writeln!(s, "| {k} | {} | {} |", v.len(), cells.join(" | "));
    }
    s.push('\n');
}

fn misclassified(o: &Outcome) -> bool {
    match o.entry.label.as_str() {
        "benign" => flagged(o) || o.verdict == "error",
        _ => !flagged(o),
    }
}

pub fn markdown(r: &Run) -> String {
    let out = r.outcomes;
    let mut s = String::new();
    let _ = writeln!(s, "# Verdicts on the labelled corpora\n");
    let _ = writeln!(
        s,
        "Written by `cargo run -p maljan-bench --bin verdicts` (crates/maljan-bench/src/bin/verdicts.rs) over \
         the corpora that `scripts/corpus.sh` builds (issue 40). Each file is analysed by the real \
         `maljan analyze --no-agent --format json` (the heuristic verdict: no model), {} at a time, each run \
         with a private MALJAN_HOME.\n",
        r.jobs
    );
    let _ = writeln!(
        s,
        "To run it again: `eval \"$(scripts/peers.sh)\"` (builds the corpora once), `cargo build -p maljan`, \
         `cargo run -p maljan-bench --bin verdicts -- --capa 28` (options in the binary's header).\n"
    );
    let _ = writeln!(s, "- measured commit: {}", r.commit);
    let _ = writeln!(s, "- maljan binary: `{}`", r.maljan.display());
    let _ = writeln!(
        s,
        "- manifest: `{}` ({} files)",
        r.manifest.display(),
        out.len()
    );
    let mut secs: Vec<f64> = out.iter().map(|o| o.seconds).collect();
    secs.sort_by(f64::total_cmp);
    let q = |p: f64| {
        secs.get(((secs.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let _ = writeln!(
        s,
        "- run time: {:.0} s wall for {} files ({} at a time){}; per file median {:.2} s, p95 {:.2} s, max {:.1} s\n",
        r.wall.as_secs_f64(),
        out.len(),
        r.jobs,
        if r.reused {
            ", reports reused where present"
        } else {
            ""
        },
        q(0.5),
        q(0.95),
        q(1.0)
    );

    let _ = writeln!(s, "## Targets (issue 40)\n");
    let _ = writeln!(s, "| figure | target | measured | met |");
    let _ = writeln!(s, "|---|---|---|---|");
    for row in targets(out) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            row.figure,
            row.target,
            row.measured,
            if row.met { "✅" } else { "❌" }
        );
    }
    let _ = writeln!(
        s,
        "\n\"Benign with a stated basis\" counts a benign verdict with at least one fact leaning benign. \
         Containers are the malicious-like corpus's zip, 7z, mail, PDF, Word, RTF and HTML carriers \
         (programs and EICAR); the documents row is its mail, PDF, Word, RTF and HTML carriers of a program \
         (no help file: nothing here writes a CHM). Scored IOCs: \
         iocs_from_file's indicators marked `scored` (or confident), summed over the file and its children.\n"
    );

    let mut by: BTreeMap<String, Vec<&Outcome>> = BTreeMap::new();
    for o in out {
        by.entry(o.entry.corpus.clone()).or_default().push(o);
    }
    let _ = writeln!(s, "## Confusion matrix per corpus\n");
    matrix(&mut s, "corpus", &by);
    let mut by: BTreeMap<String, Vec<&Outcome>> = BTreeMap::new();
    for o in out {
        by.entry(format!("{} / {}", o.entry.corpus, o.entry.source))
            .or_default()
            .push(o);
    }
    let _ = writeln!(s, "## Per source\n");
    matrix(&mut s, "corpus / source", &by);
    let mut by: BTreeMap<String, Vec<&Outcome>> = BTreeMap::new();
    for o in out {
        let what = o.entry.carries.as_deref().unwrap_or("-");
        by.entry(format!(
            "{} / {} ({}, carries {what})",
            o.entry.corpus, o.entry.kind, o.entry.container
        ))
        .or_default()
        .push(o);
    }
    let _ = writeln!(s, "## Per kind of file and carrier\n");
    matrix(&mut s, "corpus / kind (carrier, carries)", &by);

    let wrong: Vec<&Outcome> = out.iter().filter(|o| misclassified(o)).collect();
    let _ = writeln!(
        s,
        "## Misclassified files ({})\n\nBenign files called suspicious or malicious (or that failed), and \
         malicious-like files called benign or unknown, each with the verdict's top facts (id, leaning, \
         weight, first observation) or its claims.\n",
        wrong.len()
    );
    let mut tally_fp: BTreeMap<&str, usize> = BTreeMap::new();
    for o in wrong.iter().filter(|o| o.entry.label == "benign") {
        for id in &o.accusing {
            *tally_fp.entry(id.as_str()).or_default() += 1;
        }
    }
    if !tally_fp.is_empty() {
        let mut v: Vec<(&str, usize)> = tally_fp.into_iter().collect();
        v.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let list: Vec<String> = v.iter().map(|(id, n)| format!("`{id}` {n}")).collect();
        let _ = writeln!(
            s,
            "Facts leaning malicious on the benign files called suspicious or malicious (files): {}.\n",
            list.join(", ")
        );
    }
    for o in &wrong {
        let why = if !o.facts.is_empty() {
            o.facts
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        } else if !o.claims.is_empty() {
            o.claims
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        } else if let Some(e) = &o.error {
            format!("error: {e}")
        } else {
            o.summary.clone()
        };
        let _ = writeln!(
            s,
            "- `{}` ({} / {}): **{}** — {}",
            o.entry.path,
            o.entry.label,
            o.entry.source,
            o.verdict,
            why.replace('|', "\\|").replace('\n', " ")
        );
    }
    s.push('\n');

    let _ = writeln!(s, "## Random and compressed bytes: indicators\n");
    let _ = writeln!(
        s,
        "| file | size | scored IOCs | all indicators | verdict | seconds |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---|---:|");
    for o in out.iter().filter(|o| o.entry.corpus == "random") {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {:.1} |",
            o.entry.path, o.entry.size, o.iocs_scored, o.iocs_all, o.verdict, o.seconds
        );
    }
    s.push('\n');

    if let Some(c) = &r.capa {
        crate::capa::render(&mut s, c);
    }
    let errors: Vec<&Outcome> = out.iter().filter(|o| o.verdict == "error").collect();
    if !errors.is_empty() {
        let _ = writeln!(s, "## Runs without a report ({})\n", errors.len());
        for o in errors {
            let _ = writeln!(
                s,
                "- `{}`: {}",
                o.entry.path,
                o.error.as_deref().unwrap_or("?")
            );
        }
        s.push('\n');
    }
    s
}
