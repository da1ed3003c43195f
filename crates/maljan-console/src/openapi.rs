//! The API's description, OpenAPI 3.1, served at `/api/v1/openapi.json`: generated at compile
//! time by utoipa from each handler's `#[utoipa::path]` and the body types they serialize
//! (`api_types`, `servers`, `browse`, `job_pages`), never written by hand. Every request needs
//! a credential (see `security`): a bearer token for scripts, or the pages' session cookie.

use axum::{Json, response::IntoResponse};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
};

use crate::api;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "maljan console API",
        description = "The console's JSON API: servers (admin scope), jobs (read; submit and cancel need the submit scope) and the ledger. Every request is authenticated: `Authorization: Bearer <token>` (a token from `maljan console token --scope read|submit|admin`), or a page's session cookie with its CSRF token on a change. Errors are `{\"error\": \"…\"}`, or `{\"errors\": {field: \"…\"}}` with 422.",
    ),
    servers((url = "/api/v1")),
    paths(
        api::list_servers, api::create_server, api::test_unsaved, api::get_server,
        api::patch_server, api::delete_server, api::test_saved,
        api::list_jobs, api::submit_job, api::get_job, api::cancel_job, api::job_events,
        api::evidence, api::report, api::list_calls, openapi_json,
    ),
    security(("bearer" = []), ("session" = [])),
    modifiers(&Credentials),
    tags(
        (name = "servers", description = "The MCP servers jobs call (admin scope to change or test)"),
        (name = "jobs", description = "Samples submitted, their progress and their reports"),
        (name = "ledger", description = "Every call a job made"),
        (name = "meta", description = "This description"),
    )
)]
pub struct ApiDoc;

/// The two ways a request is authenticated, as security schemes.
struct Credentials;

impl Modify for Credentials {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "an API token from `maljan console token` (read, submit or admin scope)",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                crate::security::SESSION_COOKIE,
                "the pages' session (a change also needs the X-CSRF-Token header)",
            ))),
        );
    }
}

/// The description as JSON text.
pub fn json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI description serializes")
}

/// This API's OpenAPI 3.1 description.
#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "OpenAPI 3.1", content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
