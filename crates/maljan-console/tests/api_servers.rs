//! The servers API: create / change / delete with the same validation as `maljan servers add`
//! and errors per field, tokens sealed and masked, and the connection test on unsaved values.

mod common;

use axum::http::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_created_changed_and_deleted_with_errors_per_field() {
    let c = common::console();
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(json!({"name": "Bad Name", "command": "x"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["errors"]["name"]
            .as_str()
            .unwrap()
            .contains("not a server name"),
        "{v}"
    );
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(json!({"name": "web", "transport": "http", "url": "ftp://h/x"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        v["errors"]["url"].as_str().unwrap().contains("scheme"),
        "{v}"
    );
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(
                json!({"name": "web", "transport": "http", "url": "http://me:pw@127.0.0.1:9/mcp"}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        v["errors"]["url"].as_str().unwrap().contains("credentials"),
        "{v}"
    );
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(json!({"name": "web", "transport": "pigeon"})),
        )
        .await;
    assert_eq!(
        (s, v["errors"]["transport"].is_string()),
        (StatusCode::UNPROCESSABLE_ENTITY, true),
        "{v}"
    );
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(json!({"name": "web", "colour": "red"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        v["error"].as_str().unwrap().contains("unknown field"),
        "{v}"
    );
    let before = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(!before.contains("[servers.web]"), "nothing half-saved");

    let secret = "tok-3f9a-never-in-clear";
    let (s, v) = c.json("POST", "/api/v1/servers", Some(json!({
        "name": "web", "transport": "http", "url": "http://127.0.0.1:9/mcp?k=v", "auth_token": secret, "label": "remote"
    }))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["auth_token"], "••••••••");
    assert!(
        !v["url"].as_str().unwrap().contains("k=v"),
        "query strings are not shown: {v}"
    );
    let file = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        file.contains("enc:v1:") && !file.contains(secret),
        "the token is sealed at rest:\n{file}"
    );
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers",
            Some(json!({"name": "web", "transport": "http", "url": "http://127.0.0.1:9/mcp"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        v["errors"]["name"].as_str().unwrap().contains("exists"),
        "{v}"
    );

    let (s, v) = c.json("GET", "/api/v1/servers", None).await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "web"]);
    assert!(!v.to_string().contains(secret));
    let echo = &v["servers"][0];
    assert_eq!(
        (echo["transport"].as_str(), echo["enabled"].as_bool()),
        (Some("stdio"), Some(true))
    );
    assert_eq!(echo["breaker"]["state"], "closed", "{echo}");

    let (s, v) = c
        .json(
            "PATCH",
            "/api/v1/servers/web",
            Some(json!({"label": "renamed label", "tools": ["echo"]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["label"].as_str(), &v["tools_allowed"]),
        (Some("renamed label"), &json!(["echo"]))
    );
    assert_eq!(
        v["auth_token"], "••••••••",
        "an edit without a token keeps the stored one"
    );
    let (s, v) = c
        .json(
            "PATCH",
            "/api/v1/servers/web",
            Some(json!({"url": "gopher://x"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        std::fs::read_to_string(&c.config_path)
            .unwrap()
            .contains("renamed label"),
        "a refused edit changes nothing"
    );
    let (s, _) = c
        .json("PATCH", "/api/v1/servers/nope", Some(json!({"label": "x"})))
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = c.json("GET", "/api/v1/servers/nope", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (s, _) = c.json("DELETE", "/api/v1/servers/web", None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, v) = c.json("DELETE", "/api/v1/servers/web", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(
        !std::fs::read_to_string(&c.config_path)
            .unwrap()
            .contains("[servers.web]")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsaved_values_are_tested_and_nothing_is_saved() {
    let c = common::console();
    let before = std::fs::read_to_string(&c.config_path).unwrap();
    let started = std::time::Instant::now();
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers/test",
            Some(json!({"name": "fresh", "command": common::echo_bin()})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(started.elapsed().as_secs() < 10);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["latency_ms"].as_f64().unwrap() > 0.0);
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("connected over stdio"),
        "{v}"
    );
    let missing = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "missing")
        .expect("the unavailable tool is listed");
    assert_eq!(missing["available"], false);
    assert_eq!(missing["reason"], "frobnicator not found on PATH");
    assert_eq!(missing["remediation"], "install frobnicator");
    assert_eq!(v["unavailable"], 1);
    assert_eq!(
        std::fs::read_to_string(&c.config_path).unwrap(),
        before,
        "a test saves nothing"
    );

    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers/test",
            Some(json!({"name": "gone", "command": "/nonexistent/mcp-server"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["ok"], false);
    assert!(!v["detail"].as_str().unwrap().is_empty(), "{v}");
    let (s, v) = c
        .json(
            "POST",
            "/api/v1/servers/test",
            Some(json!({"name": "web", "transport": "http"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(v["errors"]["url"].is_string(), "{v}");

    let (s, v) = c.json("POST", "/api/v1/servers/echo/test", None).await;
    assert_eq!((s, v["ok"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    let (_, list) = c.json("GET", "/api/v1/servers/echo", None).await;
    assert_eq!(
        list["last_test"]["unavailable"], 1,
        "the card keeps the last test: {list}"
    );
    let (s, _) = c.json("POST", "/api/v1/servers/nope/test", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
