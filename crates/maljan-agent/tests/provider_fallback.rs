//! A fallback model is tried only when the provider fails — a 429 (after honouring its
//! Retry-After once), a 500, a dropped connection, an unknown model — and never when a provider
//! refuses the request (a bad key) or because of what a model answered.

mod common;

use common::{endpoint, setup, verdict_text};
use maljan_agent::{ProviderKind, Stages};
use maljan_testkit::ScriptedModel;
use maljan_triage::{Status, VerdictSource};
use serde_json::{Value, json};

fn judge_only() -> Stages {
    Stages::parse("stages = [\"triage\", \"judge\"]", "test").unwrap()
}

async fn with_failing_primary(primary_turns: Value) -> (maljan_triage::Report, usize, usize) {
    let s = setup("notes.txt");
    let primary = ScriptedModel::start(&json!({"turns": primary_turns}));
    let backup = ScriptedModel::start(
        &json!({"turns": [{"text": verdict_text("suspicious", &["ev_0001"])}]}),
    );
    let (report, _) = s
        .run(
            vec![
                endpoint(&primary, "primary", ProviderKind::OpenAi),
                endpoint(&backup, "backup", ProviderKind::Anthropic),
            ],
            judge_only(),
        )
        .await;
    (report, primary.requests().len(), backup.requests().len())
}

fn fell_back(report: &maljan_triage::Report) {
    let v = report.verdict.as_ref().unwrap();
    assert_eq!(v.source, VerdictSource::Agent, "{v:?}");
    assert_eq!(v.model.as_deref(), Some("anthropic/backup"));
    assert!(
        report
            .degradations
            .iter()
            .any(|d| d.contains("fell back to anthropic/backup")),
        "{:?}",
        report.degradations
    );
    assert_eq!(report.status, Status::Degraded);
    let usage = &report.agent.as_ref().unwrap().usage;
    assert_eq!(usage[0].model, "anthropic/backup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_after_its_retry_after_then_the_fallback_answers() {
    let (report, primary, backup) = with_failing_primary(json!([
        {"status": 429, "retry_after": 1}, {"status": 429, "retry_after": 1}
    ]))
    .await;
    assert_eq!(
        (primary, backup),
        (2, 1),
        "once more after Retry-After, then the fallback"
    );
    fell_back(&report);
    assert!(report.degradations.iter().any(|d| d.contains("429")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_fails_over() {
    let (report, primary, backup) =
        with_failing_primary(json!([{"status": 500}, {"status": 500}])).await;
    assert_eq!((primary, backup), (2, 1));
    fell_back(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_over_at_once() {
    let (report, primary, backup) = with_failing_primary(json!([{"drop": true}])).await;
    assert_eq!((primary, backup), (1, 1));
    fell_back(&report);
    assert!(
        report
            .degradations
            .iter()
            .any(|d| d.contains("unreachable"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_fails_over() {
    let (report, primary, backup) =
        with_failing_primary(json!([{"status": 404, "error": "model not found"}])).await;
    assert_eq!((primary, backup), (1, 1));
    fell_back(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_does_not_fail_over_and_the_heuristic_verdict_stands() {
    let (report, primary, backup) =
        with_failing_primary(json!([{"status": 401, "error": "invalid api key"}])).await;
    assert_eq!((primary, backup), (1, 0));
    let v = report.verdict.unwrap();
    assert_eq!(v.source, VerdictSource::Heuristic);
    let why = v.degradation.unwrap();
    assert!(
        why.contains("401") && why.contains("heuristic verdict stands"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_model_answers_never_triggers_the_fallback() {
    // A useless answer from a working provider is the judge's fault to fix, not the provider's.
    let (report, primary, backup) =
        with_failing_primary(json!([{"text": "no idea"}, {"text": "still no idea"}])).await;
    assert_eq!((primary, backup), (2, 0));
    let v = report.verdict.unwrap();
    assert_eq!(v.source, VerdictSource::Heuristic);
    assert!(v.degradation.unwrap().contains("refused 2 times"));
}
