//! Issue 44 item 8: what a client can do to the console before it authenticates. The real
//! `maljan console` is served by maljan-server's accept loop, so half-sent request heads are
//! closed after the head deadline and connections over the cap wait; a body declared larger
//! than the endpoint takes is refused with 413 before it is read; failed logins back off per
//! client. And item 1's login URL: printed once on stderr, kept in a 0600 file, never logged.

mod common;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use axum::{
    body::Body,
    extract::ConnectInfo,
    http::{Request, StatusCode, header},
};

/// Whether the console closed `stream` (EOF or reset) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // A 408 before the close is fine too: read on until the close.
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn half_sent_heads_are_closed_after_the_head_deadline() {
    let c = common::spawn_console(&["--header-timeout-secs", "2"]);
    let mut held: Vec<TcpStream> = (0..40)
        .map(|i| {
            let mut s = TcpStream::connect(&c.addr).unwrap();
            // Variants: nothing sent, a request line only, a head without its last CRLF.
            let part = match i % 3 {
                0 => String::new(),
                1 => "GET / HTTP/1.1\r\n".to_string(),
                _ => format!("GET /login HTTP/1.1\r\nHost: {}\r\nX-Slow: 1", c.addr),
            };
            s.write_all(part.as_bytes()).unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    for (i, s) in held.iter_mut().enumerate() {
        let left = Duration::from_secs(8).saturating_sub(started.elapsed());
        assert!(
            closed_within(s, left.max(Duration::from_millis(10))),
            "connection {i} still open"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "not closed before the deadline"
    );
    // The console still answers.
    let head = c.exchange(
        &format!(
            "GET /login HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            c.addr
        ),
        Duration::from_secs(5),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[test]
fn connections_over_the_cap_wait_for_a_free_slot() {
    let c = common::spawn_console(&["--max-connections", "4", "--header-timeout-secs", "3"]);
    let request = format!(
        "GET /login HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        c.addr
    );
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(&c.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let head = c.exchange(&request, Duration::from_secs(10));
    let waited = started.elapsed();
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "answered once a slot freed: {head}"
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "the fifth connection was served at once ({waited:?}): no cap"
    );
    drop(idle);
    let started = Instant::now();
    let head = c.exchange(&request, Duration::from_secs(5));
    assert!(
        head.starts_with("HTTP/1.1 200") && started.elapsed() < Duration::from_secs(2),
        "{head}"
    );
}

#[test]
fn a_body_declared_over_the_cap_is_refused_before_it_is_read() {
    let c = common::spawn_console(&["--max-sample-bytes", "1024"]);
    let owner = c.owner_token();
    let cases = [
        // The example: 100 GB against the sample cap, with and without a credential.
        (
            "POST",
            "/api/v1/jobs",
            100_000_000_000u64,
            Some(owner.as_str()),
        ),
        ("POST", "/api/v1/jobs", 100_000_000_000, None),
        (
            "POST",
            "/jobs/new",
            1024 + (1 << 20) + 1,
            Some(owner.as_str()),
        ),
        // Everything else takes 1 MiB.
        (
            "POST",
            "/api/v1/servers",
            (1 << 20) + 1,
            Some(owner.as_str()),
        ),
        ("PATCH", "/api/v1/servers/echo", 5 << 20, None),
        ("POST", "/login", 10 << 20, None),
    ];
    for (method, uri, length, token) in cases {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let started = Instant::now();
        let head = c.exchange(
            &format!(
                "{method} {uri} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: multipart/form-data; boundary=z\r\nContent-Length: {length}\r\n\r\n",
                c.addr
            ),
            Duration::from_secs(3),
        );
        assert!(
            head.starts_with("HTTP/1.1 413"),
            "{method} {uri} {length}: {head:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{method} {uri}: not at once"
        );
    }
    // Within the cap: the request goes on to its handler (here: the body is refused as empty).
    let head = c.exchange(
        &format!(
            "POST /api/v1/servers HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {owner}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
            c.addr
        ),
        Duration::from_secs(5),
    );
    assert!(head.starts_with("HTTP/1.1 422"), "{head}");
}

#[test]
fn the_login_url_is_printed_once_kept_private_and_never_logged() {
    use std::os::unix::fs::PermissionsExt;
    let c = common::spawn_console(&[]);
    assert!(
        c.login_url
            .starts_with(&format!("http://{}/login?token=", c.addr)),
        "{}",
        c.login_url
    );
    let file = c.data.join("console-login.url");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), c.login_url);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Opening it: a session cookie and the address without the token.
    let head = c.exchange(
        &format!(
            "GET /login?token={} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            c.owner_token(),
            c.addr
        ),
        Duration::from_secs(5),
    );
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("location: /\r\n"),
        "{head}"
    );
    assert!(
        head.contains("HttpOnly") && head.contains("SameSite=Strict"),
        "{head}"
    );
    // Wrong tokens and a few requests later, nothing on stderr carries the token.
    c.exchange(
        &format!(
            "GET /login?token=mjo_wrong HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            c.addr
        ),
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_millis(300));
    let later: Vec<String> = c.stderr.try_iter().collect();
    let token = c.owner_token();
    assert!(
        !later
            .iter()
            .any(|l| l.contains(&token) || l.contains("mjo_wrong")),
        "{later:?}"
    );
}

fn login_from(c: &common::Console, peer: &str, password: &str) -> Request<Body> {
    let peer: SocketAddr = peer.parse().unwrap();
    Request::builder()
        .method("POST")
        .uri("/login")
        .header(header::HOST, &c.host)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .extension(ConnectInfo(peer))
        .body(Body::from(format!(
            "_csrf={}&password={password}",
            c.state.auth.csrf_for("login")
        )))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_back_off_per_client() {
    let c = common::console();
    c.state.auth.set_password("correct horse battery").unwrap();
    let guesser = "192.0.2.7:5000";
    let mut statuses = Vec::new();
    for i in 0..6 {
        let resp = c.send(login_from(&c, guesser, &format!("guess{i}"))).await;
        statuses.push(resp.status());
        if resp.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(resp.headers().contains_key(header::RETRY_AFTER));
        }
    }
    assert_eq!(
        &statuses[..3],
        [StatusCode::UNAUTHORIZED; 3],
        "{statuses:?}"
    );
    assert!(
        statuses[3..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "locked out after three failures: {statuses:?}"
    );
    // While locked out even the right password is not looked at.
    let resp = c
        .send(login_from(&c, "192.0.2.7:6000", "correct+horse+battery"))
        .await;
    assert_eq!(
        resp.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "same client, another port"
    );
    // The owner's login URL from the same client counts the same way.
    let url = format!("/login?token={}", c.state.auth.owner_token());
    let req = Request::builder()
        .uri(&url)
        .header(header::HOST, &c.host)
        .extension(ConnectInfo(guesser.parse::<SocketAddr>().unwrap()))
        .body(Body::empty())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another client is not held back, and its success is its own.
    let resp = c
        .send(login_from(&c, "198.51.100.9:5000", "correct+horse+battery"))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    // Guessing API tokens at the login form counts too.
    for i in 0..3 {
        let resp = c
            .send(login_from(&c, "203.0.113.5:1", &format!("mjc_{i}")))
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let resp = c.send(login_from(&c, "203.0.113.5:1", "mjc_3")).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    // After the lockout (1 s after the third failure) one more try is let through.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let resp = c
        .send(login_from(&c, "203.0.113.5:1", "correct+horse+battery"))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
}
