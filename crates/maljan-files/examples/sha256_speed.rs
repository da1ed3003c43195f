//! The sha256 ceiling FA_file_checksum can reach on this CPU: the `sha2` crate (the one the
//! action uses, with the same features) hashing a buffer already in memory, no file I/O.
//! `cargo run --release -p maljan-files --example sha256_speed [-- MiB [runs]]` prints one JSON
//! line; bench/files_bench.py reads it as the in-memory floor beside `openssl speed`.

use std::time::Instant;

use sha2::{Digest, Sha256};

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let data: Vec<u8> = (0..mib * 1024 * 1024)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let mut best = f64::MAX;
    let mut digest = String::new();
    // The same 1 MiB updates the action makes with its default chunk_size; the best run is the
    // CPU's figure, the others only saw more interference.
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        let mut h = Sha256::new();
        for chunk in data.chunks(1024 * 1024) {
            h.update(chunk);
        }
        digest = hex::encode(h.finalize());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    #[cfg(target_arch = "x86_64")]
    let sha_ni = std::arch::is_x86_feature_detected!("sha");
    #[cfg(not(target_arch = "x86_64"))]
    let sha_ni = false;
    println!(
        "{{\"bytes\":{},\"best_s\":{best:.6},\"mb_per_s\":{:.1},\"sha_ni\":{sha_ni},\"digest\":\"{digest}\"}}",
        data.len(),
        data.len() as f64 / best / 1e6
    );
}
