//! Notifications (FA_notify_send, _list, _route_add, _route_list, _route_remove): the
//! operator's sinks (webhook, Slack, e-mail over SMTP with STARTTLS, Telegram, Discord, Teams,
//! PagerDuty; `config`), delivered through the SSRF guard (`sinks`), and durable routes that
//! send the server's own events to them (`routes`).
//!
//! FA_notify_send fans a message out to every sink at once; a sink that fails is reported in
//! the result (`"error: why"`) and never stops the others. A repeat of the same subject, body
//! and level inside the config's `dedup_seconds` is answered `"dedup"` by every sink.

mod config;
mod routes;
mod sinks;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

pub use config::NotifyConfig;
pub(crate) use routes::Event;
use routes::{Route, RouteArgs, Throttle};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{Config, NoArgs};
use maljan_server::{Registry, ToolError, ToolMeta, blocking};

/// The server's notifier: the configured sinks, the send dedup window, the routes.
pub(crate) struct Notifier {
    config: NotifyConfig,
    recent: Mutex<HashMap<(String, String, String), Instant>>,
    /// The durable routes, read from the state database on first use.
    routes: RwLock<Option<Vec<Route>>>,
    throttle: Throttle,
}

impl Notifier {
    pub(crate) fn new(config: NotifyConfig) -> Self {
        Self {
            config,
            recent: Default::default(),
            routes: Default::default(),
            throttle: Default::default(),
        }
    }

    fn sink_names(&self) -> Vec<&str> {
        self.config.sinks.iter().map(|s| s.name.as_str()).collect()
    }

    /// Whether (subject, body, level) was sent inside the window; remembers it if not.
    fn duplicate(&self, subject: &str, body: &str, level: &str) -> bool {
        let window = self.config.dedup_seconds;
        if window <= 0.0 {
            return false;
        }
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, at| now.duration_since(*at) < Duration::from_secs_f64(window));
        let key = (subject.to_string(), body.to_string(), level.to_string());
        if recent.contains_key(&key) {
            return true;
        }
        recent.insert(key, now);
        false
    }
}

fn routes_loaded(cfg: &Config) -> Result<Vec<Route>, ToolError> {
    if let Some(routes) = cfg
        .notifier
        .routes
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        return Ok(routes.clone());
    }
    let stored: Vec<String> = cfg.state.with(|c| {
        let mut stmt = c.prepare("SELECT route FROM notify_routes ORDER BY added_at, name")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect()
    })?;
    // A row this maljan cannot read (written by a newer one) is skipped, not fatal.
    let routes: Vec<Route> = stored
        .iter()
        .filter_map(|s| serde_json::from_str(s).ok())
        .collect();
    *cfg.notifier
        .routes
        .write()
        .unwrap_or_else(|p| p.into_inner()) = Some(routes.clone());
    Ok(routes)
}

/// Delivers `event` along every matching route, in the background (called from the audit
/// observer, which must not wait). A sink reached by several routes gets it once.
pub(crate) fn publish(cfg: &Arc<Config>, event: Event) {
    if cfg.notifier.config.sinks.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let cfg = cfg.clone();
    runtime.spawn(async move {
        let loaded = {
            let cfg = cfg.clone();
            blocking(move || routes_loaded(&cfg)).await
        };
        let Ok(routes) = loaded else { return };
        let now = Instant::now();
        let mut targets: Vec<&str> = Vec::new();
        for route in routes.iter().filter(|r| r.matches(&event)) {
            let names = if route.sinks.is_empty() {
                cfg.notifier.sink_names()
            } else {
                route.sinks.iter().map(String::as_str).collect()
            };
            for sink in names {
                if !targets.contains(&sink)
                    && cfg
                        .notifier
                        .throttle
                        .admit(route, sink, &event, now)
                        .is_none()
                {
                    targets.push(sink);
                }
            }
        }
        let (subject, body, level) = event.message();
        let sends = cfg
            .notifier
            .config
            .sinks
            .iter()
            .filter(|s| targets.contains(&s.name.as_str()))
            .map(|sink| sinks::send(sink, &subject, &body, level));
        for outcome in futures::future::join_all(sends).await {
            if let Err(why) = outcome {
                tracing::warn!("notification route delivery failed: {why}");
            }
        }
    });
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    /// The message's subject (non-empty).
    subject: String,
    /// The message's body.
    #[serde(default)]
    body: String,
    /// info, warning or error.
    #[serde(default = "default_level")]
    #[schemars(default = "default_level")]
    level: String,
}

fn default_level() -> String {
    "info".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    /// The route's name.
    name: String,
}

fn not_configured() -> ToolError {
    ToolError::not_configured("no notification sinks are configured").with_remediation(
        "the operator lists sinks in a TOML file given to `maljan serve files --notify-config FILE` \
         (or MALJAN_NOTIFY_CONFIG)",
    )
}

async fn send(cfg: &Config, a: SendArgs) -> Result<BTreeMap<String, String>, ToolError> {
    if a.subject.trim().is_empty() {
        return Err(ToolError::bad_argument(
            "subject must be a non-empty string",
        ));
    }
    if !["info", "warning", "error"].contains(&a.level.as_str()) {
        return Err(ToolError::bad_argument(format!(
            "level must be one of info, warning, error, not {:?}",
            a.level
        )));
    }
    let sinks = &cfg.notifier.config.sinks;
    if sinks.is_empty() {
        return Err(not_configured());
    }
    if cfg.notifier.duplicate(&a.subject, &a.body, &a.level) {
        return Ok(sinks
            .iter()
            .map(|s| (s.name.clone(), "dedup".to_string()))
            .collect());
    }
    let outcomes = futures::future::join_all(
        sinks
            .iter()
            .map(|sink| sinks::send(sink, &a.subject, &a.body, &a.level)),
    )
    .await;
    Ok(sinks
        .iter()
        .zip(outcomes)
        .map(|(sink, outcome)| {
            (
                sink.name.clone(),
                match outcome {
                    Ok(()) => "sent".to_string(),
                    Err(why) => format!("error: {why}"),
                },
            )
        })
        .collect())
}

fn route_add(cfg: &Config, a: RouteArgs) -> Result<Value, ToolError> {
    if cfg.notifier.config.sinks.is_empty() {
        return Err(not_configured());
    }
    let route = Route::from_args(a, &cfg.notifier.sink_names()).map_err(ToolError::bad_argument)?;
    let stored =
        serde_json::to_string(&route).map_err(|e| ToolError::tool_failed(e.to_string()))?;
    let mut routes = routes_loaded(cfg)?;
    cfg.state.with(|c| {
        c.execute(
            "INSERT INTO notify_routes (name, route, added_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO UPDATE SET route = excluded.route",
            rusqlite::params![route.name, stored, chrono::Utc::now().to_rfc3339()],
        )
    })?;
    cfg.notifier.throttle.forget(&route.name);
    match routes.iter_mut().find(|r| r.name == route.name) {
        Some(old) => *old = route.clone(),
        None => routes.push(route.clone()),
    }
    *cfg.notifier
        .routes
        .write()
        .unwrap_or_else(|p| p.into_inner()) = Some(routes);
    serde_json::to_value(route).map_err(|e| ToolError::tool_failed(e.to_string()))
}

fn route_remove(cfg: &Config, name: &str) -> Result<bool, ToolError> {
    let mut routes = routes_loaded(cfg)?;
    let removed = cfg
        .state
        .with(|c| c.execute("DELETE FROM notify_routes WHERE name = ?1", [name]))?
        > 0;
    routes.retain(|r| r.name != name);
    cfg.notifier.throttle.forget(name);
    *cfg.notifier
        .routes
        .write()
        .unwrap_or_else(|p| p.into_inner()) = Some(routes);
    Ok(removed)
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_notify_send",
            "Send a message (subject, body, level info|warning|error) to every notification sink \
             the operator configured. Returns each sink's outcome: sent, dedup (the same message \
             inside the dedup window) or error: why. A failing sink never stops the others.",
        )
        .title("Send a notification")
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(120),
        move |_ctx, a: SendArgs| {
            let c = c.clone();
            async move { send(&c, a).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_notify_list",
            "The configured notification sinks: name, type and what identifies them (a host, \
             recipients, a chat id), never a secret.",
        )
        .title("List notification sinks")
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move {
                Ok::<_, ToolError>(
                    c.notifier
                        .config
                        .sinks
                        .iter()
                        .map(sinks::describe)
                        .collect::<Vec<_>>(),
                )
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_notify_route_add",
            "Add (or replace, by name) a durable route: which server events (types such as \
             action.failed or action.*, sources such as a tool name, min_severity) reach which \
             sinks, with a dedup window (dedup_seconds) and a rate limit (rate_limit per \
             rate_period seconds). Returns the route as stored.",
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world()
        .title("Add a notification route")
        .writes()
        .timeout_s(60),
        move |_ctx, a: RouteArgs| {
            let c = c.clone();
            async move { blocking(move || route_add(&c, a)).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_notify_route_list",
            "Every notification route, in the order added.",
        )
        .title("List notification routes")
        .timeout_s(60),
        move |_ctx, _a: NoArgs| {
            let c = c.clone();
            async move { blocking(move || routes_loaded(&c)).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_notify_route_remove",
            "Remove the notification route `name`; true if there was one.",
        )
        .title("Remove a notification route")
        .destructive()
        .timeout_s(60),
        move |_ctx, a: NameArgs| {
            let c = c.clone();
            async move { blocking(move || route_remove(&c, &a.name)).await }
        },
    );
}
