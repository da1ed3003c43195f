//! automation-file's semantic MCP tools (`file_read`, `storage_copy`, `pipeline_run`, ...): the
//! fourteen task-shaped tools its server lists beside the `FA_*` bridge, with the same names,
//! arguments and answers, under the same policy.
//!
//! The policy is the operator's (`--root`, `--allow-write`, `--allow-overwrite`,
//! `--allow-delete`, the `--max-*` caps, `--pipeline-dir`, `--pipeline-actions`): nothing is
//! reachable until a root is given, nothing changes until writing is allowed, and every cap is
//! the server's, whatever a call asks for. A refusal is an error with its own code (`no_root`,
//! `outside_root`, `read_only`, `overwrite_not_allowed`, `delete_not_allowed`,
//! `action_not_allowed`, `limit_exceeded`), so a model can tell "not allowed" from "failed".
//! Every answer carries the tool's name and the call's correlation ID, the key that
//! `audit_search` finds the call's records by.
//!
//! The I/O is the storage-URI layer's ([`crate::storage::transfer`]): these tools only add the
//! policy and the shape of the answers.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use maljan_server::{ErrorCode, Registry, Roots, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use crate::{
    Config,
    storage::uri::{self, Location},
};

mod files;
mod pipelines;
mod reports;
mod tree;

/// The semantic tools' names, as automation-file lists them.
pub const TOOLS: [&str; 14] = [
    "file_read",
    "file_write",
    "file_copy",
    "file_move",
    "file_search",
    "file_checksum",
    "file_verify",
    "storage_list",
    "storage_copy",
    "pipeline_create",
    "pipeline_run",
    "pipeline_status",
    "integrity_status",
    "audit_search",
];

/// What the operator allows the semantic tools (automation-file's `MCPPolicy`).
#[derive(Debug, Clone)]
pub struct SemanticPolicy {
    /// The locations the tools may reach: local directories and storage URIs (`s3://bucket/team`,
    /// `sftp://host/inbox`, `memory://scratch`). Empty: every storage tool refuses (`no_root`).
    pub roots: Vec<String>,
    /// Lets the tools that create files (and pipelines) run.
    pub allow_write: bool,
    /// Lets a call replace an existing file when it asks to (`overwrite=true`).
    pub allow_overwrite: bool,
    /// Lets file_move (and pipeline tasks) delete.
    pub allow_delete: bool,
    /// The most bytes one file_read returns.
    pub max_read_bytes: u64,
    /// The most bytes one file_write (or one stored pipeline) may hold.
    pub max_write_bytes: u64,
    /// The most entries one listing or search returns.
    pub max_results: usize,
    /// The most bytes one content search reads.
    pub max_search_bytes: u64,
    /// Where pipeline_create stores definitions; None keeps them in memory until the server stops.
    pub pipeline_dir: Option<PathBuf>,
    /// The actions a stored pipeline may name; None: the storage-URI actions the permissions
    /// above allow.
    pub pipeline_actions: Option<Vec<String>>,
}

impl Default for SemanticPolicy {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            allow_write: false,
            allow_overwrite: false,
            allow_delete: false,
            max_read_bytes: 256 * 1024,
            max_write_bytes: 1024 * 1024,
            max_results: 200,
            max_search_bytes: 8 * 1024 * 1024,
            pipeline_dir: None,
            pipeline_actions: None,
        }
    }
}

/// The policy and what the tools keep for the server's life.
pub(crate) struct Semantic {
    pub(crate) policy: SemanticPolicy,
    /// The local roots, resolved once (None when every root is a storage URI).
    local: Option<Roots>,
    /// Pipelines stored without a pipeline directory.
    pub(crate) pipelines: std::sync::Mutex<HashMap<String, Value>>,
}

impl Semantic {
    pub(crate) fn new(policy: SemanticPolicy) -> Self {
        let dirs: Vec<PathBuf> = policy.roots.iter().filter_map(|r| local_root(r)).collect();
        // A root that cannot be resolved (it does not exist) leaves every local path outside;
        // `maljan serve files` refuses such a root at start-up, as it is an FA_* root too.
        let local = (!dirs.is_empty()).then(|| Roots::new(&dirs).ok()).flatten();
        Self {
            policy,
            local,
            pipelines: Default::default(),
        }
    }
}

/// The directory a root names when it is local (a path, `file://` or `local://`); None for a
/// storage URI of a remote or in-memory store.
pub fn local_root(root: &str) -> Option<PathBuf> {
    match root.split_once("://") {
        None => Some(PathBuf::from(root)),
        Some((scheme, rest))
            if matches!(scheme.to_ascii_lowercase().as_str(), "file" | "local") =>
        {
            Some(PathBuf::from(rest))
        }
        Some(_) => None,
    }
}

impl Semantic {
    /// Whether a root is a remote store (anything but a local directory or `memory://`).
    pub(crate) fn reaches_network(&self) -> bool {
        self.policy.roots.iter().any(|r| {
            !is_local(r)
                && !r
                    .split_once("://")
                    .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("memory"))
        })
    }
}

fn is_local(root: &str) -> bool {
    local_root(root).is_some()
}

/// An error whose code is one of the policy's refusals.
pub(crate) fn refused(code: &str, message: impl Into<String>, hint: &str) -> ToolError {
    ToolError::new(ErrorCode::Other(code.to_string()), message).with_remediation(hint)
}

impl Config {
    fn policy(&self) -> &SemanticPolicy {
        &self.semantic.policy
    }

    pub(crate) fn require_write(&self, tool: &str) -> Result<(), ToolError> {
        if self.policy().allow_write {
            return Ok(());
        }
        Err(refused(
            "read_only",
            format!("{tool} changes storage and this server is read-only"),
            "start the server with --allow-write to let it create files",
        ))
    }

    pub(crate) fn require_delete(&self, tool: &str) -> Result<(), ToolError> {
        self.require_write(tool)?;
        if self.policy().allow_delete {
            return Ok(());
        }
        Err(refused(
            "delete_not_allowed",
            format!("{tool} deletes its source and this server does not allow deleting"),
            "start the server with --allow-delete, or use file_copy",
        ))
    }

    /// Whether `what`, which exists, may be replaced: the call must ask (overwrite=true) and the
    /// server allow it (--allow-overwrite). Files and stored pipelines alike.
    pub(crate) fn may_replace(&self, what: &str, overwrite: bool) -> Result<(), ToolError> {
        if !overwrite {
            return Err(refused(
                "already_exists",
                format!("{what} already exists"),
                "pass overwrite=true to replace it",
            ));
        }
        if !self.policy().allow_overwrite {
            return Err(refused(
                "overwrite_not_allowed",
                format!("{what} already exists"),
                "this server does not allow replacing (--allow-overwrite)",
            ));
        }
        Ok(())
    }

    /// Checks that replacing an existing file at `target` is asked for and allowed; returns
    /// its size when there is one to replace.
    pub(crate) async fn replaceable(
        &self,
        target: &Location,
        overwrite: bool,
    ) -> Result<Option<Option<u64>>, ToolError> {
        if !crate::storage::transfer::exists(self, target).await? {
            return Ok(None);
        }
        let info = crate::storage::transfer::stat(self, target).await?;
        if info.is_dir {
            return Err(ToolError::bad_argument(format!(
                "{} is a directory",
                target.shown()
            )));
        }
        self.may_replace(&target.shown(), overwrite)?;
        Ok(Some(info.size))
    }

    /// The location a URI names, once it is inside a root: a local path is resolved
    /// (symlinks included) before it is compared; an object's key is compared segment by
    /// segment, so `s3://bucket/team` allows `team/a.csv` and not `team-b/a.csv`.
    pub(crate) fn guarded(&self, given: &str) -> Result<Location, ToolError> {
        let roots = &self.policy().roots;
        if roots.is_empty() {
            return Err(refused(
                "no_root",
                "this server allows no storage location",
                "start the server with --root <storage URI or directory>",
            ));
        }
        let outside = || {
            refused(
                "outside_root",
                format!("{given} is outside the locations this server allows"),
                &format!("use a location under one of: {}", roots.join(", ")),
            )
        };
        match uri::parse(self, given, "default")? {
            Location::Local { path } => {
                let Some(local) = &self.semantic.local else {
                    return Err(outside());
                };
                let resolved = local.resolve(&path).map_err(|e| match e.code {
                    ErrorCode::PathOutsideRoots => outside(),
                    _ => e,
                })?;
                Ok(Location::Local {
                    path: resolved.to_string_lossy().into_owned(),
                })
            }
            at @ Location::Object { .. } => {
                let Location::Object { base, key, .. } = &at else {
                    unreachable!()
                };
                let inside = roots.iter().filter(|r| !is_local(r)).any(|root| {
                    match uri::parse(self, root, "default") {
                        Ok(Location::Object {
                            base: root_base,
                            key: root_key,
                            ..
                        }) => {
                            root_base == *base
                                && (root_key.is_empty()
                                    || *key == root_key
                                    || key.starts_with(&format!("{root_key}/")))
                        }
                        _ => false,
                    }
                });
                if inside { Ok(at) } else { Err(outside()) }
            }
        }
    }
}

/// The answer of a semantic tool: `{"tool", "correlation_id", ...body}`.
pub(crate) fn answer(tool: &str, ctx: &ToolContext, body: Value) -> Value {
    let mut out = Map::new();
    out.insert("tool".into(), json!(tool));
    let correlation = ctx
        .correlation_id()
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    out.insert("correlation_id".into(), json!(correlation));
    if let Value::Object(body) = body {
        out.extend(body);
    }
    Value::Object(out)
}

/// Registers one semantic tool: `f` returns the body, wrapped by [`answer`]. Every call is
/// bounded in time, as the storage actions are.
fn add<A, F, Fut>(reg: &mut Registry, cfg: &Arc<Config>, meta: ToolMeta, f: F)
where
    A: serde::de::DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(Arc<Config>, ToolContext, A) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let name = meta.name.clone();
    // Every tool but the reports reads or writes through the storage-URI layer: with a root on
    // a remote store it connects beyond the host.
    let reports = [
        "integrity_status",
        "audit_search",
        "pipeline_status",
        "pipeline_create",
    ];
    let meta = if cfg.semantic.reaches_network() && !reports.contains(&name.as_str()) {
        meta.open_world()
    } else {
        meta
    };
    crate::storage::storage_actions::add(reg, cfg, meta, move |c, ctx: ToolContext, a: A| {
        let (f, name) = (f.clone(), name.clone());
        async move {
            let body = f(c, ctx.clone(), a).await?;
            Ok(answer(&name, &ctx, body))
        }
    });
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    files::register(reg, cfg);
    tree::register(reg, cfg);
    pipelines::register(reg, cfg);
    reports::register(reg, cfg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_roots_are_paths_and_file_uris() {
        assert!(is_local("/srv/reports"));
        assert!(is_local("file:///srv/reports"));
        assert!(!is_local("s3://bucket/team"));
        assert_eq!(local_root("file:///srv"), Some(PathBuf::from("/srv")));
        assert_eq!(local_root("memory://scratch"), None);
    }

    #[test]
    fn every_semantic_tool_is_registered_under_its_listed_name() {
        let dir = tempfile::tempdir().unwrap();
        let reg = crate::registry(crate::FilesConfig::rooted(
            Roots::new([dir.path()]).unwrap(),
        ));
        let mut served: Vec<&str> = reg.names().filter(|n| !n.starts_with("FA_")).collect();
        let mut listed = TOOLS.to_vec();
        served.sort();
        listed.sort();
        assert_eq!(served, listed);
    }
}
