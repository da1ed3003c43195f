//! The conformance suite's client under test, built on maljan-client's runtime.
//!
//! `conformance client --command "maljan-conformance-client" --scenario S` starts it with the test
//! server's streamable-HTTP URL as the last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
//! It connects through a one-server runtime (breaker, cap, ledger in memory), reads the tools, and
//! calls what the scenario expects: `tools_call` → add_numbers(a, b); `sse-retry` →
//! test_reconnection; a scenario whose context (MCP_CONFORMANCE_CONTEXT) lists `toolCalls` →
//! those calls with their arguments; anything else → every tool the runtime kept from
//! tools/list, with no arguments, one after another (a tool whose `x-mcp-header` annotations are
//! invalid is dropped there, and an `input_required` round is answered by the runtime's decline
//! policy).
//!
//! It runs as an operator who set `core.mcp.input_policy = "defaults"`: a form whose schema gives
//! a default for every field is accepted with those defaults (SEP-1034), anything else is
//! declined with the reason.
//!
//! An `auth/*` scenario signs in first, as `maljan servers login` does (the runtime's OAuth, its
//! tokens sealed in a temporary data directory): the authorization-code grant, with the
//! "browser" an HTTP client that opens the authorization URL and follows its redirect to the
//! loopback listener (the suite's authorization server approves at once); or, when the suite's
//! context (MCP_CONFORMANCE_CONTEXT) holds a client secret for a client-credentials scenario,
//! that grant. Then it connects with the stored tokens and calls a tool when the server has one.
//! A call refused for its token's scope (403 insufficient_scope) is what a person meets as
//! "sign in again with this scope": the client adds the scope and signs in again, once, as
//! `maljan servers login` would with the scope added to the config.

use std::process::ExitCode;

use maljan_client::{
    BreakerConfig, Config, InputPolicy, JobSpec, KeySource, Ledger, OAuthConfig, OAuthGrant,
    Runtime, ServerConfig, TransportKind, transport::oauth,
};
use serde_json::{Value, json};

/// The scenario's context, as the suite passes it.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default()
}

/// The OAuth settings a scenario's context asks for.
fn oauth_for(scenario: &str) -> OAuthConfig {
    let context = context();
    let text = |k: &str| context[k].as_str().unwrap_or_default().to_string();
    OAuthConfig {
        grant: if scenario.contains("client-credentials") {
            OAuthGrant::ClientCredentials
        } else {
            OAuthGrant::AuthorizationCode
        },
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        // The document URL the suite's example clients publish; used where the authorization
        // server supports client ID metadata documents, dynamic registration elsewhere.
        client_metadata_url: "https://conformance-test.local/client-metadata.json".into(),
        ..Default::default()
    }
}

/// The person at the browser: opens the authorization URL and follows its redirect to the
/// loopback listener.
async fn approve(address: String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let Ok(answer) = client.get(&address).send().await else {
        eprintln!("the authorization URL did not answer");
        return;
    };
    let Some(to) = answer
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
    else {
        eprintln!(
            "the authorization URL answered {} without a redirect",
            answer.status()
        );
        return;
    };
    if client.get(to).send().await.is_err() {
        eprintln!("the redirect did not reach the loopback listener");
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: maljan-conformance-client URL");
        return ExitCode::FAILURE;
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let data = tempfile::tempdir().expect("a temporary data directory");
    let mut oauth_config = scenario.starts_with("auth/").then(|| oauth_for(&scenario));
    if let Some(o) = &oauth_config
        && let Err(e) = sign_in(&url, o, data.path()).await
    {
        eprintln!("sign-in failed: {e}");
        return ExitCode::FAILURE;
    }
    let mut outcome = run(&url, &scenario, data.path(), oauth_config.clone()).await;
    if let (Err(Some(again)), Some(o)) = (&outcome, oauth_config.as_mut()) {
        // Step up: the scope the refusal named, added to those asked for; or the same sign-in
        // again, for a server that no longer takes the stored one. Either way once, as a person
        // would run `maljan servers login` once.
        if let SignInAgain::ForScope(scope) = again {
            for s in scope.split_whitespace() {
                if !o.scopes.iter().any(|have| have == s) {
                    o.scopes.push(s.to_string());
                }
            }
        }
        eprintln!("signing in again with scopes {:?}", o.scopes);
        if let Err(e) = sign_in(&url, o, data.path()).await {
            eprintln!("sign-in failed: {e}");
            return ExitCode::FAILURE;
        }
        outcome = run(&url, &scenario, data.path(), oauth_config).await;
    }
    if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `maljan servers login`, with [`approve`] as the browser.
async fn sign_in(url: &str, o: &OAuthConfig, data: &std::path::Path) -> Result<(), String> {
    let ctx = oauth::OAuthContext::new("conformance", o.clone(), KeySource::in_dir(data), data);
    let wait = std::time::Duration::from_secs(20);
    let done = oauth::login(url, &ctx, wait, |a| {
        tokio::spawn(approve(a.to_string()));
    })
    .await?;
    eprintln!("signed in: scopes {:?}", done.scopes);
    Ok(())
}

/// Why a run ends asking for another sign-in.
enum SignInAgain {
    /// A call was refused for lacking this OAuth scope (403 insufficient_scope).
    ForScope(String),
    /// The server no longer takes the stored sign-in (401 with the token sent).
    Refused,
}

impl SignInAgain {
    /// What the runtime's error says, if it asks for another sign-in.
    fn from_error(message: &str, remediation: &str) -> Option<Self> {
        if let Some(scope) = needed_scope(message) {
            return Some(Self::ForScope(scope));
        }
        (message.contains("sign in again") || remediation.contains("servers login"))
            .then_some(Self::Refused)
    }
}

/// Connects through a fresh runtime and calls what the scenario expects. `Err(Some(again))`: the
/// server asked for another sign-in.
async fn run(
    url: &str,
    scenario: &str,
    data: &std::path::Path,
    oauth: Option<OAuthConfig>,
) -> Result<(), Option<SignInAgain>> {
    let mut config = Config {
        data_dir: data.to_path_buf(),
        ..Default::default()
    };
    config.core.mcp.input_policy = InputPolicy::Defaults;
    config.core.mcp.breaker = BreakerConfig {
        call_timeout_seconds: 20.0,
        connect_timeout_seconds: 20.0,
        ..Default::default()
    };
    config.servers.insert(
        "conformance".into(),
        ServerConfig {
            transport: TransportKind::StreamableHttp,
            url: url.to_string(),
            enabled: true,
            oauth,
            // The scenarios send arguments the tools' schemas refuse on purpose (a null for a
            // boolean header value, a missing field), to see what the client puts on the wire.
            send_unchecked_arguments: true,
            ..Default::default()
        },
    );
    let rt = Runtime::new(config, Ledger::open_in_memory());
    let job = rt
        .new_job(JobSpec::labelled(format!("conformance {scenario}")))
        .map_err(|e| {
            eprintln!("cannot start a job: {e}");
            None
        })?;
    let server = job.server("conformance").expect("configured above");
    let view = server.view().await.map_err(|e| {
        eprintln!("connect failed: {} ({})", e.message, e.remediation);
        SignInAgain::from_error(&e.message, &e.remediation)
    })?;
    eprintln!(
        "connected: protocol {}, {} tools",
        view.protocol_version,
        view.tools.len()
    );
    // Whether the scenario named its calls (a failed one fails the run), or the client is calling
    // whatever it was given (a tool's error is then just its answer).
    let mut named = true;
    let calls: Vec<(String, Value)> = match scenario {
        "tools_call" => vec![("add_numbers".into(), json!({"a": 5, "b": 3}))],
        "sse-retry" => vec![("test_reconnection".into(), json!({}))],
        s if s.starts_with("auth/") => view
            .tools
            .first()
            .map(|t| (t.name.clone(), json!({})))
            .into_iter()
            .collect(),
        _ => match context()["toolCalls"].as_array() {
            Some(listed) => listed
                .iter()
                .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["arguments"].clone())))
                .collect(),
            None => {
                named = false;
                view.tools
                    .iter()
                    .map(|t| (t.name.clone(), json!({})))
                    .collect()
            }
        },
    };
    if view.protocol_version.as_str() < "2026-07-28" {
        // rmcp opens its standalone GET stream on its own task once the session is initialized.
        // sse-retry takes the first GET it sees after the tool call's POST as the client's
        // reconnection, so a GET that lands just after the POST is mistaken for it (seen once in
        // CI: "Could not measure timing"); and elicitation-sep1034-client-defaults's server sends
        // its elicitation request with no related request, which the TypeScript SDK routes to
        // the GET stream and drops while that stream is not open (the call then waits out its
        // deadline: seen under `cargo test`). Letting that GET go out first gives every scenario
        // the order it measures. (2026-07-28 has no session and no standalone stream.)
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let mut outcome = Ok(());
    for (tool, args) in calls {
        let rec = server.call(&tool, args).await;
        match &rec.error {
            None => eprintln!("{tool}: {}", rec.text()),
            Some(e) => {
                eprintln!("{tool} failed: [{}] {}", e.code, e.message);
                let again = SignInAgain::from_error(&e.message, &e.remediation);
                if outcome.is_ok() && (named || again.is_some()) {
                    outcome = Err(again);
                }
            }
        }
    }
    job.finish();
    rt.shutdown().await;
    outcome
}

/// The scope a refusal for the token's scope names (the runtime's message quotes it).
fn needed_scope(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("needs the OAuth scope '")?;
    let (scope, _) = rest.split_once('\'')?;
    (!scope.is_empty()).then(|| scope.to_string())
}
