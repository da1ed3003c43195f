//! macho_info beside LLVM's llvm-objdump (Debian's llvm, `--macho --universal-headers` and
//! `--private-headers`, per slice with `--arch`) on the crafted corpus scripts/macho_corpus.py
//! builds into the peers cache (MALJAN_MACHO_CORPUS): a small program written from scratch, then
//! each shape (i386, arm64, a dylib, universal with a 32- or 64-bit fat header), entry
//! (LC_UNIXTHREAD instead of LC_MAIN), load command (LC_LOAD_WEAK_DYLIB with LC_RPATH,
//! LC_CODE_SIGNATURE) and lie (load commands cut by the file's end, a cmdsize past the commands,
//! below its structure or zero, ncmds huge or zero, sizeofcmds past the file, a segment, a
//! section or the symbol table past the end, nsects beyond the command, a dylib name outside its
//! command, a universal slice past the end) alone and in every pair.
//!
//! Where llvm-objdump reads an image, every field both report must be equal: cpu, bits, file
//! type, header flags, the load commands' names and sizes, segments (name, addresses, file
//! range, both protections), sections (name, address, offset, size), linked and weak dylibs,
//! rpaths, install name, UUID, code signature, entry point; and the universal header's slices.
//! Where llvm-objdump refuses a file or a slice as malformed, macho_info must say it is (an
//! anomaly for that image, or an error for the slice) — it reads on past the lie, which llvm
//! does not, so those readings have nothing to be compared with.
//!
//! The same comparison runs on third-party files (MALJAN_MACHO_THIRD_PARTY): the Mach-O files
//! Go's own tests read (Apple's gcc, clang and ld output, a universal program, objects, DWARF),
//! unpacked from Debian's golang-1.19-src by scripts/peers.sh.
//!
//! A second test holds macho_info's reading past the lies to the same standard: each file llvm
//! refuses is compared with llvm's reading of its sound twin (the same file without the lie) on
//! every field the lie leaves alone.
//!
//! Two things llvm-objdump 14 prints its own way are read as what they mean by
//! scripts/macho_dump.py, not counted as differences: it prints MH_NO_HEAP_EXECUTION with its
//! `MH_` prefix (the other flags without), and a header with no flags as `0x00000000`.
//!
//! Needs the peers: `eval "$(scripts/peers.sh)"` (it installs llvm and builds the corpus).

use std::{collections::BTreeMap, path::Path, process::Command};

use maljan_analysis::{
    budget::Budget,
    macho::{MachArch, MachInfo, macho_info},
};
use serde_json::{Value, json};

/// The per-image fields compared, as scripts/macho_dump.py names them.
const FIELDS: [&str; 14] = [
    "cpu",
    "bits",
    "file_type",
    "flags",
    "load_commands",
    "segments",
    "sections",
    "libraries",
    "weak_libraries",
    "rpaths",
    "install_name",
    "uuid",
    "code_signature",
    "entry_point",
];

fn llvm_objdump() -> String {
    let tool = std::env::var("MALJAN_LLVM_OBJDUMP").unwrap_or_else(|_| "llvm-objdump".into());
    let version = Command::new(&tool).arg("--version").output();
    assert!(
        version.is_ok_and(|v| v.status.success()),
        "{tool} does not run: install Debian's llvm (scripts/peers.sh does)"
    );
    tool
}

fn corpus() -> String {
    std::env::var("MALJAN_MACHO_CORPUS").expect(
        "MALJAN_MACHO_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"` first (it builds the \
         crafted Mach-O corpus)",
    )
}

fn llvm_view(dir: &Path, tool: &str) -> BTreeMap<String, Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/macho_dump.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(dir)
        .env("LLVM_OBJDUMP", tool)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "macho_dump.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One image as macho_info reports it, in macho_dump.py's shape.
fn maljan_image(a: &MachArch) -> Value {
    let mut flags = a.flags.clone();
    flags.sort();
    json!({
        "cpu": a.cpu, "bits": a.bits, "file_type": a.file_type, "flags": flags,
        "load_commands": a.load_commands.iter()
            .map(|c| json!({"name": c.name, "size": c.size})).collect::<Vec<_>>(),
        "segments": a.segments.iter().map(|s| json!({
            "name": s.name, "vmaddr": s.vmaddr, "vmsize": s.vmsize, "fileoff": s.fileoff,
            "filesize": s.filesize, "protection": s.protection,
            "max_protection": s.max_protection,
        })).collect::<Vec<_>>(),
        "sections": a.sections.iter().map(|s| json!({
            "name": s.name, "address": s.address, "offset": s.offset, "size": s.size,
        })).collect::<Vec<_>>(),
        "libraries": a.libraries, "weak_libraries": a.weak_libraries, "rpaths": a.rpaths,
        "install_name": a.install_name, "uuid": a.uuid, "code_signature": a.code_signature,
        "entry_point": a.entry_point,
    })
}

/// What is compared, and what differed.
#[derive(Default)]
struct Tally {
    fields: usize,
    equal: usize,
    refusals: usize,
    differences: Vec<String>,
}

impl Tally {
    fn field(&mut self, at: &str, field: &str, theirs: &Value, ours: &Value) {
        self.fields += 1;
        if theirs == ours {
            self.equal += 1;
        } else {
            let short = |v: &Value| v.to_string().chars().take(400).collect::<String>();
            self.differences.push(format!(
                "{at} {field}:\n  llvm   {}\n  maljan {}",
                short(theirs),
                short(ours)
            ));
        }
    }

    /// llvm-objdump refused `at` with `error`; macho_info must have said why too.
    fn refusal(&mut self, at: &str, error: &Value, said: &[String]) {
        self.fields += 1;
        self.refusals += 1;
        if said.is_empty() {
            self.differences.push(format!(
                "{at}: llvm refuses it ({error}), macho_info reads it without an anomaly"
            ));
        } else {
            self.equal += 1;
        }
    }

    /// llvm-objdump read `at` whole; macho_info must read it without an anomaly, every field
    /// equal.
    fn image(&mut self, at: &str, theirs: &Value, ours: &MachArch, said: &[String]) {
        self.fields += 1;
        if said.is_empty() {
            self.equal += 1;
        } else {
            self.differences.push(format!(
                "{at}: llvm reads it whole, macho_info says {said:?}"
            ));
        }
        let ours = maljan_image(ours);
        for field in FIELDS {
            self.field(at, field, &theirs[field], &ours[field]);
        }
    }
}

fn compare(file: &str, theirs: &Value, ours: &Result<MachInfo, String>, tally: &mut Tally) {
    let info = match ours {
        Ok(info) => info,
        Err(e) => {
            let said = [e.clone()];
            match &theirs["error"] {
                Value::Null => tally.refusal(file, &json!("read whole by llvm"), &[]),
                error => tally.refusal(file, error, &said),
            }
            return;
        }
    };
    if !theirs["error"].is_null() {
        let said: Vec<String> = info.anomalies.iter().chain(&info.errors).cloned().collect();
        tally.refusal(file, &theirs["error"], &said);
        return;
    }
    tally.field(
        file,
        "universal",
        &theirs["universal"],
        &json!(info.universal),
    );
    if info.universal {
        let slices = serde_json::to_value(&info.slices).unwrap();
        tally.field(file, "slices", &theirs["slices"], &slices);
    }
    let images = theirs["architectures"].as_array().unwrap();
    assert_eq!(
        images.len(),
        info.architectures.len(),
        "{file}: every slice llvm lists is a Mach-O image macho_info reads"
    );
    for (i, (theirs, ours)) in images.iter().zip(&info.architectures).enumerate() {
        let (at, said): (String, Vec<String>) = if info.universal {
            let prefix = format!("slice {i} ");
            (
                format!("{file} slice {i}"),
                info.anomalies
                    .iter()
                    .filter(|a| a.starts_with(&prefix))
                    .cloned()
                    .collect(),
            )
        } else {
            (file.to_string(), info.anomalies.clone())
        };
        match &theirs["error"] {
            Value::Null => tally.image(&at, theirs, ours, &said),
            error => tally.refusal(&at, error, &said),
        }
    }
}

/// macho_info on every file of `dir` beside llvm's reading of it.
fn parity(dir: &Path, llvm: &BTreeMap<String, Value>) -> Tally {
    let mut tally = Tally::default();
    for (file, theirs) in llvm {
        let b = std::fs::read(dir.join(file)).unwrap();
        let ours =
            macho_info(&b, 1 << 16, &Budget::for_file(b.len(), &|| false)).map_err(|e| e.message);
        compare(file, theirs, &ours, &mut tally);
    }
    tally
}

#[test]
fn macho_info_reads_every_crafted_macho_as_llvm_objdump_does() {
    let tool = llvm_objdump();
    let dir = corpus();
    let dir = Path::new(&dir);
    let llvm = llvm_view(dir, &tool);
    assert!(llvm.len() >= 60, "only {} crafted Mach-O files", llvm.len());
    let tally = parity(dir, &llvm);
    // The corpus holds what it claims: llvm reads each shape and each load command somewhere.
    let read = |file: &str| &llvm[file]["architectures"];
    assert_eq!(
        read("plain.macho")[0]["libraries"],
        json!(["/usr/lib/libSystem.B.dylib"])
    );
    assert_eq!(read("i386.macho")[0]["bits"], 32);
    assert_eq!(
        read("weak_dylib.macho")[0]["weak_libraries"],
        json!(["@rpath/libhijack.dylib"])
    );
    assert_eq!(read("code_signature.macho")[0]["code_signature"], true);
    assert_eq!(
        read("dylib.macho")[0]["install_name"],
        "@rpath/libcrafted.dylib"
    );
    assert_eq!(
        read("arm64+unixthread.macho")[0]["entry_point"],
        0x1_0000_0800u64
    );
    assert_eq!(read("fat64.macho").as_array().unwrap().len(), 2);
    assert!(read("fat+cmdsize_zero.macho")[0]["error"].is_string());
    println!(
        "{} crafted Mach-O files, {} fields and verdicts compared: {} equal ({:.2}%); {} files \
         or slices refused by llvm-objdump as malformed, each an anomaly in macho_info",
        llvm.len(),
        tally.fields,
        tally.equal,
        100.0 * tally.equal as f64 / tally.fields as f64,
        tally.refusals
    );
    assert!(
        tally.differences.is_empty(),
        "{} differences:\n{}",
        tally.differences.len(),
        tally.differences.join("\n")
    );
}

/// The fields each lie takes from macho_info's reading (the rest must read as in the sound twin):
/// a command cut, oversized, undersized or empty ends the walk at LC_UUID, so the commands from
/// there on are lost; the other lies touch their own field or none (macho_info reads the
/// segments, the sections its command has room for, and the symbol table's command all the
/// same).
const LIES: [(&str, &[&str]); 12] = [
    ("cmds_truncated", AFTER_UUID),
    ("cmdsize_huge", AFTER_UUID),
    ("cmdsize_small", AFTER_UUID),
    ("cmdsize_zero", AFTER_UUID),
    ("ncmds_huge", &[]),
    ("ncmds_zero", &FIELDS),
    ("sizeofcmds_huge", &[]),
    ("segment_past_eof", &["segments"]),
    ("section_past_eof", &["sections"]),
    ("symtab_past_eof", &[]),
    ("nsects_lying", &[]),
    ("dylib_name_outside", &["libraries"]),
];
const AFTER_UUID: &[&str] = &[
    "load_commands",
    "uuid",
    "entry_point",
    "libraries",
    "weak_libraries",
    "rpaths",
    "code_signature",
];

#[test]
fn macho_info_reads_past_each_lie_what_llvm_objdump_reads_in_the_sound_twin() {
    let tool = llvm_objdump();
    let dir = corpus();
    let dir = Path::new(&dir);
    let llvm = llvm_view(dir, &tool);
    let mut tally = Tally::default();
    let mut twins = 0;
    for (file, theirs) in &llvm {
        let variations: Vec<&str> = file.trim_end_matches(".macho").split('+').collect();
        let lies: Vec<&[&str]> = LIES
            .iter()
            .filter(|(lie, _)| variations.contains(lie))
            .map(|(_, touched)| *touched)
            .collect();
        let past_eof = variations.contains(&"fat_slice_past_eof");
        if lies.is_empty() && !past_eof {
            continue;
        }
        let sound: Vec<&str> = variations
            .iter()
            .filter(|v| !LIES.iter().any(|(lie, _)| lie == *v))
            .map(|v| if *v == "fat_slice_past_eof" { "fat" } else { v })
            .collect();
        let twin = if sound.is_empty() {
            "plain".to_string()
        } else {
            sound.join("+")
        };
        let twin = &llvm[&format!("{twin}.macho")];
        assert!(twin["error"].is_null(), "{file}'s twin is refused: {twin}");
        let b = std::fs::read(dir.join(file)).unwrap();
        let info = macho_info(&b, 1 << 16, &Budget::for_file(b.len(), &|| false))
            .unwrap_or_else(|e| panic!("{file}: macho_info refuses it: {}", e.message));
        assert!(
            !info.anomalies.is_empty() || !info.errors.is_empty() || theirs["error"].is_null(),
            "{file}: llvm refuses it and macho_info says nothing"
        );
        twins += 1;
        let sound_images = twin["architectures"].as_array().unwrap();
        // A slice past the end is not read; the lies hit the first slice only.
        assert_eq!(
            info.architectures.len(),
            sound_images.len() - usize::from(past_eof),
            "{file}: {:?}",
            info.errors
        );
        for (i, (sound, ours)) in sound_images.iter().zip(&info.architectures).enumerate() {
            let ours = maljan_image(ours);
            for field in FIELDS {
                if i == 0 && lies.iter().any(|touched| touched.contains(&field)) {
                    continue;
                }
                tally.field(
                    &format!("{file} slice {i}"),
                    field,
                    &sound[field],
                    &ours[field],
                );
            }
        }
    }
    assert!(twins >= 100, "only {twins} files with a lie");
    println!(
        "{twins} crafted Mach-O files with a lie, {} fields the lie leaves alone compared with \
         llvm-objdump's reading of the sound twin: {} equal ({:.2}%)",
        tally.fields,
        tally.equal,
        100.0 * tally.equal as f64 / tally.fields as f64
    );
    assert!(
        tally.differences.is_empty(),
        "{} differences:\n{}",
        tally.differences.len(),
        tally.differences.join("\n")
    );
}

#[test]
fn macho_info_reads_go_s_third_party_mach_o_files_as_llvm_objdump_does() {
    let tool = llvm_objdump();
    let dir = std::env::var("MALJAN_MACHO_THIRD_PARTY").expect(
        "MALJAN_MACHO_THIRD_PARTY is not set: run `eval \"$(scripts/peers.sh)\"` first (it \
         unpacks Go's Mach-O test files from Debian)",
    );
    let dir = Path::new(&dir);
    let llvm = llvm_view(dir, &tool);
    assert!(
        llvm.len() >= 10,
        "only {} third-party Mach-O files",
        llvm.len()
    );
    let fat = &llvm["fat-gcc-386-amd64-darwin-exec.macho"];
    assert_eq!(fat["slices"].as_array().map(Vec::len), Some(2), "{fat}");
    let rpath = &llvm["clang-amd64-darwin-exec-with-rpath.macho"]["architectures"][0];
    assert!(
        rpath["rpaths"].as_array().is_some_and(|r| !r.is_empty()),
        "{rpath}"
    );
    let tally = parity(dir, &llvm);
    // Go's file with a bad LC_DYSYMTAB (its undefined symbols run past the symbol table): llvm
    // refuses it, macho_info says why.
    let b = std::fs::read(dir.join("gcc-amd64-darwin-exec-with-bad-dysym.macho")).unwrap();
    let info = macho_info(&b, 100, &Budget::for_file(b.len(), &|| false)).unwrap();
    assert!(
        info.anomalies
            .iter()
            .any(|a| a.contains("LC_DYSYMTAB's undefined symbols")),
        "{:?}",
        info.anomalies
    );
    println!(
        "{} third-party Mach-O files, {} fields and verdicts compared: {} equal ({:.2}%); {} \
         refused by llvm-objdump as malformed, each an anomaly in macho_info",
        llvm.len(),
        tally.fields,
        tally.equal,
        100.0 * tally.equal as f64 / tally.fields as f64,
        tally.refusals
    );
    assert!(
        tally.differences.is_empty(),
        "{} differences:\n{}",
        tally.differences.len(),
        tally.differences.join("\n")
    );
}
