//! `maljan console token [--scope read|submit|admin] [--list] [--revoke ID]` and
//! `maljan console set-password` against a running `maljan console`: each change takes effect at
//! once, `--list` never shows a token, and a token's scope bounds what it may do.

mod common;

use std::{
    io::{Read, Write},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

/// `maljan console ARGS` on the data directory `data` (a subcommand takes no `--config`: the
/// store is found in the data directory).
fn console_cmd(data: &Path, args: &[&str]) -> std::process::Output {
    common::run(
        Command::new(common::maljan())
            .arg("console")
            .args(args)
            .env("MALJAN_HOME", data)
            .env_remove("MALJAN_CONFIG"),
        Duration::from_secs(60),
    )
}

/// One HTTP/1.1 exchange: the status code and the whole answer (head and body).
fn http(
    addr: &str,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut req = format!(
        "{method} {uri} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn tokens_and_passwords_change_a_running_console_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("config.toml"));
    std::fs::write(&config, "").unwrap();
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let _console = common::spawn(
        Command::new(common::maljan())
            .args(["console", "--listen", &addr, "--config"])
            .arg(&config)
            .env("MALJAN_HOME", &data)
            .env_remove("MALJAN_CONFIG"),
    );
    maljan_testkit::wait_answering(&addr, "/login");
    let login_url = std::fs::read_to_string(data.join("console-login.url")).unwrap();
    let owner = login_url.trim().split("token=").nth(1).unwrap().to_string();

    // Without a token: told to use one.
    let (s, body) = http(&addr, "GET", "/api/v1/jobs", &[], "");
    assert_eq!(s, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");

    // A read token, made while the console runs: works at once, for reading only.
    let out = console_cmd(
        &data,
        &["token", "--scope", "read", "--label", "dashboards"],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let read = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(read.starts_with("mjc_"), "{read}");
    assert_eq!(
        http(
            &addr,
            "GET",
            "/api/v1/jobs",
            &[("Authorization", &bearer(&read))],
            ""
        )
        .0,
        200
    );
    let server = r#"{"name":"p","command":"sh","args":["-c","id"]}"#;
    let json = ("Content-Type", "application/json");
    let (s, body) = http(
        &addr,
        "POST",
        "/api/v1/servers/test",
        &[("Authorization", &bearer(&read)), json],
        server,
    );
    assert_eq!(s, 403, "a read token starts no program: {body}");

    // The default scope is submit: jobs yes, servers no.
    let out = console_cmd(&data, &["token"]);
    let submit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(String::from_utf8_lossy(&out.stderr).contains("scope submit"));
    let (s, _) = http(
        &addr,
        "POST",
        "/api/v1/servers/test",
        &[("Authorization", &bearer(&submit)), json],
        server,
    );
    assert_eq!(s, 403);

    // An admin token may test a server.
    let out = console_cmd(&data, &["token", "--scope", "admin", "--label", "ops"]);
    let admin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let echo = format!(
        r#"{{"name":"e","command":{:?}}}"#,
        maljan_testkit::bin_path("fixture-echo").to_string_lossy()
    );
    let (s, body) = http(
        &addr,
        "POST",
        "/api/v1/servers/test",
        &[("Authorization", &bearer(&admin)), json],
        &echo,
    );
    assert_eq!(s, 200, "{body}");

    // --list: ids, scopes, created, last used, labels; never a token.
    let out = console_cmd(&data, &["token", "--list"]);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", common::text(&out));
    for needle in [
        "ID",
        "SCOPE",
        "LAST USED",
        "dashboards",
        "read",
        "submit",
        "admin",
        "ops",
    ] {
        assert!(listed.contains(needle), "{needle} in\n{listed}");
    }
    for secret in [&read, &submit, &admin, &owner] {
        assert!(
            !common::text(&out).contains(secret.as_str()),
            "a token listed"
        );
    }
    let read_line = listed.lines().find(|l| l.contains("dashboards")).unwrap();
    assert!(
        !read_line.contains("never"),
        "its use is noted: {read_line}"
    );
    let read_id = read_line.split_whitespace().next().unwrap().to_string();

    // --revoke: refused at once.
    let out = console_cmd(&data, &["token", "--revoke", &read_id]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert_eq!(
        http(
            &addr,
            "GET",
            "/api/v1/jobs",
            &[("Authorization", &bearer(&read))],
            ""
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &addr,
            "GET",
            "/api/v1/jobs",
            &[("Authorization", &bearer(&admin))],
            ""
        )
        .0,
        200
    );
    let out = console_cmd(&data, &["token", "--revoke", &read_id]);
    assert!(!out.status.success(), "revoking twice fails");
    let out = console_cmd(&data, &["token", "--list", "--scope", "admin"]);
    assert_eq!(out.status.code(), Some(2), "--list takes no --scope");

    // set-password: works at once, and ends the owner's older session.
    let (s, answer) = http(&addr, "GET", &format!("/login?token={owner}"), &[], "");
    assert_eq!(s, 303);
    let cookie = answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        http(&addr, "GET", "/api/v1/jobs", &[("Cookie", &cookie)], "").0,
        200
    );
    let mut child = Command::new(common::maljan())
        .args(["console", "set-password"])
        .env("MALJAN_HOME", &data)
        .env_remove("MALJAN_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a long password\n")
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        http(&addr, "GET", "/api/v1/jobs", &[("Cookie", &cookie)], "").0,
        401,
        "set-password ended the older session"
    );
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    // The login form's CSRF token is in its page.
    let (_, page) = http(&addr, "GET", "/login", &[], "");
    let csrf = page
        .split("name=\"_csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let (s, _) = http(
        &addr,
        "POST",
        "/login",
        &[form],
        &format!("_csrf={csrf}&password=a+long+password"),
    );
    assert_eq!(s, 303, "the new password works at once");
}
