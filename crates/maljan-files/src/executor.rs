//! Action lists in automation-file's JSON format — `[["FA_name", {kwargs}], ["FA_name", [args]],
//! ["FA_name"]]`, or `{"auto_control": [...]}` — run in order, in parallel, as a DAG, from files,
//! or as the branch of a condition. Every nested action goes through the server
//! (`ToolContext::invoke`), so --read-only, --allowed-actions and root confinement apply to it
//! exactly as to a direct call.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::Arc,
};

use futures::{StreamExt, stream::FuturesUnordered};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Config, paths::show};

#[derive(Deserialize, JsonSchema, Clone)]
#[serde(untagged)]
enum ActionList {
    /// `[["FA_name", {kwargs}], ...]`
    List(Vec<Value>),
    /// `{"auto_control": [...]}`
    Document(Map<String, Value>),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecuteArgs {
    /// The actions: `[["FA_name", {kwargs}], ["FA_name", [args]], ["FA_name"]]` or `{"auto_control": [...]}`.
    action_list: ActionList,
    /// Resolve and report each action without running it.
    #[serde(default)]
    #[schemars(default)]
    dry_run: bool,
    /// Check every action before running any, so a typo stops the whole list.
    #[serde(default)]
    #[schemars(default)]
    validate_first: bool,
    /// Expand `${uuid}`, `${date}`, `${date:FMT}` and `${cwd}` (the first root) in every string.
    /// `${env:NAME}` is refused: the server does not hand its environment to callers.
    #[serde(default)]
    #[schemars(default)]
    substitute: bool,
}

fn default_workers() -> i64 {
    4
}
fn default_true() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ParallelArgs {
    /// The actions, as for FA_execute_action; they must not depend on each other.
    action_list: ActionList,
    /// How many actions run at once (1 to 64).
    #[serde(default = "default_workers")]
    #[schemars(default = "default_workers")]
    max_workers: i64,
    /// Resolve and report each action without running it.
    #[serde(default)]
    #[schemars(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
struct Node {
    /// The node's unique id.
    id: String,
    /// One action: `["FA_name", {kwargs}]`.
    action: Value,
    /// Ids of the nodes that must finish first.
    #[serde(default)]
    depends_on: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DagArgs {
    /// The nodes: `{"id", "action": ["FA_name", {kwargs}], "depends_on": [ids]}`.
    nodes: Vec<Node>,
    /// How many nodes run at once (1 to 64).
    #[serde(default = "default_workers")]
    #[schemars(default = "default_workers")]
    max_workers: i64,
    /// Skip every node that depends, directly or not, on a failed one.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    fail_fast: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ValidateArgs {
    /// The actions to check, as for FA_execute_action.
    action_list: ActionList,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FilesArgs {
    /// JSON files each holding an action list, run in order.
    execute_files_list: Vec<String>,
}

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

#[derive(Serialize, JsonSchema, Clone)]
struct Step {
    index: usize,
    action: String,
    /// ok, failed, dry_run or skipped.
    status: &'static str,
    /// What the action answered.
    result: Option<Value>,
    /// `{"code","message","remediation"}` when it failed.
    error: Option<Value>,
}

#[derive(Serialize, JsonSchema)]
struct ExecOut {
    results: Vec<Step>,
    succeeded: usize,
    failed: usize,
}

#[derive(Serialize, JsonSchema)]
struct FilesOut {
    files: Vec<ExecOut>,
}

#[derive(Serialize, JsonSchema)]
struct DagOut {
    /// Node id → its step.
    results: BTreeMap<String, Step>,
    succeeded: usize,
    failed: usize,
    skipped: usize,
}

#[derive(Serialize, JsonSchema)]
struct ValidateOut {
    /// The action names, in order.
    actions: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct CondOut {
    matched: bool,
    /// The branch that ran; null when that branch was empty.
    results: Option<ExecOut>,
}

/// One parsed action: its name and keyword arguments.
struct Action {
    name: String,
    args: Map<String, Value>,
}

fn actions_of(list: ActionList) -> Result<Vec<Value>, ToolError> {
    let list = match list {
        ActionList::List(l) => l,
        ActionList::Document(mut d) => match d.remove("auto_control") {
            Some(Value::Array(l)) => l,
            Some(other) => {
                return Err(ToolError::bad_argument(format!(
                    "auto_control must be a list, not {}",
                    kind(&other)
                )));
            }
            None => {
                return Err(ToolError::bad_argument(
                    "an action document needs an 'auto_control' list",
                ));
            }
        },
    };
    if list.is_empty() {
        return Err(ToolError::bad_argument("the action list is empty"));
    }
    Ok(list)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Config {
    /// Parses one action and checks that the server serves it.
    fn parse_action(
        &self,
        ctx: &ToolContext,
        v: &Value,
        index: usize,
    ) -> Result<Action, ToolError> {
        let at = |m: String| ToolError::bad_argument(format!("action {index}: {m}"));
        let Value::Array(parts) = v else {
            return Err(at(format!("must be a list, not {}", kind(v))));
        };
        let name = match parts.first() {
            Some(Value::String(n)) => n.clone(),
            _ => return Err(at("must start with the action's name".into())),
        };
        if !ctx.has_tool(&name) {
            return Err(at(format!("unknown action '{name}' (not served here)")));
        }
        let args = match parts.get(1) {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(Value::Array(positional)) => {
                let names = self
                    .params
                    .get()
                    .and_then(|p| p.get(&name))
                    .cloned()
                    .unwrap_or_default();
                if positional.len() > names.len() {
                    return Err(at(format!(
                        "{name} takes at most {} arguments, {} given",
                        names.len(),
                        positional.len()
                    )));
                }
                names.into_iter().zip(positional.iter().cloned()).collect()
            }
            Some(other) => {
                return Err(at(format!(
                    "arguments must be an object or a list, not {}",
                    kind(other)
                )));
            }
        };
        if parts.len() > 2 {
            return Err(at("has more than a name and one set of arguments".into()));
        }
        Ok(Action { name, args })
    }
}

fn step_of(index: usize, name: String, outcome: Result<Value, ToolError>) -> Step {
    match outcome {
        Ok(v) => Step {
            index,
            action: name,
            status: "ok",
            result: Some(v),
            error: None,
        },
        Err(e) => Step {
            index,
            action: name,
            status: "failed",
            result: None,
            error: Some(e.to_json("")["error"].clone()),
        },
    }
}

fn summary(results: Vec<Step>) -> ExecOut {
    let succeeded = results.iter().filter(|s| s.status == "ok").count();
    let failed = results.iter().filter(|s| s.status == "failed").count();
    ExecOut {
        results,
        succeeded,
        failed,
    }
}

/// Runs actions one after another; a failing action is recorded and the list goes on, as in
/// automation-file.
async fn run_list(
    cfg: &Config,
    ctx: &ToolContext,
    list: Vec<Value>,
    dry_run: bool,
    validate_first: bool,
) -> Result<ExecOut, ToolError> {
    if validate_first {
        for (i, v) in list.iter().enumerate() {
            cfg.parse_action(ctx, v, i)?;
        }
    }
    let total = list.len();
    let mut results = Vec::with_capacity(total);
    for (i, v) in list.iter().enumerate() {
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
        let step = match cfg.parse_action(ctx, v, i) {
            Err(e) => step_of(i, name_hint(v), Err(e)),
            Ok(a) if dry_run => Step {
                index: i,
                action: a.name,
                status: "dry_run",
                result: None,
                error: None,
            },
            Ok(a) => step_of(i, a.name.clone(), ctx.invoke(&a.name, a.args).await),
        };
        results.push(step);
        ctx.progress((i + 1) as f64, Some(total as f64), None);
    }
    Ok(summary(results))
}

fn name_hint(v: &Value) -> String {
    v.get(0).and_then(Value::as_str).unwrap_or("?").to_string()
}

fn workers(n: i64) -> Result<usize, ToolError> {
    if !(1..=64).contains(&n) {
        return Err(ToolError::bad_argument(
            "max_workers must be between 1 and 64",
        ));
    }
    Ok(n as usize)
}

/// Expands `${...}` placeholders in every string of an action list.
fn substitute(v: Value, cwd: &str) -> Result<Value, ToolError> {
    Ok(match v {
        Value::String(s) => Value::String(expand(&s, cwd)?),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .map(|x| substitute(x, cwd))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, x)| Ok((k, substitute(x, cwd)?)))
                .collect::<Result<_, ToolError>>()?,
        ),
        other => other,
    })
}

fn expand(s: &str, cwd: &str) -> Result<String, ToolError> {
    let re = regex::Regex::new(r"\$\{([A-Za-z_]\w*)(?::([^}]*))?\}").expect("a fixed pattern");
    let mut err = None;
    let out = re.replace_all(s, |c: &regex::Captures| {
        let arg = c.get(2).map(|m| m.as_str());
        match c[1].to_ascii_lowercase().as_str() {
            "uuid" => uuid::Uuid::new_v4().simple().to_string(),
            "cwd" => cwd.to_string(),
            "date" => {
                let fmt = arg.filter(|f| !f.is_empty()).unwrap_or("%Y-%m-%dT%H:%M:%S");
                let items: Vec<_> = chrono::format::StrftimeItems::new(fmt).collect();
                if items.contains(&chrono::format::Item::Error) {
                    err = Some(ToolError::bad_argument(format!(
                        "bad date format in {}",
                        &c[0]
                    )));
                    return String::new();
                }
                chrono::Local::now()
                    .format_with_items(items.into_iter())
                    .to_string()
            }
            "env" => {
                err = Some(ToolError::bad_argument(format!(
                    "{} is refused: the files server does not hand its environment to callers",
                    &c[0]
                )));
                String::new()
            }
            _ => {
                err = Some(ToolError::bad_argument(format!(
                    "unknown substitution {}",
                    &c[0]
                )));
                String::new()
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out.into_owned()),
    }
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    // Action lists can run any served action, destructive ones included, so they carry the
    // destructive hint themselves (and disappear under --read-only).
    let meta = |name: &str, desc: &str, t: u64| {
        ToolMeta::new(name, desc)
            .destructive()
            .not_idempotent()
            .timeout_s(t)
    };

    let c = cfg.clone();
    reg.add(
        meta("FA_execute_action", "Run an action list in order; each action's result or error is recorded and the list goes on.", 3600),
        move |ctx: ToolContext, a: ExecuteArgs| {
            let c = c.clone();
            async move {
                let mut list = actions_of(a.action_list)?;
                if a.substitute {
                    let cwd = c.roots.dirs().first().map(|d| show(d)).unwrap_or_default();
                    list = list.into_iter().map(|v| substitute(v, &cwd)).collect::<Result<_, _>>()?;
                }
                run_list(&c, &ctx, list, a.dry_run, a.validate_first).await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta("FA_execute_action_parallel", "Run independent actions concurrently (max_workers at a time); results keep list order.", 3600),
        move |ctx: ToolContext, a: ParallelArgs| {
            let c = c.clone();
            async move {
                let n = workers(a.max_workers)?;
                let list = actions_of(a.action_list)?;
                let jobs = list.into_iter().enumerate().map(|(i, v)| {
                    let (c, ctx) = (c.clone(), ctx.clone());
                    async move {
                        match c.parse_action(&ctx, &v, i) {
                            Err(e) => step_of(i, name_hint(&v), Err(e)),
                            Ok(a) if ctx.is_cancelled() => step_of(i, a.name, Err(ToolError::tool_failed("the call was cancelled"))),
                            Ok(act) if a.dry_run => Step { index: i, action: act.name, status: "dry_run", result: None, error: None },
                            Ok(act) => step_of(i, act.name.clone(), ctx.invoke(&act.name, act.args).await),
                        }
                    }
                });
                let results: Vec<Step> = futures::stream::iter(jobs).buffered(n).collect().await;
                Ok(summary(results))
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_execute_action_dag",
            "Run actions as a dependency graph: each node starts when its depends_on have finished, independent ones in parallel.",
            3600,
        ),
        move |ctx: ToolContext, a: DagArgs| {
            let c = c.clone();
            async move { run_dag(&c, &ctx, a).await }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_validate",
            "Check an action list without running it: its shape and that every action is served.",
        )
        .timeout_s(30),
        move |ctx: ToolContext, a: ValidateArgs| {
            let c = c.clone();
            async move {
                let list = actions_of(a.action_list)?;
                let actions = list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| c.parse_action(&ctx, v, i).map(|a| a.name))
                    .collect::<Result<_, _>>()?;
                Ok(ValidateOut { actions })
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_execute_files",
            "Run the action list stored in each JSON file, in order.",
            3600,
        ),
        move |ctx: ToolContext, a: FilesArgs| {
            let c = c.clone();
            async move {
                let mut files = Vec::new();
                for f in &a.execute_files_list {
                    let path = c.existing_file(f)?;
                    let text = tokio::fs::read_to_string(&path)
                        .await
                        .map_err(|e| ToolError::io(f, e))?;
                    let list: ActionList = serde_json::from_str(&text).map_err(|e| {
                        ToolError::unsupported_format(format!("{f} is not a JSON action list: {e}"))
                    })?;
                    files.push(run_list(&c, &ctx, actions_of(list)?, false, false).await?);
                }
                Ok(FilesOut { files })
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        meta(
            "FA_if_exists",
            "Run the `then` actions when a path exists, else the `else_` actions.",
            3600,
        ),
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
        ),
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
        ),
        move |ctx: ToolContext, a: IfSizeArgs| {
            let c = c.clone();
            async move {
                if a.bytes_threshold < 0 {
                    return Err(ToolError::bad_argument("bytes_threshold must be >= 0"));
                }
                let path = c.roots.resolve(&a.path)?;
                let matched = std::fs::metadata(&path)
                    .is_ok_and(|m| m.is_file() && m.len() > a.bytes_threshold as u64);
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

async fn run_dag(c: &Config, ctx: &ToolContext, a: DagArgs) -> Result<DagOut, ToolError> {
    let n = workers(a.max_workers)?;
    if a.nodes.is_empty() {
        return Err(ToolError::bad_argument("nodes is empty"));
    }
    let mut ids = HashSet::new();
    for node in &a.nodes {
        if !ids.insert(node.id.clone()) {
            return Err(ToolError::bad_argument(format!(
                "duplicate node id '{}'",
                node.id
            )));
        }
    }
    let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut indegree: HashMap<&str, usize> = HashMap::new();
    for node in &a.nodes {
        indegree.entry(&node.id).or_insert(0);
        for d in &node.depends_on {
            if !ids.contains(d) {
                return Err(ToolError::bad_argument(format!(
                    "node '{}' depends on unknown node '{d}'",
                    node.id
                )));
            }
            dependents.entry(d).or_default().push(&node.id);
            *indegree.entry(&node.id).or_insert(0) += 1;
        }
    }
    // Cycle check before anything runs.
    {
        let mut deg = indegree.clone();
        let mut queue: VecDeque<&str> = deg
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(k, _)| *k)
            .collect();
        let mut seen = 0;
        while let Some(id) = queue.pop_front() {
            seen += 1;
            for dep in dependents.get(id).into_iter().flatten() {
                let e = deg.get_mut(dep).expect("every node has a degree");
                *e -= 1;
                if *e == 0 {
                    queue.push_back(dep);
                }
            }
        }
        if seen != a.nodes.len() {
            return Err(ToolError::bad_argument(
                "the nodes' depends_on form a cycle",
            ));
        }
    }
    let by_id: HashMap<&str, (usize, &Node)> = a
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), (i, n)))
        .collect();
    let mut results: BTreeMap<String, Step> = BTreeMap::new();
    let mut ready: VecDeque<&str> = a
        .nodes
        .iter()
        .filter(|n| indegree[n.id.as_str()] == 0)
        .map(|n| n.id.as_str())
        .collect();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < n {
            let Some(id) = ready.pop_front() else { break };
            if results.contains_key(id) {
                continue;
            }
            let (index, node) = by_id[id];
            let parsed = c.parse_action(ctx, &node.action, index);
            let ctx = ctx.clone();
            running.push(async move {
                let step = match parsed {
                    Err(e) => step_of(index, name_hint(&node.action), Err(e)),
                    Ok(act) => step_of(
                        index,
                        act.name.clone(),
                        ctx.invoke(&act.name, act.args).await,
                    ),
                };
                (id, step)
            });
        }
        let Some((id, step)) = running.next().await else {
            break;
        };
        let failed = step.status == "failed";
        results.insert(id.to_string(), step);
        for dep in dependents.get(id).into_iter().flatten() {
            let d = indegree.get_mut(dep).expect("every node has a degree");
            *d -= 1;
            if failed && a.fail_fast {
                skip(dep, id, &dependents, &by_id, &mut results);
            } else if *d == 0 && !results.contains_key(*dep) {
                ready.push_back(dep);
            }
        }
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
    }
    let count = |s: &str| results.values().filter(|r| r.status == s).count();
    let (succeeded, failed, skipped) = (count("ok"), count("failed"), count("skipped"));
    Ok(DagOut {
        results,
        succeeded,
        failed,
        skipped,
    })
}

fn skip(
    id: &str,
    because: &str,
    dependents: &HashMap<&str, Vec<&str>>,
    by_id: &HashMap<&str, (usize, &Node)>,
    results: &mut BTreeMap<String, Step>,
) {
    if results.contains_key(id) {
        return;
    }
    let (index, node) = by_id[id];
    results.insert(
        id.to_string(),
        Step {
            index,
            action: name_hint(&node.action),
            status: "skipped",
            result: None,
            error: Some(serde_json::json!({"code": "skipped", "message": format!("dependency '{because}' failed"), "remediation": "fix the failed node, or run with fail_fast false"})),
        },
    );
    for dep in dependents.get(id).into_iter().flatten() {
        skip(dep, id, dependents, by_id, results);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution() {
        assert_eq!(expand("a-${cwd}-b", "/r").unwrap(), "a-/r-b");
        assert_eq!(expand("${uuid}", "").unwrap().len(), 32);
        assert_eq!(expand("${date:%Y}", "").unwrap().len(), 4);
        assert!(expand("${env:HOME}", "").is_err());
        assert!(expand("${nope}", "").is_err());
        assert_eq!(expand("plain $x", "").unwrap(), "plain $x");
    }
}
