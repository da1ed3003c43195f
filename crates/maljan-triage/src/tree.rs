//! The child samples of a report: what `extract_members` took out of the sample (archive members,
//! attachments, embedded objects, carved payloads), each analysed with its own steps and evidence,
//! as a tree; and the bounds the recursion ran under, with what they stopped.

use serde::{Deserialize, Serialize};

use crate::{report::StepReport, verdict::Verdict};

/// The bounds of recursive analysis. A limit reached is a finding in [`Recursion::findings`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecursionLimits {
    /// Deepest level analysed (the sample's members are depth 1).
    pub max_depth: usize,
    /// Most child samples in the whole tree.
    pub max_children: usize,
    /// Most bytes extracted in the whole tree.
    pub max_total_bytes: u64,
    /// Most a member may expand over its packed size.
    pub max_ratio: u64,
}

impl Default for RecursionLimits {
    fn default() -> Self {
        Self {
            max_depth: 5,
            max_children: 1000,
            max_total_bytes: 256 << 20,
            max_ratio: 200,
        }
    }
}

/// How the recursion went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Recursion {
    pub limits: Option<RecursionLimits>,
    /// Child samples in the tree, at every depth.
    pub children: usize,
    pub total_bytes: u64,
    /// Deepest level reached.
    pub depth: usize,
    /// Limits reached (a decompression bomb, a tree too deep or too big), each a finding.
    pub findings: Vec<RecursionFinding>,
    /// Members seen but not extracted (encrypted with an unknown password, damaged, links).
    pub skipped: Vec<SkippedMember>,
    /// The extract_members calls, in order.
    #[serde(default)]
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecursionFinding {
    /// ratio, total_bytes, members, depth.
    pub limit: String,
    /// SHA-256 of the sample whose extraction met it.
    pub parent_sha256: String,
    pub member: Option<String>,
    pub detail: String,
    /// The extract_members call that met it (empty for the depth limit, met before a call).
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedMember {
    pub parent_sha256: String,
    pub name: String,
    pub reason: String,
    pub evidence: Vec<String>,
}

/// One child sample and its own analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    /// Its place in the tree: "1", "1.2", "1.2.1", …
    pub id: String,
    /// Its path inside the parent (archive path, attachment name, `pe@0x400` for a carved one).
    pub name: String,
    pub parent_sha256: String,
    pub depth: usize,
    pub size: u64,
    pub sha256: String,
    pub sha1: String,
    pub md5: String,
    /// identify_file's kind and description of its bytes.
    pub kind: String,
    pub description: String,
    /// The container format it came from (zip, tar, mime, uuencode, carved, …).
    pub source: String,
    pub encrypted: bool,
    /// The usual password that opened it, when it was encrypted.
    pub password: Option<String>,
    /// Dangerous names (double extension, traversal, …).
    pub flags: Vec<String>,
    /// The extract_members call that produced it.
    pub extracted_by: Vec<String>,
    /// Its own steps (format tool, packer, capabilities, iocs, YARA), each with its evidence.
    pub steps: Vec<StepReport>,
    /// Its heuristic verdict (maljan-agent fills it in).
    pub verdict: Option<Verdict>,
    pub children: Vec<ChildReport>,
}

impl ChildReport {
    /// This child and every descendant, depth first.
    pub fn walk(&self) -> Vec<&ChildReport> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }

    /// A step of this child by tool.
    pub fn step(&self, tool: &str) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.tool == tool)
    }
}

/// Every child of a tree, depth first.
pub fn walk(children: &[ChildReport]) -> Vec<&ChildReport> {
    children.iter().flat_map(ChildReport::walk).collect()
}

/// Every child of a tree, depth first, mutably (for filling in verdicts).
pub fn walk_mut(children: &mut [ChildReport], f: &mut dyn FnMut(&mut ChildReport)) {
    for c in children {
        walk_mut(&mut c.children, f);
        f(c);
    }
}
