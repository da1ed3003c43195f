//! maljan-agent: the model half of `maljan analyze` — triage, then an analyst model calling the
//! MCP tools, then a judge model giving a verdict an analyst can check.
//!
//! It owns the model providers (`llm`: OpenAI-compatible Chat Completions and Anthropic Messages,
//! with fallbacks), the tool catalog a model sees (`catalog`, built from each job's manifests),
//! the loop and its guards (`analyst`, `guards`), the judge stage and its checks (`judge`), the
//! facts table every verdict rests on (`facts`), the deterministic verdict that stands without a
//! model (`heuristic`), the stages and their budgets (`stages`), what a run records besides the
//! conversation (`record`: ledger notes, token usage, byte counts, stage outcomes), the job's
//! events kept in the ledger (`events`), the stages of a run (`run`), the one job pipeline every front end calls (`pipeline`) and the
//! queue's workers that run it (`worker`).
//!
//! It depends on the client runtime (every tool call goes through a job's `ServerHandle`, so it
//! is ledgered with the model's arguments, under the breaker, the cap and the real timeouts) and
//! on maljan-triage (the fixed plan and the report). It must not depend on any concrete server
//! crate, on rmcp, or on a transport; the runtime never depends on it.

pub mod analyst;
pub mod catalog;
pub mod events;
pub mod facts;
mod facts_from;
pub mod guards;
pub mod heuristic;
pub mod judge;
pub mod llm;
pub mod pipeline;
pub mod record;
pub mod run;
pub mod stages;
pub mod worker;

pub use catalog::{Catalog, CatalogTool};
pub use events::JobEvents;
pub use llm::{Endpoint, Models, ProviderKind};
pub use pipeline::{Analysis, Setup};
pub use run::{AgentOptions, RunFigures, analyze, analyze_with_figures, run_stages};
pub use stages::Stages;
