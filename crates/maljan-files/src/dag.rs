//! FA_execute_action_dag: actions as a dependency graph. Static faults (duplicate ids, unknown
//! dependencies, cycles) are refused before anything runs; ready nodes run in parallel up to
//! max_workers; with fail_fast a failed node's dependents are skipped, transitively.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::Arc,
};

use futures::{StreamExt, stream::FuturesUnordered};
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Config,
    executor::{Step, name_hint, step_of, workers},
};

fn default_workers() -> i64 {
    4
}
fn default_true() -> bool {
    true
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

#[derive(Serialize, JsonSchema)]
struct DagOut {
    /// Node id → its step.
    results: BTreeMap<String, Step>,
    succeeded: usize,
    failed: usize,
    skipped: usize,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let meta = |name: &str, desc: &str, t: u64| {
        ToolMeta::new(name, desc)
            .destructive()
            .not_idempotent()
            .timeout_s(t)
    };
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
