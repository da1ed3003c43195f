//! Action lists in automation-file's JSON format — `[["FA_name", {kwargs}], ["FA_name", [args]],
//! ["FA_name"]]`, or `{"auto_control": [...]}` — run in order, in parallel, as a DAG, from files,
//! or as the branch of a condition. Every nested action goes through the server
//! (`ToolContext::invoke`), so --read-only, --allowed-actions and root confinement apply to it
//! exactly as to a direct call.

use std::sync::Arc;

use futures::StreamExt;
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

#[derive(Serialize, JsonSchema, Clone)]
pub(crate) struct Step {
    pub(crate) index: usize,
    pub(crate) action: String,
    /// ok, failed, dry_run or skipped.
    pub(crate) status: &'static str,
    /// What the action answered.
    pub(crate) result: Option<Value>,
    /// `{"code","message","remediation"}` when it failed.
    pub(crate) error: Option<Value>,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct ExecOut {
    pub(crate) results: Vec<Step>,
    pub(crate) succeeded: usize,
    pub(crate) failed: usize,
}

#[derive(Serialize, JsonSchema)]
struct FilesOut {
    files: Vec<ExecOut>,
}

#[derive(Serialize, JsonSchema)]
struct ValidateOut {
    /// The action names, in order.
    actions: Vec<String>,
}

/// One parsed action: its name and keyword arguments.
pub(crate) struct Action {
    pub(crate) name: String,
    pub(crate) args: Map<String, Value>,
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
    pub(crate) fn parse_action(
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

pub(crate) fn step_of(index: usize, name: String, outcome: Result<Value, ToolError>) -> Step {
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
pub(crate) async fn run_list(
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

pub(crate) fn name_hint(v: &Value) -> String {
    v.get(0).and_then(Value::as_str).unwrap_or("?").to_string()
}

pub(crate) fn workers(n: i64) -> Result<usize, ToolError> {
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
        meta("FA_execute_action", "Run an action list in order; each action's result or error is recorded and the list goes on.", 3600)
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
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
        meta("FA_execute_action_parallel", "Run independent actions concurrently (max_workers at a time); results keep list order.", 3600)
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
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
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world(),
        move |ctx: ToolContext, a: FilesArgs| {
            let c = c.clone();
            async move {
                let mut files = Vec::new();
                for f in &a.execute_files_list {
                    let opened = c.existing_file(f)?;
                    let text = maljan_server::blocking(move || opened.text()).await?;
                    let list: ActionList = serde_json::from_str(&text).map_err(|e| {
                        ToolError::unsupported_format(format!("{f} is not a JSON action list: {e}"))
                    })?;
                    files.push(run_list(&c, &ctx, actions_of(list)?, false, false).await?);
                }
                Ok(FilesOut { files })
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution() {
        assert_eq!(expand("a-${cwd}-b", "/r").unwrap(), "a-/r-b");
        assert_eq!(expand("${uuid}", "").unwrap().len(), 32);
        assert_eq!(expand("${date:%Y}", "").unwrap().len(), 4);
        assert_eq!(
            expand("${env:HOME}", "").unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(
            expand("${nope}", "").unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(expand("plain $x", "").unwrap(), "plain $x");
    }
}
