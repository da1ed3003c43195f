//! The judge's verdict is believed only when its shape is right and every id it cites is in
//! this job's ledger: a missing id gets one more request naming the exact fault; a second
//! failure leaves the heuristic verdict standing, with the reason.

mod common;

use common::{endpoint, setup, verdict_text};
use maljan_agent::{ProviderKind, Stages};
use maljan_testkit::ScriptedModel;
use maljan_triage::{VerdictSource, VerdictWord};
use serde_json::json;

fn judge_only() -> Stages {
    Stages::parse("stages = [\"triage\", \"judge\"]", "test").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_id_is_sent_back_once_and_the_corrected_verdict_stands() {
    let s = setup("sample.exe");
    let model = ScriptedModel::start(&json!({"turns": [
        {"text": verdict_text("malicious", &["ev_0099"])},
        {"text": verdict_text("malicious", &["ev_0001", "ev_0003"])},
    ]}));
    let (report, _) = s
        .run(
            vec![endpoint(&model, "judge-m", ProviderKind::Anthropic)],
            judge_only(),
        )
        .await;
    let v = report.verdict.unwrap();
    assert_eq!(
        (v.verdict, v.source),
        (VerdictWord::Malicious, VerdictSource::Agent)
    );
    assert_eq!(v.claims[0].evidence, ["ev_0001", "ev_0003"]);
    let ids: Vec<String> = s.calls().into_iter().map(|c| c.ev_id).collect();
    for id in &v.claims[0].evidence {
        assert!(ids.contains(id), "{id} is in the ledger");
    }
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let retry = reqs[1]["body"]["messages"].to_string();
    assert!(
        retry.contains("ev_0099, which is not an evidence id of this job"),
        "{retry}"
    );
    let judge = &report.agent.unwrap().stages[0];
    assert_eq!((judge.name.as_str(), judge.requests), ("judge", 2));
    // The judge read the facts; its malicious verdict on a plain PE has no strong fact under it,
    // so the disagreement stands beside it, naming the facts' own verdict.
    let first = reqs[0]["body"]["messages"].to_string();
    assert!(first.contains("The facts alone give:"), "{first}");
    let d = v.disagreement.expect("a disagreement with the facts");
    assert_ne!(d.facts_verdict, VerdictWord::Malicious);
    assert!(d.reason.contains("no strong fact"), "{}", d.reason);
    assert!(!v.facts.is_empty(), "the agent's verdict carries the facts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_keeps_citing_a_missing_id_leaves_the_heuristic_verdict() {
    let s = setup("sample.exe");
    let model = ScriptedModel::start(&json!({"turns": [
        {"text": verdict_text("malicious", &["ev_0099"])},
        {"text": verdict_text("malicious", &["ev_0098"])},
    ]}));
    let (report, _) = s
        .run(
            vec![endpoint(&model, "judge-m", ProviderKind::OpenAi)],
            judge_only(),
        )
        .await;
    let v = report.verdict.unwrap();
    assert_eq!(v.source, VerdictSource::Heuristic);
    assert_ne!(
        v.verdict,
        VerdictWord::Malicious,
        "the heuristic never says malicious on this PE"
    );
    let why = v.degradation.unwrap();
    assert!(
        why.contains("ev_0098") && why.contains("heuristic verdict stands"),
        "{why}"
    );
    assert!(report.degradations.iter().any(|d| d.contains("refused")));
}
