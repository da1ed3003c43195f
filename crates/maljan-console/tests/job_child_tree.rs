//! A job's page shows the samples found inside its sample as a tree, from the report the job
//! kept: each child with its path in its parent, its type, size, SHA-256, verdict and top facts,
//! nested under the child it came out of, and linked to its own section of the HTML report.

mod common;

use std::io::Write;

use axum::http::StatusCode;
use sha2::{Digest, Sha256};

const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        zw.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        zw.write_all(bytes).unwrap();
    }
    zw.finish().unwrap().into_inner()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `<li>` of the tree whose path in its parent is `name`: its id and its own text (up to
/// its nested list, if any).
fn entry<'a>(tree: &'a str, name: &str) -> (&'a str, &'a str) {
    // As the page escapes it (minijinja writes `/` as `&#x2f;`).
    let shown = name.replace('/', "&#x2f;");
    let at = tree
        .find(&format!("<code>{shown}</code>"))
        .unwrap_or_else(|| panic!("{name} is not in the tree: {tree}"));
    let li = tree[..at].rfind("<li id=\"").unwrap();
    let id = &tree[li + 8..li + 8 + tree[li + 8..].find('"').unwrap()];
    let rest = &tree[li..];
    let end = ["<ul class=\"tree\">", "</li>"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap();
    (id, &rest[..end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_page_shows_the_child_tree_on_sqlite() {
    the_job_page_shows_the_child_tree(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_page_shows_the_child_tree_on_postgres() {
    the_job_page_shows_the_child_tree(common::Store::Postgres).await;
}

async fn the_job_page_shows_the_child_tree(store: common::Store) {
    let c = common::console_over(store, true);
    let nested = zip_of(&[("eicar.com", EICAR)]);
    let readme = b"Read me first: the tools are in inner/.\n".repeat(4);
    let outer = zip_of(&[("docs/readme.txt", &readme), ("inner/nested.zip", &nested)]);
    let (s, v) = c.submit("bundle.zip", &outer, &[("agent", "off")]).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    c.wait_done(&id).await;

    let (s, html) = c.page(&format!("/jobs/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    let tree = &html[html
        .find("<section id=\"children\">")
        .expect("a children section")..];
    let tree = &tree[..tree.find("</section>").unwrap()];

    // The nested archive, a child of the sample, and the EICAR file inside it, a child of that.
    let (zip_id, zip_entry) = entry(tree, "inner/nested.zip");
    let (eicar_id, eicar_entry) = entry(tree, "eicar.com");
    assert!(
        eicar_id.starts_with(&format!("{zip_id}-")),
        "eicar.com ({eicar_id}) is nested under inner/nested.zip ({zip_id})"
    );
    let zip_li = tree.find(&format!("<li id=\"{zip_id}\">")).unwrap();
    let eicar_li = tree.find(&format!("<li id=\"{eicar_id}\">")).unwrap();
    assert_eq!(
        tree[zip_li..eicar_li]
            .matches("<ul class=\"tree\">")
            .count(),
        1,
        "one level down"
    );
    for (entry, bytes) in [(zip_entry, &nested[..]), (eicar_entry, EICAR)] {
        assert!(entry.contains(&format!("{} bytes", bytes.len())), "{entry}");
        assert!(
            entry.contains(&format!("sha256 {}", sha256(bytes))),
            "{entry}"
        );
    }
    assert!(
        zip_entry.contains("<code>zip</code>"),
        "its type: {zip_entry}"
    );
    // The EICAR file's verdict and its top facts.
    assert!(eicar_entry.contains("badge v-malicious"), "{eicar_entry}");
    let facts = &eicar_entry[eicar_entry.find("facts: ").expect("its top facts")..];
    assert!(facts.contains("(strong)"), "{facts}");
    // The readme sits beside the nested archive, at the first level.
    let (readme_id, readme_entry) = entry(tree, "docs/readme.txt");
    assert_eq!(readme_id.matches('-').count(), zip_id.matches('-').count());
    assert!(readme_entry.contains(&format!("sha256 {}", sha256(&readme))));

    // Each links to its own section of the HTML report, which has it.
    let link = format!("href=\"/api/v1/jobs/{id}/report?format=html#{eicar_id}\"");
    assert!(eicar_entry.contains(&link), "{eicar_entry}");
    let (s, report) = c
        .page(&format!("/api/v1/jobs/{id}/report?format=html"))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        report.contains(&format!("id=\"{eicar_id}\"")),
        "the report has the section {eicar_id}"
    );
    // The tree is the one the job kept in its report.
    let (_, kept) = c
        .json(
            "GET",
            &format!("/api/v1/jobs/{id}/report?format=json"),
            None,
        )
        .await;
    let children = kept["children"].as_array().expect("the report's children");
    assert_eq!(children.len(), 2, "{kept:#}");
}
