//! Helpers shared by the binary's integration tests: the binary, real peers, ports, children.
#![allow(dead_code)]

pub mod evidence;
pub mod session;
pub mod staging;

use std::{
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::Duration,
};

pub fn maljan() -> &'static str {
    env!("CARGO_BIN_EXE_maljan")
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A peer installed by scripts/peers.sh: a missing one fails the test, loudly.
pub fn peer(var: &str) -> String {
    maljan_testkit::peer_env(var)
}

pub fn free_port() -> u16 {
    maljan_testkit::free_port()
}

/// Waits until the MCP server on 127.0.0.1:`port` answers a real HTTP request at /mcp (a bound
/// port is not yet a serving one).
pub fn wait_answering(port: u16) {
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");
}

/// A child process killed when the test ends, pass or fail.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn spawn(cmd: &mut Command) -> Running {
    Running(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    )
}

/// Runs a command to completion with a time limit, returning its output. Output is drained
/// while the command runs (a full pipe would otherwise stall it).
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => output.expect("wait"),
        Err(_) => {
            // SAFETY: kill(2) on a pid we spawned and have not reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let out = rx.recv().expect("wait").expect("wait");
            panic!(
                "command did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A scratch root with a known file: hello.txt = "hello\n".
pub fn scratch_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), b"hello\n").unwrap();
    dir
}

pub const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
