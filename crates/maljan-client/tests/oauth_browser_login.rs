//! OAuth 2.1 sign-in against a real authorization server (node-oidc-provider): the runtime
//! refuses to guess without a sign-in and says which command to run; `login` then finds the
//! authorization server from the resource server's 401 (RFC 9728 → RFC 8414/OIDC discovery),
//! registers itself (RFC 7591), sends a person to an authorization URL with a PKCE S256
//! challenge and the resource indicator (RFC 8707), takes the redirect on 127.0.0.1, and the
//! runtime's calls then carry a token the resource server accepts for itself.

mod common;

use maljan_client::{JobSpec, OAuthConfig, OAuthGrant};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_once_and_the_runtime_calls_with_the_token() {
    let s = common::Scratch::new();
    let peer = common::oauth::OAuthPeer::start(3600, &s.dir.path().join("peer.log"));
    let cfg = peer.server(OAuthConfig::default());
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    b.connect_timeout_seconds = 30.0;

    // Before any sign-in: a clear error naming the command, and no request for a token.
    let rt = s.runtime(vec![("saas", cfg.clone())], b.clone());
    let err = rt.test_server("saas").await.unwrap_err();
    assert!(err.contains("maljan servers login saas"), "{err}");
    rt.shutdown().await;

    let ctx = common::oauth::context("saas", &cfg, s.dir.path());
    let (done, address) = common::oauth::login_as_a_person(&peer.mcp, &ctx).await;

    // The authorization URL: the discovered endpoint, PKCE S256, the resource indicator, the
    // loopback redirect, and the scope the resource server's challenge named.
    let url = reqwest::Url::parse(&address).unwrap();
    assert_eq!(
        format!("{}://{}", url.scheme(), url.authority()),
        peer.issuer
    );
    let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["code_challenge"].len(), 43, "a base64url SHA-256");
    assert_eq!(q["resource"], peer.mcp);
    assert!(q["redirect_uri"].starts_with("http://127.0.0.1:"));
    assert!(
        q["scope"].split(' ').any(|s| s == "mcp:tools"),
        "{}",
        q["scope"]
    );

    // Registered dynamically, one authorization code exchanged, a refresh token kept.
    let stats = peer.stats().await;
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["grants"]["authorization_code"], 1, "{stats}");
    assert_eq!(done.grant, OAuthGrant::AuthorizationCode);
    assert_eq!(q["client_id"], done.client_id);
    assert!(done.refreshable);
    assert!(done.file.starts_with(s.dir.path()));

    // Now the runtime connects with it, and the resource server saw this client's token.
    let rt = s.runtime(vec![("saas", cfg)], b);
    let job = rt.new_job(JobSpec::labelled("oauth")).unwrap();
    let rec = job.server("saas").unwrap().call("whoami", json!({})).await;
    assert!(rec.ok, "{:?}", rec.error);
    let who: serde_json::Value = serde_json::from_str(&rec.text()).unwrap();
    assert_eq!(who["client_id"], done.client_id.as_str());
    assert!(
        who["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "mcp:tools"),
        "{who}"
    );
    rt.shutdown().await;
}
