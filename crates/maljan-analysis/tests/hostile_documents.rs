//! Documents built to exhaust document_info (issue 18, item 1): an OOXML package whose
//! relationship parts all share one deflate stream of 16 MiB of spaces (about a megabyte; reading
//! every part would inflate a gigabyte), and an OLE2 file whose 1,000 VBA modules all name one
//! module stream of a megabyte. document_info answers with an error naming the limit, and the
//! server answers the next call.

mod corpus;
mod server;

use serde_json::json;
use server::{Server, error_code};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ooxml_package_that_inflates_a_thousand_fold_is_refused_with_the_limit() {
    let docx = corpus::inflation_bomb_docx(64);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ole2_file_whose_modules_share_one_stream_is_refused_with_the_limit() {
    let doc = corpus::shared_module_ole(1000, 1 << 20);
    let server = Server::new(&[("shared.doc", doc)]);
    let (v, is_error) = server
        .call("document_info", json!({"path": server.path("shared.doc")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("VBA module streams"), "{message}");
    server.still_answers().await;
}
