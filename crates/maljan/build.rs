//! Release builds link the functions a `maljan serve` session runs next to each other, from
//! `hot-symbols.txt` (made by `scripts/hot-symbols.py`). The kernel maps code 64 KiB around every
//! page a process touches, so a tool server whose hot code is spread over the whole binary holds
//! ~9 MB of it resident; packed, ~2 MB. Names the linker does not find are skipped, so a stale
//! list only costs locality, never correctness.
//!
//! Only where the linker is known to take these flags: x86_64 Linux (glibc) with rustc's own lld
//! (the default since Rust 1.90), and no linker chosen in RUSTFLAGS. MALJAN_SYMBOL_ORDER=0 turns
//! it off.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=hot-symbols.txt");
    println!("cargo:rerun-if-env-changed=MALJAN_SYMBOL_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("MALJAN_SYMBOL_ORDER") == "0" {
        return;
    }
    // Asking rustc its version spawns a process, so it comes last, and only for release builds.
    let default_linker = var("TARGET") == "x86_64-unknown-linux-gnu"
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("linker")
        && env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_none()
        && rustc_minor().is_some_and(|minor| minor >= 90);
    if !default_linker {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("hot-symbols.txt");
    if list.is_file() {
        let list = list.display();
        println!("cargo:rustc-link-arg-bin=maljan=-Wl,--symbol-ordering-file={list}");
        println!("cargo:rustc-link-arg-bin=maljan=-Wl,--no-warn-symbol-ordering");
    }
    // The position-independent binary's ~90k relative relocations take 1–2 MB as RELA entries,
    // all read (so resident) at every start; packed as RELR they take kilobytes. The loader
    // needs glibc 2.36, so only when the binary is built for the glibc it is built on.
    if var("HOST") == var("TARGET") && host_glibc().is_some_and(|v| v >= (2, 36)) {
        println!("cargo:rustc-link-arg-bin=maljan=-Wl,-z,pack-relative-relocs");
    }
}

/// The glibc this build script runs on, as (major, minor). A build script is compiled for the
/// host, so on a host without glibc (musl, macOS) the symbol is not even referenced.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn host_glibc() -> Option<(u32, u32)> {
    unsafe extern "C" {
        fn gnu_get_libc_version() -> *const std::ffi::c_char;
    }
    // SAFETY: glibc returns a pointer to a static NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) }
        .to_str()
        .ok()?;
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn host_glibc() -> Option<(u32, u32)> {
    None
}

/// The `90` of `rustc 1.90.0 (…)`.
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
