//! AES-GCM envelopes, conditional dispatch and the action-list executors (with policy).

mod common;

use common::Harness;
use serde_json::json;

const KEY32: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="; // bytes 0..32
const KEY16: &str = "AAECAwQFBgcICQoLDA0ODw=="; // bytes 0..16

#[tokio::test]
async fn encrypt_decrypt_round_trip_and_envelope() {
    let h = Harness::new();
    h.write("plain.txt", "attack at dawn");
    for key in [KEY32, KEY16] {
        let enc = json!({"source": "plain.txt", "target": "enc/p.bin", "key": key, "associated_data": "v1"});
        let out = h.call("FA_encrypt_file", enc).await.unwrap();
        assert_eq!(out["plaintext_bytes"], 14);
        let envelope = std::fs::read(h.path("enc/p.bin")).unwrap();
        assert_eq!(&envelope[..9], b"FA-AESG\x01\x00");
        assert_eq!(&envelope[9..13], &[0, 0, 0, 2]);
        assert_eq!(&envelope[25..27], b"v1");
        assert_eq!(envelope.len(), 13 + 12 + 2 + 14 + 16);
        let dec = json!({"source": "enc/p.bin", "target": "back.txt", "key": key});
        h.call("FA_decrypt_file", dec).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(h.path("back.txt")).unwrap(),
            "attack at dawn"
        );
    }
}

#[tokio::test]
async fn decryption_refuses_wrong_keys_and_tampering() {
    let h = Harness::new();
    h.write("plain.txt", "secret");
    h.call(
        "FA_encrypt_file",
        json!({"source": "plain.txt", "target": "e.bin", "key": KEY32}),
    )
    .await
    .unwrap();
    let wrong = json!({"source": "e.bin", "target": "o.txt", "key": "AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="});
    assert_eq!(
        h.call("FA_decrypt_file", wrong).await.unwrap_err(),
        "bad_argument"
    );
    assert!(!h.path("o.txt").exists());
    let mut bytes = std::fs::read(h.path("e.bin")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(h.path("t.bin"), &bytes).unwrap();
    let tampered = json!({"source": "t.bin", "target": "o.txt", "key": KEY32});
    assert_eq!(
        h.call("FA_decrypt_file", tampered).await.unwrap_err(),
        "bad_argument"
    );
    h.write("notenv.bin", "hello there, this is not an envelope at all");
    let junk = json!({"source": "notenv.bin", "target": "o.txt", "key": KEY32});
    assert_eq!(
        h.call("FA_decrypt_file", junk).await.unwrap_err(),
        "unsupported_format"
    );
    let badkey = json!({"source": "plain.txt", "target": "x", "key": "c2hvcnQ="});
    assert_eq!(
        h.call("FA_encrypt_file", badkey).await.unwrap_err(),
        "bad_argument"
    );
    let notb64 = json!({"source": "plain.txt", "target": "x", "key": "***"});
    assert_eq!(
        h.call("FA_encrypt_file", notb64).await.unwrap_err(),
        "bad_argument"
    );
    let missing = json!({"source": "none", "target": "x", "key": KEY32});
    assert_eq!(
        h.call("FA_encrypt_file", missing).await.unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn execute_action_runs_in_order_and_records_failures() {
    let h = Harness::new();
    let list = json!([
        ["FA_create_dir", {"dir_path": "work"}],
        ["FA_create_file", ["work/a.txt", "hello"]],
        ["FA_file_checksum", {"path": "work/a.txt", "algorithm": "md5"}],
        ["FA_remove_file", {"file_path": "work/missing"}],
        ["FA_list_dir", {"dir_path": "work"}]
    ]);
    let out = h
        .call("FA_execute_action", json!({"action_list": list}))
        .await
        .unwrap();
    assert_eq!(out["succeeded"], 4);
    assert_eq!(out["failed"], 1);
    assert_eq!(
        out["results"][2]["result"]["digest"],
        "5d41402abc4b2a76b9719d911017c592"
    );
    assert_eq!(out["results"][3]["status"], "failed");
    assert_eq!(out["results"][3]["error"]["code"], "no_such_file");
    assert_eq!(out["results"][4]["result"]["count"], 1);
    // The {"auto_control": [...]} document form and dry runs.
    let doc = json!({"action_list": {"auto_control": [["FA_create_dir", {"dir_path": "dry"}]]}, "dry_run": true});
    let out = h.call("FA_execute_action", doc).await.unwrap();
    assert_eq!(out["results"][0]["status"], "dry_run");
    assert!(!h.path("dry").exists());
}

#[tokio::test]
async fn execute_action_validation_and_substitution() {
    let h = Harness::new();
    let typo = json!({"action_list": [["FA_create_dir", {"dir_path": "x"}], ["FA_nope"]], "validate_first": true});
    assert_eq!(
        h.call("FA_execute_action", typo).await.unwrap_err(),
        "bad_argument"
    );
    assert!(
        !h.path("x").exists(),
        "validate_first stops the list before anything runs"
    );
    let unvalidated = json!({"action_list": [["FA_nope"], ["FA_create_dir", {"dir_path": "y"}]]});
    let out = h.call("FA_execute_action", unvalidated).await.unwrap();
    assert_eq!(out["results"][0]["status"], "failed");
    assert!(h.path("y").exists());
    for bad in [
        json!([]),
        json!({"other": []}),
        json!([["FA_list_dir", "str"]]),
        json!([[1]]),
    ] {
        let r = h
            .call(
                "FA_execute_action",
                json!({"action_list": bad, "validate_first": true}),
            )
            .await;
        assert_eq!(r.unwrap_err(), "bad_argument", "{bad}");
    }
    let sub = json!({"action_list": [["FA_create_file", {"file_path": "${cwd}/made-${date:%Y}.txt"}]], "substitute": true});
    h.call("FA_execute_action", sub).await.unwrap();
    let year = chrono_year();
    assert!(h.path(&format!("made-{year}.txt")).exists());
    let env = json!({"action_list": [["FA_create_file", {"file_path": "${env:HOME}"}]], "substitute": true});
    assert_eq!(
        h.call("FA_execute_action", env).await.unwrap_err(),
        "bad_argument"
    );
    let names = h
        .call(
            "FA_validate",
            json!({"action_list": [["FA_list_dir", {"dir_path": "."}], ["FA_grep"]]}),
        )
        .await
        .unwrap();
    assert_eq!(names["actions"], json!(["FA_list_dir", "FA_grep"]));
    assert_eq!(
        h.call("FA_validate", json!({"action_list": [["FA_unknown"]]}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}

fn chrono_year() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Good enough for any date this test will run on: days / 365.2425 from 1970.
    (1970 + (secs as f64 / 86_400.0 / 365.2425) as u64).to_string()
}

#[tokio::test]
async fn parallel_and_dag() {
    let h = Harness::new();
    let list: Vec<_> = (0..20)
        .map(|i| json!(["FA_create_file", {"file_path": format!("p{i}.txt"), "content": "x"}]))
        .collect();
    let out = h
        .call(
            "FA_execute_action_parallel",
            json!({"action_list": list, "max_workers": 8}),
        )
        .await
        .unwrap();
    assert_eq!(out["succeeded"], 20);
    assert_eq!(out["results"][19]["index"], 19);
    assert!(h.path("p19.txt").exists());
    let bad = json!({"action_list": [["FA_list_dir", {"dir_path": "."}]], "max_workers": 0});
    assert_eq!(
        h.call("FA_execute_action_parallel", bad).await.unwrap_err(),
        "bad_argument"
    );

    let nodes = json!([
        {"id": "dir", "action": ["FA_create_dir", {"dir_path": "d"}]},
        {"id": "a", "action": ["FA_create_file", {"file_path": "d/a.txt", "content": "a"}], "depends_on": ["dir"]},
        {"id": "b", "action": ["FA_create_file", {"file_path": "d/b.txt", "content": "b"}], "depends_on": ["dir"]},
        {"id": "zip", "action": ["FA_zip_dir", {"dir_we_want_to_zip": "d", "zip_name": "d-archive"}], "depends_on": ["a", "b"]},
        {"id": "bad", "action": ["FA_remove_file", {"file_path": "nope"}]},
        {"id": "after-bad", "action": ["FA_create_dir", {"dir_path": "never"}], "depends_on": ["bad"]},
        {"id": "after-after", "action": ["FA_create_dir", {"dir_path": "never2"}], "depends_on": ["after-bad"]}
    ]);
    let out = h
        .call("FA_execute_action_dag", json!({"nodes": nodes.clone()}))
        .await
        .unwrap();
    assert_eq!(out["results"]["zip"]["status"], "ok");
    assert_eq!(out["results"]["zip"]["result"]["members"], 2);
    assert_eq!(out["results"]["bad"]["status"], "failed");
    assert_eq!(out["results"]["after-bad"]["status"], "skipped");
    assert_eq!(out["results"]["after-after"]["status"], "skipped");
    assert!(!h.path("never").exists());
    let out = h
        .call(
            "FA_execute_action_dag",
            json!({"nodes": nodes, "fail_fast": false}),
        )
        .await
        .unwrap();
    assert_eq!(out["results"]["after-bad"]["status"], "ok");

    let cycle = json!([{"id": "x", "action": ["FA_list_dir", {"dir_path": "."}], "depends_on": ["y"]},
                       {"id": "y", "action": ["FA_list_dir", {"dir_path": "."}], "depends_on": ["x"]}]);
    assert_eq!(
        h.call("FA_execute_action_dag", json!({"nodes": cycle}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    let dup =
        json!([{"id": "x", "action": ["FA_list_dir"]}, {"id": "x", "action": ["FA_list_dir"]}]);
    assert_eq!(
        h.call("FA_execute_action_dag", json!({"nodes": dup}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    let unknown = json!([{"id": "x", "action": ["FA_list_dir"], "depends_on": ["ghost"]}]);
    assert_eq!(
        h.call("FA_execute_action_dag", json!({"nodes": unknown}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn execute_files_reads_action_lists_from_disk() {
    let h = Harness::new();
    h.write(
        "one.json",
        r#"[["FA_create_dir", {"dir_path": "from-file"}]]"#,
    );
    h.write(
        "two.json",
        r#"{"auto_control": [["FA_create_file", {"file_path": "from-file/x.txt"}]]}"#,
    );
    h.write("bad.json", "not json");
    let out = h
        .call(
            "FA_execute_files",
            json!({"execute_files_list": ["one.json", "two.json"]}),
        )
        .await
        .unwrap();
    assert_eq!(out["files"].as_array().unwrap().len(), 2);
    assert!(h.path("from-file/x.txt").exists());
    assert_eq!(
        h.call(
            "FA_execute_files",
            json!({"execute_files_list": ["bad.json"]})
        )
        .await
        .unwrap_err(),
        "unsupported_format"
    );
    assert_eq!(
        h.call(
            "FA_execute_files",
            json!({"execute_files_list": ["none.json"]})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn conditional_dispatch() {
    let h = Harness::new();
    h.write("present.txt", "12345");
    let then = json!([["FA_create_dir", {"dir_path": "then-ran"}]]);
    let else_ = json!([["FA_create_dir", {"dir_path": "else-ran"}]]);
    let out = h
        .call(
            "FA_if_exists",
            json!({"path": "present.txt", "then": then, "else_": else_}),
        )
        .await
        .unwrap();
    assert_eq!(out["matched"], true);
    assert!(h.path("then-ran").exists() && !h.path("else-ran").exists());
    let out = h
        .call("FA_if_exists", json!({"path": "absent", "then": then}))
        .await
        .unwrap();
    assert_eq!(out, json!({"matched": false, "results": null}));
    assert_eq!(
        h.call("FA_if_exists", json!({"path": "/etc/passwd"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );

    let out = h
        .call(
            "FA_if_size_gt",
            json!({"path": "present.txt", "bytes_threshold": 4, "else_": else_}),
        )
        .await
        .unwrap();
    assert_eq!(out["matched"], true);
    let out = h
        .call(
            "FA_if_size_gt",
            json!({"path": "present.txt", "bytes_threshold": 5, "else_": else_}),
        )
        .await
        .unwrap();
    assert_eq!(out["matched"], false);
    assert!(h.path("else-ran").exists());
    let neg = json!({"path": "present.txt", "bytes_threshold": -1});
    assert_eq!(
        h.call("FA_if_size_gt", neg).await.unwrap_err(),
        "bad_argument"
    );

    let old = h.write("old.txt", "o");
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH)
        .unwrap();
    let newer = |p: &str, r: &str| json!({"path": p, "reference": r});
    assert_eq!(
        h.call("FA_if_newer", newer("present.txt", "old.txt"))
            .await
            .unwrap()["matched"],
        true
    );
    assert_eq!(
        h.call("FA_if_newer", newer("old.txt", "present.txt"))
            .await
            .unwrap()["matched"],
        false
    );
    assert_eq!(
        h.call("FA_if_newer", newer("missing", "present.txt"))
            .await
            .unwrap()["matched"],
        false
    );
    assert_eq!(
        h.call("FA_if_newer", newer("present.txt", "missing"))
            .await
            .unwrap()["matched"],
        true
    );
}

#[tokio::test]
async fn nested_actions_obey_the_server_policy() {
    // What --read-only leaves: only tools that change nothing, so no action lists at all.
    let ro = Harness::with(
        |r| {
            r.retain(|m| m.read_only);
        },
        false,
    );
    assert!(ro.server.registry().get("FA_execute_action").is_none());
    assert!(ro.server.registry().get("FA_remove_file").is_none());
    // An allow-list that keeps the executor but not FA_remove_file: the nested call is refused.
    let allowed = ["FA_execute_action", "FA_create_file", "FA_if_exists"];
    let h = Harness::with(
        |r| {
            r.retain(|m| allowed.contains(&m.name.as_str()));
        },
        false,
    );
    h.write("victim.txt", "keep");
    let list = json!([["FA_remove_file", {"file_path": "victim.txt"}], ["FA_create_file", {"file_path": "ok.txt"}]]);
    let out = h
        .call("FA_execute_action", json!({"action_list": list}))
        .await
        .unwrap();
    assert_eq!(out["results"][0]["status"], "failed");
    assert!(
        out["results"][0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("FA_remove_file")
    );
    assert_eq!(out["results"][1]["status"], "ok");
    assert!(h.path("victim.txt").exists());
    let cond =
        json!({"path": "victim.txt", "then": [["FA_remove_file", {"file_path": "victim.txt"}]]});
    let out = h.call("FA_if_exists", cond).await.unwrap();
    assert_eq!(out["results"]["results"][0]["status"], "failed");
    assert!(h.path("victim.txt").exists());
    // Confinement holds inside lists too.
    let escape = json!({"action_list": [["FA_create_file", {"file_path": "../../escaped.txt"}]]});
    let out = h.call("FA_execute_action", escape).await.unwrap();
    assert_eq!(out["results"][0]["error"]["code"], "path_outside_roots");
}
