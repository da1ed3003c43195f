//! The confinement race (issue 18 item 2): while a second thread flips a name inside the root
//! between "absent" and a symlink to a file outside, no tool writes the outside file or answers
//! with its content. A path that is checked and then opened again by name loses this race now
//! and then; one opened from the root's handle without following links never does.

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use common::Harness;
use serde_json::{Value, json};
use sha2::Digest;

const ROUNDS: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_flipped_in_and_out_never_leads_outside() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let secret_path = outside.path().join("secret.txt");
    // Its own line count (313) and digest, so either showing up in an answer is noticed.
    let secret: String = (0..313).map(|i| format!("outside secret {i}\n")).collect();
    std::fs::write(&secret_path, &secret).unwrap();
    let secret_digest = hex::encode(sha2::Sha256::digest(secret.as_bytes()));
    let secret_mtime = std::fs::metadata(&secret_path).unwrap().modified().unwrap();
    h.write("source.txt", "inside\n");

    let flip = h.path("flip");
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, flip, target) = (stop.clone(), flip.clone(), secret_path.clone());
        std::thread::spawn(move || {
            // Each state is held for a few microseconds, varied, so that some check lands in
            // one state and the open that follows it in the other.
            let hold = |n: u64| {
                let until = std::time::Instant::now() + std::time::Duration::from_micros(n % 40);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            };
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::os::unix::fs::symlink(&target, &flip);
                hold(flips.wrapping_mul(7919));
                let _ = std::fs::remove_file(&flip);
                hold(flips.wrapping_mul(104_729));
                flips += 1;
            }
            flips
        })
    };

    let calls: [(&str, Value); 6] = [
        (
            "FA_copy_file",
            json!({"file_path": h.p("source.txt"), "target_path": h.p("flip")}),
        ),
        (
            "FA_jsonl_append",
            json!({"path": h.p("flip"), "record": {"k": "v"}}),
        ),
        (
            "FA_create_file",
            json!({"file_path": h.p("flip"), "content": "created\n"}),
        ),
        ("FA_file_checksum", json!({"path": h.p("flip")})),
        ("FA_line_count", json!({"file_path": h.p("flip")})),
        (
            "FA_copy_file",
            json!({"file_path": h.p("flip"), "target_path": h.p("copied.txt")}),
        ),
    ];
    let mut answered = 0;
    for _ in 0..ROUNDS {
        for (tool, args) in &calls {
            let result = h.call(tool, args.clone()).await;
            answered += 1;
            let answer = match &result {
                Ok(v) => v.to_string(),
                Err(code) => code.clone(),
            };
            assert!(
                !answer.contains(&secret_digest) && !answer.contains("outside secret"),
                "{tool} answered with the outside file's content: {answer}"
            );
            // 313 lines is the outside file's count; the inside files have 1 or 2.
            if let Ok(v) = &result
                && *tool == "FA_line_count"
            {
                assert_ne!(v["lines"], 313, "{tool} counted the outside file: {answer}");
            }
            if let Ok(v) = &result
                && *tool == "FA_copy_file"
                && v["source"] == h.p("flip")
            {
                assert_ne!(
                    v["bytes"],
                    secret.len(),
                    "FA_copy_file read the outside file: {answer}"
                );
            }
        }
        let copied = std::fs::read_to_string(h.path("copied.txt")).unwrap_or_default();
        assert!(
            !copied.contains("outside secret"),
            "FA_copy_file copied the outside file into the root"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 0);
    assert_eq!(answered, ROUNDS * calls.len());
    assert!(
        std::fs::read_to_string(&secret_path).unwrap() == secret,
        "the outside file was written"
    );
    assert_eq!(
        std::fs::metadata(&secret_path).unwrap().modified().unwrap(),
        secret_mtime,
        "the outside file was touched"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "a file was created outside the root"
    );
}
