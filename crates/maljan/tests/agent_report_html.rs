//! The HTML report of an agent run, as an analyst opens it: the verdict header comes first, each
//! claim and technique links to an evidence anchor that exists (once), the techniques are shown,
//! the conversation (the model's messages and tool calls, the tool results) sits in collapsible
//! `<details>`, and what came from the sample or the model is escaped — a `<script>` in the sample
//! never reaches the HTML raw.

mod common;

use std::{collections::BTreeMap, process::Command};

use common::maljan;
use maljan_testkit::ScriptedModel;
use serde_json::json;

const HOSTILE: &str = "<script>alert('from the sample')</script>";
const MODEL_HOSTILE: &str = "<img src=x onerror=alert(1)>";

/// Every `attr="…"` value in `html`.
fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!("{attr}=\"");
    html.match_indices(&needle)
        .map(|(i, _)| {
            let rest = &html[i + needle.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

/// Whether the text at `at` sits inside a `<details>` element.
fn inside_details(html: &str, at: usize) -> bool {
    let before = &html[..at];
    match (before.rfind("<details"), before.rfind("</details>")) {
        (Some(open), Some(close)) => open > close,
        (Some(_), None) => true,
        _ => false,
    }
}

#[test]
fn the_html_report_of_an_agent_run_leads_with_the_verdict_links_evidence_and_escapes_the_sample() {
    let tmp = tempfile::tempdir().unwrap();
    // A page with a script that writes a Run key: the persistence fact gives the verdict card a
    // fact with evidence links (a <script> makes it HTML, not inert text).
    let sample = tmp.path().join("dropper.txt");
    std::fs::write(
        &sample,
        format!(
            "{HOSTILE}\nconnect http://c2.evil.example/gate.php\n\
             reg add HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run /v updater\n"
        ),
    )
    .unwrap();
    let strings_call = json!({"min_len": 4, "pattern": "script"}).to_string();
    let model = ScriptedModel::start(&json!({"turns": [
        {"tool_calls": [{"id": "c1", "name": "strings", "arguments": strings_call}]},
        // The same call again: answered from the ledger (the same evidence id, twice in the
        // conversation; the HTML must still give that id one anchor).
        {"tool_calls": [{"id": "c2", "name": "strings", "arguments": strings_call}]},
        {"text": format!("The sample carries a script tag {MODEL_HOSTILE} and a Run key.")},
        {"text": json!({"verdict": "malicious", "confidence": 0.8, "family": null,
            "summary": format!("a dropper {MODEL_HOSTILE}"),
            "claims": [
                {"text": "persists through a Run key", "evidence": ["ev_0001", "ev_0002"]},
                {"text": format!("embeds {MODEL_HOSTILE}"), "evidence": ["ev_0001"]}
            ],
            "techniques": [{"id": "T1547.001", "name": "Registry Run Keys / Startup Folder",
                "evidence": ["ev_0002"]}]}).to_string()},
    ]}));
    let report = tmp.path().join("r.html");
    let out = Command::new(maljan())
        .arg("analyze")
        .arg(&sample)
        .arg("--report")
        .arg(&report)
        .env("MALJAN_HOME", tmp.path().join("home"))
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_API_KEY")
        .env("MALJAN_LOG", "warn")
        .env("MALJAN_LLM_PROVIDER", "openai")
        .env("MALJAN_LLM_BASE_URL", &model.url)
        .env("MALJAN_LLM_MODEL", "scripted")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        common::text(&out)
    );
    let html = std::fs::read_to_string(&report).unwrap();

    // The verdict header comes first: before the sample card and every step.
    let verdict_at = html
        .find("<section class=\"card verdict\"><h2>Verdict: <span class=\"v-malicious\">malicious</span>")
        .unwrap_or_else(|| panic!("the judge's verdict header: {html}"));
    let sample_at = html.find("<h2>Sample</h2>").unwrap();
    let first_step = html.find("class=\"card step\"").unwrap();
    assert!(verdict_at < sample_at && verdict_at < first_step);
    assert!(html[verdict_at..sample_at].contains("source <b>agent</b>"));

    // Each claim and technique links to an anchor that exists, and every anchor is unique.
    let mut anchors: BTreeMap<&str, usize> = BTreeMap::new();
    for id in attr_values(&html, "id") {
        *anchors.entry(id).or_default() += 1;
    }
    let duplicated: Vec<_> = anchors.iter().filter(|(_, n)| **n > 1).collect();
    if let Some((id, _)) = duplicated.first() {
        let at: Vec<&str> = html
            .match_indices(&format!("id=\"{id}\""))
            .map(|(i, _)| &html[i.saturating_sub(200)..i + 20])
            .collect();
        panic!("ids given twice: {duplicated:?}, at {at:#?}");
    }
    let verdict_card = &html[verdict_at..sample_at];
    // The facts come first in the card (each with its evidence links), then the claims and the
    // techniques.
    let claims_at = verdict_card
        .find("<h3>Claims</h3>")
        .expect("the verdict card lists the claims after the facts");
    let facts_links = attr_values(&verdict_card[..claims_at], "href");
    assert!(
        !facts_links.is_empty(),
        "the facts link their evidence: {verdict_card}"
    );
    let claim_links = attr_values(&verdict_card[claims_at..], "href");
    assert_eq!(
        claim_links.len(),
        4,
        "three claim links and one technique link: {claim_links:?}"
    );
    let links: Vec<&str> = facts_links.into_iter().chain(claim_links).collect();
    for link in &links {
        let target = link.strip_prefix('#').expect("an in-page link");
        assert!(
            anchors.contains_key(target),
            "{link} points at an anchor that exists"
        );
    }

    // The techniques are shown.
    assert!(
        verdict_card
            .contains("<td><code>T1547.001</code></td><td>Registry Run Keys / Startup Folder</td>")
    );

    // The conversation: model messages and tool calls and results, each in a <details>.
    let conversation = html.find("<h2>Conversation</h2>").expect("a conversation");
    let call = html[conversation..]
        .find("calls <code>strings</code>")
        .map(|i| i + conversation)
        .expect("the model's tool call is shown");
    assert!(inside_details(&html, call));
    let results: Vec<usize> = html
        .match_indices("result of <code>strings</code>")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(results.len(), 2, "both answers (one from the ledger) shown");
    assert!(results.iter().all(|&i| inside_details(&html, i)));
    let message = html
        .find("The sample carries a script tag")
        .expect("the analyst's message is shown");
    assert!(message > conversation && inside_details(&html, message));
    assert!(html[conversation..].contains("answered from the ledger"));

    // What the sample and the model wrote is escaped, never raw.
    assert!(!html.contains("<script"), "a raw <script> reached the HTML");
    assert!(!html.contains("<img"), "raw model markup reached the HTML");
    assert!(
        html[conversation..]
            .contains("&lt;script&gt;alert(&#39;from the sample&#39;)&lt;/script&gt;"),
        "the sample's string is shown escaped inside the tool result"
    );
    assert!(verdict_card.contains("&lt;img src=x onerror=alert(1)&gt;"));
}
