//! Issue 44 item 7: a hostile MCP server's strings — its name and version, tool names and
//! descriptions, manifest reasons and remedies, error codes and messages, answers, and the
//! reason it cannot be reached — reach the terminal through `maljan servers test`, `servers
//! list`, `call`, `agent tools` and `ledger --job` only with their controls made visible: CSI
//! (ESC[31m, ESC[2J), OSC 8 links and OSC titles, the 8-bit CSI (C1 0x9b), U+202E, bells and
//! carriage returns are written out, never sent as themselves.
//!
//! The server is a few lines of Python over stdio (newline-delimited JSON-RPC, no SDK: the SDKs
//! would refuse to send some of this), run by the peers' interpreter (MALJAN_PY).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_maljan");

const SERVER: &str = r#"
import json, sys
mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
ESC, C1, RLO = "\x1b", "\x9b", "\u202e"
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def text(t, err=False):
    return {"content": [{"type": "text", "text": t}], "isError": err}
tools = [
    {"name": "read" + ESC + "[31m_file", "description": "Reads " + ESC + "]8;;http://evil.example/" + "\x07here" + ESC + "]8;;\x07",
     "inputSchema": {"type": "object", "properties": {"p" + ESC + "[2J": {"type": "string"}}}},
    {"name": "list" + RLO + "exe.txt", "description": "bidi", "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "fails" + C1 + "2J", "inputSchema": {"type": "object"}},
    {"name": "capabilities", "description": "manifest", "inputSchema": {"type": "object"}},
]
manifest = {"server": "evil", "version": "1", "tools": [
    {"name": "fail", "available": True},
    {"name": "ghost" + ESC + "]0;owned\x07", "available": False, "reason": "gone" + ESC + "[2J" + C1 + "H",
     "remediation": "run" + RLO + "txt.exe", "without": "still" + ESC + "]8;;http://x/\x07y"},
]}
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        if mode == "crash":
            sys.stderr.write("crash" + ESC + "]0;owned" + "\x07" + C1 + "2J" + RLO + "\r\n"); sys.stderr.flush()
            sys.exit(1)
        if mode == "refuse":
            sys.stderr.write("refused" + ESC + "[8m" + C1 + "0m" + RLO + "\n"); sys.stderr.flush()
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": "no" + ESC + "[31m" + C1 + "2J" + RLO + "way\r"}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
              "serverInfo": {"name": "evil" + ESC + "]0;title\x07", "version": "1.0" + C1 + "31m" + RLO}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "capabilities":
            send({"jsonrpc": "2.0", "id": mid, "result": text(json.dumps(manifest))})
        elif name == "fail":
            err = {"error": {"code": "code" + ESC + "[5m", "message": "msg" + ESC + "[31m" + C1 + "J",
                   "remediation": "fix" + RLO + "gpj.exe"}, "tool": "fail"}
            send({"jsonrpc": "2.0", "id": mid, "result": text(json.dumps(err), True)})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": text("line one" + ESC + "[2J\nline two" + C1 + "H" + RLO + "\r")})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
"#;

struct Lab {
    home: tempfile::TempDir,
    config: String,
}

impl Lab {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let script = home.path().join("evil_server.py");
        std::fs::write(&script, SERVER).unwrap();
        let py = maljan_testkit::peer_env("MALJAN_PY");
        let config = home.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[servers.evil]\ncommand = {py:?}\nargs = [{script:?}, \"serve\", \"tag\\u001b[31m\"]\nlabel = \"evil\\u202elabel\"\n\n\
                 [servers.refuser]\ncommand = {py:?}\nargs = [{script:?}, \"refuse\"]\n\n\
                 [servers.crasher]\ncommand = {py:?}\nargs = [{script:?}, \"crash\"]\n",
                script = script.display().to_string()
            ),
        )
        .unwrap();
        Self {
            config: config.display().to_string(),
            home,
        }
    }

    /// Runs `maljan ARGS --config …`; returns (success, stdout, stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(BIN)
            .args(args)
            .args(["--config", &self.config])
            .env("MALJAN_HOME", self.home.path())
            .env_remove("MALJAN_DATABASE_URL")
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_LLM_MODEL")
            .current_dir(self.home.path())
            .output()
            .expect("maljan runs");
        (
            out.status.success(),
            String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        )
    }
}

fn assert_inert(what: &str, text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && maljan_triage::visible::is_hidden(c))
        .collect();
    assert!(raw.is_empty(), "{what} printed {raw:?} raw:\n{text:?}");
    for c in ['\x1b', '\u{9b}', '\u{202e}', '\x07', '\r'] {
        assert!(!text.contains(c), "{what} printed {c:?}:\n{text:?}");
    }
}

fn both(what: &str, out: &str, err: &str) -> String {
    assert_inert(what, out);
    assert_inert(&format!("{what} (stderr)"), err);
    format!("{out}{err}")
}

#[test]
fn servers_test_shows_a_hostile_servers_strings_visibly() {
    let lab = Lab::new();
    let (ok, out, err) = lab.run(&["servers", "test", "evil"]);
    assert!(ok, "{out}{err}");
    let said = both("servers test", &out, &err);
    for shown in [
        "evil\\x1b]0;title\\x07",        // serverInfo.name: an OSC title
        "1.0\\x9b31m\\u{202e}",          // serverInfo.version: C1 CSI and U+202E
        "read\\x1b[31m_file",            // a tool name: CSI
        "list\\u{202e}exe.txt",          // a tool name: bidi override
        "ghost\\x1b]0;owned\\x07",       // an unavailable tool
        "gone\\x1b[2J\\x9bH",            // its reason
        "run\\u{202e}txt.exe",           // its remedy
        "still\\x1b]8;;http://x/\\x07y", // what it still answers: OSC 8
    ] {
        assert!(said.contains(shown), "servers test shows {shown}:\n{said}");
    }
    let (_, json, err) = lab.run(&["servers", "test", "evil", "--json"]);
    both("servers test --json", &json, &err);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["server_version"], "1.0\u{9b}31m\u{202e}", "{json}");
    let tools = v["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "list\u{202e}exe.txt"));
    assert!(tools.iter().any(|t| {
        t["description"]
            .as_str()
            .is_some_and(|d| d.contains("\x1b]8;;http://evil.example/"))
    }));
}

#[test]
fn an_unreachable_hostile_server_is_reported_visibly() {
    let lab = Lab::new();
    // The server's stderr as it dies, and its JSON-RPC refusal of the handshake.
    for (server, shown) in [
        ("crasher", "crash\\x1b]0;owned\\x07\\x9b2J\\u{202e}"),
        ("refuser", "refused\\x1b[8m\\x9b0m\\u{202e}"),
    ] {
        let (ok, out, err) = lab.run(&["servers", "test", server]);
        assert!(!ok, "{server}: the handshake fails the test: {out}{err}");
        let said = both("servers test (unreachable)", &out, &err);
        assert!(said.contains(shown), "{server}: shows {shown}:\n{said}");
        let (_, json, err) = lab.run(&["servers", "test", server, "--json"]);
        both("servers test --json (unreachable)", &json, &err);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["ok"], false);
        // An analysis-free command that reaches it through a job: `call`.
        let (ok, out, err) = lab.run(&["call", server, "fail"]);
        assert!(!ok);
        both("call (unreachable)", &out, &err);
    }
}

#[test]
fn calls_lists_and_the_ledger_show_a_hostile_servers_strings_visibly() {
    let lab = Lab::new();
    // servers list: the config's own strings, a server's arguments and label.
    let (ok, out, err) = lab.run(&["servers", "list"]);
    assert!(ok, "{err}");
    let said = both("servers list", &out, &err);
    assert!(said.contains("tag\\x1b[31m"), "{said}");
    let (_, json, err) = lab.run(&["servers", "list", "--json"]);
    both("servers list --json", &json, &err);

    // A tool error: the server's own code, message and remedy.
    let (ok, out, err) = lab.run(&["call", "evil", "fail"]);
    assert!(!ok);
    let said = both("call (tool error)", &out, &err);
    for shown in ["code\\x1b[5m", "msg\\x1b[31m\\x9bJ", "fix\\u{202e}gpj.exe"] {
        assert!(said.contains(shown), "call shows {shown}:\n{said}");
    }
    // An answer: its lines kept, its controls shown.
    let (ok, out, err) = lab.run(&["call", "evil", "list\u{202e}exe.txt"]);
    assert!(ok, "{err}");
    let said = both("call (answer)", &out, &err);
    assert!(
        said.contains("line one\\x1b[2J\nline two\\x9bH\\u{202e}\\x0d"),
        "{said}"
    );
    let (_, json, err) = lab.run(&["call", "evil", "list\u{202e}exe.txt", "--json"]);
    both("call --json", &json, &err);

    // A tool the server did not list, named with controls: refused, and said visibly.
    let (ok, out, err) = lab.run(&["call", "evil", "nope\x1b]0;owned\x07"]);
    assert!(!ok);
    let said = both("call (unknown tool)", &out, &err);
    assert!(said.contains("no_such_tool"), "{said}");

    // agent tools: the names and parameters a model would get.
    let (_, out, err) = lab.run(&["agent", "tools", "--servers", "evil"]);
    let said = both("agent tools", &out, &err);
    assert!(said.contains("read\\x1b[31m_file"), "{said}");
    let (_, json, err) = lab.run(&["agent", "tools", "--servers", "evil", "--json"]);
    both("agent tools --json", &json, &err);

    // The ledger: every call above, by job, with codes, messages and remedies.
    let (ok, out, err) = lab.run(&["ledger"]);
    assert!(ok, "{err}");
    let calls = both("ledger", &out, &err);
    assert!(calls.contains("code\\x1b[5m"), "{calls}");
    let (_, jobs, err) = lab.run(&["ledger", "--jobs"]);
    let said = both("ledger --jobs", &jobs, &err);
    let job_ids: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("job"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(job_ids.len() >= 3, "{said}");
    let mut everything = String::new();
    for id in job_ids {
        let (_, out, err) = lab.run(&["ledger", "--job", id]);
        everything.push_str(&both("ledger --job", &out, &err));
    }
    for shown in [
        "evil.fail",
        "msg\\x1b[31m\\x9bJ",
        "remedy: fix\\u{202e}gpj.exe",
        "evil.list\\u{202e}exe.txt",
        "nope\\x1b]0;owned\\x07",
    ] {
        assert!(
            everything.contains(shown),
            "ledger --job shows {shown}:\n{everything}"
        );
    }
    let (_, json, err) = lab.run(&["ledger", "--json"]);
    both("ledger --json", &json, &err);
}
