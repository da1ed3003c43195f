//! `mcp-inspector --cli --strict` (Inspector 2's tool-schema portability lint) over one server,
//! read into counts: the JSON envelope's `schemaFindings` (`--format json`), checked against the
//! report Inspector writes on stderr and its summary line, so a test cannot pass on output it
//! failed to read.

use std::process::Command;

use serde_json::Value;

use crate::peer_env;

/// What Inspector found in one server's tools/list.
#[derive(Debug, Clone, Default)]
pub struct StrictReport {
    /// The names of the tools listed.
    pub tools: Vec<String>,
    /// One line per finding: `tool schema.path: issue`.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Inspector's exit status (6 when an error-severity finding was made).
    pub exit_code: Option<i32>,
}

impl StrictReport {
    pub fn summary(&self) -> String {
        format!(
            "{} tools, {} errors, {} warnings",
            self.tools.len(),
            self.errors.len(),
            self.warnings.len()
        )
    }
}

/// Runs `mcp-inspector --cli --strict --format json TARGET… --method tools/list` (TARGET: a
/// command and its arguments, or an HTTP URL) and reads its findings. Panics when Inspector is
/// not installed or its output cannot be read.
pub fn strict_tools_list(target: &[&str]) -> StrictReport {
    let out = Command::new(peer_env("MALJAN_NODE"))
        .arg(peer_env("MALJAN_INSPECTOR"))
        .args(["--cli", "--strict", "--format", "json"])
        .args(target)
        .args(["--method", "tools/list"])
        .output()
        .expect("run mcp-inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let envelope: Value = stdout
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("result").is_some())
        })
        .unwrap_or_else(|| panic!("no tools/list result from Inspector:\n{stdout}\n{stderr}"));
    let mut report = StrictReport {
        tools: (envelope["result"]["tools"].as_array())
            .unwrap_or_else(|| panic!("no tools in {envelope}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect(),
        exit_code: out.status.code(),
        ..Default::default()
    };
    for tool in envelope["schemaFindings"].as_array().into_iter().flatten() {
        let name = tool["toolName"].as_str().unwrap_or("?");
        for f in tool["findings"].as_array().into_iter().flatten() {
            let line = format!(
                "{name} {}.{}: {}",
                f["schema"].as_str().unwrap_or("?"),
                f["path"].as_str().unwrap_or(""),
                f["issue"].as_str().unwrap_or("?")
            );
            match f["severity"].as_str() {
                Some("error") => report.errors.push(line),
                Some("warning") => report.warnings.push(line),
                other => panic!("a finding of severity {other:?}: {f}"),
            }
        }
    }
    // The stderr report says the same: one `Error:`/`Warning:` header per finding, and a summary
    // line when there is any.
    let headers = |kind: &str| {
        stderr
            .lines()
            .filter(|l| l.starts_with(&format!("{kind}: tool ")))
            .count()
    };
    assert_eq!(
        (headers("Error"), headers("Warning")),
        (report.errors.len(), report.warnings.len()),
        "Inspector's stderr report and its JSON findings disagree:\n{stderr}"
    );
    if !report.errors.is_empty() || !report.warnings.is_empty() {
        let plural = |n: usize, noun: &str| format!("{n} {noun}{}", if n == 1 { "" } else { "s" });
        let summary = format!(
            "{}, {}",
            plural(report.errors.len(), "error"),
            plural(report.warnings.len(), "warning")
        );
        assert!(
            stderr.contains(&summary),
            "no summary `{summary}` in Inspector's report:\n{stderr}"
        );
    }
    report
}
