//! The servers the console edits and tests: one [`ServerInput`] from the API's JSON or a page's
//! form, turned into a `ServerConfig` with the same checks as `maljan servers add`
//! (`valid_server_name`, `TransportKind::parse`, then `Config::validate` on the whole file as
//! `save` does), errors per field. An `auth_token` is sealed with maljan-client's secrets before
//! it reaches the config, and only a mask ever comes back.

use std::{collections::BTreeMap, time::Duration};

use maljan_client::{
    Config, Ledger, Runtime, ServerConfig, TransportKind, config::valid_server_name,
    redact::scrub_url, secrets::Secret,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::state::{AppState, Problem};

/// Per-field errors (`{"errors": {"url": "…"}}`).
pub type FieldErrors = BTreeMap<String, String>;

/// What a client sends to create, change or test a server; absent fields keep their value.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerInput {
    pub name: Option<String>,
    pub transport: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub env_allow: Option<Vec<String>>,
    pub url: Option<String>,
    /// A new token (sealed before it is stored); empty or absent keeps the stored one.
    pub auth_token: Option<String>,
    /// Remove the stored token.
    #[serde(default)]
    pub clear_token: bool,
    pub mirror_dir: Option<String>,
    /// The tool allow-list; null: every tool; absent: keep.
    #[serde(default, deserialize_with = "some_or_null")]
    #[schema(value_type = Option<Vec<String>>)]
    pub tools: Option<Option<Vec<String>>>,
    pub label: Option<String>,
    pub enabled: Option<bool>,
}

/// Tells `"tools": null` (allow all) from a missing field (keep).
fn some_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Vec<String>>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// The last connection test of a server (kept in memory, shown on its card).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TestOutcome {
    pub ok: bool,
    pub at: String,
    pub latency_ms: f64,
    pub detail: String,
    pub via: Option<String>,
    pub protocol_version: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub manifest_declared: bool,
    pub tools: Vec<ToolRow>,
    pub unavailable: usize,
    pub staging_tools: Vec<String>,
}

/// One tool of a tested server, as its manifest declares it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ToolRow {
    pub name: String,
    pub available: bool,
    pub reason: Option<String>,
    pub remediation: Option<String>,
    pub without: Option<String>,
    pub timeout_s: Option<f64>,
    pub description: Option<String>,
}

fn field_of(key: &str, name: &str) -> String {
    let prefix = format!("servers.{name}.");
    match key.strip_prefix(&prefix) {
        Some(field) => field.to_string(),
        None => "name".into(),
    }
}

/// Applies `input` to `existing` (None: a new server named `name`) and checks the result as
/// `maljan servers add` and `Config::save` would. Nothing is written.
pub fn build(
    config: &Config,
    name: &str,
    existing: Option<&ServerConfig>,
    input: &ServerInput,
) -> Result<ServerConfig, FieldErrors> {
    let mut errors = FieldErrors::new();
    if !valid_server_name(name) {
        errors.insert(
            "name".into(),
            format!(
                "'{name}' is not a server name: a lower-case letter first, then at most 31 lower-case letters, digits, '-' or '_'"
            ),
        );
    }
    let mut s = existing.cloned().unwrap_or_else(|| ServerConfig {
        enabled: true,
        ..Default::default()
    });
    if let Some(t) = &input.transport {
        match TransportKind::parse(t.trim()) {
            Some(k) => s.transport = k,
            None => {
                errors.insert(
                    "transport".into(),
                    format!("'{t}': expected stdio, http, streamable-http or sse"),
                );
            }
        }
    }
    let text = |v: &Option<String>, old: &mut String| {
        if let Some(v) = v {
            *old = v.trim().to_string();
        }
    };
    text(&input.command, &mut s.command);
    text(&input.cwd, &mut s.cwd);
    text(&input.url, &mut s.url);
    text(&input.mirror_dir, &mut s.mirror_dir);
    text(&input.label, &mut s.label);
    if let Some(a) = &input.args {
        s.args = a.clone();
    }
    if let Some(e) = &input.env {
        s.env = e.clone();
    }
    if let Some(e) = &input.env_allow {
        s.env_allow = e
            .iter()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
    }
    if let Some(t) = &input.tools {
        s.tools = t.clone();
    }
    if let Some(e) = input.enabled {
        s.enabled = e;
    }
    // What one transport needs the other does not: a form sends every field, empty or not.
    if s.transport.is_http() {
        s.command.clear();
        s.args.clear();
    } else {
        s.url.clear();
    }
    if let Some(problem) = refused_url(&s) {
        errors.insert("url".into(), problem);
    }
    if input.clear_token {
        s.auth_token.clear();
    } else if let Some(token) = input.auth_token.as_deref().map(str::trim)
        && !token.is_empty()
    {
        match maljan_client::KeySource::in_dir(&config.data_dir).seal(&Secret::new(token)) {
            Ok(sealed) => s.auth_token = sealed,
            Err(e) => {
                errors.insert("auth_token".into(), format!("cannot seal the token: {e}"));
            }
        }
    }
    if errors.is_empty() {
        let mut whole = config.clone();
        whole.servers.insert(name.to_string(), s.clone());
        if let Err(e) = whole.validate() {
            errors.insert(field_of(&e.key, name), e.problem);
        }
    }
    if errors.is_empty() {
        Ok(s)
    } else {
        Err(errors)
    }
}

/// URLs the console will not store even though they parse: credentials belong in `auth_token`
/// (sealed), not in a URL that is shown and logged.
fn refused_url(s: &ServerConfig) -> Option<String> {
    if !s.transport.is_http() || s.url.is_empty() {
        return None;
    }
    let u = reqwest::Url::parse(&s.url).ok()?;
    if !u.username().is_empty() || u.password().is_some() {
        return Some(
            "the URL carries credentials: put the token in auth_token (stored sealed) instead"
                .into(),
        );
    }
    if u.fragment().is_some() {
        return Some("a server URL has no #fragment".into());
    }
    None
}

/// Connects to `cfg` as if it were saved under `name` (nothing is saved or ledgered) and reads
/// its tools and manifest, within a few seconds.
pub async fn test_values(config: &Config, name: &str, cfg: ServerConfig) -> TestOutcome {
    let mut whole = config.clone();
    whole.core.mcp.breaker.connect_timeout_seconds =
        whole.core.mcp.breaker.connect_timeout_seconds.min(8.0);
    whole.servers.insert(
        name.to_string(),
        ServerConfig {
            enabled: true,
            // The test lists every tool, so an allow-list can be chosen from them.
            tools: None,
            ..cfg
        },
    );
    let rt = Runtime::new(whole, Ledger::open_in_memory());
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), rt.test_server(name)).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let at = maljan_client::time::rfc3339(std::time::SystemTime::now());
    let failed = |detail: String| TestOutcome {
        ok: false,
        at: at.clone(),
        latency_ms,
        detail,
        via: None,
        protocol_version: None,
        server_name: None,
        server_version: None,
        manifest_declared: false,
        tools: Vec::new(),
        unavailable: 0,
        staging_tools: Vec::new(),
    };
    let test = match result {
        Err(_) => return failed("no answer within 10 s".into()),
        Ok(Err(why)) => return failed(why),
        Ok(Ok(t)) => t,
    };
    let v = &test.view;
    let tools: Vec<ToolRow> = v
        .manifest
        .tools
        .iter()
        .map(|m| ToolRow {
            name: m.name.clone(),
            available: m.available,
            reason: m.reason.clone(),
            remediation: m.remediation.clone(),
            without: m.without.clone(),
            timeout_s: m.timeout_s,
            description: v.tool(&m.name).and_then(|t| t.description.clone()),
        })
        .collect();
    // Unavailable tools first (a stable sort: the server's order within each group), so the
    // card and the form open on what needs a remedy.
    let mut tools = tools;
    tools.sort_by_key(|t| t.available);
    let unavailable = tools.iter().filter(|t| !t.available).count();
    let manifest = match (&v.manifest_declared, &v.manifest_error) {
        (true, _) => "manifest declared".to_string(),
        (false, Some(e)) => {
            format!("manifest unreadable ({e}): all listed tools count as available")
        }
        (false, None) => "no manifest: all listed tools count as available".to_string(),
    };
    TestOutcome {
        ok: true,
        detail: format!(
            "connected over {} in {:.0} ms, protocol {}, {} tools ({unavailable} unavailable), {manifest}",
            v.via,
            test.handshake_ms,
            v.protocol_version,
            tools.len()
        ),
        at,
        latency_ms,
        via: Some(v.via.clone()),
        protocol_version: Some(v.protocol_version.clone()),
        server_name: v.server_name.clone(),
        server_version: v.server_version.clone(),
        manifest_declared: v.manifest_declared,
        tools,
        unavailable,
        staging_tools: v.staging_tools.clone(),
    }
}

/// Where a server is, for people: the command line, or the URL without its query string.
pub fn target(s: &ServerConfig) -> String {
    match s.transport {
        TransportKind::Stdio => command_line(&s.command, &s.args),
        _ => scrub_url(&s.url),
    }
}

/// A command and its arguments as a shell would need them typed: an argument with a space, a
/// quote or a shell character is single-quoted, so `sh -c 'id > /tmp/m'` reads as what runs.
pub fn command_line(command: &str, args: &[String]) -> String {
    fn quoted(word: &str) -> String {
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
        if plain {
            word.to_string()
        } else {
            format!("'{}'", word.replace('\'', r"'\''"))
        }
    }
    if command.trim().is_empty() {
        return String::new();
    }
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(quoted)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The account a stdio server runs as: the console's own.
pub fn run_as() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "the account that started the console".into())
}

/// A server's breaker, as its card and the API show it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BreakerView {
    /// closed, or resting after failures in a row.
    pub state: String,
    pub failures: u32,
    pub rests: u32,
}

/// One server as the API and the cards show it (the token masked).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ServerView {
    pub name: String,
    pub label: String,
    /// stdio, http, streamable-http or sse.
    pub transport: String,
    pub enabled: bool,
    /// The command line (stdio) or the URL without its query string.
    pub target: String,
    /// What the console starts for this server (stdio), said plainly.
    pub runs: Option<String>,
    pub command: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub env_allow: Vec<String>,
    pub url: String,
    /// A mask when a token is stored, else null.
    pub auth_token: Option<String>,
    pub mirror_dir: String,
    /// The allow-list: null is every tool, an empty list no tool at all.
    pub tools_allowed: Option<Vec<String>>,
    pub last_test: Option<TestOutcome>,
    pub breaker: Option<BreakerView>,
}

pub fn describe(state: &AppState, name: &str, s: &ServerConfig) -> ServerView {
    let rt = state.runtime();
    let breaker = rt.slot(name).map(|slot| BreakerView {
        state: if slot.breaker.is_resting() {
            "resting"
        } else {
            "closed"
        }
        .into(),
        failures: slot.breaker.failures(),
        rests: slot.breaker.rests(),
    });
    ServerView {
        name: name.to_string(),
        label: s.label.clone(),
        transport: s.transport.as_str().to_string(),
        enabled: s.enabled,
        target: target(s),
        runs: (s.transport == TransportKind::Stdio).then(|| target(s)),
        command: s.command.clone(),
        args: s.args.clone(),
        cwd: s.cwd.clone(),
        env: s.env.clone(),
        env_allow: s.env_allow.clone(),
        url: scrub_url(&s.url),
        auth_token: (!s.auth_token.is_empty()).then(|| "••••••••".to_string()),
        mirror_dir: s.mirror_dir.clone(),
        tools_allowed: s.tools.clone(),
        last_test: state.last_test(name),
        breaker,
    }
}

/// Saves a new or changed entry, then gives new jobs a runtime that has it and tests it.
pub fn store(
    state: &std::sync::Arc<AppState>,
    name: &str,
    input: &ServerInput,
    creating: bool,
) -> Result<ServerConfig, Result<FieldErrors, Problem>> {
    let mut config = state.config_for_edit().map_err(Err)?;
    let existing = config.servers.get(name).cloned();
    match (creating, &existing) {
        (true, Some(_)) => {
            return Err(Ok(FieldErrors::from([(
                "name".to_string(),
                format!("a server named '{name}' exists already"),
            )])));
        }
        (false, None) => return Err(Err(Problem::new(404, format!("no server named '{name}'")))),
        _ => {}
    }
    let entry = build(&config, name, existing.as_ref(), input).map_err(Ok)?;
    config.servers.insert(name.to_string(), entry.clone());
    config
        .save()
        .map_err(|e| Err(Problem::new(500, e.to_string())))?;
    state.reload().map_err(Err)?;
    let (st, cfg, n, tested) = (state.clone(), config, name.to_string(), entry.clone());
    tokio::spawn(async move {
        let outcome = test_values(&cfg, &n, tested).await;
        st.record_test(&n, outcome);
    });
    Ok(entry)
}

pub fn remove(state: &AppState, name: &str) -> Result<(), Problem> {
    let mut config = state.config_for_edit()?;
    if config.servers.remove(name).is_none() {
        return Err(Problem::new(404, format!("no server named '{name}'")));
    }
    config
        .save()
        .map_err(|e| Problem::new(500, e.to_string()))?;
    state
        .tests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(name);
    state.reload()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn input(v: Value) -> ServerInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn errors_name_their_field() {
        let c = Config::builtin();
        let e = build(&c, "Bad Name", None, &input(json!({"command": "x"}))).unwrap_err();
        assert!(e["name"].contains("not a server name"), "{e:?}");
        let e = build(&c, "web", None, &input(json!({"transport": "http"}))).unwrap_err();
        assert!(e["url"].contains("needs its url"), "{e:?}");
        let e = build(
            &c,
            "web",
            None,
            &input(json!({"transport": "http", "url": "ftp://x"})),
        )
        .unwrap_err();
        assert!(e["url"].contains("scheme"), "{e:?}");
        let e = build(
            &c,
            "web",
            None,
            &input(json!({"transport": "http", "url": "http://u:p@h/mcp"})),
        )
        .unwrap_err();
        assert!(e["url"].contains("credentials"), "{e:?}");
        let e = build(
            &c,
            "x",
            None,
            &input(json!({"transport": "carrier-pigeon"})),
        )
        .unwrap_err();
        assert!(e.contains_key("transport"), "{e:?}");
        let e = build(&c, "x", None, &input(json!({"command": ""}))).unwrap_err();
        assert!(e["command"].contains("command"), "{e:?}");
        let ok = build(
            &c,
            "x",
            None,
            &input(json!({"command": "srv", "args": ["a"], "tools": ["echo"]})),
        )
        .unwrap();
        assert_eq!(
            (ok.command.as_str(), ok.tools),
            ("srv", Some(vec!["echo".to_string()]))
        );
    }

    #[test]
    fn a_command_line_reads_as_what_runs() {
        let args = ["-c".to_string(), "id > /tmp/m".to_string()];
        assert_eq!(command_line("sh", &args), "sh -c 'id > /tmp/m'");
        assert_eq!(command_line("a", &["it's".into()]), r"a 'it'\''s'");
        assert_eq!(command_line(" ", &args), "");
    }

    #[test]
    fn tools_null_allows_all_and_absent_keeps() {
        let c = Config::builtin();
        let old = ServerConfig {
            command: "a".into(),
            tools: Some(vec!["t".into()]),
            enabled: true,
            ..Default::default()
        };
        let kept = build(&c, "x", Some(&old), &input(json!({}))).unwrap();
        assert_eq!(kept.tools, Some(vec!["t".to_string()]));
        let all = build(&c, "x", Some(&old), &input(json!({"tools": null}))).unwrap();
        assert_eq!(all.tools, None);
    }
}
