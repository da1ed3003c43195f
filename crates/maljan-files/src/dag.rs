//! FA_execute_action_dag: actions as a dependency graph. Static faults (duplicate ids, unknown
//! dependencies, cycles) are refused before anything runs; ready nodes run in parallel up to
//! max_workers; with fail_fast a failed node's dependents are skipped, transitively.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
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
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world(),
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
    let g = graph(
        a.nodes
            .iter()
            .map(|n| (n.id.as_str(), n.depends_on.as_slice())),
    )
    .map_err(ToolError::bad_argument)?;
    let by_id: HashMap<&str, (usize, &Node)> = a
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), (i, n)))
        .collect();
    let mut settled: HashMap<String, Step> = HashMap::new();
    execute(&g, n, &mut settled, ctx, |id, done| {
        let (index, node) = by_id[id];
        // With fail_fast a node whose dependency failed (or was skipped for that) is skipped.
        let failed_dep = (node.depends_on.iter())
            .find(|d| a.fail_fast && matches!(done[d.as_str()].status, "failed" | "skipped"))
            .cloned();
        let parsed = c.parse_action(ctx, &node.action, index);
        let ctx = ctx.clone();
        async move {
            if let Some(because) = failed_dep {
                return Step {
                    index,
                    action: name_hint(&node.action),
                    status: "skipped",
                    result: None,
                    error: Some(serde_json::json!({"code": "skipped", "message": format!("dependency '{because}' failed"), "remediation": "fix the failed node, or run with fail_fast false"})),
                };
            }
            match parsed {
                Err(e) => step_of(index, name_hint(&node.action), Err(e)),
                Ok(act) => step_of(index, act.name.clone(), ctx.invoke(&act.name, act.args).await),
            }
        }
    })
    .await?;
    let results: BTreeMap<String, Step> = settled.into_iter().collect();
    let count = |s: &str| results.values().filter(|r| r.status == s).count();
    let (succeeded, failed, skipped) = (count("ok"), count("failed"), count("skipped"));
    Ok(DagOut {
        results,
        succeeded,
        failed,
        skipped,
    })
}

/// A checked dependency graph: unique ids, known dependencies, no cycle.
pub(crate) struct Graph<'a> {
    order: Vec<&'a str>,
    dependents: HashMap<&'a str, Vec<&'a str>>,
    deps: HashMap<&'a str, &'a [String]>,
}

/// Checks `nodes` (id, depends_on) before anything runs; the error says what is wrong.
pub(crate) fn graph<'a>(
    nodes: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> Result<Graph<'a>, String> {
    let mut g = Graph {
        order: Vec::new(),
        dependents: HashMap::new(),
        deps: HashMap::new(),
    };
    for (id, deps) in nodes {
        if g.deps.insert(id, deps).is_some() {
            return Err(format!("duplicate node id '{id}'"));
        }
        g.order.push(id);
    }
    let mut indegree: HashMap<&str, usize> = HashMap::new();
    for &id in &g.order {
        indegree.entry(id).or_insert(0);
        for d in g.deps[id] {
            let Some((&known, _)) = g.deps.get_key_value(d.as_str()) else {
                return Err(format!("node '{id}' depends on unknown node '{d}'"));
            };
            g.dependents.entry(known).or_default().push(id);
            *indegree.entry(id).or_insert(0) += 1;
        }
    }
    let mut queue: VecDeque<&str> = (g.order.iter())
        .copied()
        .filter(|id| indegree[id] == 0)
        .collect();
    let mut seen = 0;
    while let Some(id) = queue.pop_front() {
        seen += 1;
        for dep in g.dependents.get(id).into_iter().flatten() {
            let e = indegree.get_mut(dep).expect("every node has a degree");
            *e -= 1;
            if *e == 0 {
                queue.push_back(dep);
            }
        }
    }
    if seen != g.order.len() {
        return Err("the nodes' depends_on form a cycle".into());
    }
    Ok(g)
}

/// Runs a checked graph: each node starts once all its dependencies are settled, up to
/// `workers` at once. `start` sees what has settled so far and returns the node's future;
/// nodes already in `settled` (a resumed run) are not started again.
pub(crate) async fn execute<'a, T, F, Fut>(
    g: &Graph<'a>,
    workers: usize,
    settled: &mut HashMap<String, T>,
    ctx: &ToolContext,
    mut start: F,
) -> Result<(), ToolError>
where
    F: FnMut(&'a str, &HashMap<String, T>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut waiting: HashMap<&str, usize> = (g.order.iter())
        .filter(|id| !settled.contains_key(**id))
        .map(|&id| {
            let open = g.deps[id]
                .iter()
                .filter(|d| !settled.contains_key(d.as_str()))
                .count();
            (id, open)
        })
        .collect();
    let mut ready: VecDeque<&str> = (g.order.iter())
        .copied()
        .filter(|id| waiting.get(id) == Some(&0))
        .collect();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < workers {
            let Some(id) = ready.pop_front() else { break };
            let work = start(id, settled);
            running.push(async move { (id, work.await) });
        }
        let Some((id, out)) = running.next().await else {
            break;
        };
        settled.insert(id.to_string(), out);
        for dep in g.dependents.get(id).into_iter().flatten() {
            if let Some(open) = waiting.get_mut(dep) {
                *open -= 1;
                if *open == 0 {
                    ready.push_back(dep);
                }
            }
        }
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
    }
    Ok(())
}
