//! The operator's notification sinks, read once at start-up from TOML
//! (`maljan serve files --notify-config FILE`, or MALJAN_NOTIFY_CONFIG):
//!
//! ```toml
//! dedup_seconds = 60                 # FA_notify_send drops a repeat within this window (0: off)
//! [sinks.ops]
//! type = "webhook"                   # POSTs {"subject","body","level"}
//! url = "https://hooks.example/ops"  # or url_file / url_env, like every secret below
//! authorization_env = "OPS_TOKEN"    # optional: the Authorization header's value
//! [sinks.chat]
//! type = "slack"                     # or "discord", "teams": webhook_url (a secret)
//! webhook_url_env = "SLACK_WEBHOOK"
//! [sinks.mail]
//! type = "email"                     # SMTP; STARTTLS required unless use_tls = false
//! host = "smtp.example"
//! port = 587
//! sender = "maljan@example"
//! recipients = ["ops@example"]
//! username = "maljan"
//! password_file = "smtp.secret"
//! ca_file = "ca.pem"                 # optional: trusted besides the system's roots
//! [sinks.phone]
//! type = "telegram"                  # bot_token (a secret), chat_id; api_url to override
//! bot_token_env = "TG_TOKEN"
//! chat_id = "-1001"
//! [sinks.pager]
//! type = "pagerduty"                 # routing_key (a secret), source; url to override
//! routing_key_env = "PD_KEY"
//! ```
//!
//! Every sink also takes `timeout_s` (default 10) and `allow_private_endpoint` (default false:
//! a sink whose address is loopback, private, link-local or reserved is refused, as every
//! outbound URL of the files server is). Secrets follow the storage config's rule (inline,
//! `_file` relative to this file, or `_env`) and are held as [`Secret`], never shown. Unknown
//! keys are errors naming the key, never a value.

use std::path::{Path, PathBuf};

use crate::storage::{
    Secret,
    profiles::{self, Fields, Network},
};

const DEFAULT_DEDUP_SECONDS: f64 = 60.0;
const DEFAULT_TIMEOUT_S: u64 = 10;

/// The operator's sinks and the send-time dedup window.
#[derive(Debug, Clone)]
pub struct NotifyConfig {
    pub(crate) sinks: Vec<SinkConfig>,
    pub(crate) dedup_seconds: f64,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            sinks: Vec::new(),
            dedup_seconds: DEFAULT_DEDUP_SECONDS,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SinkConfig {
    pub(crate) name: String,
    pub(crate) kind: SinkKind,
    pub(crate) net: Network,
}

#[derive(Debug, Clone)]
pub(crate) enum SinkKind {
    Webhook {
        url: Secret,
        authorization: Option<Secret>,
    },
    Slack {
        url: Secret,
    },
    Discord {
        url: Secret,
    },
    Teams {
        url: Secret,
    },
    Telegram {
        api_url: String,
        bot_token: Secret,
        chat_id: String,
    },
    PagerDuty {
        url: String,
        routing_key: Secret,
        source: String,
    },
    Email(EmailSink),
}

#[derive(Debug, Clone)]
pub(crate) struct EmailSink {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) sender: String,
    pub(crate) recipients: Vec<String>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
    pub(crate) use_tls: bool,
    pub(crate) ca_file: Option<PathBuf>,
}

impl SinkKind {
    /// The type name automation-file gives the same sink.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            SinkKind::Webhook { .. } => "WebhookSink",
            SinkKind::Slack { .. } => "SlackSink",
            SinkKind::Discord { .. } => "DiscordSink",
            SinkKind::Teams { .. } => "TeamsSink",
            SinkKind::Telegram { .. } => "TelegramSink",
            SinkKind::PagerDuty { .. } => "PagerDutySink",
            SinkKind::Email(_) => "EmailSink",
        }
    }
}

impl NotifyConfig {
    /// Reads the file; the error names the file and the key at fault, never a value.
    pub fn load(path: &Path) -> Result<Self, String> {
        profiles::load_config(path, Self::parse)
    }

    /// Parses a config's text; `env` looks up the `_env` secrets.
    pub fn parse(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut top = Fields::new(profiles::toml_table(text)?, String::new(), base, env);
        let dedup_seconds = top
            .seconds("dedup_seconds")?
            .unwrap_or(DEFAULT_DEDUP_SECONDS);
        let mut sinks = Vec::new();
        for (name, mut f) in top.profiles("sinks")? {
            if name.is_empty() || name.len() > 100 {
                return Err("a sink's name must be 1 to 100 characters".into());
            }
            let kind = sink_kind(&mut f)?;
            let net = Network {
                allow_private_endpoint: f.bool("allow_private_endpoint")?.unwrap_or(false),
                max_retries: 0,
                timeout_s: f.int("timeout_s")?.unwrap_or(DEFAULT_TIMEOUT_S),
            };
            // Under FA_notify_send's own timeout (120 s): the sinks are sent to at once.
            if net.timeout_s == 0 || net.timeout_s > 100 {
                return Err(format!("{} must be between 1 and 100", f.name("timeout_s")));
            }
            f.finish()?;
            sinks.push(SinkConfig { name, kind, net });
        }
        top.finish()?;
        Ok(Self {
            sinks,
            dedup_seconds,
        })
    }
}

fn required<T>(f: &Fields<'_>, key: &str, value: Option<T>) -> Result<T, String> {
    value.ok_or_else(|| format!("{} is required", f.name(key)))
}

/// A secret that is a URL: checked to be http(s) without showing it.
fn secret_url(f: &mut Fields<'_>, key: &str) -> Result<Secret, String> {
    let value = f.secret(key)?;
    let url = required(f, key, value)?;
    match url::Url::parse(url.expose()) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(url),
        _ => Err(format!("{} must be an http or https URL", f.name(key))),
    }
}

fn sink_kind(f: &mut Fields<'_>) -> Result<SinkKind, String> {
    let kind = f.string("type")?;
    let kind = required(f, "type", kind)?;
    Ok(match kind.as_str() {
        "webhook" => SinkKind::Webhook {
            url: secret_url(f, "url")?,
            authorization: f.secret("authorization")?,
        },
        "slack" => SinkKind::Slack {
            url: secret_url(f, "webhook_url")?,
        },
        "discord" => SinkKind::Discord {
            url: secret_url(f, "webhook_url")?,
        },
        "teams" => SinkKind::Teams {
            url: secret_url(f, "webhook_url")?,
        },
        "telegram" => {
            let token = f.secret("bot_token")?;
            let chat_id = f.string("chat_id")?;
            SinkKind::Telegram {
                api_url: f
                    .url("api_url")?
                    .unwrap_or_else(|| "https://api.telegram.org".into()),
                bot_token: required(f, "bot_token", token)?,
                chat_id: required(f, "chat_id", chat_id)?,
            }
        }
        "pagerduty" => {
            let key = f.secret("routing_key")?;
            SinkKind::PagerDuty {
                url: f
                    .url("url")?
                    .unwrap_or_else(|| "https://events.pagerduty.com/v2/enqueue".into()),
                routing_key: required(f, "routing_key", key)?,
                source: f.string("source")?.unwrap_or_else(|| "maljan".into()),
            }
        }
        "email" => {
            let host = f.string("host")?;
            let sender = f.string("sender")?;
            let recipients = f.strings("recipients")?.unwrap_or_default();
            if recipients.is_empty() {
                return Err(format!(
                    "{} needs at least one address",
                    f.name("recipients")
                ));
            }
            let port = f.int("port")?.unwrap_or(587);
            let port = u16::try_from(port)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{} must be 1 to 65535", f.name("port")))?;
            let username = f.string("username")?;
            let password = f.secret("password")?;
            if password.is_some() != username.is_some() {
                return Err(format!(
                    "{} and its password go together",
                    f.name("username")
                ));
            }
            let ca_file = f.string("ca_file")?.map(|p| f.base().join(p));
            SinkKind::Email(EmailSink {
                host: required(f, "host", host)?,
                port,
                sender: required(f, "sender", sender)?,
                recipients,
                username,
                password,
                use_tls: f.bool("use_tls")?.unwrap_or(true),
                ca_file,
            })
        }
        _ => {
            return Err(format!(
                "{} must be one of webhook, slack, discord, teams, telegram, pagerduty, email",
                f.name("type")
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<NotifyConfig, String> {
        NotifyConfig::parse(text, Path::new("/etc/maljan"), &|name| {
            (name == "HOOK").then(|| "https://hooks.example/T0/SECRETPATH".to_string())
        })
    }

    #[test]
    fn every_sink_type_parses_and_hides_its_secrets() {
        let c = parse(
            r#"
            dedup_seconds = 5
            [sinks.a]
            type = "webhook"
            url = "https://example.org/hook"
            [sinks.b]
            type = "slack"
            webhook_url_env = "HOOK"
            [sinks.c]
            type = "discord"
            webhook_url = "https://discord.example/api/webhooks/1/x"
            [sinks.d]
            type = "teams"
            webhook_url = "https://teams.example/x"
            [sinks.e]
            type = "telegram"
            bot_token = "123:SECRETTOKEN"
            chat_id = "42"
            [sinks.f]
            type = "pagerduty"
            routing_key = "SECRETKEY"
            [sinks.g]
            type = "email"
            host = "smtp.example"
            sender = "m@example"
            recipients = ["o@example"]
            username = "u"
            password = "SECRETPASS"
            allow_private_endpoint = true
            timeout_s = 3
            "#,
        )
        .unwrap();
        assert_eq!(c.dedup_seconds, 5.0);
        assert_eq!(c.sinks.len(), 7);
        let debug = format!("{c:?}");
        for secret in ["SECRETPATH", "SECRETTOKEN", "SECRETKEY", "SECRETPASS"] {
            assert!(!debug.contains(secret), "{debug}");
        }
        let g = &c.sinks[6];
        assert!(g.net.allow_private_endpoint && g.net.timeout_s == 3);
        assert!(matches!(&g.kind, SinkKind::Email(e) if e.port == 587 && e.use_tls));
    }

    #[test]
    fn mistakes_name_the_key_never_the_value() {
        for (text, wanted) in [
            (
                "[sinks.a]\ntype = \"webhook\"\nurl = \"ftp://SECRET\"\n",
                "[sinks.a] url",
            ),
            ("[sinks.a]\ntype = \"pigeon\"\n", "[sinks.a] type"),
            (
                "[sinks.a]\ntype = \"slack\"\nwebhook_url = \"https://x\"\nchanel = 1\n",
                "chanel",
            ),
            (
                "[sinks.a]\ntype = \"email\"\nhost = \"h\"\nsender = \"s\"\n",
                "recipients",
            ),
            (
                "[sinks.a]\ntype = \"slack\"\nwebhook_url_env = \"NOPE\"\n",
                "NOPE",
            ),
            ("dedup_seconds = -1\n", "dedup_seconds"),
            ("url = \"SECRET\n", "not valid TOML"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(wanted), "{text}: {err}");
            assert!(!err.contains("SECRET"), "{err}");
        }
    }

    proptest! {
        /// Any text is a config or a clear error, never a panic, and an error never quotes a
        /// secret's value.
        #[test]
        fn any_text_parses_or_fails_cleanly(text in ".{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn a_secret_value_never_shows_in_an_error(
            kind in prop::sample::select(vec!["webhook", "slack", "telegram", "pagerduty", "email"]),
            junk in "[a-z_]{1,12}",
        ) {
            let text = format!(
                "[sinks.x]\ntype = \"{kind}\"\nwebhook_url = \"SECRETVALUE\"\nurl = \"SECRETVALUE\"\n\
                 bot_token = \"SECRETVALUE\"\n{junk} = \"SECRETVALUE\"\n"
            );
            if let Err(e) = parse(&text) {
                prop_assert!(!e.contains("SECRETVALUE"), "{}", e);
            }
        }
    }
}
