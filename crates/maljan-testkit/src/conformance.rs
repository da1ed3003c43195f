//! Runs the official conformance suite (`@modelcontextprotocol/conformance`, the 0.2 line) for one
//! leg, a spec revision's requirement set (`--requirements 2025-11-25` or `2026-07-28`), and
//! reads its verdict.
//!
//! A leg passes only when the suite exits 0 and its summary shows at least one scored scenario,
//! every scored scenario with checks passed and none failed. Scenarios the suite lists under
//! "Not scored for …" (extensions, pending and added-after-release ones: they "do not affect
//! conformance") are reported, not judged. A run that printed no summary, or scored nothing,
//! fails: it proves nothing.

use std::{collections::BTreeSet, path::Path, process::Command, sync::Mutex};

use crate::peer_env;

/// What a passing leg scored.
#[derive(Debug, PartialEq)]
pub struct Leg {
    /// Scored scenarios, every one passed.
    pub scenarios: usize,
    /// Checks passed in them.
    pub checks: u64,
    /// Unscored scenarios that failed (reported only).
    pub unscored_failing: Vec<String>,
    /// Unscored scenarios that passed (a test may require some: the extensions it implements).
    pub unscored_passing: Vec<String>,
}

/// One leg at a time in a test process: the suite already runs a leg's scenarios in parallel,
/// and two legs at once on two cores made a client miss a scenario's deadline.
static ONE_LEG: Mutex<()> = Mutex::new(());

/// Runs `conformance <side> <target…> --requirements <revision>` and returns the scored
/// verdict; panics with the suite's whole output, and what each failing scenario's client or
/// server wrote to stderr, when the leg does not pass.
pub fn run_leg(side: &str, target: &[&str], revision: &str) -> Leg {
    let _one = ONE_LEG.lock().unwrap_or_else(|e| e.into_inner());
    let mut out_dir = tempfile::tempdir().expect("a temporary directory");
    // MALJAN_CONFORMANCE_KEEP=1 keeps the suite's per-scenario results (checks, stdout, stderr).
    if std::env::var_os("MALJAN_CONFORMANCE_KEEP").is_some() {
        out_dir.disable_cleanup(true);
        eprintln!("conformance results kept in {}", out_dir.path().display());
    }
    let out = Command::new(peer_env("MALJAN_NODE"))
        .arg(peer_env("MALJAN_CONFORMANCE"))
        .arg(side)
        .args(target)
        .args(["--requirements", revision, "-o"])
        .arg(out_dir.path())
        .current_dir(out_dir.path())
        .output()
        .expect("run the conformance suite");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let leg = verdict(&text).unwrap_or_else(|why| {
        panic!(
            "{side} leg at {revision}: {why}\n--- output\n{text}{}",
            stderr_of_failing(out_dir.path(), &text)
        )
    });
    assert!(
        out.status.success(),
        "{side} leg at {revision}: the suite exited {}\n--- output\n{text}",
        out.status
    );
    eprintln!(
        "{side} leg at {revision}: {} scored scenarios, {} checks passed, 0 failed; unscored failing: {:?}; unscored passing: {:?}",
        leg.scenarios, leg.checks, leg.unscored_failing, leg.unscored_passing
    );
    leg
}

/// What each failing scenario's run wrote to stderr, from the suite's results folder
/// (`<dir>/<scenario>-<time>/stderr.txt`, `auth/…` scenarios in a subfolder).
fn stderr_of_failing(dir: &Path, output: &str) -> String {
    let mut shown = String::new();
    let failing = output
        .lines()
        .map(strip_ansi)
        .filter_map(|l| l.trim().strip_prefix("✗ ").map(str::to_string))
        .filter_map(|l| l.split(':').next().map(str::to_string));
    for name in failing.collect::<BTreeSet<_>>() {
        let (folder, stem) = name.rsplit_once('/').unwrap_or(("", &name));
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if file.starts_with(&format!("{stem}-"))
                && let Ok(text) = std::fs::read_to_string(entry.path().join("stderr.txt"))
            {
                shown.push_str(&format!("\n--- stderr of {name}\n{text}"));
            }
        }
    }
    shown
}

/// The scored verdict of a suite's output, or why it is no pass.
pub fn verdict(output: &str) -> Result<Leg, String> {
    let lines: Vec<String> = output.lines().map(strip_ansi).collect();
    // "=== SUMMARY ===", or "=== SUITE SUMMARY ===" when results are saved.
    let summary_at = lines
        .iter()
        .position(|l| {
            let l = l.trim();
            l.starts_with("===") && l.ends_with("SUMMARY ===")
        })
        .ok_or("no summary")?;
    let mut unscored = BTreeSet::new();
    let mut unscored_failing = Vec::new();
    let mut unscored_passing = Vec::new();
    if let Some(at) = lines.iter().position(|l| l.starts_with("Not scored for")) {
        for line in lines[at + 1..].iter().map(|l| l.trim()) {
            let Some((mark, rest)) = split_mark(line) else {
                break;
            };
            let name = rest.split(" (").next().unwrap_or(rest).to_string();
            if mark == '✗' {
                unscored_failing.push(name.clone());
            } else {
                unscored_passing.push(name.clone());
            }
            unscored.insert(name);
        }
    }
    let (mut scenarios, mut checks, mut failing) = (0, 0, Vec::new());
    for line in lines[summary_at + 1..].iter().map(|l| l.trim()) {
        if line.starts_with("Total:") {
            break;
        }
        let Some((mark, rest)) = split_mark(line) else {
            continue;
        };
        let Some((name, counts)) = rest.split_once(": ") else {
            return Err(format!("a summary line without counts: {line}"));
        };
        if unscored.contains(name) {
            continue;
        }
        let count = |what: &str| {
            counts
                .split(',')
                .find_map(|part| part.trim().strip_suffix(what))
                .and_then(|n| n.trim().parse::<u64>().ok())
        };
        let (Some(passed), Some(failed)) = (count(" passed"), count(" failed")) else {
            return Err(format!("a summary line without counts: {line}"));
        };
        scenarios += 1;
        checks += passed;
        if mark != '✓' || failed > 0 || passed == 0 {
            failing.push(line.to_string());
        }
    }
    if !failing.is_empty() {
        return Err(format!("scored scenarios failed: {failing:?}"));
    }
    if scenarios == 0 || checks == 0 {
        return Err("no scored scenario passed a check".into());
    }
    Ok(Leg {
        scenarios,
        checks,
        unscored_failing,
        unscored_passing,
    })
}

fn split_mark(line: &str) -> Option<(char, &str)> {
    let mark = line.chars().next().filter(|c| *c == '✓' || *c == '✗')?;
    Some((mark, line[mark.len_utf8()..].trim()))
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters… final byte in @..~
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSING: &str = "=== SUMMARY ===\n✓ ping: 2 passed, 0 failed\n✗ tasks-x: 1 passed, 3 failed\n\
        ✓ tools: 4 passed, 0 failed\n\nTotal: 7 passed, 3 failed\n\n\
        Not scored for 2026-07-28: 1 scenario(s) run, 1 failing. These do not affect conformance.\n\
        \x20 ✗ tasks-x (extension)\n\x20 ✓ tasks-y (extension)\n";

    #[test]
    fn unscored_failures_are_reported_not_judged() {
        assert_eq!(
            verdict(PASSING),
            Ok(Leg {
                scenarios: 2,
                checks: 6,
                unscored_failing: vec!["tasks-x".into()],
                unscored_passing: vec!["tasks-y".into()],
            })
        );
    }

    #[test]
    fn a_run_that_proves_nothing_is_no_pass() {
        for (output, why) in [
            ("", "no summary"),
            ("Total: 3 passed, 0 failed", "no summary"),
            (
                "=== SUMMARY ===\nTotal: 0 passed, 0 failed\n",
                "no scored scenario",
            ),
            (
                "=== SUMMARY ===\n✓ ping: 0 passed, 0 failed\nTotal: 0 passed, 0 failed\n",
                "scored scenarios failed",
            ),
            (
                "=== SUMMARY ===\n✓ a: 1 passed, 0 failed\n✗ b: 0 passed, 1 failed\nTotal: 1 passed, 1 failed\n",
                "scored scenarios failed",
            ),
            (
                "=== SUMMARY ===\n✓ b: 1 passed, 2 failed\nTotal: 1 passed, 2 failed\n",
                "scored scenarios failed",
            ),
            (
                "=== SUMMARY ===\n✓ b: many passed\nTotal: 1 passed, 0 failed\n",
                "a summary line without counts",
            ),
        ] {
            let refused = verdict(output).expect_err(output);
            assert!(refused.starts_with(why), "{output:?}: {refused}");
        }
    }

    #[test]
    fn colour_codes_are_read_through() {
        let coloured = "\x1b[1m=== SUITE SUMMARY ===\x1b[0m\n\x1b[32m✓ ping: 2 passed, 0 failed\x1b[0m\nTotal: 2 passed, 0 failed\n";
        assert_eq!(verdict(coloured).map(|l| l.checks), Ok(2));
    }
}
