//! Templates and assets, all compiled into the binary: the minijinja templates under
//! `templates/` (auto-escaped: every value from a sample, a server or a model is text, never
//! markup) and the one script and style sheet under `assets/` (no inline script, so the CSP can
//! forbid it; no Node build step).

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
