//! Conditional dispatch (automation-file's FA_if_exists / FA_if_newer / FA_if_size_gt): test a
//! path, then run one of two inline action lists through the executor, under the same policy.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::data::non_negative;
use crate::{
    Config,
    executor::{ExecOut, run_list},
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IfExistsArgs {
    /// The path tested.
    path: String,
    /// Actions run when it exists.
    #[serde(default)]
    then: Option<Vec<Value>>,
    /// Actions run when it does not.
    #[serde(default)]
    else_: Option<Vec<Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IfNewerArgs {
    /// The path tested (missing: not newer).
    path: String,
    /// The path compared with (missing: `path` wins).
    reference: String,
    /// Actions run when `path` was modified after `reference`.
    #[serde(default)]
    then: Option<Vec<Value>>,
    /// Actions run otherwise.
    #[serde(default)]
    else_: Option<Vec<Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IfSizeArgs {
    /// The file tested.
    path: String,
    /// `then` runs when the file is strictly larger than this many bytes.
    bytes_threshold: i64,
    /// Actions run when it is larger.
    #[serde(default)]
    then: Option<Vec<Value>>,
    /// Actions run otherwise (also when it is missing).
    #[serde(default)]
    else_: Option<Vec<Value>>,
}

#[derive(Serialize, JsonSchema)]
struct CondOut {
    matched: bool,
    /// The branch that ran; null when that branch was empty.
    results: Option<ExecOut>,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    // The branches can run any served action, so these carry the destructive hint too.
    let meta = |name: &str, desc: &str, t: u64| {
        ToolMeta::new(name, desc)
            .destructive()
            .not_idempotent()
            .timeout_s(t)
    };

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_if_exists",
            "Run the `then` actions when a path exists, else the `else_` actions.",
            3600,
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world(),
        move |ctx: ToolContext, a: IfExistsArgs| {
            let c = c.clone();
            async move {
                let matched = c.roots.resolve(&a.path)?.symlink_metadata().is_ok();
                branch(&c, &ctx, matched, a.then, a.else_).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_if_newer",
            "Run the `then` actions when a path was modified after a reference path, else `else_`.",
            3600,
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world(),
        move |ctx: ToolContext, a: IfNewerArgs| {
            let c = c.clone();
            async move {
                let mtime =
                    |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
                let path = mtime(&c.roots.resolve(&a.path)?);
                let reference = mtime(&c.roots.resolve(&a.reference)?);
                let matched = match (path, reference) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (Some(p), Some(r)) => p > r,
                };
                branch(&c, &ctx, matched, a.then, a.else_).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_if_size_gt",
            "Run the `then` actions when a file is larger than bytes_threshold, else `else_`.",
            3600,
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world(),
        move |ctx: ToolContext, a: IfSizeArgs| {
            let c = c.clone();
            async move {
                let threshold = non_negative("bytes_threshold", a.bytes_threshold)?;
                let path = c.roots.resolve(&a.path)?;
                let matched =
                    std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() > threshold);
                branch(&c, &ctx, matched, a.then, a.else_).await
            }
        },
    );
}

async fn branch(
    c: &Config,
    ctx: &ToolContext,
    matched: bool,
    then: Option<Vec<Value>>,
    else_: Option<Vec<Value>>,
) -> Result<CondOut, ToolError> {
    let chosen = if matched { then } else { else_ };
    let results = match chosen {
        Some(list) if !list.is_empty() => Some(run_list(c, ctx, list, false, false).await?),
        _ => None,
    };
    Ok(CondOut { matched, results })
}
