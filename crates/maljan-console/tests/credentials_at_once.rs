//! Issue 44 item 1 and issue 41 item 7: a token made, a token revoked and a password set by
//! `maljan console token` / `set-password` (another process: here another store over the same
//! data directory, as the CLI opens it) take effect on the running console at once, and a new
//! password ends every older session.

mod common;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use maljan_console::{AuthStore, Scope};

/// The store as `maljan console token` opens it: the console's data directory.
fn cli_store(c: &common::Console) -> AuthStore {
    AuthStore::load(&c.state.data_dir).unwrap()
}

async fn status_with(c: &common::Console, token: &str) -> StatusCode {
    let req = c
        .req_token("GET", "/api/v1/jobs", token)
        .body(Body::empty())
        .unwrap();
    c.send(req).await.status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_token_works_at_once_and_a_revoked_one_stops_at_once() {
    let c = common::console();
    let cli = cli_store(&c);
    for scope in [Scope::Read, Scope::Submit, Scope::Admin] {
        let (id, token) = cli.create_token(&format!("{scope} script"), scope).unwrap();
        assert_eq!(
            status_with(&c, &token).await,
            StatusCode::OK,
            "{scope}: new token at once"
        );
        // Its use is noted for --list, which never shows the token.
        let listed = cli_store(&c).tokens();
        let entry = listed.iter().find(|t| t.id() == id).unwrap();
        assert_eq!(entry.scope, scope);
        assert!(entry.last_used.is_some(), "last use noted");
        let file = std::fs::read_to_string(AuthStore::file_in(&c.state.data_dir)).unwrap();
        assert!(!file.contains(&token), "only digests are kept");
        cli.revoke_token(&id).unwrap();
        let (s, v) = common::read_json(
            c.send(
                c.req_token("GET", "/api/v1/jobs", &token)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await,
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{scope}: revoked at once: {v}");
        assert!(v["error"].as_str().unwrap().contains("revoked"));
    }
    // Revoking by a prefix of the id, and an unknown id.
    let (id, token) = cli.create_token("prefix", Scope::Read).unwrap();
    cli.revoke_token(&id[..6]).unwrap();
    assert_eq!(status_with(&c, &token).await, StatusCode::UNAUTHORIZED);
    assert!(cli.revoke_token(&id).is_err(), "gone already");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_password_takes_effect_at_once_and_ends_older_sessions() {
    let c = common::console();
    let login = |pw: &str| {
        Request::builder()
            .method("POST")
            .uri("/login")
            .header(header::HOST, &c.host)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!(
                "_csrf={}&password={pw}",
                c.state.auth.csrf_for("login")
            )))
            .unwrap()
    };
    // No password yet: none works.
    assert_eq!(
        c.send(login("first+password")).await.status(),
        StatusCode::UNAUTHORIZED
    );
    c.state.throttle.succeeded(None);
    let (_, token) = c.state.auth.create_token("t", Scope::Submit).unwrap();
    let token_session = c.state.auth.new_session(Scope::Submit, None);
    cli_store(&c).set_password("first password").unwrap();
    // The owner's session (from the login URL) and every other older one have ended.
    let (s, _) = c.json("GET", "/api/v1/servers", None).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "set-password ends older sessions"
    );
    assert!(c.state.auth.session(&token_session).is_none());
    // Bearer tokens are not sessions: they stay valid.
    assert_eq!(status_with(&c, &token).await, StatusCode::OK);
    // The new password works at once.
    let resp = c.send(login("first+password")).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let session = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let get = || {
        Request::builder()
            .uri("/api/v1/servers")
            .header(header::HOST, &c.host)
            .header(header::COOKIE, &session)
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(c.send(get()).await.status(), StatusCode::OK);
    // A second change: the old password stops working and that session ends too.
    cli_store(&c).set_password("second password").unwrap();
    assert_eq!(c.send(get()).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        c.send(login("first+password")).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        c.send(login("second+password")).await.status(),
        StatusCode::SEE_OTHER
    );
}

#[test]
fn the_store_is_private_and_each_start_draws_its_own_login_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = AuthStore::load(dir.path()).unwrap();
    store.create_token("x", Scope::Read).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&AuthStore::file_in(dir.path())), 0o600);
    let other = AuthStore::load(dir.path()).unwrap();
    assert_ne!(
        store.owner_token(),
        other.owner_token(),
        "each console start draws its own login token"
    );
}
