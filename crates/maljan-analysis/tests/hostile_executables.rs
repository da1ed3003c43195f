//! Executables built to exhaust parsers (issue 18, item 1): a 1.4 MB PE whose 50,000 import
//! descriptors all point at one 50,000-entry thunk array, and a Mach-O with 10,000 segments each
//! claiming 0xFFFFFFFF sections. Every parsing tool answers within its budget — a result bounded
//! by the file's size or an error naming the limit — and the server answers the next call.

mod corpus;
mod server;

use serde_json::{Value, json};
use server::{Server, error_code};

/// Every tool that parses the sample, with the arguments that make it parse most.
fn parsing_calls(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("identify_file", json!({"path": path})),
        ("hashes", json!({"path": path})),
        ("strings", json!({"path": path})),
        ("iocs_from_file", json!({"path": path})),
        ("entropy", json!({"path": path})),
        ("pe_info", json!({"path": path})),
        ("elf_info", json!({"path": path})),
        ("macho_info", json!({"path": path})),
        ("archive_list", json!({"path": path})),
        ("document_info", json!({"path": path})),
        ("carve_payloads", json!({"path": path})),
        ("search", json!({"path": path, "patterns": ["A"]})),
    ]
}

/// Runs every parsing tool on `name`; each answers (a result or an error) with an answer no larger
/// than a small multiple of the file, and the server answers afterwards.
async fn every_tool_answers_within_its_budget(server: &Server, name: &str, size: usize) {
    let path = server.path(name);
    for (tool, args) in parsing_calls(&path) {
        let (v, is_error) = server.call(tool, args).await;
        let answer = v.to_string().len();
        assert!(
            answer <= 4 * size + 64 * 1024,
            "{tool} answered {answer} bytes for a {size}-byte file"
        );
        if is_error {
            assert!(!error_code(&v).is_empty(), "{tool}: {v}");
        }
        server.still_answers().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pe_whose_descriptors_share_one_thunk_array_is_refused_with_the_limit() {
    let pe = corpus::import_bomb_pe(50_000, 50_000);
    assert!(pe.len() > 1_400_000 && pe.len() < 1_500_000, "{}", pe.len());
    let server = Server::new(&[("bomb.exe", pe.clone())]);

    let (v, is_error) = server
        .call("pe_info", json!({"path": server.path("bomb.exe")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more imports than a") && message.contains("limit"),
        "{message}"
    );
    assert!(
        v["error"]["remediation"]
            .as_str()
            .unwrap()
            .contains("imports=false"),
        "{v}"
    );

    // The rest of the structure is still there to read.
    let (v, is_error) = server
        .call(
            "pe_info",
            json!({"path": server.path("bomb.exe"), "imports": false}),
        )
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"][0]["name"], ".idata", "{v}");

    // entropy reads the sections without the import walk at all.
    let (v, is_error) = server
        .call("entropy", json!({"path": server.path("bomb.exe")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"][0]["name"], ".idata", "{v}");

    every_tool_answers_within_its_budget(&server, "bomb.exe", pe.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_whose_segments_claim_four_billion_sections_each_is_read_within_its_commands() {
    let macho = corpus::section_bomb_macho(10_000);
    let server = Server::new(&[("bomb.macho", macho.clone())]);

    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("bomb.macho")}))
        .await;
    assert!(!is_error, "{v}");
    let arch = &v["architectures"][0];
    assert_eq!(arch["segments"].as_array().unwrap().len(), 10_000);
    // A 72-byte LC_SEGMENT_64 has no room for a section record.
    assert_eq!(arch["sections"].as_array().unwrap().len(), 0, "{arch}");

    let (v, is_error) = server
        .call("entropy", json!({"path": server.path("bomb.macho")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"].as_array().unwrap().len(), 0);

    every_tool_answers_within_its_budget(&server, "bomb.macho", macho.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_binding_one_symbol_four_quintillion_times_is_refused_with_the_limit() {
    let macho = corpus::bind_bomb_macho();
    let server = Server::new(&[("bind.macho", macho.clone())]);
    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("bind.macho")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more Mach-O bind entries than a"),
        "{message}"
    );
    every_tool_answers_within_its_budget(&server, "bind.macho", macho.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_whose_export_trie_loops_is_read_once_per_node() {
    let macho = corpus::trie_loop_macho();
    let server = Server::new(&[("loop.macho", macho.clone())]);
    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("loop.macho")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["architectures"][0]["export_count"], 0, "{v}");
    every_tool_answers_within_its_budget(&server, "loop.macho", macho.len()).await;
}
