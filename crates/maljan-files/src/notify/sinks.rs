//! Delivering one message through one sink. Every address a sink reaches (a webhook's host, the
//! SMTP relay) is checked first: a loopback, private, link-local or reserved address is refused
//! unless the operator's sink table says `allow_private_endpoint = true`; HTTP goes through the
//! files server's guarded client (checking resolver, no proxy, no redirects). Errors name the
//! sink and the host, never a URL's path or query (Slack, Discord, Teams and Telegram keep
//! their secret there) nor a credential.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use serde_json::{Value, json};

use super::config::{EmailSink, SinkConfig, SinkKind};
use crate::download::{allowed, parse_numeric_v4};

/// The largest body sent; longer ones are cut (as automation-file does).
const MAX_BODY_BYTES: usize = 64 * 1024;
/// Discord refuses content over 2000 characters.
const DISCORD_MAX_CHARS: usize = 1900;

fn truncate(body: &str) -> String {
    if body.len() <= MAX_BODY_BYTES {
        return body.to_string();
    }
    let mut end = MAX_BODY_BYTES;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated]", &body[..end])
}

fn prefix(level: &str, warning: &'static str, error: &'static str) -> &'static str {
    match level {
        "warning" => warning,
        "error" => error,
        _ => "",
    }
}

/// The addresses `host` stands for, each checked against the SSRF policy.
pub(crate) async fn checked_addrs(
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let literal = bare
        .parse::<IpAddr>()
        .ok()
        .or_else(|| parse_numeric_v4(bare).map(IpAddr::V4));
    let addrs: Vec<SocketAddr> = match literal {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    if !allow_private && let Some(bad) = addrs.iter().find(|a| !allowed(a.ip(), false)) {
        return Err(format!(
            "refused: {host} is {}, a loopback, private, link-local or reserved address \
             (only the operator's sink table, with allow_private_endpoint = true, may reach one)",
            bad.ip()
        ));
    }
    Ok(addrs)
}

/// What automation-file's `FA_notify_list` shows of a sink: nothing secret.
pub(crate) fn describe(sink: &SinkConfig) -> Value {
    let mut out = json!({"name": sink.name, "type": sink.kind.type_name()});
    let host = |url: &str| {
        url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
    };
    match &sink.kind {
        SinkKind::Webhook { url, .. } => out["url_host"] = json!(host(url.expose())),
        SinkKind::Email(e) => {
            out["host"] = json!(e.host);
            out["port"] = json!(e.port);
            out["recipients"] = json!(e.recipients);
        }
        SinkKind::Telegram { chat_id, .. } => out["chat_id"] = json!(chat_id),
        SinkKind::PagerDuty { source, .. } => out["source"] = json!(source),
        _ => {}
    }
    out
}

/// Sends one message; the error says why, naming the sink.
pub(crate) async fn send(
    sink: &SinkConfig,
    subject: &str,
    body: &str,
    level: &str,
) -> Result<(), String> {
    let body = truncate(body);
    let (url, payload, authorization) = match &sink.kind {
        SinkKind::Email(mail) => return send_mail(sink, mail, subject, &body, level).await,
        SinkKind::Webhook { url, authorization } => (
            url.expose().to_string(),
            json!({"subject": subject, "body": body, "level": level}),
            authorization.as_ref().map(|a| a.expose().to_string()),
        ),
        SinkKind::Slack { url } => (
            url.expose().to_string(),
            json!({"text": format!("{}*{subject}*\n{body}", prefix(level, ":warning: ", ":rotating_light: "))}),
            None,
        ),
        SinkKind::Discord { url } => {
            let mut content = format!(
                "{}**{subject}**\n{body}",
                prefix(level, ":warning: ", ":rotating_light: ")
            );
            if content.chars().count() > DISCORD_MAX_CHARS {
                content = content.chars().take(DISCORD_MAX_CHARS).collect::<String>() + "…";
            }
            (url.expose().to_string(), json!({"content": content}), None)
        }
        SinkKind::Teams { url } => {
            let color = match level {
                "warning" => "E67E22",
                "error" => "C0392B",
                _ => "2E86DE",
            };
            (
                url.expose().to_string(),
                json!({"@type": "MessageCard", "@context": "https://schema.org/extensions",
                       "summary": subject, "themeColor": color, "title": subject, "text": body}),
                None,
            )
        }
        SinkKind::Telegram {
            api_url,
            bot_token,
            chat_id,
        } => (
            format!(
                "{}/bot{}/sendMessage",
                api_url.trim_end_matches('/'),
                bot_token.expose()
            ),
            json!({"chat_id": chat_id, "disable_web_page_preview": true,
                   "text": format!("{}{subject}\n{body}", prefix(level, "⚠️ ", "🚨 "))}),
            None,
        ),
        SinkKind::PagerDuty {
            url,
            routing_key,
            source,
        } => (
            url.clone(),
            json!({"routing_key": routing_key.expose(), "event_action": "trigger",
                   "payload": {"summary": subject, "source": source, "severity": level,
                               "custom_details": {"body": body}}}),
            None,
        ),
    };
    post(sink, &url, &payload, authorization.as_deref()).await
}

async fn post(
    sink: &SinkConfig,
    url: &str,
    payload: &Value,
    authorization: Option<&str>,
) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|_| format!("sink {}: not a URL", sink.name))?;
    let host = parsed.host_str().unwrap_or_default().to_string();
    let port = parsed.port_or_known_default().unwrap_or(443);
    checked_addrs(&host, port, sink.net.allow_private_endpoint)
        .await
        .map_err(|e| format!("sink {}: {e}", sink.name))?;
    let client = crate::storage::guard::guarded_client(&sink.net, None)
        .map_err(|e| format!("sink {}: {}", sink.name, e.message))?;
    let mut request = client
        .post(parsed)
        .timeout(Duration::from_secs(sink.net.timeout_s))
        .json(payload);
    if let Some(value) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("sink {}: request to {host} failed: {}", sink.name, chain(e)))?;
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        return Err(format!(
            "sink {}: {host} answered HTTP {}",
            sink.name,
            status.as_u16()
        ));
    }
    Ok(())
}

/// An error and its causes, without the request's URL.
fn chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn send_mail(
    sink: &SinkConfig,
    mail: &EmailSink,
    subject: &str,
    body: &str,
    level: &str,
) -> Result<(), String> {
    use lettre::{
        AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
        message::{Mailbox, header::ContentType},
        transport::smtp::{
            authentication::Credentials,
            client::{Certificate, Tls, TlsParameters},
        },
    };
    let fail = |what: String| format!("sink {}: {what}", sink.name);
    let addrs = checked_addrs(&mail.host, mail.port, sink.net.allow_private_endpoint)
        .await
        .map_err(fail)?;
    let mailbox = |a: &str| {
        a.parse::<Mailbox>()
            .map_err(|e| fail(format!("the address {a} is not valid: {e}")))
    };
    let mut message = Message::builder()
        .from(mailbox(&mail.sender)?)
        .subject(format!("[{}] {subject}", level.to_uppercase()))
        .header(ContentType::TEXT_PLAIN);
    for to in &mail.recipients {
        message = message.to(mailbox(to)?);
    }
    let message = message
        .body(body.to_string())
        .map_err(|e| fail(format!("the message cannot be built: {e}")))?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Connect to the checked address; the certificate is verified against the configured name.
    let mut transport =
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addrs[0].ip().to_string())
            .port(mail.port)
            .timeout(Some(Duration::from_secs(sink.net.timeout_s)));
    if mail.use_tls {
        let mut tls = TlsParameters::builder(mail.host.clone());
        if let Some(path) = &mail.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| fail(format!("cannot read ca_file {}: {e}", path.display())))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| {
                fail(format!(
                    "ca_file {} holds no certificate: {e}",
                    path.display()
                ))
            })?;
            tls = tls.add_root_certificate(cert);
        }
        let tls = tls
            .build_rustls()
            .map_err(|e| fail(format!("TLS set-up failed: {e}")))?;
        transport = transport.tls(Tls::Required(tls));
    } else {
        transport = transport.tls(Tls::None);
    }
    if let (Some(user), Some(password)) = (&mail.username, &mail.password) {
        transport = transport.credentials(Credentials::new(
            user.clone(),
            password.expose().to_string(),
        ));
    }
    transport
        .build()
        .send(message)
        .await
        .map(|_| ())
        .map_err(|e| fail(format!("SMTP to {}:{} failed: {e}", mail.host, mail.port)))
}
