//! `extract_members` on Compiled HTML Help files that Free Pascal's `chmcmd` (Debian's
//! fp-utils, installed by scripts/peers.sh as MALJAN_CHMCMD) compiles here from a project of an
//! HTML page and programs: the programs come out of the LZX section byte for byte — a small one,
//! and a large one whose frames cross the decoder's reset intervals — under their paths, through
//! the library and through the served tools; a damaged file gives what it can and says why, and
//! compiled files with bytes flipped or cut never panic nor pass the extraction's limits.

mod corpus;
mod server;

use std::{path::PathBuf, process::Command, sync::OnceLock};

use maljan_analysis::{
    hashes::sha256_hex,
    members::{Extraction, Limits, extract},
    members_chm::{chm_compressed, chm_directory},
};
use proptest::prelude::*;
use serde_json::json;
use server::Server;

fn chmcmd() -> PathBuf {
    let p = std::env::var_os("MALJAN_CHMCMD")
        .map(PathBuf::from)
        .expect("MALJAN_CHMCMD (run `eval \"$(scripts/peers.sh)\"`: Debian's fp-utils chmcmd)");
    assert!(p.is_file(), "MALJAN_CHMCMD={} is not a file", p.display());
    p
}

/// A help file compiled by chmcmd from `files` (paths relative to the project).
fn compile(files: &[(&str, &[u8])]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    for (name, data) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
        list.push_str(&format!("{}\n", name.replace('/', "\\")));
    }
    let project = format!(
        "[OPTIONS]\nCompiled file=help.chm\nDefault topic=index.html\nTitle=Help\n\n[FILES]\n{list}"
    );
    std::fs::write(dir.path().join("help.hhp"), project).unwrap();
    let out = Command::new(chmcmd())
        .arg("help.hhp")
        .current_dir(dir.path())
        .output()
        .expect("chmcmd runs");
    assert!(out.status.success(), "chmcmd: {out:?}");
    std::fs::read(dir.path().join("help.chm")).expect("chmcmd wrote help.chm")
}

const PAGE: &[u8] =
    b"<html><head><title>Help</title></head><body><a href=\"bin/setup.exe\">Install</a></body></html>";

/// A program of several LZX frames and reset intervals: the PE, then text and noise.
fn large_program() -> Vec<u8> {
    let mut b = corpus::pe();
    for i in 0..6000 {
        b.extend_from_slice(format!("line {i} of the program's data section\n").as_bytes());
    }
    b.extend(corpus::packed::noise(150_000, 7));
    b
}

fn members(b: &[u8]) -> Extraction {
    extract(b, Limits::default(), &|| false).0
}

#[test]
fn a_help_file_gives_its_page_and_programs_byte_for_byte() {
    let pe = corpus::pe();
    let large = large_program();
    let chm = compile(&[
        ("index.html", PAGE),
        ("bin/setup.exe", &pe),
        ("bin/large.exe", &large),
    ]);
    let x = members(&chm);
    assert_eq!(x.format, "chm", "{x:?}");
    assert!(x.limits_hit.is_empty(), "{:?}", x.limits_hit);
    let by_name = |n: &str| {
        x.members
            .iter()
            .find(|m| m.name == n)
            .unwrap_or_else(|| panic!("{n} among {:?}; skipped {:?}", x.members, x.skipped))
    };
    let setup = by_name("bin/setup.exe");
    assert_eq!(setup.kind, "pe");
    assert_eq!(setup.source, "chm");
    assert_eq!(setup.sha256, sha256_hex(&pe));
    assert_eq!(by_name("bin/large.exe").sha256, sha256_hex(&large));
    assert_eq!(by_name("index.html").sha256, sha256_hex(PAGE));
    // The format's own files (#SYSTEM, #TOPICS, ::DataSpace…) are not members.
    assert!(
        x.members
            .iter()
            .all(|m| !m.name.starts_with('#') && !m.name.starts_with(':')),
        "{:?}",
        x.members
    );
    // The large program crossed more than one reset interval of the section's LZX stream.
    let dir = chm_directory(&chm, 10_000).unwrap();
    assert!(dir.anomalies.is_empty(), "{:?}", dir.anomalies);
    let section = chm_compressed(&chm, &dir, usize::MAX, &|| false).unwrap();
    assert!(section.declared > 3 * 0x10000, "{}", section.declared);
    assert_eq!(section.data.len() as u64, section.declared);
    assert!(section.stopped.is_none(), "{:?}", section.stopped);
}

#[test]
fn a_byte_budget_stops_decoding_and_says_so() {
    let chm = compile(&[("index.html", PAGE), ("bin/large.exe", &large_program())]);
    let limits = Limits {
        max_total_bytes: 64 * 1024,
        ..Limits::default()
    };
    let (x, data) = extract(&chm, limits, &|| false);
    assert!(data.iter().map(Vec::len).sum::<usize>() <= 64 * 1024);
    assert!(
        x.members.iter().all(|m| m.name != "bin/large.exe"),
        "{:?}",
        x.members
    );
    assert!(
        x.skipped
            .iter()
            .any(|s| s.name == "bin/large.exe" && s.reason.contains("byte limit")),
        "{:?}",
        x.skipped
    );
}

#[test]
fn a_damaged_compressed_section_is_said_and_the_rest_still_read() {
    let pe = corpus::pe();
    let mut chm = compile(&[("index.html", PAGE), ("bin/setup.exe", &pe)]);
    let dir = chm_directory(&chm, 10_000).unwrap();
    let table = dir
        .entries
        .iter()
        .find(|e| e.name.ends_with("InstanceData/ResetTable"))
        .expect("a reset table");
    // The table's frame size is 32768; a lie makes the whole section unreadable.
    let at = (dir.content + table.offset + 32) as usize;
    chm[at] = 0x01;
    let x = members(&chm);
    assert_eq!(x.format, "chm");
    assert!(
        x.skipped
            .iter()
            .any(|s| s.name == "bin/setup.exe" && s.reason.contains("reset table")),
        "{:?}",
        x.skipped
    );
}

#[tokio::test]
async fn a_help_file_through_the_served_tools_gives_a_program_pe_info_reads() {
    let pe = corpus::pe();
    let chm = compile(&[("index.html", PAGE), ("bin/setup.exe", &pe)]);
    let srv = Server::new(&[("manual.chm", chm)]);
    let (id, is_error) = srv
        .call("identify_file", json!({"path": srv.path("manual.chm")}))
        .await;
    assert!(!is_error, "{id}");
    assert_eq!(id["kind"], "chm", "{id}");
    let (v, is_error) = srv
        .call("extract_members", json!({"path": srv.path("manual.chm")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["format"], "chm", "{v}");
    let exe = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "bin/setup.exe")
        .unwrap_or_else(|| panic!("the program in {v}"));
    assert_eq!(exe["sha256"], sha256_hex(&pe));
    let (info, is_error) = srv
        .call("pe_info", json!({"carved_path": exe["carved_path"]}))
        .await;
    assert!(!is_error, "{info}");
}

/// Valid help files to damage: one frame, and several across a reset interval.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut medium = corpus::pe();
        for i in 0..2500 {
            medium.extend_from_slice(format!("record {i}: {}\n", i * 7919).as_bytes());
        }
        medium.extend(corpus::packed::noise(20_000, 3));
        vec![
            compile(&[("index.html", PAGE), ("bin/setup.exe", &corpus::pe())]),
            compile(&[("index.html", PAGE), ("bin/medium.exe", &medium)]),
        ]
    })
}

/// A compiled help file with bytes flipped and maybe cut.
fn damaged() -> impl Strategy<Value = Vec<u8>> {
    (
        0usize..2,
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..12),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(seed, flips, cut, do_cut)| {
            let mut b = seeds()[seed].clone();
            for (i, v) in flips {
                let at = i.index(b.len());
                b[at] = v;
            }
            if do_cut {
                b.truncate(cut.index(b.len() + 1));
            }
            b
        })
}

/// Random bytes after a help file's magic, or after a real header and directory header.
fn random_after_a_header() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![8usize, 0x60, 0xCC]),
        prop::collection::vec(any::<u8>(), 0..8192),
    )
        .prop_map(|(keep, tail)| [&seeds()[0][..keep], &tail[..]].concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn damaged_or_random_help_files_never_panic_nor_pass_the_limits(
        b in prop_oneof![damaged(), random_after_a_header()]
    ) {
        if let Some(dir) = chm_directory(&b, 1000) {
            prop_assert!(dir.entries.len() <= 1000);
            if let Ok(s) = chm_compressed(&b, &dir, 256 * 1024, &|| false) {
                prop_assert!(s.data.len() <= 256 * 1024);
                // A decoder panic is contained and said.
                prop_assert!(!s.contained_panic || s.stopped.is_some());
            }
        }
        let limits = Limits { max_members: 8, max_total_bytes: 1 << 20, max_ratio: 50 };
        let (x, data) = extract(&b, limits, &|| false);
        prop_assert!(x.members.len() <= 8);
        prop_assert!(x.total_bytes <= 1 << 20);
        prop_assert_eq!(x.total_bytes, data.iter().map(|d| d.len() as u64).sum::<u64>());
    }
}
