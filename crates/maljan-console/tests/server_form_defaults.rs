//! The add-server form runs every tool unless told otherwise, as `maljan servers add` does
//! without `--tool`; the servers page says plainly when an allow-list is empty; tool tables list
//! the unavailable tools first and fit their cards (fixed columns, wrapping, a scroll box).

mod common;

use axum::http::StatusCode;

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The `[servers.NAME]` table of the config file, up to the next table.
fn entry(c: &common::Console, name: &str) -> String {
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    let head = format!("[servers.{name}]");
    let at = config
        .find(&head)
        .unwrap_or_else(|| panic!("{head} in {config}"));
    let rest = &config[at + head.len()..];
    rest[..rest.find("\n[").unwrap_or(rest.len())].to_string()
}

/// The fixture's tools in the order a test lists them: (name, checked), in the allow-list
/// fieldset of a form page.
fn allow_list(html: &str) -> Vec<(String, bool)> {
    let at = html
        .find("id=\"allow-list\"")
        .expect("the allow-list fieldset");
    let end = at + html[at..].find("</fieldset>").unwrap();
    html[at..end]
        .split("<input type=\"checkbox\" name=\"tools\" value=\"")
        .skip(1)
        .map(|part| {
            let name = part[..part.find('"').unwrap()].to_string();
            let tag = &part[..part.find('>').unwrap()];
            (name, tag.contains("checked"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_runs_every_tool_unless_some_are_unticked() {
    let c = common::console();
    let csrf = c.csrf();
    let cmd = enc(&common::echo_bin());
    let (s, html) = c.page("/servers/new").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        html.contains("id=\"tools-default\">Tools: every tool the server lists may run"),
        "{html}"
    );

    // Saved without a Test: no allow-list in the file, every tool in the API.
    let base = format!("_csrf={csrf}&transport=stdio&command={cmd}&enabled=on");
    let (s, _, to) = c
        .post_form("/servers/new", &format!("{base}&action=save&name=plain"))
        .await;
    assert_eq!(
        (s, to.as_deref()),
        (StatusCode::SEE_OTHER, Some("/servers#server-plain"))
    );
    assert!(
        !entry(&c, "plain").contains("tools"),
        "{}",
        entry(&c, "plain")
    );
    let (s, v) = c.json("GET", "/api/v1/servers/plain", None).await;
    assert_eq!(
        (s, &v["tools_allowed"]),
        (StatusCode::OK, &serde_json::Value::Null)
    );

    // A Test lists the tools, every one ticked, the unavailable one first.
    let (s, html, _) = c
        .post_form("/servers/new", &format!("{base}&action=test&name=tested"))
        .await;
    assert_eq!(s, StatusCode::OK, "{html}");
    let listed = allow_list(&html);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "missing", "unavailable first: {names:?}");
    assert!(
        names.contains(&"echo") && names.contains(&"stats"),
        "{names:?}"
    );
    assert!(listed.iter().all(|(_, checked)| *checked), "{listed:?}");
    let table = &html[html.find("<table class=\"tools\">").unwrap()..];
    let first_row = &table[table.find("<tbody>").unwrap()..];
    assert!(
        first_row
            .trim_start_matches("<tbody>")
            .trim_start()
            .starts_with("<tr class=\"unavailable\">"),
        "the tools table opens on the unavailable tool: {first_row:.300}"
    );

    // Saved as the Test left it (all ticked): every tool, no allow-list written.
    let shown: String = names.iter().map(|n| format!("&tool_listed={n}")).collect();
    let all: String = names.iter().map(|n| format!("&tools={n}")).collect();
    let (s, _, _) = c
        .post_form(
            "/servers/new",
            &format!("{base}&action=save&name=tested&tools_shown=1{shown}{all}"),
        )
        .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert!(
        !entry(&c, "tested").contains("tools"),
        "{}",
        entry(&c, "tested")
    );

    // One unticked: the others, as a list.
    let some: String = names
        .iter()
        .filter(|n| **n != "missing")
        .map(|n| format!("&tools={n}"))
        .collect();
    let (s, _, _) = c
        .post_form(
            "/servers/new",
            &format!("{base}&action=save&name=narrow&tools_shown=1{shown}{some}"),
        )
        .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let narrow = entry(&c, "narrow");
    assert!(
        narrow.contains("tools = [")
            && narrow.contains("\"echo\"")
            && !narrow.contains("\"missing\""),
        "{narrow}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_page_says_plainly_when_an_allow_list_is_empty() {
    let c = common::console();
    let (s, v) = c
        .json(
            "PATCH",
            "/api/v1/servers/echo",
            Some(serde_json::json!({"tools": []})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["tools_allowed"], serde_json::json!([]));
    let (s, html) = c.page("/servers").await;
    assert_eq!(s, StatusCode::OK);
    let at = html
        .find("id=\"allow-empty-echo\"")
        .expect("the empty allow-list is said");
    let said = &html[at..at + html[at..].find("</p>").unwrap()];
    assert!(
        said.contains("No tool of this server may run: its allow-list is empty"),
        "{said}"
    );
    assert!(
        said.contains("href=\"/servers/echo\""),
        "the remedy links the form: {said}"
    );
    // Its edit form says so too, before any Test.
    let (_, form) = c.page("/servers/echo").await;
    assert!(
        form.contains("<b>none may run</b> (the allow-list is empty)"),
        "{form}"
    );

    // A list and no list read differently.
    c.json(
        "PATCH",
        "/api/v1/servers/echo",
        Some(serde_json::json!({"tools": ["echo"]})),
    )
    .await;
    let (_, html) = c.page("/servers").await;
    assert!(html.contains("Tools: only echo may run (the allow-list)."));
    c.json(
        "PATCH",
        "/api/v1/servers/echo",
        Some(serde_json::json!({"tools": null})),
    )
    .await;
    let (_, html) = c.page("/servers").await;
    assert!(html.contains("Tools: every tool the server lists may run."));
    assert!(!html.contains("allow-empty-echo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_tables_fit_their_cards() {
    let c = common::console();
    let (s, v) = c.json("POST", "/api/v1/servers/echo/test", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, html) = c.page("/servers").await;
    let card = &html[html.find("id=\"server-echo\"").unwrap()..];
    // The table sits in a box of its own with fixed columns.
    let table = card
        .find("<div class=\"table-fit\"><table class=\"tools\">")
        .expect("a fitted table");
    assert!(card[table..].contains("<colgroup><col class=\"c-name\">"));
    let (s, css) = c.page("/assets/app.css").await;
    assert_eq!(s, StatusCode::OK);
    for rule in [
        // A grid item may shrink below its content's width …
        "min-width: 0;",
        // … its table keeps to the card's width with fixed columns …
        "table.tools { table-layout: fixed; width: 100%; }",
        // … long names and reasons wrap …
        "table.tools td, table.tools th { overflow-wrap: anywhere; word-break: break-word; }",
        // … and what still cannot wrap scrolls inside the table's box.
        ".table-fit { max-width: 100%; overflow-x: auto; }",
        // Narrow windows: a column never asks for more than the page.
        "minmax(min(520px, 100%), 1fr)",
    ] {
        assert!(css.contains(rule), "app.css lacks {rule}");
    }
    // The first row is the unavailable tool, with its reason and remedy.
    let tbody = &card[card.find("<tbody>").unwrap()..];
    let first = &tbody[..tbody.find("</tr>").unwrap()];
    assert!(
        first.contains("unavailable") && first.contains("frobnicator not found on PATH"),
        "{first}"
    );
}
