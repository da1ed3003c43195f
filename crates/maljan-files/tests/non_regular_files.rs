//! A FIFO (or any file that is not a regular file) given where a tool reads a file is refused at
//! once with bad_argument, never opened in a way that waits for a writer that never comes
//! (issue 18 item 4).

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::json;

fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// Lets a thread stuck opening the FIFO go (a writer comes, writes nothing and leaves), so a
/// failing test ends instead of waiting on it for ever.
fn release_readers(fifo: &std::path::Path) {
    for _ in 0..50 {
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(fifo)
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(writer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_at_once_by_every_tool_that_reads_a_file() {
    let h = Harness::new();
    mkfifo(&h.path("fifo"));
    let fifo = h.p("fifo");
    let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let calls = [
        ("FA_file_checksum", json!({"path": fifo})),
        (
            "FA_verify_checksum",
            json!({"path": fifo, "expected": "00"}),
        ),
        ("FA_line_count", json!({"file_path": fifo})),
        (
            "FA_copy_file",
            json!({"file_path": fifo, "target_path": h.p("copy")}),
        ),
        ("FA_zip_info", json!({"zip_file_path": fifo})),
        (
            "FA_read_zip_file",
            json!({"zip_file_path": fifo, "file_name": "a"}),
        ),
        (
            "FA_extract_tar",
            json!({"source": fifo, "target_dir": h.p("out")}),
        ),
        ("FA_diff_files", json!({"left": fifo, "right": fifo})),
        ("FA_json_get", json!({"path": fifo, "key_path": "a"})),
        ("FA_jsonl_iter", json!({"path": fifo})),
        (
            "FA_sed_replace",
            json!({"file_path": fifo, "pattern": "a", "replacement": "b"}),
        ),
        (
            "FA_encrypt_file",
            json!({"source": fifo, "target": h.p("enc"), "key": key}),
        ),
        (
            "FA_file_split",
            json!({"file_path": fifo, "chunk_size": 10}),
        ),
    ];
    for (tool, args) in calls {
        let Ok(answer) = tokio::time::timeout(Duration::from_secs(1), h.call(tool, args)).await
        else {
            release_readers(&h.path("fifo"));
            panic!("{tool} did not answer within a second on a FIFO");
        };
        assert_eq!(answer.unwrap_err(), "bad_argument", "{tool}");
    }
    // Nothing was written on the way.
    let mut names: Vec<_> = std::fs::read_dir(h.root())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["fifo"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusal_says_what_was_refused() {
    let h = Harness::new();
    mkfifo(&h.path("fifo"));
    let call = h.server.call(
        "FA_file_checksum",
        serde_json::from_value(json!({"path": h.p("fifo")})).unwrap(),
        Default::default(),
        None,
    );
    let Ok(outcome) = tokio::time::timeout(Duration::from_secs(1), call).await else {
        release_readers(&h.path("fifo"));
        panic!("FA_file_checksum did not answer within a second on a FIFO");
    };
    let outcome = outcome.unwrap();
    let message = outcome.value["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("is not a regular file (FIFOs, devices, sockets are refused)"),
        "{message}"
    );
}
