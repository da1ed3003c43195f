//! Routes: which server events reach which sinks, and how often (automation-file's `Route`).
//! Routes are kept in the state database (FA_notify_route_add / _remove), so they outlive the
//! server; what each route has recently sent (its dedup memory, its rate window) lives in memory.
//!
//! The events are the server's own: `action.failed` (source: the tool, severity error) for every
//! call that ends in an error, top-level or nested, published by the audit observer.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Severity words, lowest first.
pub(crate) const SEVERITIES: [&str; 4] = ["info", "warning", "error", "critical"];
const DEFAULT_DEDUP_SECONDS: f64 = 300.0;
const DEFAULT_RATE_PERIOD: f64 = 60.0;
/// Remembered (route, sink, event) keys at most; the oldest are forgotten beyond.
const MAX_SEEN: usize = 10_000;

/// Something that happened in the server that a route may deliver.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) kind: String,
    pub(crate) source: String,
    pub(crate) severity: &'static str,
    pub(crate) subject: String,
    pub(crate) correlation_id: Option<String>,
    pub(crate) error: Option<String>,
}

impl Event {
    /// The subject, body and sink level a route sends for this event.
    pub(crate) fn message(&self) -> (String, String, &'static str) {
        let subject = format!(
            "[{}] {}: {}",
            self.severity.to_uppercase(),
            self.kind,
            self.subject
        );
        let mut body = format!(
            "Severity: {}\nType: {}\nSource: {}\nSubject: {}\nCorrelation ID: {}",
            self.severity,
            self.kind,
            self.source,
            self.subject,
            self.correlation_id.as_deref().unwrap_or("-")
        );
        if let Some(error) = &self.error {
            body.push_str(&format!("\nError: {error}"));
        }
        let level = match self.severity {
            "info" => "info",
            "warning" => "warning",
            _ => "error",
        };
        (subject, body, level)
    }
}

/// One route, as FA_notify_route_add stores it and FA_notify_route_list returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Route {
    pub(crate) name: String,
    /// Sink names; empty: every sink.
    pub(crate) sinks: Vec<String>,
    /// Event types (`action.failed`) or prefixes (`action.*`); empty: every type.
    pub(crate) types: Vec<String>,
    /// Exact event sources (for `action.*`, the tool's name); empty: every source.
    pub(crate) sources: Vec<String>,
    pub(crate) min_severity: String,
    /// A repeat of the same event (type, source, subject) to the same sink inside this window
    /// is dropped; 0 turns it off.
    pub(crate) dedup_seconds: f64,
    /// At most this many messages per sink per `rate_period`; 0 turns it off.
    pub(crate) rate_limit: u64,
    pub(crate) rate_period: f64,
}

/// FA_notify_route_add's arguments: automation-file's names, its `**throttle` spelled out.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouteArgs {
    /// The route's name; adding a route of an existing name replaces it.
    pub(crate) name: String,
    /// The sinks it sends to (names from the notify config); none or empty: every sink.
    pub(crate) sinks: Option<Vec<String>>,
    /// Event types (e.g. `action.failed`) or prefixes (`action.*`); none: every type.
    pub(crate) types: Option<Vec<String>>,
    /// Event sources (for `action.failed`, the tool that failed); none: every source.
    pub(crate) sources: Option<Vec<String>>,
    /// The lowest severity delivered: info, warning, error or critical.
    #[serde(default = "default_severity")]
    #[schemars(default = "default_severity")]
    pub(crate) min_severity: String,
    /// Seconds a repeat of the same event is dropped for (default 300; 0: never).
    pub(crate) dedup_seconds: Option<f64>,
    /// Messages per sink per rate_period at most (default 0: no limit).
    pub(crate) rate_limit: Option<u64>,
    /// The rate limit's window in seconds (default 60).
    pub(crate) rate_period: Option<f64>,
}

fn default_severity() -> String {
    "warning".into()
}

fn names(list: Option<Vec<String>>, option: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for name in list.unwrap_or_default() {
        if name.trim().is_empty() || name.len() > 200 {
            return Err(format!(
                "route {option} must be non-empty names of at most 200 characters"
            ));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}

impl Route {
    /// Validates the arguments; `known_sinks` are the configured sinks' names.
    pub(crate) fn from_args(a: RouteArgs, known_sinks: &[&str]) -> Result<Route, String> {
        if a.name.trim().is_empty() || a.name.len() > 200 {
            return Err("a route needs a name of 1 to 200 characters".into());
        }
        let sinks = names(a.sinks, "sinks")?;
        if let Some(unknown) = sinks.iter().find(|s| !known_sinks.contains(&s.as_str())) {
            return Err(format!(
                "route sinks: no sink is configured as {unknown:?} (configured: {})",
                known_sinks.join(", ")
            ));
        }
        let types = names(a.types, "types")?;
        if let Some(bad) = types
            .iter()
            .find(|t| t.contains('*') && !t.ends_with(".*") || t.matches('*').count() > 1)
        {
            return Err(format!(
                "route types: {bad:?} is neither a type nor a 'prefix.*'"
            ));
        }
        let severity = a.min_severity.trim().to_lowercase();
        if !SEVERITIES.contains(&severity.as_str()) {
            return Err(format!(
                "min_severity must be one of {}, not {:?}",
                SEVERITIES.join(", "),
                a.min_severity
            ));
        }
        let seconds = |v: Option<f64>, default: f64, option: &str, positive: bool| {
            let v = v.unwrap_or(default);
            if v.is_finite() && (v > 0.0 || (v == 0.0 && !positive)) && v <= 1e9 {
                Ok(v)
            } else {
                Err(format!(
                    "route {option} must be a {} number of seconds",
                    if positive { "positive" } else { "non-negative" }
                ))
            }
        };
        Ok(Route {
            name: a.name,
            sinks,
            types,
            sources: names(a.sources, "sources")?,
            min_severity: severity,
            dedup_seconds: seconds(
                a.dedup_seconds,
                DEFAULT_DEDUP_SECONDS,
                "dedup_seconds",
                false,
            )?,
            rate_limit: a.rate_limit.unwrap_or(0),
            rate_period: seconds(a.rate_period, DEFAULT_RATE_PERIOD, "rate_period", true)?,
        })
    }

    pub(crate) fn matches(&self, e: &Event) -> bool {
        let rank = |s: &str| SEVERITIES.iter().position(|x| *x == s).unwrap_or(0);
        rank(e.severity) >= rank(&self.min_severity)
            && (self.sources.is_empty() || self.sources.contains(&e.source))
            && (self.types.is_empty()
                || self.types.iter().any(|t| match t.strip_suffix(".*") {
                    Some(prefix) => e
                        .kind
                        .strip_prefix(prefix)
                        .is_some_and(|r| r.starts_with('.')),
                    None => *t == e.kind,
                }))
    }
}

/// (route, sink, event type, event source, event subject).
type SeenKey = (String, String, String, String, String);

/// What the routes have sent lately: per (route, sink, event) the end of its dedup window, and
/// per (route, sink) the times of the messages inside the rate window.
#[derive(Default)]
pub(crate) struct Throttle {
    seen: Mutex<HashMap<SeenKey, Instant>>,
    sent: Mutex<HashMap<(String, String), VecDeque<Instant>>>,
}

impl Throttle {
    /// Why `event` must not go to `sink` along `route` now ("dedup", "rate_limited"), or None
    /// (and it is counted as sent).
    pub(crate) fn admit(
        &self,
        route: &Route,
        sink: &str,
        e: &Event,
        now: Instant,
    ) -> Option<&'static str> {
        let key = (
            route.name.clone(),
            sink.to_string(),
            e.kind.clone(),
            e.source.clone(),
            e.subject.clone(),
        );
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() > MAX_SEEN {
            seen.retain(|_, until| *until > now);
        }
        if route.dedup_seconds > 0.0 && seen.get(&key).is_some_and(|until| *until > now) {
            return Some("dedup");
        }
        if route.rate_limit > 0 {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            let times = sent
                .entry((route.name.clone(), sink.to_string()))
                .or_default();
            let period = Duration::from_secs_f64(route.rate_period);
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) >= period)
            {
                times.pop_front();
            }
            if times.len() as u64 >= route.rate_limit {
                return Some("rate_limited");
            }
            times.push_back(now);
        }
        if route.dedup_seconds > 0.0 {
            seen.insert(key, now + Duration::from_secs_f64(route.dedup_seconds));
        }
        None
    }

    /// Forgets what a route sent (it was replaced or removed).
    pub(crate) fn forget(&self, route: &str) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| k.0 != route);
        self.sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| k.0 != route);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(v: serde_json::Value) -> Result<Route, String> {
        let a: RouteArgs = serde_json::from_value(v).map_err(|e| e.to_string())?;
        Route::from_args(a, &["ops", "mail"])
    }

    fn failed(tool: &str) -> Event {
        Event {
            kind: "action.failed".into(),
            source: tool.into(),
            severity: "error",
            subject: format!("{tool} failed"),
            correlation_id: None,
            error: None,
        }
    }

    #[test]
    fn routes_match_by_type_prefix_source_and_severity() {
        let r = args(
            serde_json::json!({"name": "r", "types": ["action.*"], "sources": ["FA_copy_file"]}),
        )
        .unwrap();
        assert_eq!(
            (r.dedup_seconds, r.rate_period, r.min_severity.as_str()),
            (300.0, 60.0, "warning")
        );
        assert!(r.matches(&failed("FA_copy_file")));
        assert!(!r.matches(&failed("FA_move_file")));
        let mut info = failed("FA_copy_file");
        info.severity = "info";
        assert!(!r.matches(&info));
        let exact = args(serde_json::json!({"name": "e", "types": ["action"]})).unwrap();
        assert!(
            !exact.matches(&failed("x")),
            "a type is not a prefix of another"
        );
    }

    #[test]
    fn bad_routes_say_what_is_wrong() {
        for (v, wanted) in [
            (serde_json::json!({"name": ""}), "name"),
            (
                serde_json::json!({"name": "r", "sinks": ["pager"]}),
                "pager",
            ),
            (
                serde_json::json!({"name": "r", "min_severity": "loud"}),
                "min_severity",
            ),
            (serde_json::json!({"name": "r", "types": ["a*b"]}), "prefix"),
            (
                serde_json::json!({"name": "r", "rate_period": 0}),
                "rate_period",
            ),
            (
                serde_json::json!({"name": "r", "dedup_seconds": -1}),
                "dedup_seconds",
            ),
            (serde_json::json!({"name": "r", "burst": 3}), "burst"),
        ] {
            let err = args(v.clone()).unwrap_err();
            assert!(err.contains(wanted), "{v}: {err}");
        }
    }

    #[test]
    fn the_throttle_drops_repeats_and_counts_the_rate() {
        let t = Throttle::default();
        let r =
            args(serde_json::json!({"name": "r", "rate_limit": 2, "dedup_seconds": 10})).unwrap();
        let now = Instant::now();
        assert_eq!(t.admit(&r, "ops", &failed("a"), now), None);
        assert_eq!(t.admit(&r, "ops", &failed("a"), now), Some("dedup"));
        assert_eq!(t.admit(&r, "ops", &failed("b"), now), None);
        assert_eq!(t.admit(&r, "ops", &failed("c"), now), Some("rate_limited"));
        assert_eq!(
            t.admit(&r, "ops", &failed("c"), now + Duration::from_secs(61)),
            None
        );
        t.forget("r");
        assert_eq!(t.admit(&r, "ops", &failed("a"), now), None);
    }

    proptest! {
        /// Any JSON object is a route or a clear refusal; a route that parses round-trips
        /// through its stored form.
        #[test]
        fn any_arguments_parse_or_are_refused(
            name in ".{0,8}",
            sinks in prop::collection::vec(prop::sample::select(vec!["ops", "mail", "x", ""]), 0..3),
            types in prop::collection::vec("[a-z.*]{0,8}", 0..3),
            sev in "[a-z]{0,9}",
            dedup in prop::num::f64::ANY,
            period in prop::num::f64::ANY,
        ) {
            let v = serde_json::json!({"name": name, "sinks": sinks, "types": types,
                "min_severity": sev, "dedup_seconds": dedup, "rate_period": period});
            if let Ok(route) = args(v) {
                prop_assert!(route.rate_period > 0.0 && route.dedup_seconds >= 0.0);
                let stored = serde_json::to_string(&route).unwrap();
                let back: Route = serde_json::from_str(&stored).unwrap();
                prop_assert_eq!(back, route);
            }
        }
    }
}
