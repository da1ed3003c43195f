//! More of issue 45's list, run on automation-file 0.0.55 and maljan in identical trees:
//! FA_zip_file with two members of one base name, and the local storage backend's answers.

mod common;
#[path = "common/differential.rs"]
mod differential;
#[path = "common/peers.rs"]
mod peers;

use std::{path::Path, time::SystemTime};

use differential::{automation_file, trees, under};
use serde_json::{Value, json};

#[tokio::test]
async fn zip_file_of_two_same_named_files_is_refused_whole() {
    let (mine, theirs) = trees(&[("d1/a.txt", b"1"), ("d2/a.txt", b"2"), ("b.txt", b"b")]);
    let args = json!({"zip_file_path": "z.zip", "file": ["d1/a.txt", "d2/a.txt"]});
    let on = |root: &Path| {
        let mut a = under(root, &args, &["zip_file_path"]);
        a["file"] = json!([
            root.join("d1/a.txt").to_string_lossy(),
            root.join("d2/a.txt").to_string_lossy()
        ]);
        a
    };
    // automation-file writes both under one name (Python warns "Duplicate name"): an unzip keeps
    // one of them. maljan refuses the call before writing anything (a deliberate difference).
    automation_file(theirs.path(), "FA_zip_file", &on(theirs.path()));
    let info = |root: &Path, zip: &str| {
        automation_file(
            root,
            "FA_zip_file_info",
            &json!({"zip_file_path": root.join(zip).to_string_lossy()}),
        )
    };
    assert_eq!(info(theirs.path(), "z.zip"), json!(["a.txt", "a.txt"]));
    let (code, message) = mine.error("FA_zip_file", on(&mine.root())).await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("'a.txt'"), "{message}");
    assert!(!mine.path("z.zip").exists(), "no partial zip left behind");
    // An archive already at that path is left as it was.
    let ok = json!({"zip_file_path": mine.p("z.zip"), "file": [mine.p("b.txt")]});
    mine.call("FA_zip_file", ok).await.unwrap();
    let before = std::fs::read(mine.path("z.zip")).unwrap();
    mine.error("FA_zip_file", on(&mine.root())).await;
    assert_eq!(std::fs::read(mine.path("z.zip")).unwrap(), before);
    // Distinct names: the same members as automation-file.
    let args = json!({"zip_file_path": "y.zip", "file": []});
    let on = |root: &Path| {
        let mut a = under(root, &args, &["zip_file_path"]);
        a["file"] = json!([
            root.join("d1/a.txt").to_string_lossy(),
            root.join("b.txt").to_string_lossy()
        ]);
        a
    };
    automation_file(theirs.path(), "FA_zip_file", &on(theirs.path()));
    mine.call("FA_zip_file", on(&mine.root())).await.unwrap();
    assert_eq!(info(&mine.root(), "y.zip"), info(theirs.path(), "y.zip"));
}

/// A storage answer with its tree's root written `<root>` and its time left out.
fn comparable(info: &Value, root: &Path) -> Value {
    let root = root.to_string_lossy();
    let mut info = info.clone();
    info.as_object_mut().unwrap().remove("modified_at");
    let text = info
        .to_string()
        .replace(root.trim_start_matches('/'), "<root>");
    serde_json::from_str(&text).unwrap()
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

#[tokio::test]
async fn local_storage_answers_as_automation_files_local_backend() {
    let (mine, theirs) = trees(&[("a.txt", b"hi\n"), ("b.json", b"{}"), ("c", b"x")]);
    let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_577_934_245);
    for root in [mine.root(), theirs.path().to_path_buf()] {
        std::fs::File::options()
            .write(true)
            .open(root.join("a.txt"))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    for (action, args, paths) in [
        ("FA_storage_stat", json!({"uri": "a.txt"}), vec!["uri"]),
        ("FA_storage_stat", json!({"uri": "b.json"}), vec!["uri"]),
        ("FA_storage_stat", json!({"uri": "c"}), vec!["uri"]),
        (
            "FA_storage_write_text",
            json!({"uri": "w.txt", "text": "hé"}),
            vec!["uri"],
        ),
        (
            "FA_storage_move",
            json!({"source": "a.txt", "target": "m/a.txt"}),
            vec!["source", "target"],
        ),
    ] {
        let theirs_said =
            automation_file(theirs.path(), action, &under(theirs.path(), &args, &paths));
        let mine_said = mine
            .call(action, under(&mine.root(), &args, &paths))
            .await
            .unwrap_or_else(|e| panic!("{action} {args}: {e}"));
        assert_eq!(
            comparable(&mine_said, &mine.root()),
            comparable(&theirs_said, theirs.path()),
            "{action} {args}"
        );
    }
    // A move keeps the file's time in both.
    assert_eq!(mtime(&theirs.path().join("m/a.txt")), old);
    assert_eq!(mtime(&mine.path("m/a.txt")), old);
}
