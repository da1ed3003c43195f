//! automation-file's semantic tools (file_read, file_write, storage_copy, pipeline_run, ...)
//! under the operator's policy: nothing is reachable without a root, nothing changes without
//! --allow-write, a path or a key outside the roots is refused after symlinks are resolved,
//! dry runs change nothing, and every answer carries the correlation ID audit_search finds
//! the call by.

#[path = "common/automation.rs"]
mod automation;
#[path = "common/peers.rs"]
mod peers;

use std::{path::Path, sync::Arc};

use automation::{call, until};
use maljan_files::{FilesConfig, SemanticPolicy, StorageConfig, SystemClock, registry_with_clock};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};

/// A started server over `root` whose semantic policy `policy` makes from the root's path.
fn server(root: &Path, policy: impl FnOnce(&str) -> SemanticPolicy) -> Arc<ToolServer> {
    server_with(root, Default::default(), policy)
}

fn server_with(
    root: &Path,
    storage: StorageConfig,
    policy: impl FnOnce(&str) -> SemanticPolicy,
) -> Arc<ToolServer> {
    built(root, storage, policy, |_| {})
}

fn built(
    root: &Path,
    storage: StorageConfig,
    policy: impl FnOnce(&str) -> SemanticPolicy,
    narrow: impl FnOnce(&mut maljan_server::Registry),
) -> Arc<ToolServer> {
    let shown = root.to_string_lossy().into_owned();
    let mut reg = registry_with_clock(
        FilesConfig {
            storage,
            semantic: policy(&shown),
            ..FilesConfig::rooted(Roots::new([root]).unwrap())
        },
        Arc::new(SystemClock),
    );
    narrow(&mut reg);
    let server = ToolServer::new("files-test", "0", reg);
    server.start();
    server
}

fn rooted(root: &str) -> SemanticPolicy {
    SemanticPolicy {
        roots: vec![root.to_string(), "memory://scratch".into()],
        ..Default::default()
    }
}

fn writable(root: &str) -> SemanticPolicy {
    SemanticPolicy {
        allow_write: true,
        ..rooted(root)
    }
}

fn everything(root: &str) -> SemanticPolicy {
    SemanticPolicy {
        allow_overwrite: true,
        allow_delete: true,
        ..writable(root)
    }
}

fn code(e: Value) -> String {
    e["code"].as_str().unwrap_or_default().to_string()
}

fn dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(d.path()).unwrap();
    (d, root)
}

#[tokio::test]
async fn without_a_root_nothing_is_reachable() {
    let (_d, root) = dir();
    std::fs::write(root.join("a.txt"), "hi").unwrap();
    let s = server(&root, |_| SemanticPolicy::default());
    let uri = root.join("a.txt").to_string_lossy().into_owned();
    for (tool, args) in [
        ("file_read", json!({"uri": uri})),
        ("storage_list", json!({"uri": root})),
        ("file_checksum", json!({"uri": uri})),
    ] {
        let e = call(&s, tool, args).await.unwrap_err();
        assert_eq!(code(e.clone()), "no_root", "{tool}: {e}");
        assert!(e["remediation"].as_str().unwrap().contains("--root"), "{e}");
    }
    // The FA_* bridge keeps its own roots.
    assert!(
        call(&s, "FA_file_checksum", json!({"path": uri}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_path_or_key_outside_the_roots_is_refused_after_resolving_symlinks() {
    let (_d, top) = dir();
    let inside = top.join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(top.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(top.join("secret.txt"), inside.join("link.txt")).unwrap();
    let s = server(&top, |_| rooted(&inside.to_string_lossy()));
    for uri in [
        top.join("secret.txt").to_string_lossy().into_owned(),
        format!("{}/../secret.txt", inside.display()),
        inside.join("link.txt").to_string_lossy().into_owned(),
        format!("file://{}", top.join("secret.txt").display()),
        "memory://scratch-b/a.txt".into(),
        "memory://other/a.txt".into(),
    ] {
        let e = call(&s, "file_read", json!({"uri": uri}))
            .await
            .unwrap_err();
        assert_eq!(code(e.clone()), "outside_root", "{uri}: {e}");
    }
}

#[tokio::test]
async fn a_read_only_server_refuses_every_change_and_a_dry_run_changes_nothing() {
    let (_d, root) = dir();
    let s = server(&root, rooted);
    let target = root.join("new.txt").to_string_lossy().into_owned();
    let e = call(&s, "file_write", json!({"uri": target, "content": "x"}))
        .await
        .unwrap_err();
    assert_eq!(code(e.clone()), "read_only", "{e}");
    for tool in ["file_copy", "storage_copy"] {
        let e = call(&s, tool, json!({"source": target, "target": target}))
            .await
            .unwrap_err();
        assert_eq!(code(e), "read_only", "{tool}");
    }
    let e = call(
        &s,
        "pipeline_create",
        json!({"name": "p", "definition": {}}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "read_only");

    let s = server(&root, writable);
    let plan = call(
        &s,
        "file_write",
        json!({"uri": target, "content": "hello", "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(plan["written"], false);
    assert_eq!(plan["size"], 5);
    assert!(!root.join("new.txt").exists(), "a dry run wrote the file");
}

#[tokio::test]
async fn reads_come_in_windows_that_never_split_a_character() {
    let (_d, root) = dir();
    let s = server(&root, everything);
    let uri = root.join("t.txt").to_string_lossy().into_owned();
    let written = call(&s, "file_write", json!({"uri": uri, "content": "aéb"}))
        .await
        .unwrap();
    assert_eq!(written["tool"], "file_write");
    assert!(
        written["correlation_id"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert_eq!(written["written"], true);
    assert_eq!(written["size"], 4);

    let first = call(&s, "file_read", json!({"uri": uri, "max_bytes": 2}))
        .await
        .unwrap();
    assert_eq!(first["content"], "a", "{first}");
    assert_eq!(first["bytes"], 1);
    assert_eq!(first["truncated"], true);
    assert_eq!(first["next_offset"], 1);
    let rest = call(&s, "file_read", json!({"uri": uri, "offset": 1}))
        .await
        .unwrap();
    assert_eq!(rest["content"], "éb");
    assert_eq!(rest["truncated"], false);
    assert_eq!(rest["next_offset"], Value::Null);
    let raw = call(&s, "file_read", json!({"uri": uri, "encoding": "base64"}))
        .await
        .unwrap();
    assert_eq!(raw["content"], "YcOpYg==");

    // Replacing needs overwrite=true, and the server's permission.
    let again = call(&s, "file_write", json!({"uri": uri, "content": "x"})).await;
    assert_eq!(code(again.unwrap_err()), "already_exists");
    let replaced = call(
        &s,
        "file_write",
        json!({"uri": uri, "content": "x", "overwrite": true}),
    )
    .await
    .unwrap();
    assert_eq!(replaced["overwrites"], true);
    assert_eq!(replaced["replaced_size"], 4);
    let strict = server(&root, writable);
    let e = call(
        &strict,
        "file_write",
        json!({"uri": uri, "content": "y", "overwrite": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "overwrite_not_allowed");
    // The server's caps hold whatever a call asks.
    let small = server(&root, |r| SemanticPolicy {
        max_write_bytes: 3,
        ..writable(r)
    });
    let e = call(
        &small,
        "file_write",
        json!({"uri": root.join("big.txt"), "content": "four"}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "limit_exceeded");
}

#[tokio::test]
async fn copies_and_moves_cross_backends_and_verify_their_digest() {
    let (_d, root) = dir();
    std::fs::write(root.join("a.bin"), b"payload").unwrap();
    let a = root.join("a.bin").to_string_lossy().into_owned();
    let s = server(&root, writable);
    let copied = call(
        &s,
        "file_copy",
        json!({"source": a, "target": "memory://scratch/a.bin", "verify": true}),
    )
    .await
    .unwrap();
    assert_eq!(copied["done"], true);
    assert_eq!(copied["verified"], true);
    let sum = call(
        &s,
        "file_checksum",
        json!({"uri": "memory://scratch/a.bin"}),
    )
    .await
    .unwrap();
    assert_eq!(sum["value"], copied["sha256"]);
    // A window of an object is a ranged read; one past the end is empty.
    let window = call(
        &s,
        "file_read",
        json!({"uri": "memory://scratch/a.bin", "offset": 3, "max_bytes": 2}),
    )
    .await
    .unwrap();
    assert_eq!(
        (window["content"].clone(), window["next_offset"].clone()),
        (json!("lo"), json!(5))
    );
    let past = call(
        &s,
        "file_read",
        json!({"uri": "memory://scratch/a.bin", "offset": 99}),
    )
    .await
    .unwrap();
    assert_eq!(
        (past["content"].clone(), past["truncated"].clone()),
        (json!(""), json!(false))
    );
    let expected = format!("sha256:{}", sum["value"].as_str().unwrap().to_uppercase());
    let verified = call(&s, "file_verify", json!({"uri": a, "expected": expected}))
        .await
        .unwrap();
    assert_eq!(verified["match"], true);
    let wrong = call(&s, "file_verify", json!({"uri": a, "expected": "00"}))
        .await
        .unwrap();
    assert_eq!(wrong["match"], false, "a mismatch is a result");

    let back = root.join("back.bin").to_string_lossy().into_owned();
    let e = call(
        &s,
        "file_move",
        json!({"source": "memory://scratch/a.bin", "target": back}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "delete_not_allowed");
    let s = server(&root, everything);
    std::fs::write(root.join("m.bin"), b"moved").unwrap();
    let moved = call(
        &s,
        "file_move",
        json!({"source": root.join("m.bin"), "target": back, "verify": true}),
    )
    .await
    .unwrap();
    assert_eq!(moved["deletes_source"], true);
    assert!(!root.join("m.bin").exists());
    assert_eq!(std::fs::read(root.join("back.bin")).unwrap(), b"moved");
}

#[tokio::test]
async fn listings_and_searches_are_capped_and_say_so() {
    let (_d, root) = dir();
    for i in 0..5 {
        std::fs::write(root.join(format!("r{i}.csv")), format!("id\nrow {i}\n")).unwrap();
    }
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/deep.csv"), "x\nNeedle here\nneedle again\n").unwrap();
    std::fs::write(root.join("sub/blob.csv"), b"needle\0binary").unwrap();
    let s = server(&root, |r| SemanticPolicy {
        max_results: 3,
        ..rooted(r)
    });
    let listed = call(&s, "storage_list", json!({"uri": root}))
        .await
        .unwrap();
    assert_eq!(listed["count"], 3);
    assert_eq!(listed["total"], 6);
    assert_eq!(listed["truncated"], true);

    let named = call(
        &s,
        "file_search",
        json!({"uri": root, "pattern": "sub/*.CSV"}),
    )
    .await
    .unwrap();
    assert_eq!(named["candidates"], 2, "{named}");
    let found = call(
        &s,
        "file_search",
        json!({"uri": root, "pattern": "sub/*", "content": "NEEDLE"}),
    )
    .await
    .unwrap();
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["matches"][0]["name"], "deep.csv");
    assert_eq!(found["matches"][0]["line"], 2);
    assert_eq!(found["matches"][0]["snippet"], "Needle here");
    assert_eq!(found["matches"][0]["matching_lines"], 2);
    assert_eq!(found["skipped"][0]["reason"], "not a text file");
    assert_eq!(found["complete"], false);

    let tight = server(&root, |r| SemanticPolicy {
        max_search_bytes: 10,
        ..rooted(r)
    });
    let budget = call(
        &tight,
        "file_search",
        json!({"uri": root, "content": "row"}),
    )
    .await
    .unwrap();
    assert_eq!(
        budget["skipped"][0]["reason"],
        "larger than what is left of the read budget"
    );
    assert!(budget["searched_bytes"].as_u64().unwrap() <= 10);
}

#[tokio::test]
async fn a_tree_copy_plans_first_and_skips_what_the_target_has() {
    let (_d, root) = dir();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/a.txt"), "a").unwrap();
    std::fs::write(root.join("src/deep/b.txt"), "bb").unwrap();
    let s = server(&root, writable);
    let src = root.join("src").to_string_lossy().into_owned();
    let plan = call(
        &s,
        "storage_copy",
        json!({"source": src, "target": "memory://scratch/copy", "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(plan["kind"], "tree");
    assert_eq!(plan["planned"]["copy"], 2);
    assert_eq!(plan["planned"]["bytes"], 3);
    assert_eq!(plan["done"], false);
    let done = call(
        &s,
        "storage_copy",
        json!({"source": src, "target": "memory://scratch/copy"}),
    )
    .await
    .unwrap();
    assert_eq!(
        (done["ok"].clone(), done["copied"].clone()),
        (json!(true), json!(2)),
        "{done}"
    );
    let again = call(
        &s,
        "storage_copy",
        json!({"source": src, "target": "memory://scratch/copy"}),
    )
    .await
    .unwrap();
    assert_eq!(again["planned"]["skip"], 2);
    assert_eq!(again["copied"], 0);
    let e = call(
        &s,
        "storage_copy",
        json!({"source": src, "target": root.join("src/deep/inner")}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "bad_argument");
}

#[tokio::test]
async fn stored_pipelines_run_only_allowed_actions_inside_the_roots() {
    let (_d, root) = dir();
    std::fs::write(root.join("in.txt"), "data").unwrap();
    let s = server(&root, writable);
    let definition = json!({
        "schema_version": 1,
        "params": {"name": "out.txt"},
        "tasks": {
            "copy": {"action": ["FA_storage_copy", {
                "source": root.join("in.txt"),
                "target": format!("memory://scratch/${{params.name}}"),
            }]},
            "check": {"action": ["FA_storage_exists", {"uri": "memory://scratch/${params.name}"}],
                      "depends_on": ["copy"]},
        },
    });
    let plan = call(
        &s,
        "pipeline_create",
        json!({"name": "nightly", "definition": definition, "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(plan["stored"], false);
    assert_eq!(
        plan["actions"],
        json!(["FA_storage_copy", "FA_storage_exists"])
    );
    let e = call(&s, "pipeline_run", json!({"name": "nightly"})).await;
    assert_eq!(
        code(e.unwrap_err()),
        "no_such_file",
        "a dry run stored nothing"
    );
    call(
        &s,
        "pipeline_create",
        json!({"name": "nightly", "definition": definition}),
    )
    .await
    .unwrap();
    let e = call(
        &s,
        "pipeline_create",
        json!({"name": "nightly", "definition": definition}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "already_exists");

    let run = call(&s, "pipeline_run", json!({"name": "nightly"}))
        .await
        .unwrap();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["run"]["tasks"]["check"]["result"], true);
    let one = call(&s, "pipeline_status", json!({"run_id": run["run_id"]}))
        .await
        .unwrap();
    assert_eq!(one["runs"][0]["status"], "succeeded");

    // A parameter that points outside the roots is refused before anything runs.
    let e = call(
        &s,
        "pipeline_run",
        json!({"name": "nightly", "params": {"name": "../../elsewhere/x"}}),
    )
    .await
    .unwrap_err();
    assert!(
        ["outside_root", "bad_argument"].contains(&code(e.clone()).as_str()),
        "{e}"
    );
    let e = call(
        &s,
        "pipeline_run",
        json!({"name": "nightly", "params": {"name": "x"}, "dry_run": false}),
    )
    .await;
    assert!(e.is_ok(), "{e:?}");
    let background = call(
        &s,
        "pipeline_run",
        json!({"name": "nightly", "params": {"name": "bg.txt"}, "background": true}),
    )
    .await
    .unwrap();
    assert_eq!(background["status"], "running");
    let id = background["run_id"].clone();
    until("the background run", || {
        let (s, id) = (s.clone(), id.clone());
        async move {
            let v = call(&s, "pipeline_status", json!({"run_id": id}))
                .await
                .ok()?;
            (v["runs"][0]["status"] == "succeeded").then_some(())
        }
    })
    .await;
    let history = call(
        &s,
        "pipeline_status",
        json!({"name": "nightly", "limit": 2}),
    )
    .await
    .unwrap();
    assert_eq!(history["count"], 2);

    // Actions beyond the allowed ones, or a delete without --allow-delete, are refused.
    let deleting = json!({"schema_version": 1, "tasks": {
        "rm": {"action": ["FA_storage_delete", {"uri": "memory://scratch/out.txt"}]}}});
    let e = call(
        &s,
        "pipeline_create",
        json!({"name": "rm", "definition": deleting}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "action_not_allowed");
    let shell = json!({"schema_version": 1, "tasks": {
        "x": {"action": ["FA_remove_file", {"file_path": "a"}]}}});
    let e = call(
        &s,
        "pipeline_create",
        json!({"name": "x", "definition": shell}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "action_not_allowed");
}

#[tokio::test]
async fn audit_search_finds_a_call_by_its_correlation_id() {
    let (_d, root) = dir();
    let s = server(&root, writable);
    let wrote = call(
        &s,
        "file_write",
        json!({"uri": "memory://scratch/audited.txt", "content": "x"}),
    )
    .await
    .unwrap();
    let found = call(
        &s,
        "audit_search",
        json!({"correlation_id": wrote["correlation_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["records"][0]["action"], "file_write");
    assert_eq!(found["truncated"], false);
    let monitors = call(&s, "integrity_status", json!({})).await.unwrap();
    assert_eq!(monitors["count"], 0);
    let e = call(
        &s,
        "file_read",
        json!({"uri": "memory://scratch/audited.txt", "bogus": 1}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), "bad_argument", "an unknown argument is refused");
    let null = call(
        &s,
        "file_read",
        json!({"uri": "memory://scratch/audited.txt", "max_bytes": null}),
    )
    .await
    .unwrap();
    assert_eq!(null["content"], "x", "null counts as left out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_store_root_allows_its_prefix_segment_by_segment() {
    let moto = peers::moto();
    peers::s3_bucket(&moto.url(), "semantic");
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{}\"\nregion = \"us-east-1\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_private_endpoint = true\n",
        moto.url()
    );
    let storage = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let (_d, root) = dir();
    std::fs::write(root.join("r.csv"), "id\n1\n").unwrap();
    let s = server_with(&root, storage, |r| SemanticPolicy {
        roots: vec![r.to_string(), "s3://semantic/team".into()],
        allow_write: true,
        ..Default::default()
    });
    let copied = call(
        &s,
        "file_copy",
        json!({"source": root.join("r.csv"), "target": "s3://semantic/team/2026/r.csv", "verify": true}),
    )
    .await
    .unwrap();
    assert_eq!(copied["verified"], true, "{copied}");
    let listed = call(
        &s,
        "storage_list",
        json!({"uri": "s3://semantic/team", "recursive": true}),
    )
    .await
    .unwrap();
    assert_eq!(listed["entries"][0]["path"], "2026/r.csv", "{listed}");
    for outside in [
        "s3://semantic/team-b/r.csv",
        "s3://semantic/r.csv",
        "s3://other/team/r.csv",
    ] {
        let e = call(&s, "file_write", json!({"uri": outside, "content": "x"}))
            .await
            .unwrap_err();
        assert_eq!(code(e.clone()), "outside_root", "{outside}: {e}");
    }
}

#[tokio::test]
async fn without_the_bridge_a_client_cannot_call_fa_actions_but_pipelines_still_run_them() {
    let (_d, root) = dir();
    std::fs::write(root.join("in.txt"), "data").unwrap();
    let s = built(&root, Default::default(), writable, |reg| {
        reg.unlist(|m| m.name.starts_with("FA_"));
    });
    let listed: Vec<String> = s.listed_tools().map(|t| t.meta.name.clone()).collect();
    assert!(listed.iter().all(|n| !n.starts_with("FA_")), "{listed:?}");
    let direct = s
        .call(
            "FA_storage_exists",
            json!({"uri": "memory://scratch/x"})
                .as_object()
                .unwrap()
                .clone(),
            Default::default(),
            None,
        )
        .await;
    assert!(direct.is_none(), "an unlisted action answered a client");
    let definition = json!({"schema_version": 1, "tasks": {
        "copy": {"action": ["FA_storage_copy", {"source": root.join("in.txt"), "target": "memory://scratch/in.txt"}]}}});
    call(
        &s,
        "pipeline_create",
        json!({"name": "bridge-less", "definition": definition}),
    )
    .await
    .unwrap();
    let run = call(&s, "pipeline_run", json!({"name": "bridge-less"}))
        .await
        .unwrap();
    assert_eq!(run["status"], "succeeded", "{run}");
}
