//! Documents built to exhaust document_info (issue 18, item 1): an OOXML package whose
//! relationship parts all share one deflate stream of 16 MiB of spaces. The package is about a
//! megabyte; reading every part would inflate a gigabyte. document_info answers with an error
//! naming the limit, and the server answers the next call.

mod server;

use std::io::{Cursor, Write};

use serde_json::json;
use server::{Server, error_code};

/// How many parts reuse the one compressed stream.
const COPIES: usize = 64;

fn inflation_bomb_docx() -> Vec<u8> {
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut one = zip::ZipWriter::new(Cursor::new(Vec::new()));
    one.start_file("blob", opts).unwrap();
    one.write_all(&vec![b' '; 16 << 20]).unwrap();
    let one = one.finish().unwrap().into_inner();
    let mut source = zip::ZipArchive::new(Cursor::new(one)).unwrap();

    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file("[Content_Types].xml", opts).unwrap();
    w.write_all(br#"<?xml version="1.0"?><Types/>"#).unwrap();
    w.start_file("word/document.xml", opts).unwrap();
    w.write_all(b"<w:document/>").unwrap();
    for i in 0..COPIES {
        let blob = source.by_name("blob").unwrap();
        w.raw_copy_file_rename(blob, format!("word/_rels/part{i}.xml.rels"))
            .unwrap();
    }
    w.finish().unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ooxml_package_that_inflates_a_thousand_fold_is_refused_with_the_limit() {
    let docx = inflation_bomb_docx();
    assert!(docx.len() < 2 << 20, "{}", docx.len());
    let server = Server::new(&[("bomb.docx", docx)]);
    let (v, _) = server
        .call("identify_file", json!({"path": server.path("bomb.docx")}))
        .await;
    assert_eq!(v["kind"], "ooxml", "{v}");
    let (v, is_error) = server
        .call("document_info", json!({"path": server.path("bomb.docx")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("OOXML parts decompress to more than"),
        "{message}"
    );
    server.still_answers().await;
}
