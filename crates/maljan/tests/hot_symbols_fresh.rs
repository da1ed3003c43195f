//! The release build packs the serve path's functions by name (`hot-symbols.txt`, see build.rs).
//! The names carry hashes that change with Cargo.lock and the toolchain; a stale list breaks
//! nothing but quietly takes idle RSS from ~9 MB to ~14 MB (issue 2's bound is 10 MB). This
//! fails when the list was made from another Cargo.lock or rustc than the tree has now.

use std::path::Path;

use sha2::{Digest, Sha256};

#[test]
fn the_hot_symbol_list_was_made_from_this_cargo_lock_and_toolchain() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = std::fs::read(crate_dir.join("../../Cargo.lock")).expect("Cargo.lock");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .expect("rustc -V");
    let now = format!(
        "Cargo.lock sha256 {}\n{}\n",
        hex::encode(Sha256::digest(&lock)),
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let stamped = std::fs::read_to_string(crate_dir.join("hot-symbols.stamp")).unwrap_or_default();
    assert_eq!(
        stamped, now,
        "crates/maljan/hot-symbols.txt was made from another Cargo.lock or toolchain: \
         regenerate it as scripts/hot-symbols.py says (release builds of both feature sets, \
         then the script), or idle RSS of `maljan serve` grows by ~5 MB"
    );
}
