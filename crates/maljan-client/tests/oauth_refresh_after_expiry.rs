//! Refresh without a person: with access tokens that live 2 s at a real authorization server
//! (node-oidc-provider), a call after expiry still goes through, on the same connection and from
//! a new runtime that starts from the sealed store alone, because the runtime refreshes the
//! token (a `refresh_token` grant, with the resource indicator) and seals the new one.

mod common;

use std::time::Duration;

use maljan_client::{JobSpec, OAuthConfig};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_without_a_person() {
    let s = common::Scratch::new();
    let peer = common::oauth::OAuthPeer::start(2, &s.dir.path().join("peer.log"));
    let cfg = peer.server(OAuthConfig::default());
    let ctx = common::oauth::context("saas", &cfg, s.dir.path());
    let (done, _) = common::oauth::login_as_a_person(&peer.mcp, &ctx).await;
    assert!(done.refreshable, "the provider gave no refresh token");
    assert_eq!(done.expires_in, Some(2));
    let sealed_at_login = std::fs::read_to_string(&done.file).unwrap();

    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    b.connect_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("saas", cfg.clone())], b.clone());
    let job = rt.new_job(JobSpec::labelled("refresh")).unwrap();
    let h = job.server("saas").unwrap();
    let first = h.call("whoami", json!({})).await;
    assert!(first.ok, "{:?}", first.error);

    // Past the token's life: the resource server would refuse it now.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let refreshes_before = peer.grants("refresh_token").await;
    let second = h.call("whoami", json!({})).await;
    assert!(second.ok, "after expiry: {:?}", second.error);
    assert!(
        peer.grants("refresh_token").await > refreshes_before,
        "{}",
        peer.stats().await
    );
    assert_eq!(peer.grants("authorization_code").await, 1, "no new sign-in");
    let sealed_after = std::fs::read_to_string(&done.file).unwrap();
    assert!(sealed_after.starts_with("enc:v1:"));
    assert_ne!(sealed_after, sealed_at_login, "the new tokens were stored");
    rt.shutdown().await;

    // A new process: only the sealed file to go on, and the token in it has expired too.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let rt = s.runtime(vec![("saas", cfg)], b);
    let job = rt.new_job(JobSpec::labelled("restart")).unwrap();
    let third = job.server("saas").unwrap().call("whoami", json!({})).await;
    assert!(third.ok, "after a restart: {:?}", third.error);
    let who: serde_json::Value = serde_json::from_str(&third.text()).unwrap();
    assert_eq!(who["client_id"], done.client_id.as_str());
    assert_eq!(
        peer.grants("authorization_code").await,
        1,
        "still no new sign-in"
    );
    rt.shutdown().await;
}
