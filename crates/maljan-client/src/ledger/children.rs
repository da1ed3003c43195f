//! The child samples of a job (recursive analysis): which sample each came out of, where in it,
//! the call that extracted it and the calls that analysed it. An additive table: a ledger written
//! before it existed simply has no children.

use serde::{Deserialize, Serialize};

use super::{
    Ledger, LedgerError,
    db::{DbResult, vals},
};

/// One child sample of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRow {
    pub job_id: String,
    pub sha256: String,
    /// The sample it came out of: the job's sample or another child.
    pub parent_sha256: String,
    /// Its path inside the parent.
    pub name: String,
    /// 1 for a member of the job's sample.
    pub depth: i64,
    pub size: i64,
    pub kind: String,
    /// The evidence id of the extract_members call that produced it.
    pub extracted_by: String,
    /// The evidence ids of the calls that analysed it.
    pub evidence: Vec<String>,
}

impl Ledger {
    /// Records a child sample of a job.
    pub fn add_child(&self, row: ChildRow) -> Result<(), LedgerError> {
        self.write(move |c| {
            c.execute(
                "INSERT INTO children(job_id, sha256, parent_sha256, name, depth, size, kind, extracted_by, evidence, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                vals![
                    row.job_id,
                    row.sha256,
                    row.parent_sha256,
                    row.name,
                    row.depth,
                    row.size,
                    row.kind,
                    row.extracted_by,
                    serde_json::to_string(&row.evidence).unwrap_or_else(|_| "[]".into()),
                    crate::time::now_ms()
                ],
            )
        })
    }

    /// A job's child samples, in the order they were recorded.
    pub fn children(&self, job_id: &str) -> Result<Vec<ChildRow>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT job_id, sha256, parent_sha256, name, depth, size, kind, extracted_by, evidence FROM children WHERE job_id = ?1 ORDER BY id",
                vals![job_id],
            )?
            .iter()
            .map(|r| -> DbResult<ChildRow> {
                Ok(ChildRow {
                    job_id: r.text(0)?,
                    sha256: r.text(1)?,
                    parent_sha256: r.text(2)?,
                    name: r.text(3)?,
                    depth: r.i64(4)?,
                    size: r.i64(5)?,
                    kind: r.text(6)?,
                    extracted_by: r.text(7)?,
                    evidence: serde_json::from_str(&r.text(8)?).unwrap_or_default(),
                })
            })
            .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_read_back_per_job_with_their_parent_and_evidence() {
        for l in crate::ledger::tests::engines() {
            let row = ChildRow {
                job_id: "j".into(),
                sha256: "c".repeat(64),
                parent_sha256: "p".repeat(64),
                name: "inner/a.exe".into(),
                depth: 2,
                size: 10,
                kind: "pe".into(),
                extracted_by: "ev_0007".into(),
                evidence: vec!["ev_0008".into(), "ev_0009".into()],
            };
            l.add_child(row.clone()).unwrap();
            assert_eq!(l.children("j").unwrap(), [row]);
            assert!(l.children("other").unwrap().is_empty());
        }
    }
}
