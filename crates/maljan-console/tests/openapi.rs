//! The JSON API's description at `/api/v1/openapi.json`: OpenAPI 3.1, valid by
//! openapi-spec-validator (the peers' venv, from PyPI), generated from the handlers' types, and
//! describing every route the router serves under `/api/v1` — each one probed, so a route added
//! without its description, or described without being served, fails here.

mod common;

use axum::{body::Body, http::StatusCode};
use maljan_console::Scope;
use serde_json::Value;

/// openapi-spec-validator from the peers' venv: a missing peer fails the test.
fn validator() -> std::path::PathBuf {
    let path = std::env::var("MALJAN_OPENAPI_VALIDATOR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::Path::new(&maljan_testkit::peer_env("MALJAN_PEERS"))
                .join("venv/bin/openapi-spec-validator")
        });
    assert!(
        path.is_file(),
        "{} is missing: run `eval \"$(scripts/peers.sh)\"` (it installs openapi-spec-validator into the peers' venv)",
        path.display()
    );
    path
}

async fn spec(c: &common::Console) -> Value {
    let (s, v) = c.json("GET", "/api/v1/openapi.json", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_description_is_valid_openapi_3_1() {
    let c = common::console();
    let v = spec(&c).await;
    assert!(
        v["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        v["openapi"]
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = std::process::Command::new(validator())
        .arg(&file)
        .output()
        .expect("run openapi-spec-validator");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "openapi-spec-validator: {said}");
    assert!(said.contains("OK"), "{said}");
    // A broken description is refused by the same validator (it is not a rubber stamp).
    let mut broken = v.clone();
    broken["paths"]["/jobs"]["get"]["responses"] = Value::String("none".into());
    std::fs::write(&file, serde_json::to_vec(&broken).unwrap()).unwrap();
    let out = std::process::Command::new(validator())
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a broken description passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_route_is_described_and_every_described_route_is_served() {
    let c = common::console();
    let v = spec(&c).await;
    let admin = c.token(Scope::Admin);
    let endpoints = maljan_console::api::endpoints();
    assert!(endpoints.len() >= 16);
    let fallback = "no such API endpoint";
    for (method, path, _) in &endpoints {
        let op = &v["paths"][*path][method.as_str().to_lowercase()];
        assert!(op.is_object(), "{method} {path} is not in openapi.json");
        assert!(
            op["responses"].is_object(),
            "{method} {path} has no responses"
        );
        // Served: the router answers it with its handler, not the fallback nor a 405.
        let uri = format!(
            "/api/v1{}",
            path.replace("{name}", "no-such-server")
                .replace("{id}", "no-such-job")
        );
        let req = c
            .req_token(method.as_str(), &uri, &admin)
            .body(Body::empty())
            .unwrap();
        let (status, text) = common::read_text(c.send(req).await).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert!(
            !text.contains(fallback),
            "{method} {uri} is not served: {text}"
        );
        // Every status it answers is one the description names (when it is a 2xx, 4xx it gave).
        assert!(
            op["responses"].get(status.as_str()).is_some(),
            "{method} {uri} answered {status}, which openapi.json does not describe: {text}"
        );
    }
    // And nothing is described that the router does not serve.
    for (path, ops) in v["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            assert!(
                endpoints
                    .iter()
                    .any(|(m, p, _)| p == path && m.as_str().eq_ignore_ascii_case(method)),
                "openapi.json describes {method} {path}, which the router does not serve"
            );
        }
    }
    // The probe tells a served route from one that is not.
    let req = c
        .req_token("GET", "/api/v1/no-such-route", &admin)
        .body(Body::empty())
        .unwrap();
    let (status, text) = common::read_text(c.send(req).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(text.contains(fallback));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schemas_are_the_handlers_types() {
    let c = common::console();
    let v = spec(&c).await;
    let schemas = &v["components"]["schemas"];
    let props = |name: &str| -> Vec<String> {
        schemas[name]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no schema {name}"))
            .keys()
            .cloned()
            .collect()
    };
    // A listed job carries the sample's name and verdict, as /api/v1/jobs sends it.
    let (_, list) = c.json("GET", "/api/v1/jobs", None).await;
    let mut sent: Vec<String> = list.as_object().unwrap().keys().cloned().collect();
    let mut described = props("JobList");
    sent.sort();
    described.sort();
    assert_eq!(sent, described);
    for field in ["sample_name", "verdict", "sample_sha256", "status"] {
        assert!(props("JobListed").contains(&field.to_string()), "{field}");
    }
    // A server as the API sends it, field for field.
    let (_, server) = c.json("GET", "/api/v1/servers/echo", None).await;
    let mut sent: Vec<String> = server.as_object().unwrap().keys().cloned().collect();
    let mut described = props("ServerView");
    sent.sort();
    described.sort();
    assert_eq!(sent, described);
    // Parameters of the list: the search and the filters.
    let params: Vec<&str> = v["paths"]["/jobs"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for p in [
        "status", "verdict", "name", "sha256", "q", "page", "per_page",
    ] {
        assert!(params.contains(&p), "{p} in {params:?}");
    }
    // The submission is a multipart form with the sample as a file.
    let form = &v["paths"]["/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"];
    assert!(form.is_object(), "{form}");
    // Bearer tokens are how a script authenticates.
    assert_eq!(
        v["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}
