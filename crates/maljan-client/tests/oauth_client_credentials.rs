//! Machine to machine: the client-credentials grant at a real authorization server
//! (node-oidc-provider). The runtime mints a token for the resource it calls (RFC 8707), with
//! the scope the resource server's challenge names, mints a new one when it expires (no refresh
//! token, no person), and a wrong secret fails the call with the provider's reason while the
//! runtime keeps serving the other server.

mod common;

use std::time::Duration;

use maljan_client::{JobSpec, KeySource, OAuthConfig, OAuthGrant, Secret};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_client_mints_tokens_as_they_expire() {
    let s = common::Scratch::new();
    let peer = common::oauth::OAuthPeer::start(2, &s.dir.path().join("peer.log"));
    let keys = KeySource::in_dir(s.dir.path());
    let machine = |secret: &str| OAuthConfig {
        grant: OAuthGrant::ClientCredentials,
        client_id: peer.m2m_client_id.clone(),
        client_secret: keys.seal(&Secret::new(secret)).unwrap(),
        ..Default::default()
    };
    let good = peer.server(machine(&peer.m2m_client_secret));
    let wrong = peer.server(machine("not-the-secret"));
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    b.connect_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("pipeline", good), ("impostor", wrong)], b);
    let job = rt.new_job(JobSpec::labelled("m2m")).unwrap();

    let h = job.server("pipeline").unwrap();
    let first = h.call("whoami", json!({})).await;
    assert!(first.ok, "{:?}", first.error);
    let who: serde_json::Value = serde_json::from_str(&first.text()).unwrap();
    assert_eq!(who["client_id"], peer.m2m_client_id.as_str());
    assert_eq!(who["scopes"], json!(["mcp:tools"]));
    assert_eq!(peer.grants("client_credentials").await, 1);

    tokio::time::sleep(Duration::from_millis(2600)).await;
    let second = h.call("whoami", json!({})).await;
    assert!(second.ok, "after expiry: {:?}", second.error);
    assert_eq!(
        peer.grants("client_credentials").await,
        2,
        "a new token was minted"
    );
    let sealed = std::fs::read_to_string(s.dir.path().join("oauth/pipeline.sealed")).unwrap();
    assert!(sealed.starts_with("enc:v1:"));

    let refused = job
        .server("impostor")
        .unwrap()
        .call("whoami", json!({}))
        .await;
    assert!(!refused.ok);
    let e = refused.error.as_ref().unwrap();
    assert!(
        e.message.contains("invalid_client") || e.message.contains("authentication failed"),
        "{e:?}"
    );
    assert!(!e.message.contains("not-the-secret"), "{e:?}");
    // The good server is not affected.
    assert!(h.call("whoami", json!({})).await.ok);
    assert_eq!(peer.grants("client_credentials").await, 2);
    rt.shutdown().await;
}
