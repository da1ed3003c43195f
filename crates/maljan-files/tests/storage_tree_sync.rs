//! FA_storage_copy_tree and FA_storage_sync: a directory copied and mirrored between local
//! paths, memory:// and a real S3 server (moto), with automation-file's summary
//! (`copied`, `skipped`, `deleted`, `errors`, `dry_run`), sync's size / time / checksum
//! rules, `delete` and `dry_run`, a failing file that leaves the others copied, and the
//! refusals.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::{
    path::Path,
    time::{Duration, SystemTime},
};

use common::Harness;
use maljan_files::StorageConfig;
use serde_json::{Value, json};

fn tree(h: &Harness) {
    h.write("src/a.txt", "alpha");
    h.write("src/sub/b.txt", "bravo");
    h.write("src/sub/deep/c.txt", "charlie");
    std::fs::create_dir_all(h.path("src/empty")).unwrap();
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// Gives a file an old modification time, so the other side counts as newer.
fn age(path: &Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

#[tokio::test]
async fn copy_tree_between_local_and_memory() {
    let h = Harness::new();
    tree(&h);
    let out = h
        .call(
            "FA_storage_copy_tree",
            json!({"source": h.p("src"), "target": "memory://m/t"}),
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"copied": ["a.txt", "sub/b.txt", "sub/deep/c.txt"], "skipped": [],
               "deleted": [], "errors": {}, "dry_run": false})
    );

    // Back to a local directory that does not exist yet, through a file:// URI.
    let back = h
        .call(
            "FA_storage_copy_tree",
            json!({"source": "memory://m/t", "target": format!("file://{}", h.p("dst"))}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&back["copied"]).len(), 3, "{back}");
    assert_eq!(
        std::fs::read_to_string(h.path("dst/sub/deep/c.txt")).unwrap(),
        "charlie"
    );

    // overwrite = false leaves what the target has.
    h.write("dst/a.txt", "mine");
    let kept = h
        .call(
            "FA_storage_copy_tree",
            json!({"source": h.p("src"), "target": h.p("dst"), "overwrite": false}),
        )
        .await
        .unwrap();
    assert_eq!(
        strings(&kept["skipped"]),
        ["a.txt", "sub/b.txt", "sub/deep/c.txt"]
    );
    assert!(strings(&kept["copied"]).is_empty());
    assert_eq!(
        std::fs::read_to_string(h.path("dst/a.txt")).unwrap(),
        "mine"
    );
    // A local target gets the source's empty directories too.
    assert!(h.path("dst/empty").is_dir());
}

#[tokio::test]
async fn a_failing_file_leaves_the_others_copied() {
    let h = Harness::new();
    tree(&h);
    // A directory where the target wants the file a.txt.
    std::fs::create_dir_all(h.path("dst/a.txt")).unwrap();
    let out = h
        .call(
            "FA_storage_copy_tree",
            json!({"source": h.p("src"), "target": h.p("dst")}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&out["copied"]), ["sub/b.txt", "sub/deep/c.txt"]);
    let errors = out["errors"].as_object().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["a.txt"], "{out}");
    assert!(
        errors["a.txt"].as_str().unwrap().contains("directory"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(h.path("dst/sub/b.txt")).unwrap(),
        "bravo"
    );
}

#[tokio::test]
async fn sync_copies_only_what_changed_and_deletes_on_request() {
    let h = Harness::new();
    tree(&h);
    let first = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t"}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&first["copied"]).len(), 3, "{first}");

    // Nothing changed: everything is skipped.
    let again = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t"}),
        )
        .await
        .unwrap();
    assert!(strings(&again["copied"]).is_empty(), "{again}");
    assert_eq!(strings(&again["skipped"]).len(), 3);

    // Another size is copied; the same size with an older time is not, unless checksum.
    h.write("src/a.txt", "alpha, longer");
    h.write("src/sub/b.txt", "BRAVO");
    age(&h.path("src/sub/b.txt"));
    let by_time = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t"}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&by_time["copied"]), ["a.txt"], "{by_time}");
    assert_eq!(
        strings(&by_time["skipped"]),
        ["sub/b.txt", "sub/deep/c.txt"]
    );
    let by_digest = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t", "checksum": true}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&by_digest["copied"]), ["sub/b.txt"], "{by_digest}");
    assert_eq!(
        h.call(
            "FA_storage_read_text",
            json!({"uri": "memory://s/t/sub/b.txt"})
        )
        .await
        .unwrap(),
        json!("BRAVO")
    );

    // delete: dry_run reports and keeps, then the real run removes.
    h.call(
        "FA_storage_write_text",
        json!({"uri": "memory://s/t/extra.txt", "text": "x"}),
    )
    .await
    .unwrap();
    let dry = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t", "delete": true, "dry_run": true}),
        )
        .await
        .unwrap();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(strings(&dry["deleted"]), ["extra.txt"]);
    let exists = json!({"uri": "memory://s/t/extra.txt"});
    assert_eq!(
        h.call("FA_storage_exists", exists.clone()).await.unwrap(),
        json!(true)
    );
    let done = h
        .call(
            "FA_storage_sync",
            json!({"source": h.p("src"), "target": "memory://s/t", "delete": true}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&done["deleted"]), ["extra.txt"]);
    assert_eq!(
        h.call("FA_storage_exists", exists).await.unwrap(),
        json!(false)
    );

    // Into a local mirror: extra files go, then their directory, deepest first.
    h.call(
        "FA_storage_sync",
        json!({"source": "memory://s/t", "target": h.p("mirror")}),
    )
    .await
    .unwrap();
    h.write("mirror/old/deeper/x.txt", "stale");
    let pruned = h
        .call(
            "FA_storage_sync",
            json!({"source": "memory://s/t", "target": h.p("mirror"), "delete": true}),
        )
        .await
        .unwrap();
    assert_eq!(
        strings(&pruned["deleted"]),
        ["old/deeper/x.txt", "old/deeper", "old"],
        "{pruned}"
    );
    assert!(!h.path("mirror/old").exists());
    assert_eq!(
        std::fs::read_to_string(h.path("mirror/sub/deep/c.txt")).unwrap(),
        "charlie"
    );
}

#[tokio::test]
async fn the_refusals() {
    let h = Harness::new();
    tree(&h);
    for tool in ["FA_storage_copy_tree", "FA_storage_sync"] {
        let same = json!({"source": h.p("src"), "target": format!("file://{}/", h.p("src"))});
        assert_eq!(h.call(tool, same).await, Err("bad_argument".into()));
        let missing = json!({"source": h.p("nothing"), "target": h.p("dst")});
        assert_eq!(h.call(tool, missing).await, Err("no_such_file".into()));
        let outside = tempfile::tempdir().unwrap();
        let out = json!({"source": h.p("src"), "target": outside.path().to_str().unwrap()});
        assert_eq!(h.call(tool, out).await, Err("path_outside_roots".into()));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        let unknown = json!({"source": h.p("src"), "target": h.p("dst"), "recursive": true});
        assert!(h.call(tool, unknown).await.is_err());
        assert!(!h.path("dst").exists(), "a refused call changed nothing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_round_trips_through_s3() {
    let s3 = peers::moto();
    peers::s3_bucket(&s3.url(), "trees");
    let toml = format!(
        "[s3.default]\nendpoint_url = \"{}\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_private_endpoint = true\n",
        s3.url()
    );
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    tree(&h);
    std::fs::create_dir_all(h.path("src/bin")).unwrap();
    let sha = peers::big_file(&h.path("src/bin/big.bin"), 12 << 20);

    let up = h
        .call(
            "FA_storage_copy_tree",
            json!({"source": h.p("src"), "target": "s3://trees/backup"}),
        )
        .await
        .unwrap();
    assert_eq!(strings(&up["copied"]).len(), 4, "{up}");
    assert_eq!(up["errors"], json!({}));

    let down = h
        .call(
            "FA_storage_sync",
            json!({"source": "s3://trees/backup", "target": h.p("restored"), "checksum": true}),
        )
        .await
        .unwrap();
    assert_eq!(
        strings(&down["copied"]),
        ["a.txt", "bin/big.bin", "sub/b.txt", "sub/deep/c.txt"]
    );
    assert_eq!(peers::sha256_of(&h.path("restored/bin/big.bin")), sha);

    // Unchanged on both sides: the digests match and nothing moves.
    let again = h
        .call(
            "FA_storage_sync",
            json!({"source": "s3://trees/backup", "target": h.p("restored"), "checksum": true}),
        )
        .await
        .unwrap();
    assert!(strings(&again["copied"]).is_empty(), "{again}");
    assert_eq!(strings(&again["skipped"]).len(), 4);
}
