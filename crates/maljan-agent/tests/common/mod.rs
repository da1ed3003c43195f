//! Shared by the agent's tests: a job over the real `maljan serve analysis` (stdio) on a corpus
//! sample, and models that are scripted model servers (testkit's `fixture-model`).
#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc, time::Duration};

use maljan_agent::{
    AgentOptions, Endpoint, Models, ProviderKind, RunFigures, Stages, analyze_with_figures,
};
use maljan_client::{Config, Job, JobSpec, Ledger, Runtime, ServerConfig};
use maljan_testkit::ScriptedModel;
use maljan_triage::{Report, TriageOptions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub runtime: Arc<Runtime>,
    pub job: Arc<Job>,
    pub sample: PathBuf,
}

/// A job on the corpus sample `name` (sample.exe, sample.elf, notes.txt) with the built-in
/// analysis server over stdio.
pub fn setup(name: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    let files = maljan_triage::corpus::write_corpus(&samples);
    let sample = files[name].clone();
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let analysis = ServerConfig {
        command: maljan.to_string_lossy().into_owned(),
        args: vec![
            "serve".into(),
            "analysis".into(),
            "--root".into(),
            samples.to_string_lossy().into_owned(),
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
    config.path = dir.path().join("config.toml");
    let runtime = Runtime::new(config, Ledger::open_in_memory());
    let job = runtime.new_job(JobSpec::for_sample(&sample)).unwrap();
    Setup {
        dir,
        runtime,
        job,
        sample,
    }
}

/// An OpenAI-format endpoint on a scripted model.
pub fn endpoint(model: &ScriptedModel, name: &str, kind: ProviderKind) -> Endpoint {
    Endpoint {
        provider: kind,
        base_url: model.url.clone(),
        model: name.into(),
        key: None,
        context_window: 32768,
        max_output_tokens: 512,
        timeout: Duration::from_secs(10),
    }
}

impl Setup {
    pub async fn run(&self, endpoints: Vec<Endpoint>, stages: Stages) -> (Report, RunFigures) {
        self.run_cancellable(endpoints, stages, CancellationToken::new())
            .await
    }

    pub async fn run_cancellable(
        &self,
        endpoints: Vec<Endpoint>,
        stages: Stages,
        cancel: CancellationToken,
    ) -> (Report, RunFigures) {
        let models = (!endpoints.is_empty()).then(|| Arc::new(Models::new(endpoints)));
        let out = analyze_with_figures(
            &self.job,
            AgentOptions {
                triage: TriageOptions::default(),
                models,
                stages,
                cancel,
            },
        )
        .await;
        self.runtime.shutdown().await;
        out
    }

    /// The job's ledger rows.
    pub fn calls(&self) -> Vec<maljan_client::LedgerEntry> {
        self.runtime
            .ledger()
            .calls(Some(self.job.id()), 1000)
            .unwrap()
    }
}

/// A judge answer citing `ids`, as the model's text.
pub fn verdict_text(word: &str, ids: &[&str]) -> String {
    serde_json::json!({
        "verdict": word, "confidence": 0.8, "family": null, "summary": "scripted",
        "claims": [{"text": "the triage found it", "evidence": ids}],
        "techniques": [],
    })
    .to_string()
}

/// The text of every tool result the model was sent.
pub fn tool_results_sent(model: &ScriptedModel) -> Vec<String> {
    // The analyst's last request holds every result so far (the judge's is a fresh conversation).
    let mut out = Vec::new();
    for req in model.requests() {
        let results: Vec<String> = req["body"]["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or("").to_string())
            .collect();
        if !results.is_empty() {
            out = results;
        }
    }
    out
}

pub fn text_of(v: &Value) -> String {
    v.to_string()
}
