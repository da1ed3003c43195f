//! The analyst loop's guards, each against the scripted model and the real analysis server:
//! repeats (the second from the ledger, the third refused, repeated repeats end the stage),
//! truncated arguments repaired only by closing brackets and marked so in the ledger, an answer
//! cut to the context window, the step budget ending the stage with a forced write-up, and
//! sample text kept inside the delimited tool results.

mod common;

use common::{endpoint, setup, verdict_text};
use maljan_agent::{ProviderKind, Stages};
use maljan_testkit::ScriptedModel;
use maljan_triage::VerdictSource;
use serde_json::json;

fn call(name: &str, args: &str) -> serde_json::Value {
    json!({"tool_calls": [{"name": name, "arguments": args}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_is_answered_from_the_ledger_then_refused_and_repeats_end_the_stage() {
    let s = setup("sample.exe");
    let model = ScriptedModel::start(&json!({"turns": [
        call("hashes", "{}"),
        call("hashes", "{}"),
        call("hashes", "{}"),
        call("hashes", "{}"),
        {"text": "write-up: hashes seen in [ev_0002]"},
        {"text": verdict_text("unknown", &["ev_0002"])},
    ]}));
    let (report, _) = s
        .run(
            vec![endpoint(&model, "m", ProviderKind::OpenAi)],
            Stages::default(),
        )
        .await;
    let agent = report.agent.as_ref().unwrap();
    let analyst = &agent.stages[0];
    assert_eq!(analyst.name, "analyst");
    assert_eq!(analyst.status, "budget", "{analyst:?}");
    assert!(
        analyst
            .ended_because
            .as_deref()
            .unwrap()
            .contains("repeated identical calls 3 times")
    );
    // Triage's hashes and the analyst's first: the repeats never reached the server.
    let hashes: Vec<_> = s
        .calls()
        .into_iter()
        .filter(|c| c.tool == "hashes")
        .collect();
    assert_eq!(hashes.len(), 2, "{hashes:?}");
    let first = &hashes[1];
    // The model wrote `{}`; the platform filled in the pinned sample path.
    let args: serde_json::Value = serde_json::from_str(&first.args).unwrap();
    assert_eq!(args["path"], s.sample.to_str().unwrap());
    let results: Vec<_> = agent
        .conversation
        .iter()
        .filter(|t| t.role == "tool")
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0].evidence.as_deref(), Some(first.ev_id.as_str()));
    assert!(
        results[1].notes[0].contains("answered from the ledger"),
        "{:?}",
        results[1]
    );
    assert!(results[1].text.as_deref().unwrap().contains(&first.ev_id));
    assert!(results[2].text.as_deref().unwrap().contains("refused"));
    let notes = s.runtime.ledger().call_notes(s.job.id()).unwrap();
    assert!(
        notes
            .iter()
            .any(|(ev, n)| ev == &first.ev_id && n.contains("answered from the ledger"))
    );
    // The forced write-up was asked for, and the judge's verdict stands.
    assert!(
        agent
            .conversation
            .iter()
            .any(|t| t.role == "user" && t.text.as_deref().unwrap_or("").contains("Stop here"))
    );
    let v = report.verdict.unwrap();
    assert_eq!(v.source, VerdictSource::Agent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_arguments_are_repaired_by_closing_brackets_and_marked_in_the_ledger() {
    let s = setup("notes.txt");
    let model = ScriptedModel::start(&json!({"turns": [
        call("strings", "{\"min_len\": 6, \"encodings\": [\"ascii\""),
        call("strings", "{\"min_len\": "),
        {"text": "done"},
        {"text": verdict_text("unknown", &["ev_0001"])},
    ]}));
    let (report, _) = s
        .run(
            vec![endpoint(&model, "m", ProviderKind::OpenAi)],
            Stages::default(),
        )
        .await;
    let agent = report.agent.unwrap();
    let strings: Vec<_> = s
        .calls()
        .into_iter()
        .filter(|c| c.tool == "strings")
        .collect();
    assert_eq!(
        strings.len(),
        2,
        "triage's and the repaired one; the unrepairable one is not sent"
    );
    let repaired = &strings[1];
    let args: serde_json::Value = serde_json::from_str(&repaired.args).unwrap();
    assert_eq!(args["min_len"], 6);
    assert_eq!(args["encodings"], json!(["ascii"]));
    let notes = s.runtime.ledger().call_notes(s.job.id()).unwrap();
    let note = notes
        .iter()
        .find(|(ev, _)| ev == &repaired.ev_id)
        .expect("a ledger note");
    assert!(note.1.contains("repaired by closing brackets"), "{note:?}");
    assert!(
        note.1.contains("[\"ascii\""),
        "the note keeps the arguments as written"
    );
    let results: Vec<_> = agent
        .conversation
        .iter()
        .filter(|t| t.role == "tool")
        .collect();
    assert!(results[0].notes.iter().any(|n| n.contains("repaired")));
    assert!(
        results[1]
            .text
            .as_deref()
            .unwrap()
            .contains("closing brackets does not make them so")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_cut_to_the_context_window_and_says_how_to_page() {
    let s = setup("sample.exe");
    let model = ScriptedModel::start(&json!({"turns": [
        call("strings", "{\"min_len\": 4, \"limit\": 5000}"),
        {"text": "done"},
        {"text": verdict_text("unknown", &["ev_0001"])},
    ]}));
    let mut ep = endpoint(&model, "m", ProviderKind::OpenAi);
    ep.context_window = 1024;
    ep.max_output_tokens = 128;
    let (report, figures) = s.run(vec![ep], Stages::default()).await;
    let agent = report.agent.unwrap();
    let result = agent
        .conversation
        .iter()
        .find(|t| t.role == "tool")
        .unwrap();
    assert!(
        result
            .notes
            .iter()
            .any(|n| n.starts_with("cut:") && n.contains("offset")),
        "{:?}",
        result.notes
    );
    // What the model was sent for the call fits its share of a 1024-token window.
    let sent = common::tool_results_sent(&model);
    assert!(sent[0].len() < 2600, "{} bytes", sent[0].len());
    assert!(sent[0].contains("more items") || sent[0].contains("more bytes"));
    assert!(figures.sent_bytes < figures.raw_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_budget_ends_the_stage_with_a_forced_write_up_and_results_are_fenced() {
    let s = setup("notes.txt");
    let model = ScriptedModel::start(&json!({"turns": [
        call("iocs_from_file", "{}"),
        call("strings", "{}"),
        {"text": "write-up: indicators in [ev_0006]"},
        {"text": verdict_text("suspicious", &["ev_0001"])},
    ]}));
    let mut stages = Stages::default();
    stages.budgets.max_steps = 2;
    let (report, _) = s
        .run(vec![endpoint(&model, "m", ProviderKind::OpenAi)], stages)
        .await;
    let agent = report.agent.unwrap();
    assert_eq!(agent.stages[0].status, "budget");
    assert!(
        agent.stages[0]
            .ended_because
            .as_deref()
            .unwrap()
            .contains("step budget")
    );
    assert_eq!(agent.stages[0].requests, 3, "two steps and the write-up");
    let reqs = model.requests();
    // The write-up request says why; the judge reads the write-up inside a fence.
    let write_up_req = reqs[2]["body"]["messages"].to_string();
    assert!(write_up_req.contains("step budget ran out"));
    let judge_req = reqs[3]["body"]["messages"].to_string();
    assert!(judge_req.contains("write-up: indicators"));
    assert!(judge_req.contains("UNTRUSTED-"));
    // Each tool result starts with its evidence id and holds the sample's text inside the fence.
    for t in common::tool_results_sent(&model) {
        assert!(t.starts_with("[ev_"), "{t}");
        let fence = t.find("<<<UNTRUSTED-").expect("a fence");
        assert!(t[fence..].contains("UNTRUSTED-") && t.contains(">>>"));
    }
    assert_eq!(report.verdict.unwrap().verdict.as_str(), "suspicious");
}
