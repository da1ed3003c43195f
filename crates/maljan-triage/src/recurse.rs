//! Recursive analysis: after the sample's own steps, `extract_members` (on the server that
//! identified the sample) writes out what the sample carries; each member becomes a child sample
//! analysed with its own steps — its format tool, packer and capability detection for
//! executables, iocs, YARA — by `carved_path`, and a child that is itself a container is opened in
//! turn, down to the depth limit. The job-wide bounds (depth, count, bytes, ratio) are handed to
//! each extraction as what is left of them, so the whole tree stays inside them; a bound reached
//! is a finding. Every call is ledgered like any other, and the ledger's `children` table links
//! each child (and so each of its calls) to its parent.

use std::{collections::VecDeque, sync::Arc};

use maljan_client::{ChildRow, Job, ServerHandle, ServerView};
use serde_json::{Value, json};

use crate::{
    plan::format_tool,
    report::{StepReport, StepStatus},
    tree::{ChildReport, Recursion, RecursionFinding, RecursionLimits, SkippedMember},
};

/// The tool that writes a sample's members out.
pub const EXTRACT_TOOL: &str = "extract_members";
/// Tools run on executables only (the root's plan and every child).
pub const EXECUTABLE_TOOLS: &[&str] = &["detect_packer", "code_capabilities"];
/// identify_file's kinds that are executables.
pub const EXECUTABLE_KINDS: &[&str] = &["pe", "dos", "elf", "macho"];
/// identify_file's kinds that extract_members opens (the rest are leaves).
const CONTAINER_KINDS: &[&str] = &[
    "zip", "jar", "apk", "ooxml", "odf", "tar", "gzip", "bzip2", "xz", "lzip", "lzma", "7z", "rar",
    "cab", "cpio", "email", "mbox", "uuencode", "rtf", "ole2", "pe", "dos", "elf", "pdf", "html",
    "xml",
];
/// Children analysed at once (the runtime's per-server cap still holds).
const CONCURRENT_CHILDREN: usize = 8;

/// Where the sample was read from, as extract_members is asked to read it.
struct Target {
    args: Value,
    sha256: String,
    depth: usize,
    /// Index path of the node in the tree ("" for the sample itself).
    id: String,
}

/// Opens the sample and its members recursively. Returns the tree and how it went.
pub(crate) async fn recurse(
    job: &Arc<Job>,
    handle: &ServerHandle,
    view: &ServerView,
    sample_path: &str,
    sample_sha256: &str,
    limits: RecursionLimits,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> (Vec<ChildReport>, Recursion) {
    let mut info = Recursion {
        limits: Some(limits),
        ..Default::default()
    };
    let mut nodes: Vec<(String, ChildReport)> = Vec::new();
    let mut queue = VecDeque::from([Target {
        args: json!({ "path": sample_path }),
        sha256: sample_sha256.to_string(),
        depth: 0,
        id: String::new(),
    }]);
    while let Some(target) = queue.pop_front() {
        if cancelled() || info.children >= limits.max_children {
            break;
        }
        let mut args = target.args.clone();
        args["max_members"] = json!(limits.max_children - info.children);
        args["max_total_bytes"] = json!(limits.max_total_bytes.saturating_sub(info.total_bytes));
        args["max_ratio"] = json!(limits.max_ratio);
        let rec = handle.call(EXTRACT_TOOL, args).await;
        let ev = vec![rec.ev_id.clone()];
        info.evidence.push(rec.ev_id.clone());
        let Some(answer) = rec.json().filter(|_| rec.error.is_none()) else {
            let reason = rec
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.code.as_str(), e.message))
                .unwrap_or_else(|| "no answer".into());
            // A format the server does not open has no members; any other failure leaves what
            // the sample carries unanalysed, and the job says so.
            if rec
                .error
                .as_ref()
                .is_none_or(|e| e.code.as_str() != "unsupported_format")
            {
                job.degrade(unextracted(&target, "its members", &reason));
            }
            info.skipped.push(SkippedMember {
                parent_sha256: target.sha256.clone(),
                name: "(all members)".into(),
                reason,
                evidence: ev,
            });
            continue;
        };
        for hit in answer["limits_hit"].as_array().into_iter().flatten() {
            info.findings.push(RecursionFinding {
                limit: text(hit, "limit"),
                parent_sha256: target.sha256.clone(),
                member: hit["member"].as_str().map(str::to_string),
                detail: text(hit, "detail"),
                evidence: ev.clone(),
            });
        }
        for s in answer["skipped"].as_array().into_iter().flatten() {
            let reason = text(s, "reason");
            // Links and devices are left alone on purpose; anything else was not extracted.
            if !reason.contains("not followed") {
                job.degrade(unextracted(&target, &text(s, "name"), &reason));
            }
            info.skipped.push(SkippedMember {
                parent_sha256: target.sha256.clone(),
                name: text(s, "name"),
                reason: text(s, "reason"),
                evidence: ev.clone(),
            });
        }
        let members: Vec<Value> = answer["members"].as_array().cloned().unwrap_or_default();
        let depth = target.depth + 1;
        if !members.is_empty() {
            info.depth = info.depth.max(depth);
        }
        let mut made = Vec::new();
        for (i, m) in members.iter().enumerate() {
            if info.children >= limits.max_children {
                break;
            }
            info.children += 1;
            info.total_bytes += m["size"].as_u64().unwrap_or(0);
            let id = if target.id.is_empty() {
                format!("{}", i + 1)
            } else {
                format!("{}.{}", target.id, i + 1)
            };
            made.push((id, m.clone()));
        }
        // Each child's own steps, several children at once.
        let analysed: Vec<ChildReport> =
            {
                use futures::StreamExt;
                futures::stream::iter(made.into_iter().map(|(id, m)| {
                    let parent = target.sha256.clone();
                    let ev = ev.clone();
                    async move {
                        analyse_child(handle, view, id, &m, parent, depth, ev, cancelled).await
                    }
                }))
                .buffered(CONCURRENT_CHILDREN)
                .collect()
                .await
            };
        for child in analysed {
            let row = ChildRow {
                job_id: job.id().to_string(),
                sha256: child.sha256.clone(),
                parent_sha256: child.parent_sha256.clone(),
                name: child.name.clone(),
                depth: child.depth as i64,
                size: child.size as i64,
                kind: child.kind.clone(),
                extracted_by: child.extracted_by.first().cloned().unwrap_or_default(),
                evidence: child
                    .steps
                    .iter()
                    .flat_map(|s| s.evidence.clone())
                    .collect(),
            };
            if let Err(e) = job.runtime().ledger().add_child(row) {
                job.degrade(format!("the ledger could not record a child sample: {e}"));
            }
            for reason in unanalysed(&members, &child) {
                job.degrade(reason);
            }
            let path = carved_path(&members, &child);
            if CONTAINER_KINDS.contains(&child.kind.as_str())
                && let Some(path) = path
            {
                if depth < limits.max_depth {
                    queue.push_back(Target {
                        args: json!({ "carved_path": path }),
                        sha256: child.sha256.clone(),
                        depth,
                        id: child.id.clone(),
                    });
                } else {
                    info.findings.push(RecursionFinding {
                        limit: "depth".into(),
                        parent_sha256: child.sha256.clone(),
                        member: None,
                        detail: format!(
                            "{} ({}) is a container at depth {depth}, the deepest analysed: not opened",
                            child.name, child.kind
                        ),
                        evidence: vec![],
                    });
                }
            }
            nodes.push((target.id.clone(), child));
        }
    }
    (assemble(nodes, ""), info)
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// The degradation reason for members of `target` that could not be extracted.
fn unextracted(target: &Target, what: &str, reason: &str) -> String {
    let of = if target.id.is_empty() {
        "the sample".to_string()
    } else {
        format!("child {} ({})", target.id, short(&target.sha256))
    };
    format!("{what} of {of} could not be extracted: {reason}")
}

/// The degradation reasons of a child that could not be analysed: it was not written out, or
/// one of its steps failed.
fn unanalysed(members: &[Value], child: &ChildReport) -> Vec<String> {
    let who = format!(
        "child {} {} ({})",
        child.id,
        child.name,
        short(&child.sha256)
    );
    if carved_path(members, child).is_none() {
        return vec![format!(
            "{who} could not be analysed: the server did not write it out"
        )];
    }
    child
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Failed)
        .map(|s| {
            let why = s
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_default();
            format!("{who} could not be analysed: {} failed: {why}", s.tool)
        })
        .collect()
}

fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}

fn carved_path(members: &[Value], child: &ChildReport) -> Option<String> {
    members
        .iter()
        .find(|m| m["sha256"].as_str() == Some(child.sha256.as_str()))
        .and_then(|m| m["carved_path"].as_str())
        .map(str::to_string)
}

/// Builds the tree from (parent id, node) pairs.
fn assemble(nodes: Vec<(String, ChildReport)>, parent: &str) -> Vec<ChildReport> {
    let (mine, rest): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|(p, _)| p == parent);
    let mut out: Vec<ChildReport> = mine.into_iter().map(|(_, c)| c).collect();
    let mut rest = rest;
    for c in &mut out {
        let (theirs, others): (Vec<_>, Vec<_>) = rest
            .into_iter()
            .partition(|(p, _)| p == &c.id || p.starts_with(&format!("{}.", c.id)));
        rest = others;
        c.children = assemble(theirs, &c.id);
    }
    out.sort_by_key(|c| {
        c.id.rsplit('.')
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    });
    out
}

/// The steps one child gets, by its kind.
fn child_tools(kind: &str) -> Vec<String> {
    let mut tools = Vec::new();
    if let Some(t) = format_tool(&json!({ "kind": kind })) {
        tools.push(t);
    }
    if EXECUTABLE_KINDS.contains(&kind) {
        tools.extend(EXECUTABLE_TOOLS.iter().map(|t| t.to_string()));
    }
    tools.push("iocs_from_file".into());
    tools.push("yara_scan".into());
    tools
}

#[allow(clippy::too_many_arguments)]
async fn analyse_child(
    handle: &ServerHandle,
    view: &ServerView,
    id: String,
    m: &Value,
    parent_sha256: String,
    depth: usize,
    extracted_by: Vec<String>,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> ChildReport {
    let kind = text(m, "kind");
    let mut child = ChildReport {
        id,
        name: text(m, "name"),
        parent_sha256,
        depth,
        size: m["size"].as_u64().unwrap_or(0),
        sha256: text(m, "sha256"),
        sha1: text(m, "sha1"),
        md5: text(m, "md5"),
        kind: kind.clone(),
        description: text(m, "description"),
        source: text(m, "source"),
        encrypted: m["encrypted"].as_bool().unwrap_or(false),
        password: m["password"].as_str().map(str::to_string),
        flags: m["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect(),
        extracted_by,
        steps: vec![],
        verdict: None,
        children: vec![],
    };
    let Some(path) = m["carved_path"].as_str() else {
        return child;
    };
    for (i, tool) in child_tools(&kind).into_iter().enumerate() {
        if cancelled() {
            break;
        }
        let mut step = StepReport {
            index: i + 1,
            title: crate::plan::Step::tool(&tool).heading(),
            tool: tool.clone(),
            server: Some(handle.name().to_string()),
            status: StepStatus::Skipped,
            evidence: vec![],
            duration_ms: 0.0,
            error: None,
            reason: None,
            remediation: None,
            result: None,
        };
        match view.tool(&tool) {
            None => {
                step.reason = Some(format!("{} does not offer {tool}", handle.name()));
                child.steps.push(step);
                continue;
            }
            Some(t) if !t.available => {
                step.reason = t.reason.clone();
                step.remediation = t.remediation.clone();
                child.steps.push(step);
                continue;
            }
            Some(_) => {}
        }
        let rec = handle.call(&tool, json!({ "carved_path": path })).await;
        step.evidence.push(rec.ev_id.clone());
        step.duration_ms = (rec.duration_ms * 1000.0).round() / 1000.0;
        match &rec.error {
            None => {
                step.status = StepStatus::Ok;
                step.result = rec.json();
            }
            Some(e) => {
                step.status = StepStatus::Failed;
                step.error = Some(crate::report::ErrorInfo {
                    code: e.code.as_str().to_string(),
                    message: e.message.clone(),
                    remediation: e.remediation.clone(),
                });
            }
        }
        child.steps.push(step);
    }
    child
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> ChildReport {
        ChildReport {
            id: id.into(),
            name: id.into(),
            parent_sha256: String::new(),
            depth: id.split('.').count(),
            size: 0,
            sha256: String::new(),
            sha1: String::new(),
            md5: String::new(),
            kind: "data".into(),
            description: String::new(),
            source: String::new(),
            encrypted: false,
            password: None,
            flags: vec![],
            extracted_by: vec![],
            steps: vec![],
            verdict: None,
            children: vec![],
        }
    }

    #[test]
    fn the_tree_is_assembled_from_parent_ids_in_member_order() {
        let nodes = vec![
            ("".to_string(), node("2")),
            ("".to_string(), node("1")),
            ("1".to_string(), node("1.1")),
            ("1.1".to_string(), node("1.1.1")),
            ("2".to_string(), node("2.10")),
            ("2".to_string(), node("2.9")),
        ];
        let tree = assemble(nodes, "");
        assert_eq!(tree.len(), 2);
        assert_eq!(tree[0].id, "1");
        assert_eq!(tree[0].children[0].children[0].id, "1.1.1");
        let ids: Vec<_> = tree[1].children.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["2.9", "2.10"]);
    }

    #[test]
    fn a_child_not_written_or_with_a_failed_step_is_a_degradation_reason() {
        let mut child = node("1");
        child.name = "payload.exe".into();
        child.sha256 = "ab".repeat(32);
        let written = [json!({"sha256": child.sha256, "carved_path": "/w/carved/x/members/y"})];
        assert!(unanalysed(&written, &child).is_empty());
        let reasons = unanalysed(&[json!({"sha256": child.sha256})], &child);
        assert_eq!(
            reasons,
            [
                "child 1 payload.exe (abababababab) could not be analysed: the server did not write it out"
            ]
        );
        child.steps.push(StepReport {
            index: 1,
            title: String::new(),
            tool: "pe_info".into(),
            server: None,
            status: StepStatus::Failed,
            evidence: vec![],
            duration_ms: 0.0,
            error: Some(crate::report::ErrorInfo {
                code: "no_such_file".into(),
                message: "gone".into(),
                remediation: String::new(),
            }),
            reason: None,
            remediation: None,
            result: None,
        });
        let reasons = unanalysed(&written, &child);
        assert_eq!(reasons.len(), 1);
        assert!(
            reasons[0].ends_with("pe_info failed: no_such_file: gone"),
            "{reasons:?}"
        );
    }

    #[test]
    fn executables_get_packer_and_capability_steps() {
        assert_eq!(
            child_tools("pe"),
            [
                "pe_info",
                "detect_packer",
                "code_capabilities",
                "iocs_from_file",
                "yara_scan"
            ]
        );
        assert_eq!(child_tools("text"), ["iocs_from_file", "yara_scan"]);
    }
}
