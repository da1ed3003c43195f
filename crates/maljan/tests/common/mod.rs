//! Helpers shared by the binary's integration tests: the binary, real peers, ports, children.
#![allow(dead_code)]

pub mod staging;

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
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

/// A peer installed by scripts/peers.sh. A missing peer fails the test, loudly: a test that
/// silently skips proves nothing.
pub fn peer(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests through scripts/test.sh, or `eval \"$(scripts/peers.sh)\"` first")
    })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on the port (the server is up).
pub fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listened on port {port} within 20 s");
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
