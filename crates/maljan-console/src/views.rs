//! Templates and assets, all compiled into the binary: the minijinja templates under
//! `templates/` (auto-escaped: every value from a sample, a server or a model is text, never
//! markup; and every control character and bidi override in it is shown as an escape, by the
//! one formatter below) and the one script and style sheet under `assets/` (no inline script, so
//! the CSP can forbid it; no Node build step).

use std::sync::Arc;

use axum::{
    Router,
    http::header,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use minijinja::Environment;
use serde::Serialize;

use crate::state::AppState;

const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../templates/base.html")),
    ("macros.html", include_str!("../templates/macros.html")),
    (
        "dashboard.html",
        include_str!("../templates/dashboard.html"),
    ),
    ("servers.html", include_str!("../templates/servers.html")),
    (
        "server_form.html",
        include_str!("../templates/server_form.html"),
    ),
    ("jobs.html", include_str!("../templates/jobs.html")),
    ("job_new.html", include_str!("../templates/job_new.html")),
    ("job.html", include_str!("../templates/job.html")),
    ("ledger.html", include_str!("../templates/ledger.html")),
    ("calls.html", include_str!("../templates/calls.html")),
    ("settings.html", include_str!("../templates/settings.html")),
    ("login.html", include_str!("../templates/login.html")),
    ("error.html", include_str!("../templates/error.html")),
];

const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

pub struct Views {
    env: Environment<'static>,
}

impl Default for Views {
    fn default() -> Self {
        Self::new()
    }
}

impl Views {
    pub fn new() -> Self {
        let mut env = Environment::new();
        for (name, text) in TEMPLATES {
            env.add_template(name, text)
                .unwrap_or_else(|e| panic!("template {name}: {e:#}"));
        }
        env.add_filter("ms", |v: f64| -> String {
            if v >= 1000.0 {
                format!("{:.2} s", v / 1000.0)
            } else {
                format!("{v:.1} ms")
            }
        });
        // Every value printed: controls and bidi overrides made visible (a file name cannot
        // read backwards, `invoice\u{202e}fdp.exe`), then HTML-escaped as before.
        env.set_formatter(|out, state, value| {
            if !value.is_safe()
                && let Some(s) = value.as_str()
                && let std::borrow::Cow::Owned(shown) = maljan_triage::visible_multiline(s)
            {
                return minijinja::escape_formatter(out, state, &minijinja::Value::from(shown));
            }
            minijinja::escape_formatter(out, state, value)
        });
        // A verdict's facts in reading order (for a malicious reading first, strong first,
        // heaviest first), as the reports list them.
        env.add_filter("ordered_facts", |v: minijinja::Value| -> minijinja::Value {
            let facts: Vec<maljan_triage::report::Fact> = serde_json::to_value(&v)
                .ok()
                .and_then(|j| serde_json::from_value(j).ok())
                .unwrap_or_default();
            minijinja::Value::from_serialize(maljan_triage::render::ordered_facts(&facts))
        });
        env.add_filter("pretty", |v: minijinja::Value| -> String {
            let json: serde_json::Value = serde_json::to_value(&v).unwrap_or_default();
            match json {
                serde_json::Value::String(s) => s,
                other => serde_json::to_string_pretty(&other).unwrap_or_default(),
            }
        });
        Self { env }
    }

    /// Renders a page; a template error is a 500 page that says so (and is logged).
    pub fn render(&self, name: &str, ctx: impl Serialize) -> Response {
        match self
            .env
            .get_template(name)
            .and_then(|t| t.render(minijinja::Value::from_serialize(&ctx)))
        {
            Ok(html) => Html(html).into_response(),
            Err(e) => {
                tracing::error!("template {name}: {e:#}");
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "the page could not be drawn (see the console's log)",
                )
                    .into_response()
            }
        }
    }
}

pub fn asset_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/assets/app.js",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                        (header::CACHE_CONTROL, "max-age=300"),
                    ],
                    APP_JS,
                )
            }),
        )
        .route(
            "/assets/app.css",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/css; charset=utf-8"),
                        (header::CACHE_CONTROL, "max-age=300"),
                    ],
                    APP_CSS,
                )
            }),
        )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn child(
        id: &str,
        name: &str,
        facts: serde_json::Value,
        children: serde_json::Value,
    ) -> serde_json::Value {
        json!({"id": id, "name": name, "parent_sha256": "", "depth": id.split('.').count(),
            "size": 4096, "sha256": format!("{id}-sha"), "sha1": "", "md5": "", "kind": "pe",
            "description": "PE32 executable", "source": "zip", "encrypted": false, "password": null,
            "flags": [], "extracted_by": ["ev_0008"], "steps": [],
            "verdict": {"verdict": "malicious", "confidence": 0.9, "family": null, "summary": "",
                "claims": [], "techniques": [], "source": "heuristic", "model": null,
                "degradation": null, "facts": facts},
            "children": children})
    }

    fn fact(id: &str, leaning: &str, weight: u32, strong: bool) -> serde_json::Value {
        json!({"id": id, "name": id.replace('_', " "), "leaning": leaning, "weight": weight,
            "strong": strong, "observations": [format!("seen {id}")], "evidence": ["ev_0020"]})
    }

    fn job_page(name: &str) -> String {
        let exe = child(
            "1.1",
            "payload.exe",
            json!([
                fact("packed", "neutral", 1, false),
                fact("persistence", "malicious", 4, true),
                fact("process_injection", "malicious", 5, true),
                fact("signed", "benign", 3, true)
            ]),
            json!([]),
        );
        let zip = child("1", name, json!([]), json!([exe]));
        let report = json!({
            "status": "complete", "generated_at": "2026-12-07T04:00:00Z", "duration_ms": 10.0,
            "sample": {"name": name, "size": 1, "sha256": "s", "hashes": {}, "kind": "zip"},
            "verdict": {"verdict": "malicious", "confidence": 0.9, "summary": "s", "source": "agent",
                "claims": [], "techniques": [],
                "facts": [fact("carries_executable", "malicious", 5, true)],
                "disagreement": {"facts_verdict": "suspicious", "reason": "no second strong fact"}},
            "steps": [], "failures": [], "degradations": [], "unavailable": [],
            "children": [zip], "recursion": {"children": 2}
        });
        let ctx = json!({"job": {"job_id": "j1", "calls": 3}, "live": false, "report": report});
        Views::new()
            .env
            .get_template("job.html")
            .unwrap()
            .render(minijinja::Value::from_serialize(&ctx))
            .unwrap()
    }

    #[test]
    fn the_job_page_shows_the_facts_and_the_children_as_a_linked_tree() {
        let html = job_page("outer.zip");
        // The verdict's facts, and the model's disagreement beside the verdict.
        let facts = html
            .find("<section id=\"facts\">")
            .expect("a facts section");
        assert!(facts < html.find("<section id=\"children\">").unwrap());
        assert!(html.contains("the facts alone say <b>suspicious</b>. no second strong fact"));
        assert!(html.contains("href=\"/jobs/j1/ledger?ev=ev_0020#ev_0020\""));
        // The tree: the exe nested under the zip, each linked to its section of the HTML report,
        // with its type, size, SHA-256, verdict and top facts in the reports' order.
        let zip = html.find("<li id=\"child-1\">").unwrap();
        let exe = html.find("<li id=\"child-1-1\">").unwrap();
        assert_eq!(html[zip..exe].matches("<ul class=\"tree\">").count(), 1);
        assert!(html.contains("href=\"/api/v1/jobs/j1/report?format=html#child-1-1\""));
        let entry = &html[exe..];
        for part in [
            "payload.exe",
            "PE32 executable",
            "4096 bytes",
            "1.1-sha",
            "badge v-malicious",
        ] {
            assert!(entry.contains(part), "{part}");
        }
        assert!(entry.contains(
            "facts: process injection (strong), persistence (strong), signed (strong)</div>"
        ));
    }

    #[test]
    fn controls_and_bidi_overrides_are_shown_not_obeyed() {
        let html = job_page("invoice\u{202e}fdp.zip\u{1b}[2J<b>");
        assert!(!html.contains('\u{202e}') && !html.contains('\u{1b}'));
        assert!(html.contains("invoice\\u{202e}fdp.zip\\x1b[2J&lt;b&gt;"));
    }
}
