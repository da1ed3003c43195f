//! The Markdown report read as a CommonMark reader reads it (pulldown-cmark, with GFM tables):
//! every section heading is a heading, every evidence link lands on an anchor that exists, the
//! verdict's facts come before the raw tool output, the children form a tree whose entries
//! link to their own sections, and addresses read in hex.

mod report_fixture;

use std::collections::{BTreeMap, BTreeSet};

use maljan_triage::render;
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use report_fixture::{SHA_EXE, report};

/// What the parsed document holds, in order.
#[derive(Default)]
struct Doc {
    /// (level, text, anchors written inside the heading).
    headings: Vec<(u8, String, Vec<String>)>,
    /// Every `<a id="…">` anywhere, with how often.
    anchors: BTreeMap<String, usize>,
    /// (target, list depth at the link).
    links: Vec<(String, usize)>,
    /// Text of each list item (its own line only, nested items excluded), with its depth.
    items: Vec<(usize, String)>,
    /// Text of every paragraph.
    paragraphs: Vec<String>,
    /// Rows of every table, cells as text.
    tables: Vec<Vec<Vec<String>>>,
    /// All the text, as a reader sees it.
    text: String,
}

fn anchors_in(html: &str) -> Vec<String> {
    html.split("<a id=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

fn parse(md: &str) -> Doc {
    let mut d = Doc::default();
    let mut heading: Option<(u8, String, Vec<String>)> = None;
    let mut list_depth = 0usize;
    let mut item_stack: Vec<String> = Vec::new();
    let mut paragraph: Option<String> = None;
    let mut table: Option<Vec<Vec<String>>> = None;
    let mut cell: Option<String> = None;
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES) {
        let text = match &ev {
            Event::Text(t) | Event::Code(t) => Some(t.to_string()),
            _ => None,
        };
        if let Some(t) = &text {
            d.text.push_str(t);
            for buf in [
                heading.as_mut().map(|h| &mut h.1),
                item_stack.last_mut(),
                paragraph.as_mut(),
                cell.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                buf.push_str(t);
            }
        }
        match ev {
            Event::Start(Tag::Heading { level, .. }) => {
                let n = match level {
                    HeadingLevel::H1 => 1,
                    HeadingLevel::H2 => 2,
                    HeadingLevel::H3 => 3,
                    _ => 4,
                };
                heading = Some((n, String::new(), vec![]));
            }
            Event::End(TagEnd::Heading(_)) => d.headings.extend(heading.take()),
            Event::InlineHtml(h) | Event::Html(h) => {
                for a in anchors_in(&h) {
                    *d.anchors.entry(a.clone()).or_default() += 1;
                    if let Some(h) = heading.as_mut() {
                        h.2.push(a);
                    }
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                d.links.push((dest_url.to_string(), list_depth));
            }
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => list_depth -= 1,
            Event::Start(Tag::Item) => item_stack.push(String::new()),
            Event::End(TagEnd::Item) => {
                let t = item_stack.pop().unwrap_or_default();
                d.items.push((list_depth, t));
            }
            Event::Start(Tag::Paragraph) => paragraph = Some(String::new()),
            Event::End(TagEnd::Paragraph) => d.paragraphs.extend(paragraph.take()),
            Event::Start(Tag::Table(_)) => table = Some(vec![]),
            Event::End(TagEnd::Table) => d.tables.extend(table.take()),
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                table.as_mut().unwrap().push(vec![]);
            }
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                let c = cell.take().unwrap_or_default();
                table.as_mut().unwrap().last_mut().unwrap().push(c);
            }
            _ => {}
        }
    }
    d
}

fn heading_index(d: &Doc, text: &str) -> usize {
    d.headings
        .iter()
        .position(|h| h.1 == text)
        .unwrap_or_else(|| panic!("no heading {text:?} in {:#?}", d.headings))
}

#[test]
fn every_section_heading_is_a_heading_and_every_evidence_link_resolves() {
    let r = report("plain");
    let md = render::markdown(&r);
    let d = parse(&md);

    // The sections, each a real heading at its level, its evidence anchored inside it.
    for (level, text, anchors) in [
        (1, "Triage report: outer plain.zip", vec![]),
        (2, "Sample", vec![]),
        (
            2,
            "Contents: 4 child samples (16384 bytes, depth 3)",
            vec!["ev_0008", "ev_0010", "ev_0011"],
        ),
        (2, "Servers", vec![]),
        (2, "Failures", vec![]),
        (2, "1. File type", vec!["ev_0001"]),
        (2, "2. Format structure (pe_info)", vec!["ev_0002"]),
        (2, "4. YARA", vec!["ev_0004"]),
        (2, "5. Mach-O", vec![]),
        (2, "7. Indicators of compromise", vec!["ev_0007"]),
        (2, "Child 1: inner plain.zip", vec!["child-1"]),
        (3, "1 · 1. File type", vec!["ev_0009"]),
        (2, "Child 1.1: invoice plain.doc", vec!["child-1-1"]),
        (2, "Child 1.1.1: payload plain.exe", vec!["child-1-1-1"]),
        (3, "1.1.1 · 1. Format structure (pe_info)", vec!["ev_0020"]),
        (3, "1.1.1 · 2. Indicators of compromise", vec!["ev_0021"]),
        (2, "Child 1.2: readme plain.txt", vec!["child-1-2"]),
        (3, "1.2 · 1. Strings", vec!["ev_0013"]),
        (2, "Agent (openai/scripted)", vec![]),
        (3, "Conversation", vec![]),
    ] {
        let h = &d.headings[heading_index(&d, text)];
        assert_eq!(h.0, level, "{text}");
        assert_eq!(h.2, anchors, "{text}: anchors");
    }
    let verdict = &d.headings[1];
    assert_eq!(
        (verdict.0, verdict.1.as_str()),
        (
            2,
            "Verdict: MALICIOUS (confidence 0.90) · family plain · the facts alone: SUSPICIOUS"
        )
    );
    // Nothing that should be a heading was read as a paragraph (the old `<a id></a>## …`).
    for p in &d.paragraphs {
        assert!(!p.starts_with('#'), "a heading read as a paragraph: {p}");
    }

    // Each anchor once; every in-page link lands on one; every call of the report has one.
    for (a, n) in &d.anchors {
        assert_eq!(*n, 1, "{a} anchored {n} times");
    }
    let internal: Vec<&str> = d
        .links
        .iter()
        .filter_map(|(url, _)| url.strip_prefix('#'))
        .collect();
    assert!(internal.len() > 20, "{internal:?}");
    for target in &internal {
        assert!(
            d.anchors.contains_key(*target),
            "link to #{target}, which is not anchored"
        );
    }
    assert!(
        d.links.iter().all(|(url, _)| url.starts_with('#')),
        "{:?}",
        d.links
    );
    for id in r.evidence() {
        assert!(d.anchors.contains_key(id), "{id} has no anchor");
    }
    assert!(
        d.anchors.contains_key("ev_0030"),
        "the model's own call is anchored"
    );
    // Evidence chips are links: the failure row, each step's line, the claims.
    for target in ["ev_0004", "ev_0001", "ev_0020", "ev_0013", "ev_0021"] {
        assert!(internal.contains(&target), "no link to {target}");
    }
    // An id no part of the report shows is said so, not linked.
    assert!(!internal.contains(&"ev_0099"));
    assert!(d.text.contains("ev_0099 (not in this report)"));

    // The verdict's facts come first, before any raw tool output.
    assert!(heading_index(&d, "Facts") < heading_index(&d, "Sample"));
    assert!(heading_index(&d, "Facts") < heading_index(&d, "1. File type"));
    let facts = d
        .tables
        .iter()
        .find(|t| t[0][0] == "Fact")
        .expect("the facts table");
    assert_eq!(
        facts[0],
        ["Fact", "Leaning", "Weight", "Strong", "Evidence", "Child"]
    );
    assert_eq!(
        facts[1],
        [
            "carries an executable (carries_executable)",
            "malicious",
            "5",
            "strong",
            "ev_0011",
            "outer.zip → inner plain.zip → invoice plain.doc"
        ]
    );
    assert_eq!(
        facts[2][..4],
        [
            "valid Authenticode signature (signed)",
            "benign",
            "3",
            "strong"
        ]
    );
    assert_eq!(
        facts[3][..4],
        ["packed or protected (packed)", "neutral", "1", "no"]
    );
    for side in ["For a malicious reading:", "For a benign reading:"] {
        assert!(d.paragraphs.iter().any(|p| p == side), "{side}");
    }
    assert!(
        d.items.iter().any(|(_, t)| t.starts_with("valid Authenticode signature (weight 3, strong): yara_scan: rule plain; detect_packer: plain")),
        "{:?}",
        d.items
    );
    assert!(
        d.paragraphs.iter().any(|p| p
            == "Disagreement: the model says malicious; the facts alone say suspicious. plain"),
        "{:?}",
        d.paragraphs
    );

    // Addresses in hex, sizes in decimal.
    let fields = d
        .tables
        .iter()
        .find(|t| t.iter().any(|row| row[0] == "image_base"))
        .unwrap();
    assert!(fields.iter().any(|row| row == &["entry_point", "0x1000"]));
    assert!(fields.iter().any(|row| row == &["image_base", "0x400000"]));
    let sections = d
        .tables
        .iter()
        .find(|t| t[0].contains(&"virtual_address".to_string()))
        .unwrap();
    assert_eq!(sections[1][1..], ["0x1000", "0x400", "512"]);
}

#[test]
fn the_children_are_a_tree_each_linked_to_its_own_section() {
    let md = render::markdown(&report("plain"));
    let d = parse(&md);
    // The tree: each child a list item nested under its parent, its link first.
    let depth_of = |target: &str| {
        d.links
            .iter()
            .find(|(url, _)| url == target)
            .map(|(_, depth)| *depth)
            .unwrap_or_else(|| panic!("no link to {target}"))
    };
    assert_eq!(depth_of("#child-1"), 1);
    assert_eq!(depth_of("#child-1-1"), 2);
    assert_eq!(depth_of("#child-1-1-1"), 3);
    assert_eq!(depth_of("#child-1-2"), 2);
    // Each entry: type, size, SHA-256, verdict, top facts (those for a malicious reading first).
    let exe = d
        .items
        .iter()
        .find(|(depth, t)| *depth == 3 && t.starts_with("1.1.1 "))
        .map(|(_, t)| t.as_str())
        .expect("the exe's entry");
    for part in [
        "payload plain.exe",
        "pe file (pe)",
        "4.0 KiB (4096 bytes)",
        &format!("sha256 {SHA_EXE}"),
        "malicious",
        "facts: process injection (strong), persistence (strong), packed or protected",
    ] {
        assert!(exe.contains(part), "{part:?} not in {exe:?}");
    }
    // Each child's section: its details, its verdict and facts, its steps (not only in JSON).
    let section = md.split("<a id=\"child-1-1-1\"></a>").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let s = parse(section);
    let details = &s.tables[0];
    assert!(details.iter().any(|row| row
        == &[
            "Path",
            "outer plain.zip → inner plain.zip → invoice plain.doc → payload plain.exe"
        ]));
    assert!(
        details
            .iter()
            .any(|row| row == &["Parent", "1.1 invoice plain.doc"])
    );
    assert!(details.iter().any(|row| row == &["SHA-256", SHA_EXE]));
    assert!(
        details
            .iter()
            .any(|row| row == &["Verdict", "malicious (confidence 0.70, heuristic)"])
    );
    assert!(
        details
            .iter()
            .any(|row| row[0] == "From" && row[1].contains("extracted by ev_0011"))
    );
    assert!(s.tables.iter().any(|t| t[0][0] == "Fact" && t.len() == 4));
    assert!(s.text.contains("0x400000"));
}

#[test]
fn the_html_report_has_the_same_tree_facts_and_resolving_links() {
    let r = report("plain");
    let html = render::html(&r);
    let ids: Vec<&str> = html
        .split(" id=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an id is repeated");
    let targets: Vec<&str> = html
        .split("href=\"#")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    for t in &targets {
        assert!(unique.contains(t), "href #{t} has no target");
    }
    for id in r.evidence() {
        assert!(unique.contains(id), "{id} is not anchored");
        assert!(targets.contains(&id), "{id} is never linked");
    }
    for child in ["child-1", "child-1-1", "child-1-1-1", "child-1-2"] {
        assert!(
            unique.contains(child) && targets.contains(&child),
            "{child}"
        );
    }
    // Nested lists: the exe sits three trees deep.
    let exe_at = html.find("href=\"#child-1-1-1\"").unwrap();
    let before = &html[html.find("id=\"contents\"").unwrap()..exe_at];
    assert_eq!(
        before.matches("<ul class=\"tree\">").count() - before.matches("</ul>").count(),
        3
    );
    assert!(html.contains("<table class=\"facts\">"));
    assert!(html.contains("the facts alone say <b class=\"v-suspicious\">suspicious</b>"));
    assert!(html.contains("0x400000") && html.contains(SHA_EXE));
    let facts_at = html.find("<table class=\"facts\">").unwrap();
    assert!(
        facts_at < html.find("id=\"step-1\"").unwrap(),
        "facts before the tool output"
    );
    assert!(html.contains("process injection (strong), persistence (strong), packed or protected"));
}
