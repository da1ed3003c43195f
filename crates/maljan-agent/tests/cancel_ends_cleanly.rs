//! Cancelling a job (what Ctrl-C does) while the model is thinking ends the run at once: the
//! report is whole, marked cancelled, and the heuristic verdict of what was done stands.

mod common;

use std::time::Duration;

use common::{endpoint, setup};
use maljan_agent::{ProviderKind, Stages};
use maljan_testkit::ScriptedModel;
use maljan_triage::{Status, VerdictSource};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_while_the_model_thinks_writes_a_cancelled_report() {
    let s = setup("sample.elf");
    let model = ScriptedModel::start(&json!({"turns": [{"delay_ms": 20000, "text": "late"}]}));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let poll = model.log.clone();
    tokio::spawn(async move {
        // Cancel once the model has the analyst's first request.
        while !poll.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trigger.cancel();
    });
    let (report, _) = tokio::time::timeout(
        Duration::from_secs(15),
        s.run_cancellable(
            vec![endpoint(&model, "m", ProviderKind::OpenAi)],
            Stages::default(),
            cancel,
        ),
    )
    .await
    .expect("cancellation ends the run without waiting for the model");
    assert_eq!(report.status, Status::Cancelled);
    let agent = report.agent.as_ref().unwrap();
    assert!(agent.cancelled);
    assert_eq!(agent.stages[0].status, "cancelled");
    assert_eq!(agent.stages.len(), 1, "no judge after a cancel");
    let v = report.verdict.as_ref().unwrap();
    assert_eq!(v.source, VerdictSource::Heuristic);
    assert!(v.degradation.as_deref().unwrap().contains("cancelled"));
    let job = s.runtime.ledger().job(s.job.id()).unwrap().unwrap();
    assert_eq!(job.status, "cancelled");
}
