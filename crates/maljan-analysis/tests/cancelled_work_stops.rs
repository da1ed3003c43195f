//! A cancelled call frees the CPU (issue 18, item 4, the analysis side): the framework stops
//! waiting at once, and the work it handed to the blocking pool sees the token and ends within a
//! second instead of burning a core to the end. Measured as this process's CPU time over a
//! second that starts one second after the cancel: this file holds one test, so the process's
//! CPU is that test's.

mod server;

use std::time::Duration;

use serde_json::{Map, Value, json};
use server::Server;
use tokio_util::sync::CancellationToken;

/// CPU seconds (user + system) this process has used.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The headers of a PE without sections: everything after them is overlay.
fn pe_headers() -> Vec<u8> {
    let mut b = vec![0u8; 0x400];
    b[..2].copy_from_slice(b"MZ");
    b[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    b[0x80..0x84].copy_from_slice(b"PE\0\0");
    b[0x84..0x86].copy_from_slice(&0x14cu16.to_le_bytes());
    b[0x94..0x96].copy_from_slice(&224u16.to_le_bytes()); // optional header size
    b[0x96..0x98].copy_from_slice(&0x0102u16.to_le_bytes());
    let o = 0x98;
    b[o..o + 2].copy_from_slice(&0x10bu16.to_le_bytes());
    b[o + 32..o + 36].copy_from_slice(&0x1000u32.to_le_bytes()); // section alignment
    b[o + 36..o + 40].copy_from_slice(&0x200u32.to_le_bytes()); // file alignment
    b[o + 56..o + 60].copy_from_slice(&0x1000u32.to_le_bytes()); // size of image
    b[o + 60..o + 64].copy_from_slice(&0x400u32.to_le_bytes()); // size of headers
    b[o + 92..o + 96].copy_from_slice(&16u32.to_le_bytes());
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_stops_working_within_a_second() {
    let server = Server::new(&[("huge.bin", vec![]), ("overlay.exe", pe_headers())]);
    // Files of 1 GiB of holes: reading them costs CPU, not disk.
    for name in ["huge.bin", "overlay.exe"] {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(server.samples.join(name))
            .unwrap();
        file.set_len(1 << 30).unwrap();
    }
    let huge = server.path("huge.bin");
    let calls = [
        ("hashes", json!({"path": huge, "fuzzy": true})),
        ("entropy", json!({"path": huge, "window": 0})),
        ("strings", json!({"path": huge})),
        ("iocs_from_file", json!({"path": huge})),
        ("pe_info", json!({"path": server.path("overlay.exe")})),
    ];
    for (tool, args) in calls {
        let Value::Object(args): Value = args else {
            unreachable!()
        };
        let args: Map<String, Value> = args;
        let token = CancellationToken::new();
        let call = {
            let server = server.server.clone();
            let token = token.clone();
            tokio::spawn(async move { server.call(tool, args, token, None).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
        let out = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("a cancelled call answers at once")
            .unwrap()
            .unwrap();
        assert!(
            out.is_error,
            "{tool} finished before the cancel: {}",
            out.value
        );
        assert!(
            out.value["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cancelled"),
            "{tool}: {}",
            out.value
        );
        // The work has a second to notice, then must leave the CPU idle.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = cpu_seconds();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let used = cpu_seconds() - before;
        assert!(
            used < 0.3,
            "{tool} kept working after its cancel: {used:.2} CPU s in the second after"
        );
    }
    server.still_answers().await;
}
