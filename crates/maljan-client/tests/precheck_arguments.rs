//! A call to a third-party server (the Python MCP SDK's py_server.py: echo(message: str),
//! add(a: int, b: int)) is checked before it is sent: a tool the server did not list is
//! `no_such_tool`, arguments its inputSchema refuses are `bad_argument`, each with a remedy, each
//! recorded in the ledger once with its code — and none of them reaches the server, which the
//! test proves from the server's side: every line the client writes to the server's stdin is
//! copied to a file (`tee`) before the server reads it.
//!
//! Needs MALJAN_PY (`eval "$(scripts/peers.sh)"`).

mod common;
use common::{Scratch, peers_dir, quick};

use maljan_client::{BreakerConfig, JobSpec, ServerConfig, TransportKind, precheck::NO_SUCH_TOOL};
use maljan_testkit::peer_env;
use serde_json::{Value, json};

/// py_server.py over stdio, its stdin copied line by line into `wire`.
fn tapped_py_server(wire: &std::path::Path) -> ServerConfig {
    let script = peers_dir().join("py_server.py");
    ServerConfig {
        transport: TransportKind::Stdio,
        command: "sh".into(),
        args: vec![
            "-c".into(),
            r#"tee -a "$0" | exec "$1" "$2""#.into(),
            wire.display().to_string(),
            peer_env("MALJAN_PY"),
            script.display().to_string(),
        ],
        enabled: true,
        ..Default::default()
    }
}

/// The tools/call requests the server was sent, as (tool, arguments).
fn calls_on_the_wire(wire: &std::path::Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(wire)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| {
            (
                m["params"]["name"].as_str().unwrap_or_default().to_string(),
                m["params"]["arguments"].clone(),
            )
        })
        .collect()
}

fn breaker() -> BreakerConfig {
    // The Python interpreter's start can take a few seconds on a busy machine.
    BreakerConfig {
        call_timeout_seconds: 30.0,
        ..quick()
    }
}

#[tokio::test]
async fn unknown_tools_and_schema_errors_are_refused_before_the_call_and_recorded_once() {
    let s = Scratch::new();
    let wire = s.dir.path().join("wire.jsonl");
    let rt = s.runtime(vec![("py", tapped_py_server(&wire))], breaker());
    let job = rt.new_job(JobSpec::labelled("precheck")).unwrap();
    let h = job.server("py").unwrap();

    // A call that matches: sent, answered (the server is really there and listening).
    let ok = h.call("add", json!({"a": 2, "b": 3})).await;
    assert!(ok.ok, "{:?}", ok.error);

    // Unknown tools: a near miss, a staging-looking name, a name with a control character.
    let mut refused = Vec::new();
    for tool in ["subtract", "Add", "echo\u{1b}[2J"] {
        let rec = h.call(tool, json!({"a": 1, "b": 2})).await;
        assert!(!rec.ok, "{tool} was answered: {:?}", rec.result);
        let e = rec.error.as_ref().unwrap();
        assert_eq!(e.code.as_str(), NO_SUCH_TOOL, "{tool}: {e:?}");
        assert!(
            e.message.contains("no tool named") && e.message.contains("add"),
            "the message names the tool and what the server lists: {}",
            e.message
        );
        assert!(
            e.remediation.contains("maljan servers test py"),
            "{}",
            e.remediation
        );
        assert!(rec.result.is_none(), "nothing came back from the server");
        refused.push((rec.ev_id.clone(), NO_SUCH_TOOL.to_string()));
    }

    // Schema errors: a wrong type, a missing required argument, a number where a string is due,
    // arguments that are not an object at the top (null is read as no arguments).
    let bad = [
        ("add", json!({"a": "two", "b": 3}), "/a"),
        ("add", json!({"a": 2}), "\"b\" is a required property"),
        ("echo", json!({"message": 42}), "/message"),
        ("echo", json!(null), "\"message\" is a required property"),
    ];
    for (tool, args, names) in bad {
        let rec = h.call(tool, args.clone()).await;
        assert!(!rec.ok, "{tool} {args} was answered: {:?}", rec.result);
        let e = rec.error.as_ref().unwrap();
        assert_eq!(e.code.as_str(), "bad_argument", "{tool} {args}: {e:?}");
        assert!(
            e.message.contains(names) && e.message.contains("inputSchema"),
            "{tool} {args}: the message names the argument: {}",
            e.message
        );
        assert!(
            !e.message.contains("two"),
            "the value given is not repeated: {}",
            e.message
        );
        assert!(e.remediation.contains("inputSchema"), "{}", e.remediation);
        refused.push((rec.ev_id.clone(), "bad_argument".to_string()));
    }
    job.finish();

    // The ledger has each refused call once, with its code and remedy.
    let rows = rt.ledger().calls(Some(job.id()), 100).unwrap();
    assert_eq!(rows.len(), 1 + refused.len(), "one row per call: {rows:#?}");
    for (ev, code) in &refused {
        let mine: Vec<_> = rows.iter().filter(|r| &r.ev_id == ev).collect();
        assert_eq!(mine.len(), 1, "{ev} recorded once");
        assert_eq!(mine[0].error_code.as_deref(), Some(code.as_str()));
        assert!(!mine[0].ok);
        assert!(
            mine[0]
                .remediation
                .as_deref()
                .is_some_and(|r| !r.is_empty())
        );
    }
    rt.shutdown().await;

    // From the server's side: only the good call was sent.
    let sent = calls_on_the_wire(&wire);
    assert_eq!(
        sent,
        vec![("add".to_string(), json!({"a": 2, "b": 3}))],
        "the refused calls never reached the server"
    );
}
