//! `maljan serve jobs --http`: a host on another machine hands the sample over with put_sample
//! (DESIGN.md's convention) and analyses the path it gets back, through the official Python SDK
//! client over streamable HTTP; the server's sample size limit holds for an upload and for a
//! path under the root alike.

mod common;

use std::{path::Path, process::Command, time::Duration};

use common::*;
use serde_json::{Value, json};
use sha2::Digest as _;

const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

fn drive(home: &Path, steps: &Value, url: &str) -> Vec<Value> {
    let script = repo_root().join("tests/peers/py_jobs_client.py");
    let out = run(
        Command::new(peer("MALJAN_PY"))
            .arg(script)
            .arg("--steps")
            .arg(steps.to_string())
            .args(["--http", url])
            .env("MALJAN_HOME", home),
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn error(answer: &Value) -> Value {
    assert_eq!(answer["is_error"], true, "{answer}");
    serde_json::from_str(answer["text"].as_str().unwrap()).unwrap()
}

#[test]
fn a_sample_put_over_http_is_analysed_and_the_size_limit_holds() {
    use base64::Engine as _;
    let tmp = tempfile::tempdir().unwrap();
    let (home, root, staging) = (
        tmp.path().join("home"),
        tmp.path().join("evidence"),
        tmp.path().join("staging"),
    );
    std::fs::create_dir_all(&root).unwrap();
    // 200 bytes: over the limit below, under the root.
    std::fs::write(root.join("big.bin"), [0x41u8; 200]).unwrap();
    let port = free_port();
    let _server = spawn(
        Command::new(maljan())
            .args(["serve", "jobs", "--http", &format!("127.0.0.1:{port}")])
            .arg("--root")
            .arg(&root)
            .arg("--staging-dir")
            .arg(&staging)
            .args(["--max-sample-bytes", "128"])
            .env("MALJAN_HOME", &home)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_DATABASE_URL"),
    );
    wait_answering(port);
    let b64 = base64::engine::general_purpose::STANDARD;
    let steps = json!([
        {"tool": "put_sample", "save": "put", "args": {
            "filename": "../../eicar.com", "content_b64": b64.encode(EICAR),
            "sha256": hex::encode(sha2::Sha256::digest(EICAR))}},
        {"tool": "analyze_sample", "progress": true,
         "args": {"path": "${put.path}", "agent": false}},
        {"tool": "put_sample", "args": {
            "filename": "big.bin", "content_b64": b64.encode([0x41u8; 200]), "sha256": ""}},
        {"tool": "analyze_sample", "args": {"path": root.join("big.bin")}},
    ]);
    let answers = drive(&home, &steps, &format!("http://127.0.0.1:{port}/mcp"));
    let put = &answers[0];
    assert_eq!(put["is_error"], false, "{put}");
    let staged = Path::new(put["structured"]["path"].as_str().unwrap());
    assert!(
        staged.starts_with(staging.canonicalize().unwrap()),
        "{}",
        staged.display()
    );
    let analysed = &answers[1];
    assert_eq!(analysed["is_error"], false, "{analysed}");
    let a = &analysed["structured"];
    assert_eq!(
        a["sample"]["sha256"],
        hex::encode(sha2::Sha256::digest(EICAR))
    );
    assert!(
        ["malicious", "suspicious"].contains(&a["verdict"]["verdict"].as_str().unwrap()),
        "{a}"
    );
    assert!(!a["evidence"].as_array().unwrap().is_empty(), "{a}");
    assert!(
        !analysed["progress"].as_array().unwrap().is_empty(),
        "{analysed}"
    );
    // Over the limit: the upload refused by put_sample, the path by analyze_sample.
    assert_eq!(answers[2]["is_error"], true, "{}", answers[2]);
    let big = error(&answers[3]);
    assert_eq!(big["error"]["code"], "bad_argument", "{big}");
    assert!(
        big["error"]["message"]
            .as_str()
            .unwrap()
            .contains("128 bytes"),
        "{big}"
    );
}
