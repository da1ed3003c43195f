//! integrity_status and audit_search: what the server's monitors found and what its calls did.

use std::sync::Arc;

use maljan_server::{Registry, ToolError, ToolMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::add;
use crate::Config;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct IntegrityArgs {
    /// Only this monitor. Default: every monitor.
    name: Option<String>,
}

/// The filters of audit_search: automation-file's names, FA_audit_search's meaning.
#[derive(Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct AuditArgs {
    /// Who did it: a user, 'scheduler', or the 'mcp' actor of this server's own calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<String>,
    /// The component that reported: storage, pipeline, mcp, integrity, scheduler, notify.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    /// The pipeline name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline: Option<String>,
    /// The task ID inside a pipeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    /// What happened: the tool's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<String>,
    /// The storage scheme: s3, sftp, local, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: Option<String>,
    /// The result: ok or error.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    /// Everything one call did: the correlation_id of a tool result.
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<String>,
    /// Records whose resource (a storage URI or path) starts with this text.
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_prefix: Option<String>,
    /// Records that contain this text in any field or in their metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    /// Earliest time, included: ISO 8601 with an offset, 2026-10-08T00:00:00+00:00.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    /// Latest time, excluded: ISO 8601 with an offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    /// How many records. Default 50; the server caps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u64>,
    /// How many records to skip. Default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
}

async fn audit_search(c: Arc<Config>, mut a: AuditArgs) -> Result<Value, ToolError> {
    if a.limit == Some(0) {
        return Err(ToolError::bad_argument("limit must be 1 or more"));
    }
    let limit = a
        .limit
        .unwrap_or(50)
        .min(c.semantic.policy.max_results as u64);
    let offset = a.offset.unwrap_or(0);
    (a.limit, a.offset) = (Some(limit), Some(offset));
    let filters = serde_json::to_value(&a).expect("filters serialise");
    let (records, total) = crate::audit::page(&c, filters).await?;
    Ok(json!({
        "count": records.len(),
        "records": records,
        "total": total,
        "limit": limit,
        "offset": offset,
        "truncated": offset + limit < total,
    }))
}

pub(super) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "integrity_status",
            "Report the integrity monitors of this server: what each one watches, whether it is running, when it last ran and what it found (the changed files by kind). Read-only; it starts no verification.",
        ),
        |c, _ctx, a: IntegrityArgs| async move {
            let monitors = crate::watch::statuses(&c, a.name.as_deref())?;
            Ok(json!({"count": monitors.len(), "monitors": monitors}))
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "audit_search",
            "Search the audit trail: who did what, when, against which resource, with what result. Records come newest first and their number is capped: page with offset while 'truncated' is true. Pass the correlation_id of a tool result to see what that call did.",
        ),
        |c, _ctx, a: AuditArgs| audit_search(c, a),
    );
}
