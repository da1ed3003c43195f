//! FA_audit_search and FA_audit_count take automation-file's filters: `since` / `until` (ISO
//! 8601 with an offset, or seconds since the epoch; since included, until excluded), exact
//! `actor`, `source`, `pipeline`, `task`, `action`, `backend`, `status`, `correlation_id`,
//! `resource_prefix`, `text` (in any text field or the metadata; both literal, ASCII case
//! ignored), and `limit` (default 100, at most 10,000) / `offset`. An unknown filter is an
//! error, not a search that silently returns everything. Records come back newest first.

use std::sync::Arc;

use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Config;

const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 10_000;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filters {
    /// Records at or after this time (ISO 8601 with an offset, or seconds since the epoch).
    since: Option<Value>,
    /// Records before this time.
    until: Option<Value>,
    actor: Option<String>,
    source: Option<String>,
    pipeline: Option<String>,
    task: Option<String>,
    /// The tool's name.
    action: Option<String>,
    /// Records whose resource (the call's path argument) starts with this.
    resource_prefix: Option<String>,
    backend: Option<String>,
    /// ok or error.
    status: Option<String>,
    /// Every call of one run (a top-level call and the calls nested in it).
    correlation_id: Option<String>,
    /// Text anywhere in the record or its metadata (the redacted arguments).
    text: Option<String>,
    /// At most this many records (default 100, at most 10000; ignored by FA_audit_count).
    limit: Option<u64>,
    offset: Option<u64>,
}

/// Microseconds since the epoch as the ISO 8601 text records carry.
pub(crate) fn iso(ts_us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(ts_us)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

fn time(v: &Value, name: &str) -> Result<i64, ToolError> {
    let bad = || {
        ToolError::bad_argument(format!(
            "{name} must be an ISO 8601 time with an offset or seconds since the epoch, got {v}"
        ))
    };
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|s| s.is_finite() && s.abs() < 1e12)
            .map(|s| (s * 1e6) as i64)
            .ok_or_else(bad),
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s.trim())
            .map(|t| t.timestamp_micros())
            .map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn like(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// The WHERE clause and its parameters.
fn clause(f: &Filters) -> Result<(String, Vec<rusqlite::types::Value>), ToolError> {
    use rusqlite::types::Value as Sql;
    let mut sql = vec!["1 = 1".to_string()];
    let mut params: Vec<Sql> = Vec::new();
    if let Some(v) = &f.since {
        params.push(Sql::Integer(time(v, "since")?));
        sql.push(format!("ts_us >= ?{}", params.len()));
    }
    if let Some(v) = &f.until {
        params.push(Sql::Integer(time(v, "until")?));
        sql.push(format!("ts_us < ?{}", params.len()));
    }
    let exact = [
        ("actor", &f.actor),
        ("source", &f.source),
        ("pipeline", &f.pipeline),
        ("task", &f.task),
        ("action", &f.action),
        ("backend", &f.backend),
        ("status", &f.status),
        ("correlation_id", &f.correlation_id),
    ];
    for (column, wanted) in exact {
        if let Some(v) = wanted {
            params.push(Sql::Text(v.clone()));
            sql.push(format!("{column} = ?{}", params.len()));
        }
    }
    if let Some(prefix) = &f.resource_prefix {
        let escaped = like(prefix);
        params.push(Sql::Text(escaped[1..].to_string()));
        sql.push(format!("resource LIKE ?{} ESCAPE '\\'", params.len()));
    }
    if let Some(text) = &f.text {
        params.push(Sql::Text(like(text)));
        let n = params.len();
        let fields = [
            "action", "resource", "error", "actor", "source", "pipeline", "task", "backend",
            "metadata",
        ];
        let any: Vec<String> = fields
            .iter()
            .map(|c| format!("{c} LIKE ?{n} ESCAPE '\\'"))
            .collect();
        sql.push(format!("({})", any.join(" OR ")));
    }
    Ok((sql.join(" AND "), params))
}

pub(super) fn search(cfg: &Arc<Config>, f: Filters) -> Result<Vec<Value>, ToolError> {
    let limit = f.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(ToolError::bad_argument(format!(
            "limit may not exceed {MAX_LIMIT}, got {limit}"
        )));
    }
    let offset = f.offset.unwrap_or(0).min(i64::MAX as u64);
    let (wh, params) = clause(&f)?;
    let sql = format!(
        "SELECT id, timestamp, actor, source, pipeline, task, action, resource, backend, status,
                duration_ms, error, metadata, correlation_id
         FROM audit_records WHERE {wh} ORDER BY ts_us DESC, seq DESC LIMIT {limit} OFFSET {offset}"
    );
    super::with_db(cfg, |c| {
        let mut stmt = c.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
            let metadata: String = r.get(12)?;
            Ok(json!({
                "id": r.get::<_, String>(0)?,
                "timestamp": r.get::<_, String>(1)?,
                "actor": r.get::<_, String>(2)?,
                "source": r.get::<_, String>(3)?,
                "pipeline": r.get::<_, Option<String>>(4)?,
                "task": r.get::<_, Option<String>>(5)?,
                "action": r.get::<_, String>(6)?,
                "resource": r.get::<_, Option<String>>(7)?,
                "backend": r.get::<_, Option<String>>(8)?,
                "status": r.get::<_, String>(9)?,
                "duration_ms": r.get::<_, Option<f64>>(10)?,
                "error": r.get::<_, Option<String>>(11)?,
                "metadata": serde_json::from_str::<Value>(&metadata).unwrap_or(Value::Null),
                "correlation_id": r.get::<_, Option<String>>(13)?,
            }))
        })?;
        rows.collect()
    })
}

pub(super) fn count(cfg: &Arc<Config>, f: Filters) -> Result<u64, ToolError> {
    let (wh, params) = clause(&f)?;
    super::with_db(cfg, |c| {
        c.query_row(
            &format!("SELECT COUNT(*) FROM audit_records WHERE {wh}"),
            rusqlite::params_from_iter(params),
            |r| r.get::<_, i64>(0),
        )
    })
    .map(|n| n as u64)
}

fn purge(cfg: &Arc<Config>, older_than_seconds: f64) -> Result<u64, ToolError> {
    if !older_than_seconds.is_finite() || older_than_seconds < 0.0 {
        return Err(ToolError::bad_argument(
            "older_than_seconds must be a number, 0 or more",
        ));
    }
    let cutoff =
        chrono::Utc::now().timestamp_micros() - (older_than_seconds.min(1e12) * 1e6) as i64;
    super::with_db(cfg, |c| {
        c.execute("DELETE FROM audit_records WHERE ts_us < ?1", [cutoff])
    })
    .map(|n| n as u64)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ConfigureArgs {
    /// The SQLite file (inside the roots) to keep the trail in from now on.
    db_path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PurgeArgs {
    /// Delete the records older than this many seconds.
    older_than_seconds: f64,
}

pub(super) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_audit_configure",
            "Keep the audit trail (every tool call: tool, outcome, duration, correlation id, \
             redacted arguments) in the SQLite file db_path, inside the roots, from now on \
             (by default it is in the server's state database).",
        )
        .title("Configure the audit trail")
        .writes()
        .timeout_s(60),
        move |_ctx, a: ConfigureArgs| {
            let c = c.clone();
            async move { super::after_flush(&c, move |c| super::configure(c, &a.db_path)).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_audit_search",
            "Audit records passing the filters, newest first: since/until (ISO 8601 or epoch \
             seconds), actor, source, pipeline, task, action (the tool), backend, status (ok, \
             error), correlation_id (every call of one run), resource_prefix, text, limit, offset.",
        )
        .title("Search the audit trail")
        .timeout_s(60),
        move |_ctx, f: Filters| {
            let c = c.clone();
            async move { super::after_flush(&c, move |c| search(c, f)).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_audit_count",
            "How many audit records pass the filters (those of FA_audit_search; limit and \
             offset are ignored).",
        )
        .title("Count audit records")
        .timeout_s(60),
        move |_ctx, f: Filters| {
            let c = c.clone();
            async move { super::after_flush(&c, move |c| count(c, f)).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_audit_purge",
            "Delete the audit records older than older_than_seconds; returns how many.",
        )
        .title("Purge old audit records")
        .destructive()
        .timeout_s(60),
        move |_ctx, a: PurgeArgs| {
            let c = c.clone();
            async move { super::after_flush(&c, move |c| purge(c, a.older_than_seconds)).await }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn times_read_as_iso_or_epoch_seconds() {
        assert_eq!(time(&json!(1.5), "since").unwrap(), 1_500_000);
        assert_eq!(
            time(&json!("1970-01-01T00:00:02+00:00"), "since").unwrap(),
            2_000_000
        );
        assert!(
            time(&json!("yesterday"), "since")
                .unwrap_err()
                .message
                .contains("since")
        );
        assert!(time(&json!(true), "until").is_err());
    }

    proptest! {
        /// Any filters the schema accepts give a clause or a clear refusal; the clause only
        /// ever carries the values as parameters.
        #[test]
        fn filters_never_reach_the_sql_text(text in ".{0,20}", prefix in ".{0,20}", action in ".{0,20}") {
            let f = Filters { text: Some(text.clone()), resource_prefix: Some(prefix), action: Some(action), ..Default::default() };
            let (sql, params) = clause(&f).unwrap();
            prop_assert_eq!(params.len(), 3);
            prop_assert!(sql.is_ascii());
        }
    }
}
