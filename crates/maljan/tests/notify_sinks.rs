//! Notifications over a real server: FA_notify_send reaches local webhook receivers (webhook,
//! Slack, Discord, Teams, Telegram, PagerDuty, each in its own shape) and a real SMTP server
//! (aiosmtpd, STARTTLS required, with a certificate the test makes); a sink at a private
//! address the operator did not allow is refused and a failing sink stops no other; a repeat
//! inside the window is deduplicated; routes deliver the server's failures and are durable.

mod common;

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, extract::State, http::StatusCode, routing::post};
use common::{Running, peer, session::Session};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// Local receivers: every POST is kept as (path, JSON body); /fail answers 500.
fn receivers() -> (u16, Seen) {
    let seen: Seen = Default::default();
    let kept = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            async fn keep(
                State(seen): State<Seen>,
                uri: axum::http::Uri,
                body: String,
            ) -> StatusCode {
                let path = uri.path().to_string();
                let failing = path == "/fail";
                seen.lock()
                    .unwrap()
                    .push((path, serde_json::from_str(&body).unwrap_or(Value::Null)));
                if failing {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
            let app = Router::new().route("/{*path}", post(keep)).with_state(kept);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (port, seen)
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(ok.success(), "openssl {args:?}");
}

/// A CA and a server certificate for 127.0.0.1 signed by it.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=maljan test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

const SMTP_SERVER: &str = r#"
import ssl, sys
from aiosmtpd.controller import Controller
cert, key, port, out = sys.argv[1:5]
class Keep:
    async def handle_DATA(self, server, session, envelope):
        with open(out, "ab") as f:
            f.write(b"TLS=" + (b"yes" if session.ssl else b"no") + b"\n" + envelope.content + b"\n")
        return "250 OK"
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ctx.load_cert_chain(cert, key)
c = Controller(Keep(), hostname="127.0.0.1", port=int(port), tls_context=ctx, require_starttls=True)
c.start()
print("ready", flush=True)
sys.stdin.read()
"#;

/// aiosmtpd on a free port, STARTTLS required; what it receives is appended to `out`.
fn smtp_server(dir: &Path, out: &Path) -> (Running, u16) {
    let port = common::free_port();
    let mut child = Command::new(peer("MALJAN_PY"))
        .args([
            "-c",
            SMTP_SERVER,
            "server.pem",
            "server.key",
            &port.to_string(),
            out.to_str().unwrap(),
        ])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "aiosmtpd did not start (is it installed? scripts/peers.sh)"
    );
    (Running(child), port)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "waited 30 s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn notifications_reach_every_sink_and_a_failing_one_stops_none() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let mail = d.join("mail.txt");
    let (_smtp, smtp_port) = smtp_server(d, &mail);
    let (port, seen) = receivers();
    std::fs::write(d.join("tg.secret"), "123:TGSECRETTOKEN\n").unwrap();
    let base = format!("http://127.0.0.1:{port}");
    std::fs::write(
        d.join("notify.toml"),
        format!(
            r#"
dedup_seconds = 600
[sinks.hook]
type = "webhook"
url = "{base}/hook"
authorization_env = "T_HOOK_AUTH"
allow_private_endpoint = true
[sinks.slack]
type = "slack"
webhook_url_env = "T_SLACK_URL"
allow_private_endpoint = true
[sinks.discord]
type = "discord"
webhook_url = "{base}/discord/SECRETPATH"
allow_private_endpoint = true
[sinks.teams]
type = "teams"
webhook_url = "{base}/teams"
allow_private_endpoint = true
[sinks.telegram]
type = "telegram"
api_url = "{base}/tg"
bot_token_file = "tg.secret"
chat_id = "42"
allow_private_endpoint = true
[sinks.pager]
type = "pagerduty"
url = "{base}/pd"
routing_key = "PDSECRETKEY"
allow_private_endpoint = true
[sinks.broken]
type = "webhook"
url = "{base}/fail"
allow_private_endpoint = true
[sinks.private]
type = "webhook"
url = "{base}/private"
[sinks.mail]
type = "email"
host = "127.0.0.1"
port = {smtp_port}
sender = "maljan@example.org"
recipients = ["ops@example.org"]
ca_file = "ca.pem"
allow_private_endpoint = true
"#
        ),
    )
    .unwrap();
    let state = d.join("state");
    let root = d.join("root");
    std::fs::create_dir(&root).unwrap();
    let config = d.join("notify.toml");
    let args = [
        "--root",
        root.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--notify-config",
        config.to_str().unwrap(),
    ];
    let slack = format!("{base}/slack/SLACKSECRET");
    let envs = [
        ("T_SLACK_URL", slack.as_str()),
        ("T_HOOK_AUTH", "Bearer HOOKSECRET"),
    ];
    let mut s = Session::start(&args, &envs);

    let listed = s.ok("FA_notify_list", json!({})).to_string();
    for secret in [
        "SLACKSECRET",
        "SECRETPATH",
        "TGSECRETTOKEN",
        "PDSECRETKEY",
        "HOOKSECRET",
    ] {
        assert!(!listed.contains(secret), "{listed}");
    }
    assert!(
        listed.contains("\"url_host\":\"127.0.0.1\"") && listed.contains("ops@example.org"),
        "{listed}"
    );

    let out = s.ok(
        "FA_notify_send",
        json!({"subject": "disk full", "body": "on host a", "level": "warning"}),
    );
    for sink in [
        "hook", "slack", "discord", "teams", "telegram", "pager", "mail",
    ] {
        assert_eq!(out[sink], "sent", "{sink}: {out}");
    }
    let broken = out["broken"].as_str().unwrap();
    assert!(
        broken.starts_with("error:") && broken.contains("500"),
        "{broken}"
    );
    let private = out["private"].as_str().unwrap();
    assert!(
        private.starts_with("error:") && private.contains("refused"),
        "{private}"
    );
    assert!(!out.to_string().contains("SECRET"), "{out}");

    let by_path = |p: &str| -> Vec<Value> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.starts_with(p))
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(
        by_path("/hook"),
        [json!({"subject": "disk full", "body": "on host a", "level": "warning"})]
    );
    assert_eq!(
        by_path("/slack/SLACKSECRET")[0]["text"],
        ":warning: *disk full*\non host a"
    );
    assert_eq!(
        by_path("/discord/SECRETPATH")[0]["content"],
        ":warning: **disk full**\non host a"
    );
    assert_eq!(by_path("/teams")[0]["@type"], "MessageCard");
    assert_eq!(by_path("/teams")[0]["themeColor"], "E67E22");
    let tg = by_path("/tg/bot123:TGSECRETTOKEN/sendMessage");
    assert_eq!(
        (tg[0]["chat_id"].clone(), tg[0]["text"].clone()),
        (json!("42"), json!("⚠️ disk full\non host a"))
    );
    let pd = &by_path("/pd")[0];
    assert_eq!(
        (pd["routing_key"].clone(), pd["payload"]["severity"].clone()),
        (json!("PDSECRETKEY"), json!("warning"))
    );
    assert_eq!(by_path("/fail").len(), 1, "the failing sink was tried");
    assert!(
        by_path("/private").is_empty(),
        "a private address was reached"
    );
    let received = std::fs::read_to_string(&mail).unwrap();
    assert!(received.starts_with("TLS=yes"), "{received}");
    assert!(
        received.contains("Subject: [WARNING] disk full") && received.contains("on host a"),
        "{received}"
    );
    assert!(received.contains("To: ops@example.org"), "{received}");

    // The same message inside the window is dropped by every sink; another one is sent.
    let again = s.ok(
        "FA_notify_send",
        json!({"subject": "disk full", "body": "on host a", "level": "warning"}),
    );
    assert!(
        again.as_object().unwrap().values().all(|v| v == "dedup"),
        "{again}"
    );
    assert_eq!(by_path("/hook").len(), 1);
    let other = s.ok(
        "FA_notify_send",
        json!({"subject": "disk full", "body": "on host b", "level": "warning"}),
    );
    assert_eq!(other["hook"], "sent");

    // Bad arguments are refused clearly.
    for bad in [
        json!({"subject": ""}),
        json!({"subject": "x", "level": "loud"}),
        json!({"subject": "x", "url": "https://evil.example"}),
    ] {
        let a = s.call("FA_notify_send", bad.clone());
        assert!(
            a.is_error && a.value["error"]["code"] == "bad_argument",
            "{bad}: {}",
            a.value
        );
    }

    // A route sends the server's failures to one sink, throttled; it outlives the server.
    let route = s.ok("FA_notify_route_add", json!({"name": "failures", "sinks": ["hook"], "types": ["action.*"], "sources": ["FA_file_checksum"], "rate_limit": 5}));
    assert_eq!(route["min_severity"], "warning");
    let unknown = s.call(
        "FA_notify_route_add",
        json!({"name": "x", "sinks": ["nowhere"]}),
    );
    assert!(
        unknown.is_error && unknown.value.to_string().contains("nowhere"),
        "{}",
        unknown.value
    );
    let slack_before = by_path("/slack").len();
    let missing = root.join("missing.bin");
    assert!(
        s.call(
            "FA_file_checksum",
            json!({"path": missing.to_str().unwrap()})
        )
        .is_error
    );
    wait_for("the routed failure", || {
        by_path("/hook").iter().any(|v| {
            v["subject"]
                .as_str()
                .is_some_and(|t| t.contains("action.failed"))
        })
    });
    let routed = by_path("/hook")
        .into_iter()
        .find(|v| v["subject"].as_str().unwrap().contains("action.failed"))
        .unwrap();
    assert_eq!(routed["level"], "error");
    assert!(
        routed["body"]
            .as_str()
            .unwrap()
            .contains("Source: FA_file_checksum"),
        "{routed}"
    );
    assert_eq!(
        by_path("/slack").len(),
        slack_before,
        "the route named one sink"
    );
    drop(s);

    let mut again = Session::start(&args, &envs);
    let routes = again.ok("FA_notify_route_list", json!({}));
    assert_eq!(routes[0]["name"], "failures", "{routes}");
    assert_eq!(routes[0]["rate_limit"], 5);
    assert_eq!(
        again.ok("FA_notify_route_remove", json!({"name": "failures"})),
        true
    );
    assert_eq!(
        again.ok("FA_notify_route_remove", json!({"name": "failures"})),
        false
    );
    assert_eq!(again.ok("FA_notify_route_list", json!({})), json!([]));
}

#[test]
fn without_a_notify_config_sending_names_the_remedy_and_a_bad_config_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(&["--root", dir.path().to_str().unwrap()], &[]);
    let a = s.call("FA_notify_send", json!({"subject": "x"}));
    assert_eq!(a.value["error"]["code"], "not_configured", "{}", a.value);
    assert!(
        a.value["error"]["remediation"]
            .as_str()
            .unwrap()
            .contains("--notify-config")
    );
    assert_eq!(s.ok("FA_notify_list", json!({})), json!([]));

    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[sinks.a]\ntype = \"slack\"\nwebhook_url = \"ftp://BADSECRET\"\n",
    )
    .unwrap();
    let out = common::run(
        Command::new(common::maljan())
            .args(["serve", "files"])
            .env("MALJAN_NOTIFY_CONFIG", &config),
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let text = common::text(&out);
    assert!(
        text.contains("[sinks.a] webhook_url") && !text.contains("BADSECRET"),
        "{text}"
    );
}
