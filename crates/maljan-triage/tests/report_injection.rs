//! Hostile text in every slot of a report — the sample's name, version-info values, member
//! names, IOCs, failure cells, a server's error code, fact observations, the model's words —
//! cannot add a link, an image, raw HTML or a code span to the Markdown report, nor a tag to the
//! HTML report; controls and bidi overrides are shown, not obeyed; the STIX bundle stays JSON.
//!
//! The Markdown is read with a CommonMark parser (pulldown-cmark, GFM tables on) and compared
//! with the same report rendered with a harmless placeholder in the same slots.

mod report_fixture;

use maljan_triage::render;
use proptest::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};
use report_fixture::report;

/// The constructs a hostile string could smuggle in: links and images with their targets, raw
/// HTML with its text, code spans and code blocks.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
enum Construct {
    Link(String),
    Image(String),
    Html(String),
    Code,
    CodeBlock,
}

fn parse(md: &str) -> Vec<Event<'_>> {
    Parser::new_ext(md, Options::ENABLE_TABLES).collect()
}

fn constructs(md: &str) -> Vec<Construct> {
    parse(md)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::Start(Tag::Link { dest_url, .. }) => Some(Construct::Link(dest_url.to_string())),
            Event::Start(Tag::Image { dest_url, .. }) => {
                Some(Construct::Image(dest_url.to_string()))
            }
            Event::Html(h) | Event::InlineHtml(h) => Some(Construct::Html(h.to_string())),
            Event::Code(_) => Some(Construct::Code),
            Event::Start(Tag::CodeBlock(_)) => Some(Construct::CodeBlock),
            _ => None,
        })
        .collect()
}

/// The document's shape: every block and inline tag in order (tables, cells, lists, headings,
/// emphasis, links…), and where each code span and HTML fragment sits; text left out.
fn shape(md: &str) -> Vec<String> {
    parse(md)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::Start(t) => Some(format!("start {t:?}")),
            Event::End(t) => Some(format!("end {t:?}")),
            Event::Code(_) => Some("code".into()),
            Event::Html(h) | Event::InlineHtml(h) => Some(format!("html {h}")),
            Event::SoftBreak | Event::HardBreak | Event::Rule => Some(format!("{ev:?}")),
            _ => None,
        })
        .collect()
}

/// The Markdown may only hold what the placeholder's rendering holds: the same links (to the
/// same targets), images, HTML and code blocks, and no more code spans (a name with a `|` is
/// written as escaped text instead of a span, so fewer is fine).
fn assert_md_made_only_its_own(s: &str) {
    let own = constructs(&render::markdown(&report("placeholder")));
    let got = constructs(&render::markdown(&report(s)));
    let code = |c: &[Construct]| c.iter().filter(|x| **x == Construct::Code).count();
    assert!(code(&got) <= code(&own), "a code span was added for {s:?}");
    let strip = |c: Vec<Construct>| -> Vec<Construct> {
        c.into_iter().filter(|x| *x != Construct::Code).collect()
    };
    assert_eq!(strip(got), strip(own), "for {s:?}");
}

/// The report's shape does not depend on what the slots hold (given the slots are not empty,
/// and hold a `|` exactly when the placeholder does).
fn assert_same_shape(s: &str) {
    let (slot, placeholder) = if s.contains('|') {
        (format!("a|{s}b"), "a|b".to_string())
    } else {
        (format!("a{s}b"), "ab".to_string())
    };
    let own = shape(&render::markdown(&report(&placeholder)));
    let got = shape(&render::markdown(&report(&slot)));
    if own != got {
        let at = own.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "the report's shape changed for {s:?} at event {at}: {:?} vs {:?}",
            own.get(at..at + 3),
            got.get(at..at + 3)
        );
    }
}

/// The HTML report's tags (names and attribute names, values blanked), in order.
fn tags(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').map_or(rest.len(), |e| start + e);
        let mut tag = String::new();
        let mut quoted = false;
        for c in rest[start..end].chars() {
            match c {
                '"' => {
                    quoted = !quoted;
                    tag.push('"');
                }
                _ if quoted => {}
                c => tag.push(c),
            }
        }
        out.push(tag);
        rest = &rest[end..];
    }
    out
}

/// The HTML report's tags do not depend on what the slots hold (non-empty, as above: an empty
/// summary rightly leaves out its paragraph).
fn assert_html_made_only_its_own(s: &str) {
    let own = tags(&render::html(&report("ab")));
    let got = tags(&render::html(&report(&format!("a{s}b"))));
    if own != got {
        let at = own.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "the HTML's tags changed for {s:?} at tag {at}: {:?} vs {:?}",
            own.get(at..at + 3),
            got.get(at..at + 3)
        );
    }
}

/// The issue's examples and variants of each class.
const HOSTILE: &[&str] = &[
    // A live link from a sample's name, and its variants.
    "[x](javascript:alert(1)).zip",
    "[x]( javascript:alert(1) 'title')",
    "<javascript:alert(1)>",
    "<https://evil.example/x>",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "[x]: https://evil.example/",
    "https://evil.example/beacon www.evil.example a@evil.example",
    // A remote image from version-info.
    "![p](http://host/p.png)",
    "![p][i]",
    "!\\[p](http://host/p.png)",
    "<img src=http://host/p.png>",
    // Raw HTML from a hostile server's error code.
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "</td></tr></table><iframe src=//x>",
    "<!-- x -->",
    "<details open><summary>x</summary>",
    "&lt;img src=x&gt; &#60;b&#62;",
    // Code spans and blocks.
    "`code`",
    "``a`b``",
    "\n```\nfenced\n```\n",
    "    indented code",
    "~~~\nx\n~~~",
    // Table, heading, list and emphasis breakers.
    "a | b | c",
    "\\| escaped \\\\| twice",
    "\n# heading\n",
    "- item",
    "1. item",
    "> quote",
    "***bold*** _em_ ~~strike~~",
    "\\",
    "trailing backslash\\",
    "",
    " ",
    // Terminal and bidi controls.
    "\u{1b}]8;;https://evil.example\u{7}link\u{1b}]8;;\u{7}",
    "\u{1b}[2J\u{9b}31m\r\u{85}",
    "invoice\u{202e}fdp.exe",
    "\u{2066}\u{2067}\u{2068}x\u{2069}\u{202a}\u{202b}\u{202c}\u{202d}",
];

#[test]
fn the_issues_examples_and_their_variants_stay_text() {
    for s in HOSTILE {
        assert_md_made_only_its_own(s);
        assert_same_shape(s);
        assert_html_made_only_its_own(s);
        let md = render::markdown(&report(s));
        let html = render::html(&report(s));
        // (The text may still read "javascript:" inside a code span or block: literal there.)
        assert!(constructs(&md).iter().all(|c| match c {
            Construct::Link(url) => url.starts_with('#'),
            Construct::Image(_) => false,
            _ => true,
        }));
        for out in [&md, &html] {
            assert!(
                !out.contains('\u{1b}') && !out.contains('\u{202e}') && !out.contains('\u{9b}')
            );
        }
        // The text is there for a reader, as escapes where it was hidden.
        if s.contains('\u{202e}') {
            assert!(
                md.contains("\\\\u{202e}") && html.contains("\\u{202e}"),
                "{md}"
            );
        }
    }
    // The report's own links and code spans are still there.
    let own = constructs(&render::markdown(&report("placeholder")));
    assert!(own.contains(&Construct::Link("#ev_0001".into())));
    assert!(own.contains(&Construct::Code));
}

#[test]
fn the_stix_bundle_keeps_hostile_text_as_json_strings() {
    for s in HOSTILE {
        let bundle: serde_json::Value = serde_json::from_str(&render::stix(&report(s))).unwrap();
        let text = bundle.to_string();
        assert!(!text.contains('\u{1b}'), "controls are JSON escapes");
        let names: Vec<&str> = bundle["objects"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o["name"].as_str())
            .collect();
        assert!(
            names.contains(&format!("outer {s}.zip").as_str()),
            "{names:?}"
        );
    }
}

/// Pieces of what Markdown, HTML and terminals read as syntax.
fn tokens() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "[",
        "]",
        "(",
        ")",
        "!",
        "<",
        ">",
        "`",
        "``",
        "```",
        "*",
        "_",
        "~",
        "~~",
        "|",
        "\\",
        "&",
        "#",
        "-",
        "+",
        "=",
        "1.",
        "2)",
        ":",
        "@",
        "'",
        "\"",
        " ",
        "    ",
        "\n",
        "\r",
        "\t",
        "\n\n",
        "http://x.y/",
        "javascript:alert(1)",
        "www.x.com",
        "a@b.co",
        "<img src=x>",
        "<a href='x'>",
        "</details>",
        "&lt;",
        "&#60;",
        "&amp;",
        "\u{202e}",
        "\u{2066}",
        "\u{1b}[31m",
        "\u{9b}",
        "\u{0}",
        "\u{7f}",
        "x",
        "é",
        "文",
    ])
}

/// Strings made of those pieces.
fn syntax() -> impl Strategy<Value = String> {
    prop::collection::vec(tokens(), 0..24).prop_map(|t| t.concat())
}

/// Strings shaped like a construct (a link, an image, an autolink, a code span, a reference
/// definition, raw HTML, a cell break, a heading) with syntax inside, so the cases reach past
/// the first bracket.
fn near_constructs() -> impl Strategy<Value = String> {
    let template = prop::sample::select(vec![
        "[{0}]({1})",
        "![{0}]({1})",
        "[{0}]( <{1}> )",
        "<{0}>",
        "<http://{0}>",
        "`{0}`",
        "``{0}``",
        "[{0}]: {1}\n\n[{0}]",
        "[{0}][{1}]",
        "<a href=\"{0}\">{1}</a>",
        "<{0} onerror={1}>",
        "{0}|{1}",
        "\n# {0}\n{1}",
        "{0}\n```\n{1}",
    ]);
    let filler = || prop::collection::vec(tokens(), 0..4).prop_map(|t| t.concat());
    (template, filler(), filler(), filler(), filler()).prop_map(|(t, a, b, pre, post)| {
        format!("{pre}{}{post}", t.replace("{0}", &a).replace("{1}", &b))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_string_adds_a_construct_to_the_markdown(s in prop_oneof![syntax(), near_constructs(), any::<String>()]) {
        assert_md_made_only_its_own(&s);
        assert_same_shape(&s);
    }

    #[test]
    fn no_string_adds_a_tag_to_the_html(s in prop_oneof![syntax(), near_constructs(), any::<String>()]) {
        assert_html_made_only_its_own(&s);
    }
}
