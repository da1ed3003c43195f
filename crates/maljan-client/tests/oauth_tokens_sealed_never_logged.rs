//! What an operator's disk and logs hold after OAuth: `maljan servers login` (browser and
//! client-credentials) and calls that refresh and mint tokens, all at full trace logging
//! (rmcp's own included), leave no access token, refresh token or client secret in any output,
//! log, the config file, the ledger or any other file of the data directory; the tokens are
//! there only sealed (enc:v1), and the sealed file opens to the token the provider issued last.

mod common;

use std::{
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use maljan_client::KeySource;

fn maljan(home: &Path) -> Command {
    let mut c = Command::new(maljan_testkit::package_bin("maljan", "maljan"));
    c.env("MALJAN_HOME", home)
        .env("MALJAN_LOG", "trace")
        .env_remove("MALJAN_SECRET_KEY")
        .env_remove("MALJAN_CONFIG");
    c
}

/// Runs to the end; returns stdout + stderr after checking it succeeded.
fn run(mut c: Command, stdin: &str) -> String {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

fn files_under(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            let bytes = std::fs::read(&p).unwrap();
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_sealed_and_never_logged() {
    let s = common::Scratch::new();
    let home = s.dir.path().join("home");
    let peer = common::oauth::OAuthPeer::start(2, &s.dir.path().join("peer.log"));
    let mut outputs = Vec::new();
    for name in ["saas", "pipeline"] {
        let mut add = maljan(&home);
        add.args([
            "servers",
            "add",
            name,
            "--transport",
            "http",
            "--url",
            &peer.mcp,
        ]);
        outputs.push(run(add, ""));
    }

    // The browser sign-in, as a person does it: the address printed, a browser, the redirect.
    let mut login = maljan(&home);
    login.args(["servers", "login", "saas", "--wait-seconds", "60"]);
    let mut child = login
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let address = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "login printed: {printed}"
        );
        printed.push_str(&line);
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    let page = common::oauth::browse(&address).await;
    assert!(page.contains("Signed in"), "{page}");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    stdout.read_to_string(&mut printed).unwrap();
    assert!(status.success(), "{printed}");
    assert!(printed.contains("signed in to 'saas'"), "{printed}");
    outputs.push(printed);

    // The machine client: its secret read from stdin and sealed into the config.
    let mut m2m = maljan(&home);
    m2m.args([
        "servers",
        "login",
        "pipeline",
        "--client-credentials",
        "--client-id",
        &peer.m2m_client_id,
    ]);
    outputs.push(run(m2m, &format!("{}\n", peer.m2m_client_secret)));

    // Calls after the tokens expired: one refresh, one new mint, both at trace level.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let refreshes = peer.grants("refresh_token").await;
    for name in ["saas", "pipeline"] {
        let mut call = maljan(&home);
        call.args(["call", name, "whoami"]);
        let out = run(call, "");
        assert!(out.contains("\"client_id\""), "{out}");
        assert!(
            out.contains("TRACE") || out.contains("DEBUG"),
            "logging was on: {out}"
        );
        outputs.push(out);
    }
    assert!(peer.grants("refresh_token").await > refreshes);
    assert_eq!(peer.grants("client_credentials").await, 2);

    let stats = peer.stats().await;
    let mut secrets: Vec<String> = vec![peer.m2m_client_secret.clone()];
    for kind in ["access_tokens", "refresh_tokens"] {
        for t in stats[kind].as_array().unwrap() {
            secrets.push(t.as_str().unwrap().to_string());
        }
    }
    assert!(secrets.len() >= 6, "{stats}");
    let mut files = Vec::new();
    files_under(&home, &mut files);
    assert!(files.iter().any(|(p, _)| p.ends_with("config.toml")));
    for secret in &secrets {
        for (i, out) in outputs.iter().enumerate() {
            assert!(
                !out.contains(secret.as_str()),
                "output {i} shows a token or secret"
            );
        }
        for (path, text) in &files {
            assert!(
                !text.contains(secret.as_str()),
                "{path} holds a token or secret in the clear"
            );
        }
    }

    // Sealed, and opening to the last token issued for each client.
    let keys = KeySource::in_dir(&home);
    for name in ["saas", "pipeline"] {
        let sealed = std::fs::read_to_string(home.join(format!("oauth/{name}.sealed"))).unwrap();
        assert!(sealed.starts_with("enc:v1:"), "{name}");
        let opened = keys.open(sealed.trim()).unwrap();
        let held: serde_json::Value = serde_json::from_str(opened.expose()).unwrap();
        let token = held["token_response"]["access_token"].as_str().unwrap();
        assert!(
            secrets.iter().any(|s| s == token),
            "{name}: not a token the provider issued"
        );
    }
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains("client_secret = \"enc:v1:"), "{config}");
}
