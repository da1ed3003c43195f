//! `maljan analyze` opens what a sample carries, as a user runs it with no config: a mail holding
//! a tar.gz holding a zip holding an EICAR-bearing executable comes out as a tree in the JSON,
//! Markdown and HTML reports, every child with its own steps and evidence and a verdict, the
//! verdicts rising to the mail; the ledger links each child to its parent; a zip bomb ends as a
//! finding; an encrypted zip opens with "infected"; a RAR's executable is a child with its own
//! verdict; the STIX 2.1 bundle passes OASIS's stix2-validator and the IOCs come out as CSV.

mod common;

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::{maljan, peer};
use maljan_triage::corpus;
use serde_json::Value;

const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

fn analyze(home: &Path, args: &[&str]) -> Output {
    let out = Command::new(maljan())
        .arg("analyze")
        .args(args)
        .arg("--no-agent")
        .current_dir(home.parent().unwrap())
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn zip_of(entries: &[(&str, &[u8])], password: Option<&str>) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        let mut o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        if let Some(p) = password {
            o = o.with_aes_encryption(zip::AesMode::Aes256, p);
        }
        w.start_file(*name, o).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn tar_gz_of(name: &str, data: &[u8]) -> Vec<u8> {
    let mut t = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    t.append_data(&mut h, name, data).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&t.into_inner().unwrap()).unwrap();
    gz.finish().unwrap()
}

fn mail_of(name: &str, attachment: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(attachment);
    let body: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "From: billing@example.com\r\nTo: victim@example.org\r\nSubject: your invoice\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\n\
         Please see the attached invoice.\r\n--B\r\nContent-Type: application/gzip\r\n\
         Content-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\r\n{}\r\n--B--\r\n",
        body.join("\r\n")
    )
    .into_bytes()
}

/// The executable at the bottom: a PE that injects into another process and persists through a Run key (the API names as
/// strings, as when resolved at run time; the corpus PE carries the Run key path): two independent
/// strong facts, so the facts table calls it malicious. A URL and the EICAR text (not at offset 0,
/// so not the test file itself) ride along.
fn dropper() -> Vec<u8> {
    let mut pe = corpus::pe_bytes(4096);
    pe.extend_from_slice(EICAR);
    pe.extend_from_slice(b"\0http://payload.evil-cdn.example.net/stage2.bin\0");
    pe.extend_from_slice(
        b"\0OpenProcess\0VirtualAllocEx\0WriteProcessMemory\0CreateRemoteThread\0RegSetValueExA\0",
    );
    pe
}

struct Run {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    sample: PathBuf,
}

fn setup(name: &str, data: &[u8]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let samples = tmp.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    let sample = samples.join(name);
    std::fs::write(&sample, data).unwrap();
    Run {
        _tmp: tmp,
        home,
        sample,
    }
}

fn report(run: &Run, format: &str) -> String {
    let path = run.home.parent().unwrap().join(format!("report.{format}"));
    analyze(
        &run.home,
        &[
            run.sample.to_str().unwrap(),
            "--format",
            format,
            "--report",
            path.to_str().unwrap(),
        ],
    );
    std::fs::read_to_string(path).unwrap()
}

fn walk(children: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for c in children.as_array().into_iter().flatten() {
        out.push(c);
        out.extend(walk(&c["children"]));
    }
    out
}

#[test]
fn a_mail_with_a_zip_in_a_tar_gz_is_analysed_as_a_tree_and_the_ledger_links_it() {
    let inner = zip_of(
        &[("invoice.pdf.exe", &dropper()), ("eicar.com", EICAR)],
        None,
    );
    let run = setup(
        "invoice.eml",
        &mail_of("invoice.tar.gz", &tar_gz_of("docs/payload.zip", &inner)),
    );
    let r: Value = serde_json::from_str(&report(&run, "json")).unwrap();

    // The tree: mail → invoice.tar.gz → docs/payload.zip → invoice.pdf.exe.
    let tgz = &r["children"][0];
    assert_eq!(tgz["name"], "invoice.tar.gz", "{}", r["children"]);
    assert_eq!(tgz["kind"], "gzip");
    assert_eq!(tgz["parent_sha256"], r["sample"]["sha256"]);
    let zip = &tgz["children"][0];
    assert_eq!(
        (zip["name"].as_str(), zip["kind"].as_str()),
        (Some("docs/payload.zip"), Some("zip"))
    );
    let exe = &zip["children"][0];
    assert_eq!(exe["name"], "invoice.pdf.exe");
    assert_eq!(exe["kind"], "pe");
    assert_eq!(exe["depth"], 3);
    assert_eq!(exe["id"], "1.1.1");
    assert_eq!(exe["parent_sha256"], zip["sha256"]);
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(dropper()));
    assert_eq!(exe["sha256"], sha.as_str());
    assert!(
        exe["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "double_extension")
    );
    // Its own steps, each with evidence: the PE parsed, packers and capabilities read, EICAR found.
    let step = |tool: &str| {
        exe["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} step: {}", exe["steps"]))
            .clone()
    };
    for tool in [
        "pe_info",
        "detect_packer",
        "code_capabilities",
        "iocs_from_file",
        "yara_scan",
    ] {
        assert_eq!(step(tool)["status"], "ok", "{tool}: {}", step(tool));
        assert_eq!(step(tool)["evidence"].as_array().unwrap().len(), 1);
    }
    let eicar = &zip["children"][1];
    assert_eq!(eicar["name"], "eicar.com");
    let yara = eicar["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tool"] == "yara_scan")
        .unwrap();
    let rules: Vec<&str> = yara["result"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["rule"].as_str())
        .collect();
    assert!(rules.iter().any(|r| r.contains("EICAR")), "{rules:?}");

    // Verdicts: the executable is judged on its own facts, and its containers are at least as bad.
    let word = |v: &Value| v["verdict"]["verdict"].as_str().unwrap_or("").to_string();
    assert!(
        matches!(word(exe).as_str(), "malicious" | "suspicious"),
        "{}",
        exe["verdict"]
    );
    for v in [zip, tgz, &r] {
        assert!(
            matches!(word(v).as_str(), "malicious" | "suspicious"),
            "{}",
            v["verdict"]
        );
    }
    let claims = r["verdict"]["claims"].as_array().unwrap();
    assert!(
        claims
            .iter()
            .any(|c| c["text"].as_str().unwrap().contains("invoice.tar.gz")),
        "{claims:?}"
    );
    // The child's verdict reaches the mail as a fact with the path down to it.
    let facts = r["verdict"]["facts"].as_array().unwrap();
    assert!(
        facts.iter().any(|f| f["id"] == "child_malicious"
            && f["child"] == "invoice.tar.gz → docs/payload.zip → invoice.pdf.exe"),
        "{facts:#?}"
    );
    assert_eq!(r["recursion"]["children"], 4);
    assert_eq!(r["recursion"]["depth"], 3);

    // The ledger: one row per child, each with its parent, the call that extracted it and the
    // calls that analysed it, all of them calls of this job.
    let ledger = maljan_client::Ledger::open(&run.home.join("ledger.sqlite3"), 1 << 20).unwrap();
    let job = r["job_id"].as_str().unwrap();
    let rows = ledger.children(job).unwrap();
    assert_eq!(rows.len(), 4);
    let calls = ledger.calls(Some(job), 10_000).unwrap();
    let tool_of = |ev: &str| calls.iter().find(|c| c.ev_id == ev).map(|c| c.tool.clone());
    let exe_row = rows.iter().find(|c| c.sha256 == sha).unwrap();
    assert_eq!(exe_row.parent_sha256, zip["sha256"].as_str().unwrap());
    assert_eq!(exe_row.depth, 3);
    assert_eq!(
        tool_of(&exe_row.extracted_by).as_deref(),
        Some("extract_members")
    );
    let analysed: Vec<String> = exe_row.evidence.iter().filter_map(|e| tool_of(e)).collect();
    assert!(analysed.contains(&"pe_info".to_string()), "{analysed:?}");
    let tgz_row = rows.iter().find(|c| c.name == "invoice.tar.gz").unwrap();
    assert_eq!(
        tgz_row.parent_sha256,
        r["sample"]["sha256"].as_str().unwrap()
    );
    drop(ledger);

    // Markdown and HTML show the same tree, and anchor each child's evidence once.
    let md = report(&run, "md");
    assert!(
        md.lines()
            .any(|l| l.starts_with("## <a id=\"ev_") && l.contains("</a>Contents: 4 child samples")),
        "{md}"
    );
    // Each child has its own section, linked from the tree.
    let exe_id = exe["id"].as_str().unwrap().replace('.', "-");
    assert!(md.contains(&format!("](#child-{exe_id})")));
    assert!(md.contains(&format!("## <a id=\"child-{exe_id}\"></a>")));
    assert!(md.contains("`invoice.pdf.exe`") && md.contains(&sha));
    let ev = exe["steps"][0]["evidence"][0].as_str().unwrap();
    assert_eq!(md.matches(&format!("<a id=\"{ev}\">")).count(), 1);
    let html = report(&run, "html");
    assert!(html.contains("<ul class=\"tree\">") && html.contains("invoice.pdf.exe"));
    assert!(html.contains(&sha));
}

#[test]
fn a_zip_bomb_ends_as_a_finding_and_an_encrypted_zip_opens_with_infected() {
    let zeros = vec![0u8; 64 << 20];
    let run = setup(
        "bomb.zip",
        &zip_of(&[("zeros.img", &zeros), ("readme.txt", b"hi")], None),
    );
    let r: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let f = &r["recursion"]["findings"][0];
    assert_eq!(f["limit"], "ratio", "{}", r["recursion"]);
    assert_eq!(f["member"], "zeros.img");
    assert_eq!(f["evidence"].as_array().unwrap().len(), 1);
    assert!(r["recursion"]["total_bytes"].as_u64().unwrap() < 1 << 20);
    let names: Vec<&str> = walk(&r["children"])
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["readme.txt"]);
    let claims = r["verdict"]["claims"].as_array().unwrap();
    assert!(
        claims
            .iter()
            .any(|c| c["text"].as_str().unwrap().contains("decompression bomb"))
    );

    let run = setup(
        "locked.zip",
        &zip_of(&[("sample.exe", &dropper())], Some("infected")),
    );
    let r: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let exe = &r["children"][0];
    assert_eq!(exe["kind"], "pe", "{}", r["children"]);
    assert_eq!(exe["encrypted"], true);
    assert_eq!(exe["password"], "infected");
}

#[test]
fn a_rar_s_executable_is_analysed_as_a_child_with_its_own_verdict() {
    let archive = maljan_testkit::rar::rar5(&[("invoice.exe", &dropper())], None);
    let run = setup("invoice.rar", &archive);
    let r: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let exe = &r["children"][0];
    assert_eq!(
        (exe["name"].as_str(), exe["kind"].as_str()),
        (Some("invoice.exe"), Some("pe")),
        "{}",
        r["children"]
    );
    let tools: Vec<&str> = exe["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["tool"].as_str())
        .collect();
    assert!(tools.contains(&"yara_scan"), "{tools:?}");
    let word = exe["verdict"]["verdict"].as_str().unwrap_or("");
    assert!(
        matches!(word, "malicious" | "suspicious"),
        "{}",
        exe["verdict"]
    );
}

#[test]
fn the_stix_bundle_passes_the_oasis_validator_and_the_iocs_come_out_as_csv() {
    let validator = peer("MALJAN_STIX2_VALIDATOR");
    let inner = zip_of(
        &[("invoice.pdf.exe", &dropper()), ("eicar.com", EICAR)],
        None,
    );
    let run = setup(
        "invoice.eml",
        &mail_of("invoice.tar.gz", &tar_gz_of("docs/payload.zip", &inner)),
    );
    let stix = report(&run, "stix");
    let bundle: Value = serde_json::from_str(&stix).unwrap();
    assert_eq!(bundle["type"], "bundle");
    let objects = bundle["objects"].as_array().unwrap();
    let of = |t: &str| {
        objects
            .iter()
            .filter(|o| o["type"] == t)
            .collect::<Vec<_>>()
    };
    assert_eq!(of("file").len(), 5, "the mail and its four children");
    let analysis = of("malware-analysis");
    assert_eq!(analysis.len(), 1);
    assert!(matches!(
        analysis[0]["result"].as_str(),
        Some("malicious" | "suspicious")
    ));
    assert_eq!(
        analysis[0]["analysis_sco_refs"].as_array().unwrap().len(),
        4
    );
    let eicar_sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(EICAR));
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(dropper()));
    let patterns: Vec<&str> = of("indicator")
        .iter()
        .filter_map(|i| i["pattern"].as_str())
        .collect();
    assert!(
        patterns.iter().any(|p| p.contains(&eicar_sha)),
        "{patterns:?}"
    );
    assert!(
        patterns
            .iter()
            .any(|p| p.starts_with("[url:value = 'http://payload.evil-cdn.example.net")),
        "{patterns:?}"
    );

    let file = run.home.parent().unwrap().join("bundle.json");
    std::fs::write(&file, &stix).unwrap();
    let out = Command::new(&validator)
        .args(["--strict", "--enforce-refs", "--no-cache"])
        .arg(&file)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "stix2-validator refused the bundle:\n{said}"
    );
    assert!(said.contains("STIX JSON: Valid"), "{said}");

    let csv = report(&run, "csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("sample_sha256,sample_path,kind,value,count,evidence")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(
        rows.iter()
            .any(|r| r[0] == sha && r[2] == "sha256" && r[3] == sha)
    );
    assert!(rows.iter().any(|r| r[0] == sha
        && r[2] == "url"
        && r[3].starts_with("http://payload.evil-cdn.example.net")
        && r[5].starts_with("ev_")));
    assert!(rows.iter().all(|r| r.len() == 6), "{csv}");
}
