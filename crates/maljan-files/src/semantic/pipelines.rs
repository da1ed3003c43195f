//! pipeline_create, pipeline_run and pipeline_status: pipelines stored under a name and run
//! by the same engine as FA_pipeline_run, under the semantic policy.
//!
//! A stored pipeline may name only the allowed actions (by default the `FA_storage_*` actions
//! the permissions cover), and every storage location its tasks name is checked against the
//! roots before the run starts, with its parameters filled in: a location that only a task's
//! result would give (`${tasks.x.result}`) cannot be checked, so it is refused.

use std::{collections::HashMap, sync::Arc};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{add, refused};
use crate::{
    Config,
    automation::{definition, pipeline},
};

const READ_ACTIONS: &[&str] = &[
    "FA_storage_exists",
    "FA_storage_stat",
    "FA_storage_list",
    "FA_storage_checksum",
    "FA_storage_verify",
    "FA_storage_read_text",
    "FA_storage_schemes",
];
const WRITE_ACTIONS: &[&str] = &[
    "FA_storage_mkdir",
    "FA_storage_write_text",
    "FA_storage_copy",
    "FA_storage_copy_tree",
];
const OVERWRITE_ACTIONS: &[&str] = &["FA_storage_sync"];
const DELETE_ACTIONS: &[&str] = &["FA_storage_move", "FA_storage_delete"];
/// The arguments of the storage actions that name a location.
const LOCATION_ARGS: &[&str] = &["uri", "source", "target", "local_path"];

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// The name the definition is stored under: 1 to 100 characters: letters, digits, '.', '_'
    /// and '-', starting with a letter or a digit.
    name: String,
    /// A pipeline definition, schema_version 1: {"schema_version": 1, "tasks": {"<task id>":
    /// {"action": ["FA_storage_copy", {"source": "s3://in/${params.date}.csv", "target":
    /// "sftp://host/in/${params.date}.csv"}], "depends_on": ["<task id>"]}}}. Optional
    /// top-level keys: description, max_workers, params (defaults). Only the actions this
    /// server allows may be named, and the storage actions stay inside the allowed locations.
    definition: Map<String, Value>,
    /// Replace a definition already stored under this name. The server must allow overwriting
    /// as well.
    overwrite: Option<bool>,
    /// When true, validate and report, but store nothing.
    dry_run: Option<bool>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The name the definition is stored under.
    name: String,
    /// Parameters of this run; they fill ${params.<name>} and override the definition's
    /// defaults. Do not put secrets here: they are recorded with the run.
    params: Option<Map<String, Value>>,
    /// When true, change nothing and report what the call would do.
    dry_run: Option<bool>,
    /// Return at once with status 'running' and poll pipeline_status with the run_id.
    background: Option<bool>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    /// The run to report, as pipeline_run returned it.
    run_id: Option<String>,
    /// Without run_id: only the runs of this pipeline.
    name: Option<String>,
    /// Without run_id: how many runs, newest first. Default 5.
    limit: Option<i64>,
}

fn checked_name(name: &str) -> Result<&str, ToolError> {
    let ok = (1..=100).contains(&name.len())
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c));
    if ok {
        Ok(name)
    } else {
        Err(ToolError::bad_argument(
            "a pipeline name is 1 to 100 characters: letters, digits, '.', '_' and '-', starting with a letter or a digit",
        ))
    }
}

impl Config {
    /// The actions a stored pipeline may name.
    fn pipeline_actions(&self) -> Vec<String> {
        let p = &self.semantic.policy;
        if let Some(given) = &p.pipeline_actions {
            return given.clone();
        }
        let mut out: Vec<&str> = READ_ACTIONS.to_vec();
        if p.allow_write {
            out.extend(WRITE_ACTIONS);
            if p.allow_overwrite {
                out.extend(OVERWRITE_ACTIONS);
            }
            if p.allow_delete {
                out.extend(DELETE_ACTIONS);
            }
        }
        out.into_iter().map(str::to_string).collect()
    }

    /// Every task's action, checked against the allowed actions; nested action names (an
    /// action list inside an argument) are refused, as they would run unchecked.
    fn allowed_tasks(
        &self,
        ctx: &ToolContext,
        d: &Value,
    ) -> Result<Vec<(String, crate::executor::Action)>, ToolError> {
        let allowed = self.pipeline_actions();
        let mut out = Vec::new();
        for (id, task) in definition::tasks_of(d) {
            let action = self.parse_action(ctx, &task["action"], 0).map_err(|e| {
                ToolError::bad_argument(format!("tasks.{id}.action: {}", e.message))
            })?;
            if !allowed.contains(&action.name) {
                return Err(refused(
                    "action_not_allowed",
                    format!(
                        "tasks.{id}: {} is not an action this server's pipelines may run",
                        action.name
                    ),
                    &format!("use one of: {}", allowed.join(", ")),
                ));
            }
            if names_an_action(&Value::Object(action.args.clone())) {
                return Err(refused(
                    "action_not_allowed",
                    format!("tasks.{id}: an argument names another action"),
                    "a pipeline task runs one storage action; make each action its own task",
                ));
            }
            out.push((id.clone(), action));
        }
        Ok(out)
    }

    async fn stored(&self, name: &str) -> Result<Option<Value>, ToolError> {
        match &self.semantic.policy.pipeline_dir {
            None => Ok(self
                .semantic
                .pipelines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .cloned()),
            Some(dir) => {
                let path = dir.join(format!("{name}.json"));
                match tokio::fs::read(&path).await {
                    Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                        ToolError::tool_failed(format!(
                            "the stored pipeline {name} is unreadable: {e}"
                        ))
                    }),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(ToolError::io(&format!("pipeline {name}"), e)),
                }
            }
        }
    }

    async fn store(&self, name: &str, doc: &Value) -> Result<(), ToolError> {
        match &self.semantic.policy.pipeline_dir {
            None => {
                (self
                    .semantic
                    .pipelines
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()))
                .insert(name.to_string(), doc.clone());
                Ok(())
            }
            Some(dir) => {
                let shown = format!("pipeline {name}");
                tokio::fs::create_dir_all(dir)
                    .await
                    .map_err(|e| ToolError::io(&shown, e))?;
                let part = dir.join(format!(".{name}.json.part"));
                let text = serde_json::to_vec_pretty(doc).expect("a JSON value serialises");
                tokio::fs::write(&part, text)
                    .await
                    .map_err(|e| ToolError::io(&shown, e))?;
                tokio::fs::rename(&part, dir.join(format!("{name}.json")))
                    .await
                    .map_err(|e| ToolError::io(&shown, e))
            }
        }
    }

    fn pipeline_location(&self) -> String {
        match &self.semantic.policy.pipeline_dir {
            None => "memory (kept until the server stops)".into(),
            Some(dir) => dir.to_string_lossy().into_owned(),
        }
    }
}

fn names_an_action(v: &Value) -> bool {
    match v {
        Value::String(s) => s.starts_with("FA_"),
        Value::Array(a) => a.iter().any(names_an_action),
        Value::Object(m) => m.values().any(names_an_action),
        _ => false,
    }
}

async fn pipeline_create(
    c: Arc<Config>,
    ctx: ToolContext,
    a: CreateArgs,
) -> Result<Value, ToolError> {
    c.require_write("pipeline_create")?;
    let name = checked_name(&a.name)?;
    let mut doc = Map::new();
    doc.insert("name".into(), json!(name));
    doc.extend(a.definition.into_iter().filter(|(k, _)| k != "name"));
    let doc = Value::Object(doc);
    if doc.get("schedule").is_some() {
        return Err(refused(
            "action_not_allowed",
            "a stored pipeline cannot carry a schedule",
            "run it with pipeline_run; schedules are the operator's (FA_schedule_*)",
        ));
    }
    definition::checked(&ctx, &doc)?;
    let tasks = c.allowed_tasks(&ctx, &doc)?;
    let size = doc.to_string().len() as u64;
    let max = c.semantic.policy.max_write_bytes;
    if size > max {
        return Err(refused(
            "limit_exceeded",
            format!("the definition is {size} bytes and this server stores at most {max}"),
            "split the pipeline, or start the server with a larger --max-write-bytes",
        ));
    }
    let exists = c.stored(name).await?.is_some();
    if exists {
        c.may_replace(
            &format!("the pipeline {name}"),
            a.overwrite.unwrap_or(false),
        )?;
    }
    let mut actions: Vec<String> = tasks.iter().map(|(_, t)| t.name.clone()).collect();
    actions.sort();
    actions.dedup();
    let dry_run = a.dry_run.unwrap_or(false);
    if !dry_run {
        c.store(name, &doc).await?;
    }
    Ok(json!({
        "name": name,
        "location": c.pipeline_location(),
        "persistent": c.semantic.policy.pipeline_dir.is_some(),
        "tasks": tasks.len(),
        "actions": actions,
        "overwrites": exists,
        "dry_run": dry_run,
        "stored": !dry_run,
    }))
}

/// The definition a run executes: each task's arguments by name, every location checked
/// against the roots with the run's parameters filled in, `overwrite` forced off where the
/// server does not allow replacing, and a deleting sync refused without --allow-delete.
fn guarded_definition(
    c: &Config,
    ctx: &ToolContext,
    d: &Value,
    params: &Map<String, Value>,
) -> Result<Value, ToolError> {
    let policy = &c.semantic.policy;
    let mut out = d.clone();
    for (id, action) in c.allowed_tasks(ctx, d)? {
        let mut args = action.args;
        for key in LOCATION_ARGS {
            let Some(raw) = args.get(*key) else { continue };
            if raw.to_string().contains("${tasks.") {
                return Err(refused(
                    "outside_root",
                    format!(
                        "tasks.{id}.{key} comes from another task's result and cannot be checked before the run"
                    ),
                    "name the location in the definition or in a parameter",
                ));
            }
            match definition::substitute(raw, params, &HashMap::new()) {
                Value::String(at) => {
                    c.guarded(&at)?;
                }
                _ => {
                    return Err(ToolError::bad_argument(format!(
                        "tasks.{id}.{key} must be a storage URI"
                    )));
                }
            }
        }
        if action.name == "FA_storage_sync" && args.get("delete") == Some(&json!(true)) {
            c.require_delete("pipeline_run")?;
        }
        if !policy.allow_overwrite && args.contains_key("overwrite") {
            args.insert("overwrite".into(), json!(false));
        }
        out["tasks"][&id]["action"] = json!([action.name, args]);
    }
    Ok(out)
}

/// A run as the tools answer it: task results larger than file_read would return are left
/// out (pipeline_status has them by run_id as well).
fn shown_run(c: &Config, run: &pipeline::RunOut) -> Value {
    let mut v = serde_json::to_value(run).expect("a run serialises");
    let max = c.semantic.policy.max_read_bytes as usize;
    if let Some(tasks) = v.get_mut("tasks").and_then(Value::as_object_mut) {
        for task in tasks.values_mut() {
            if task
                .get("result")
                .is_some_and(|r| r.to_string().len() > max)
            {
                task["result"] = Value::Null;
                task["result_omitted"] = json!(true);
            }
        }
    }
    v
}

async fn pipeline_run(c: Arc<Config>, ctx: ToolContext, a: RunArgs) -> Result<Value, ToolError> {
    c.require_write("pipeline_run")?;
    let name = checked_name(&a.name)?;
    let Some(stored) = c.stored(name).await? else {
        return Err(
            ToolError::no_such_file(format!("no pipeline named {name} is stored"))
                .with_remediation("store it with pipeline_create first"),
        );
    };
    let given = a.params.unwrap_or_default();
    let params = definition::merged_params(&stored, given.clone());
    let d = guarded_definition(&c, &ctx, &stored, &params)?;
    let (dry_run, background) = (a.dry_run.unwrap_or(false), a.background.unwrap_or(false));
    let run = if dry_run {
        pipeline::plan(&c, &ctx, &d, given)?
    } else if background {
        let handle = c.automation.handle()?;
        // A background run counts one level deeper than this call and carries its origins
        // (refused before anything is recorded when it would start itself again).
        let run_ctx = handle.context_for(
            Some(&ctx),
            &pipeline::origin_of(&d),
            handle.stopped().child_token(),
        )?;
        let (run_id, params) = pipeline::record_new(&c, &ctx, &d, given).await?;
        let (c2, id) = (c.clone(), run_id.clone());
        tokio::spawn(async move {
            if let Err(e) = pipeline::execute_recorded(&c2, &run_ctx, &id, &d, params).await {
                tracing::warn!(error = %e.message, "pipeline_run: a background run failed");
            }
        });
        return Ok(json!({
            "name": name,
            "run_id": run_id,
            "status": "running",
            "dry_run": false,
            "background": true,
            "ok": true,
            "run": null,
        }));
    } else {
        pipeline::run_new(&c, &ctx, d, given).await?
    };
    let shown = shown_run(&c, &run);
    Ok(json!({
        "name": name,
        "run_id": shown["run_id"],
        "status": run.status,
        "dry_run": dry_run,
        "background": false,
        "ok": run.status == "succeeded" || run.status == "planned",
        "run": shown,
    }))
}

async fn pipeline_status(c: Arc<Config>, a: StatusArgs) -> Result<Value, ToolError> {
    let runs = match a.run_id {
        Some(id) => match pipeline::read_run(&c, &id).await? {
            Some(run) => vec![run],
            None => {
                return Err(ToolError::no_such_file(format!("no pipeline run {id}"))
                    .with_remediation("pass a run_id pipeline_run returned"));
            }
        },
        None => {
            let limit = a.limit.unwrap_or(5);
            if limit < 1 {
                return Err(ToolError::bad_argument("limit must be 1 or more"));
            }
            let cap = c.semantic.policy.max_results as i64;
            pipeline::history(&c, a.name, limit.min(cap)).await?
        }
    };
    let runs: Vec<Value> = runs.iter().map(|r| shown_run(&c, r)).collect();
    Ok(json!({"count": runs.len(), "runs": runs}))
}

pub(super) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "pipeline_create",
            "Validate a pipeline definition and store it under a name, where pipeline_run finds it. Nothing is run. Needs a server that allows writing. Every problem of the definition is reported with the path of the entry it is about.",
        )
        .writes(),
        pipeline_create,
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "pipeline_run",
            "Run a pipeline stored with pipeline_create and return the run: its run_id, its status and every task with its result or error. With dry_run=true nothing is executed and the tasks come back 'planned', in order. Needs a server that allows writing. The run_id is also the correlation ID of everything the run does.",
        )
        .destructive()
        .not_idempotent()
        .timeout_s(3600),
        pipeline_run,
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "pipeline_status",
            "Report pipeline runs: one run by its run_id, or the latest recorded runs of one pipeline (name) or of all. Each run has its status and the state of every task.",
        ),
        |c, _ctx, a: StatusArgs| pipeline_status(c, a),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_names_are_short_plain_words() {
        assert!(checked_name("nightly-2026.v1").is_ok());
        for bad in ["", "-x", "a/b", "a b", &"x".repeat(101)] {
            assert!(checked_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_argument_that_names_an_action_is_found_at_any_depth() {
        assert!(names_an_action(
            &json!({"actions": [["FA_delete_file", {}]]})
        ));
        assert!(!names_an_action(&json!({"uri": "s3://b/k"})));
    }
}
