//! Property: no generated path — `..`, `.`, absolute, through symlinks pointing in or out,
//! dangling links — lets an action read or write outside the root.

mod common;

use common::Harness;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The fixture: a root with a file, a subdirectory, a link inside, a link out, a dangling link
/// out; and an outside directory holding a secret and watched for new entries.
struct World {
    h: Harness,
    outside: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
}

fn world() -> World {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    h.write("a/file.txt", "inside");
    std::os::unix::fs::symlink(h.path("a"), h.path("link_in")).unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path("link_out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("new-thing"), h.path("dangling_out")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    World { h, outside, rt }
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("a".to_string()),
        Just("file.txt".to_string()),
        Just("link_in".to_string()),
        Just("link_out".to_string()),
        Just("dangling_out".to_string()),
        Just("secret.txt".to_string()),
        Just("new".to_string()),
        Just("".to_string()),
    ]
}

fn path_strategy(outside: String, root: String) -> impl Strategy<Value = String> {
    (prop::collection::vec(component(), 1..6), 0..4u8).prop_map(move |(parts, start)| {
        let rel = parts.join("/");
        match start {
            0 => rel,
            1 => format!("{root}/{rel}"),
            2 => format!("{outside}/{rel}"),
            _ => format!("/{rel}"),
        }
    })
}

fn outside_entries(w: &World) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(w.outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every path-like string in a result must lie under the root.
fn assert_inside(v: &Value, root: &str) {
    match v {
        Value::String(s) if s.starts_with('/') => {
            assert!(s.starts_with(root), "{s} is outside {root}")
        }
        Value::Array(a) => a.iter().for_each(|x| assert_inside(x, root)),
        Value::Object(m) => m.values().for_each(|x| assert_inside(x, root)),
        _ => {}
    }
}

/// One fixture for all cases (building it per case would dominate), a proptest runner over
/// pairs of generated paths.
#[test]
fn no_generated_path_escapes() {
    let w = world();
    let root = w.h.root().to_string_lossy().into_owned();
    let outside = w
        .outside
        .path()
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(
                path_strategy(outside.clone(), root.clone()),
                path_strategy(outside.clone(), root.clone()),
            ),
            |(p, q)| {
                let calls = [
                    ("FA_file_checksum", json!({"path": p})),
                    ("FA_list_dir", json!({"dir_path": p})),
                    ("FA_fast_find", json!({"root": p})),
                    (
                        "FA_read_zip_file",
                        json!({"zip_file_path": p, "file_name": "x"}),
                    ),
                    ("FA_create_dir", json!({"dir_path": p})),
                    ("FA_create_file", json!({"file_path": p, "content": "x"})),
                    ("FA_copy_file", json!({"file_path": q, "target_path": p})),
                    ("FA_jsonl_append", json!({"path": p, "record": {"a": 1}})),
                    ("FA_grep", json!({"root": p, "pattern": "secret"})),
                ];
                for (tool, args) in calls {
                    match w.rt.block_on(w.h.call(tool, args.clone())) {
                        Ok(v) => assert_inside(&v, &root),
                        Err(code) => prop_assert!(
                            [
                                "path_outside_roots",
                                "no_such_file",
                                "bad_argument",
                                "unsupported_format",
                                "tool_failed"
                            ]
                            .contains(&code.as_str()),
                            "{tool} {args}: unexpected code {code}"
                        ),
                    }
                }
                prop_assert_eq!(outside_entries(&w), vec!["secret.txt".to_string()]);
                prop_assert_eq!(
                    std::fs::read_to_string(w.outside.path().join("secret.txt")).unwrap(),
                    "secret"
                );
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn reads_through_a_link_out_are_refused() {
    let w = world();
    for p in [
        "link_out/secret.txt",
        "a/../link_out/secret.txt",
        "link_in/../link_out/secret.txt",
    ] {
        let err =
            w.rt.block_on(w.h.call("FA_file_checksum", json!({"path": p})))
                .unwrap_err();
        assert_eq!(err, "path_outside_roots", "{p}");
    }
    let ok =
        w.rt.block_on(w.h.call("FA_file_checksum", json!({"path": "link_in/file.txt"})))
            .unwrap();
    assert!(ok["path"].as_str().unwrap().ends_with("/a/file.txt"));
}
