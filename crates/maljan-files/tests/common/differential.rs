//! The same call on automation-file 0.0.55 (the peers venv's package, its registered FA_*
//! function called directly) and on maljan, each in its own copy of the same tree.
#![allow(dead_code)]

use std::{path::Path, process::Command};

use serde_json::{Value, json};

use super::{common::Harness, peers::peer};

/// Runs `action(**args)` through automation-file's executor registry in `dir`; its JSON answer
/// (an exception fails the test).
pub fn automation_file(dir: &Path, action: &str, args: &Value) -> Value {
    automation_file_outcome(dir, action, args)
        .unwrap_or_else(|e| panic!("automation-file {action} {args} raised {e}"))
}

/// Two identical trees (maljan's and automation-file's) holding `files`.
pub fn trees(files: &[(&str, &[u8])]) -> (Harness, tempfile::TempDir) {
    let mine = Harness::new();
    let theirs = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        mine.write(name, bytes);
        let theirs_path = theirs.path().join(name);
        std::fs::create_dir_all(theirs_path.parent().unwrap()).unwrap();
        std::fs::write(theirs_path, bytes).unwrap();
    }
    (mine, theirs)
}

/// `args` with each of `paths` made absolute under `root`.
pub fn under(root: &Path, args: &Value, paths: &[&str]) -> Value {
    let mut args = args.clone();
    for key in paths {
        let rel = args[*key].as_str().unwrap().to_string();
        args[*key] = json!(root.join(rel).to_string_lossy());
    }
    args
}

pub fn read(root: &Path, name: &str) -> Vec<u8> {
    std::fs::read(root.join(name)).unwrap()
}

/// `action(**args)` on automation-file in `dir`: Ok(its JSON answer) or Err(the exception's type
/// and message).
pub fn automation_file_outcome(dir: &Path, action: &str, args: &Value) -> Result<Value, String> {
    let script = "import json, sys\n\
        from automation_file import executor\n\
        action, args = sys.argv[1], json.loads(sys.argv[2])\n\
        try:\n    print(json.dumps({'ok': executor.registry.event_dict[action](**args)}))\n\
        except Exception as e:\n    print(json.dumps({'raised': type(e).__name__ + ': ' + str(e)}))";
    let out = Command::new(peer("MALJAN_PY"))
        .args(["-c", script, action, &args.to_string()])
        .current_dir(dir)
        .output()
        .expect("the peers venv's python runs");
    assert!(
        out.status.success(),
        "automation-file {action} did not answer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    match answer.get("ok") {
        Some(v) => Ok(v.clone()),
        None => Err(answer["raised"].as_str().unwrap_or_default().to_string()),
    }
}
