//! The release build packs the serve path's functions by name (`hot-symbols.txt`, see build.rs).
//! The names carry hashes that change with Cargo.lock and the toolchain, and some change with the
//! source of the crates a serve session runs (ThinLTO's `.llvm.N` suffixes, the hashes of
//! generic code they instantiate). A stale list breaks nothing but quietly takes idle RSS from
//! ~8.5 MB to 11.8 MB or more (issue 2's bound is 10 MB). This fails when the list was made from
//! another Cargo.lock, other serve-crate sources or another rustc than the tree has now.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The same crates as `LINKED_CRATES` in scripts/hot-symbols.py: every workspace crate the binary
/// links (a one-string edit to the client alone renamed 23 serve-path functions: +1–1.7 MB).
const LINKED_CRATES: [&str; 6] = [
    "maljan",
    "maljan-server",
    "maljan-files",
    "maljan-analysis",
    "maljan-client",
    "maljan-triage",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// scripts/hot-symbols.py's `sources_digest`: each file's path from the repository root, a NUL,
/// its sha256 in hex and a newline, in path order.
fn sources_digest(root: &Path) -> String {
    let mut entries = Vec::new();
    for krate in LINKED_CRATES {
        let base = root.join("crates").join(krate);
        let mut paths = vec![base.join("build.rs")];
        rust_files(&base.join("src"), &mut paths);
        for path in paths.into_iter().filter(|p| p.is_file()) {
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let bytes = std::fs::read(&path).expect("a source file");
            entries.push((rel, hex::encode(Sha256::digest(&bytes))));
        }
    }
    entries.sort();
    let mut digest = Sha256::new();
    for (rel, file_digest) in entries {
        digest.update(format!("{rel}\0{file_digest}\n"));
    }
    hex::encode(digest.finalize())
}

#[test]
fn the_hot_symbol_list_was_made_from_this_tree_and_toolchain() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.join("../..").canonicalize().expect("the root");
    let lock = std::fs::read(root.join("Cargo.lock")).expect("Cargo.lock");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .expect("rustc -V");
    let now = format!(
        "Cargo.lock sha256 {}\nlinked crates' sources sha256 {}\n{}\n",
        hex::encode(Sha256::digest(&lock)),
        sources_digest(&root),
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let stamped = std::fs::read_to_string(crate_dir.join("hot-symbols.stamp")).unwrap_or_default();
    assert_eq!(
        stamped, now,
        "crates/maljan/hot-symbols.txt was made from another Cargo.lock, other sources of the \
         linked crates or another toolchain: regenerate it as scripts/hot-symbols.py says \
         (release builds of both feature sets, then the script), or idle RSS of `maljan serve` \
         grows by 3 MB or more"
    );
}
