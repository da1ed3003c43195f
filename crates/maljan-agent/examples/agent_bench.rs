//! The agent's own cost, on the test corpus against the scripted model (so the model's latency is
//! known and excluded): per analyst step, the time the agent spends besides the model and the
//! tools; and the bytes of tool output the model is sent against the tools' raw answers.
//!
//! `cargo run --release -p maljan-agent --example agent_bench` (builds `maljan` and the fixtures).
//! Writes nothing itself: the figures go in bench/agent.md by hand.

use std::{sync::Arc, time::Duration};

use maljan_agent::{AgentOptions, Endpoint, Models, ProviderKind, Stages, analyze_with_figures};
use maljan_client::{Config, JobSpec, Ledger, Runtime, ServerConfig};
use maljan_testkit::ScriptedModel;
use maljan_triage::TriageOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let files = maljan_triage::corpus::write_corpus(dir.path());
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    // Valid arguments for each tool (iocs_from_file refuses unknown fields); `round` varies one
    // so no two runs are byte-identical.
    let calls = |round: usize| {
        [
            ("strings", json!({"min_len": 4, "limit": 5000 + round})),
            ("iocs_from_file", json!({"limit": 1000 + round})),
            ("hashes", json!({})),
            ("identify_file", json!({})),
            ("entropy", json!({})),
        ]
    };
    println!(
        "| context window | sample | steps | agent time per step (median, excl. model and tools) | raw tool bytes | sent to the model | sent / raw |"
    );
    println!("|---|---|---|---|---|---|---|");
    for context_window in [32768u32, 4096] {
        for (name, path) in &files {
            let mut overhead = Vec::new();
            let (mut raw, mut sent) = (0usize, 0usize);
            for round in 0..5 {
                let mut turns: Vec<_> = calls(round)
                .iter()
                .map(|(c, args)| json!({"tool_calls": [{"name": c, "arguments": args.to_string()}]}))
                .collect();
                turns.push(json!({"text": "done"}));
                turns.push(json!({"text": "{\"verdict\": \"unknown\", \"confidence\": 0, \"summary\": \"\", \"claims\": [], \"techniques\": []}"}));
                let model = ScriptedModel::start(&json!({"turns": turns}));
                let analysis = ServerConfig {
                    command: maljan.to_string_lossy().into_owned(),
                    args: vec![
                        "serve".into(),
                        "analysis".into(),
                        "--root".into(),
                        dir.path().to_string_lossy().into_owned(),
                    ],
                    env: [("MALJAN_LOG".to_string(), "warn".to_string())].into(),
                    enabled: true,
                    ..Default::default()
                };
                let mut config = Config {
                    servers: [("analysis".to_string(), analysis)].into(),
                    ..Default::default()
                };
                config.data_dir = dir.path().join("data");
                let runtime = Runtime::new(config, Ledger::open_in_memory());
                let job = runtime.new_job(JobSpec::for_sample(path)).unwrap();
                let ep = Endpoint {
                    provider: ProviderKind::OpenAi,
                    base_url: model.url.clone(),
                    model: "bench".into(),
                    key: None,
                    context_window,
                    max_output_tokens: 512,
                    timeout: Duration::from_secs(30),
                };
                let (_, figures) = analyze_with_figures(
                    &job,
                    AgentOptions {
                        triage: TriageOptions::default(),
                        models: Some(Arc::new(Models::new(vec![ep]))),
                        stages: Stages::default(),
                        cancel: CancellationToken::new(),
                    },
                )
                .await;
                runtime.shutdown().await;
                overhead.extend(figures.step_overhead);
                raw += figures.raw_bytes;
                sent += figures.sent_bytes;
            }
            overhead.sort();
            let median = overhead
                .get(overhead.len() / 2)
                .copied()
                .unwrap_or_default();
            println!(
                "| {context_window} | {name} | {} | {:.1} µs | {raw} | {sent} | {:.2} |",
                overhead.len(),
                median.as_secs_f64() * 1e6,
                sent as f64 / raw.max(1) as f64
            );
        }
    }
}
