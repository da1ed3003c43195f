//! The scripted model server (testkit's `fixture-model`) is checked by the official `openai` and
//! `anthropic` Python SDKs: they call it and parse its answers, tool calls included, so the
//! fixture the agent is tested against cannot drift from the real wire formats.

use maljan_testkit::{ScriptedModel, peer_env};
use serde_json::{Value, json};

#[test]
fn the_official_sdks_parse_the_fixtures_answers_and_tool_calls() {
    let py = peer_env("MALJAN_PY");
    let model = ScriptedModel::start(&json!({"model": "scripted-1", "turns": [
        {"tool_calls": [{"id": "call_a", "name": "hashes", "arguments": "{\"algo\": \"sha256\"}"}],
         "usage": {"input_tokens": 11, "output_tokens": 3}},
        {"text": "done [ev_0001]"},
        {"status": 429, "retry_after": 7},
        {"tool_calls": [{"id": "toolu_b", "name": "hashes", "arguments": {"algo": "md5"}}],
         "usage": {"input_tokens": 5, "output_tokens": 2}},
        {"text": "fine"},
        {"status": 500},
    ]}));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk_check.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .arg(&model.url)
        .output()
        .expect("run the SDK check");
    assert!(
        out.status.success(),
        "the SDKs could not read the fixture:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(
        got["openai_tool"],
        json!(["call_a", "hashes", {"algo": "sha256"}])
    );
    assert_eq!(got["openai_finish"], "tool_calls");
    assert_eq!(got["openai_usage"], json!([11, 3]));
    assert_eq!(got["openai_text"], "done [ev_0001]");
    assert_eq!(got["openai_429"], json!([429, "7"]));
    assert_eq!(
        got["anthropic_tool"],
        json!(["toolu_b", "hashes", {"algo": "md5"}])
    );
    assert_eq!(got["anthropic_stop"], "tool_use");
    assert_eq!(got["anthropic_usage"], json!([5, 2]));
    assert_eq!(got["anthropic_text"], "fine");
    assert_eq!(got["anthropic_500"], 500);
    // What the SDKs sent is logged for the tests: the key as each API carries it.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 6);
    assert_eq!(reqs[0]["auth"], "Bearer test-key");
    // The anthropic SDK carries it as x-api-key or as a bearer token, depending on its version.
    assert!(
        reqs[3]["api_key"] == "test-key" || reqs[3]["auth"] == "Bearer test-key",
        "{}",
        reqs[3]
    );
    assert_eq!(reqs[1]["body"]["messages"][2]["tool_call_id"], "call_a");
}
