//! Pipeline definitions as automation-file writes them (`schema_version: 1`): loading one (a
//! mapping, or a JSON/YAML file under the roots), checking it (every problem with the path of
//! the entry at fault, as FA_pipeline_validate answers), and filling in its `${params.x}` and
//! `${tasks.id.result}` placeholders. Nothing here runs a task.

use std::{collections::HashMap, sync::Arc};

use maljan_server::{ToolContext, ToolError};
use serde_json::{Map, Value};

use super::cron::CronSpec;
use crate::{Config, dag};

const TOP_KEYS: &[&str] = &[
    "schema_version",
    "name",
    "description",
    "max_workers",
    "schedule",
    "params",
    "tasks",
];
const TASK_KEYS: &[&str] = &[
    "action",
    "depends_on",
    "retry",
    "timeout",
    "when",
    "idempotency_key",
];
const RETRY_KEYS: &[&str] = &["max_attempts", "backoff", "backoff_cap", "on"];
const WHEN: &[&str] = &["on_success", "on_failure", "always"];
/// The most tasks one definition may have.
const MAX_TASKS: usize = 1000;

/// The definition document: the mapping itself, or the content of a JSON/YAML file under the roots.
pub(crate) async fn load(
    c: &Arc<Config>,
    _ctx: &ToolContext,
    definition: Value,
) -> Result<Value, ToolError> {
    match definition {
        Value::Object(_) => Ok(definition),
        Value::String(path) => {
            let c = c.clone();
            maljan_server::blocking(move || {
                let text = c.existing_file(&path)?.text()?;
                let yaml = path.ends_with(".yaml") || path.ends_with(".yml");
                let parsed: Result<Value, String> = if yaml {
                    serde_yaml_ng::from_str(&text).map_err(|e| e.to_string())
                } else {
                    serde_json::from_str(&text).map_err(|e| e.to_string())
                };
                parsed.map_err(|e| ToolError::bad_argument(format!("definition {path}: {e}")))
            })
            .await
        }
        other => Err(ToolError::bad_argument(format!(
            "definition: expected a mapping or a file path, got {}",
            if other.is_array() {
                "a list"
            } else {
                "a scalar"
            }
        ))),
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|ch| ch.is_whitespace() || ".${}".contains(ch))
}

/// Every problem of a definition, each with the path of the entry at fault; empty when valid.
pub(crate) fn problems(ctx: &ToolContext, d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(doc) = d.as_object() else {
        return vec!["the definition must be a mapping".into()];
    };
    for key in doc.keys().filter(|k| !TOP_KEYS.contains(&k.as_str())) {
        out.push(format!("{key}: unknown key"));
    }
    if doc.get("schema_version") != Some(&Value::from(1)) {
        out.push("schema_version: must be 1".into());
    }
    match doc.get("name").and_then(Value::as_str) {
        Some(n) if !n.trim().is_empty() => {}
        _ => out.push("name: a non-empty string is required".into()),
    }
    if let Some(w) = doc.get("max_workers")
        && !w.as_u64().is_some_and(|w| (1..=64).contains(&w))
    {
        out.push("max_workers: an integer from 1 to 64".into());
    }
    if let Some(s) = doc.get("schedule") {
        let cron = s.get("cron").and_then(Value::as_str).unwrap_or_default();
        let zone = s.get("timezone").and_then(Value::as_str);
        if let Err(e) = CronSpec::parse(cron, zone) {
            out.push(format!("schedule: {e}"));
        }
    }
    let declared: Vec<&str> = match doc.get("params") {
        None => Vec::new(),
        Some(Value::Object(p)) => {
            for k in p.keys().filter(|k| !is_name(k)) {
                out.push(format!("params.{k}: not a valid parameter name"));
            }
            p.keys().map(String::as_str).collect()
        }
        Some(_) => {
            out.push("params: must be a mapping".into());
            Vec::new()
        }
    };
    let Some(tasks) = doc
        .get("tasks")
        .and_then(Value::as_object)
        .filter(|t| !t.is_empty())
    else {
        out.push("tasks: a non-empty mapping of task id to task is required".into());
        return out;
    };
    if tasks.len() > MAX_TASKS {
        out.push(format!("tasks: at most {MAX_TASKS} tasks"));
    }
    let mut deps: Vec<(&str, Vec<String>)> = Vec::new();
    for (id, task) in tasks {
        let at = format!("tasks.{id}");
        if !is_name(id) {
            out.push(format!(
                "{at}: a task id has no whitespace, '.', '$', '{{' or '}}'"
            ));
        }
        let Some(t) = task.as_object() else {
            out.push(format!("{at}: must be a mapping"));
            continue;
        };
        for key in t.keys().filter(|k| !TASK_KEYS.contains(&k.as_str())) {
            out.push(format!("{at}.{key}: unknown key"));
        }
        match t.get("action").and_then(Value::as_array) {
            Some(a) if (1..=2).contains(&a.len()) => match a[0].as_str() {
                Some(name) if ctx.has_tool(name) => {}
                Some(name) => out.push(format!(
                    "{at}.action: unknown action '{name}' (not served here)"
                )),
                None => out.push(format!("{at}.action: must start with the action's name")),
            },
            _ => out.push(format!(
                "{at}.action: [\"FA_name\", {{kwargs}}] is required"
            )),
        }
        if let Some(a) = t.get("action") {
            placeholder_problems(a, &at, &declared, &mut out);
        }
        let listed: Vec<String> = match t.get("depends_on") {
            None => Vec::new(),
            Some(Value::Array(d)) if d.iter().all(Value::is_string) => d
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            Some(_) => {
                out.push(format!("{at}.depends_on: a list of task ids"));
                Vec::new()
            }
        };
        deps.push((id.as_str(), listed));
        if let Some(w) = t.get("when")
            && !w.as_str().is_some_and(|w| WHEN.contains(&w))
        {
            out.push(format!("{at}.when: one of {}", WHEN.join(", ")));
        }
        if let Some(x) = t.get("timeout")
            && !x.as_f64().is_some_and(|x| x > 0.0 && x.is_finite())
        {
            out.push(format!("{at}.timeout: a positive number of seconds"));
        }
        if let Some(r) = t.get("retry") {
            match r.as_object() {
                None => out.push(format!("{at}.retry: must be a mapping")),
                Some(r) => {
                    for key in r.keys().filter(|k| !RETRY_KEYS.contains(&k.as_str())) {
                        out.push(format!("{at}.retry.{key}: unknown key"));
                    }
                    if let Some(m) = r.get("max_attempts")
                        && !m.as_u64().is_some_and(|m| (1..=100).contains(&m))
                    {
                        out.push(format!("{at}.retry.max_attempts: an integer from 1 to 100"));
                    }
                    for key in ["backoff", "backoff_cap"] {
                        if let Some(b) = r.get(key)
                            && !b.as_f64().is_some_and(|b| (0.0..=3600.0).contains(&b))
                        {
                            out.push(format!("{at}.retry.{key}: seconds from 0 to 3600"));
                        }
                    }
                }
            }
        }
    }
    if let Err(e) = dag::graph(deps.iter().map(|(id, d)| (*id, d.as_slice()))) {
        out.push(format!("tasks: {}", e.replace("node", "task")));
    }
    out
}

/// `${params.x}` must name a declared parameter; `${tasks.id.result}` must be a whole string.
fn placeholder_problems(v: &Value, at: &str, declared: &[&str], out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("${") {
                let Some(end) = rest[i..].find('}') else {
                    break;
                };
                let body = &rest[i + 2..i + end];
                let whole = s.len() == rest.len() && i == 0 && end + 1 == rest.len();
                let bad = match (body.strip_prefix("params."), body.strip_prefix("tasks.")) {
                    (Some(p), _) if !declared.contains(&p) => {
                        Some(format!("${{params.{p}}} names no declared parameter"))
                    }
                    (_, Some(t)) if !(t.ends_with(".result") && whole) => {
                        Some("use ${tasks.<id>.result} as a whole string".to_string())
                    }
                    _ => None,
                };
                out.extend(bad.map(|b| format!("{at}.action: {b}")));
                rest = &rest[i + end + 1..];
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| placeholder_problems(x, at, declared, out)),
        Value::Object(m) => m
            .values()
            .for_each(|x| placeholder_problems(x, at, declared, out)),
        _ => {}
    }
}

/// Fills in `${params.x}` and `${tasks.id.result}`.
pub(crate) fn substitute(
    v: &Value,
    params: &Map<String, Value>,
    results: &HashMap<String, Option<Value>>,
) -> Value {
    match v {
        Value::String(s) => {
            if let Some(body) = s.strip_prefix("${").and_then(|b| b.strip_suffix('}'))
                && !body.contains('}')
            {
                if let Some(t) = body
                    .strip_prefix("tasks.")
                    .and_then(|t| t.strip_suffix(".result"))
                {
                    return results.get(t).cloned().flatten().unwrap_or(Value::Null);
                }
                if let Some(p) = body.strip_prefix("params.")
                    && let Some(value) = params.get(p)
                {
                    return value.clone();
                }
            }
            let mut text = s.clone();
            for (name, value) in params {
                let shown = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text = text.replace(&format!("${{params.{name}}}"), &shown);
            }
            Value::String(text)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, params, results)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), substitute(x, params, results)))
                .collect(),
        ),
        other => other.clone(),
    }
}

pub(crate) fn checked(ctx: &ToolContext, d: &Value) -> Result<(), ToolError> {
    let found = problems(ctx, d);
    if found.is_empty() {
        return Ok(());
    }
    Err(ToolError::bad_argument(format!(
        "the pipeline definition is invalid: {}",
        found.join("; ")
    ))
    .with_remediation("FA_pipeline_validate lists every problem with its path"))
}

/// The run's parameters: the definition's defaults, overridden by the caller's.
pub(crate) fn merged_params(d: &Value, given: Map<String, Value>) -> Map<String, Value> {
    let mut out = d
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    out.extend(given);
    out
}

pub(crate) fn levels(tasks: &Map<String, Value>) -> HashMap<String, usize> {
    fn level(id: &str, tasks: &Map<String, Value>, memo: &mut HashMap<String, usize>) -> usize {
        if let Some(&l) = memo.get(id) {
            return l;
        }
        let deps = depends_on(&tasks[id]);
        let l = deps
            .iter()
            .map(|d| level(d, tasks, memo) + 1)
            .max()
            .unwrap_or(0);
        memo.insert(id.to_string(), l);
        l
    }
    let mut memo = HashMap::new();
    for id in tasks.keys() {
        level(id, tasks, &mut memo);
    }
    memo
}

pub(crate) fn depends_on(task: &Value) -> Vec<String> {
    (task
        .get("depends_on")
        .and_then(Value::as_array)
        .into_iter()
        .flatten())
    .filter_map(Value::as_str)
    .map(str::to_string)
    .collect()
}

pub(crate) fn tasks_of(d: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    d.get("tasks")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_in_and_a_whole_one_keeps_its_type() {
        let params = json!({"n": 3, "dir": "out"}).as_object().unwrap().clone();
        let results = HashMap::from([("a".to_string(), Some(json!({"bytes": 5})))]);
        let action = json!(["FA_x", {"count": "${params.n}", "path": "/r/${params.dir}/${params.n}.txt", "prev": "${tasks.a.result}", "other": "${env.HOME}"}]);
        assert_eq!(
            substitute(&action, &params, &results),
            json!(["FA_x", {"count": 3, "path": "/r/out/3.txt", "prev": {"bytes": 5}, "other": "${env.HOME}"}])
        );
    }

    #[test]
    fn a_task_result_placeholder_must_be_the_whole_string() {
        let mut out = Vec::new();
        placeholder_problems(
            &json!({"x": "see ${tasks.a.result}"}),
            "tasks.b",
            &[],
            &mut out,
        );
        placeholder_problems(&json!({"x": "${tasks.a.result}"}), "tasks.c", &[], &mut out);
        assert_eq!(
            out,
            vec!["tasks.b.action: use ${tasks.<id>.result} as a whole string"]
        );
    }
}
