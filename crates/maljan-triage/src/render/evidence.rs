//! Where each evidence id is anchored, shared by the Markdown and HTML renderers: every id the
//! report shows a call for (a step of the sample or of a child, an extraction, a tool result the
//! model read) gets exactly one anchor, at the first place it appears in reading order, and an
//! evidence chip is a link exactly when its target exists in the page.

use std::collections::BTreeSet;

use crate::{report::Report, tree::walk};

pub(crate) struct Evidence {
    /// Every id some part of the page anchors.
    targets: BTreeSet<String>,
    /// The ids anchored so far.
    placed: BTreeSet<String>,
}

impl Evidence {
    pub fn of(r: &Report) -> Self {
        let children = walk(&r.children);
        let targets = r
            .steps
            .iter()
            .chain(children.iter().flat_map(|c| c.steps.iter()))
            .flat_map(|s| s.evidence.iter())
            .chain(children.iter().flat_map(|c| c.extracted_by.iter()))
            .chain(r.recursion.iter().flat_map(|x| x.evidence.iter()))
            .chain(
                r.agent
                    .iter()
                    .flat_map(|a| &a.conversation)
                    .filter(|t| t.role == "tool")
                    .filter_map(|t| t.evidence.as_ref()),
            )
            .cloned()
            .collect();
        Self {
            targets,
            placed: BTreeSet::new(),
        }
    }

    /// Whether `id` is anchored somewhere on the page (so a link to it resolves).
    pub fn exists(&self, id: &str) -> bool {
        self.targets.contains(id)
    }

    /// True the first time `id` is placed: the caller writes its anchor then, and only then.
    pub fn place(&mut self, id: &str) -> bool {
        self.targets.contains(id) && self.placed.insert(id.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{SampleInfo, Status, StepReport, StepStatus};

    #[test]
    fn each_target_is_placed_once_and_unknown_ids_are_not_targets() {
        let r = Report {
            schema: String::new(),
            verdict: None,
            job_id: "j".into(),
            generated_at: String::new(),
            maljan_version: String::new(),
            status: Status::Complete,
            duration_ms: 0.0,
            sample: SampleInfo {
                name: "s".into(),
                path: String::new(),
                size: 0,
                sha256: String::new(),
                hashes: Default::default(),
                kind: None,
                description: None,
                mime: None,
            },
            servers: vec![],
            degradations: vec![],
            failures: vec![],
            unavailable: vec![],
            steps: vec![StepReport {
                index: 1,
                title: "t".into(),
                tool: "t".into(),
                server: None,
                status: StepStatus::Ok,
                evidence: vec!["ev_0001".into()],
                duration_ms: 0.0,
                error: None,
                reason: None,
                remediation: None,
                result: None,
            }],
            agent: None,
            children: vec![],
            recursion: None,
        };
        let mut ev = Evidence::of(&r);
        assert!(ev.exists("ev_0001") && !ev.exists("ev_0999"));
        assert!(ev.place("ev_0001"));
        assert!(!ev.place("ev_0001"));
        assert!(!ev.place("ev_0999"));
    }
}
