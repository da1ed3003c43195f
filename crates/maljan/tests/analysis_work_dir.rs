//! `maljan serve analysis` writes what it extracts into a directory it owns, never beside the
//! sample: by default a private directory made for the process under `<data dir>/work` (0700,
//! files 0600), accepted by its other tools, and gone when the server stops; with `--work-dir DIR`
//! there, and DIR is left to its owner.

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    evidence::{snapshot, zip_of},
    maljan,
};
use maljan_triage::corpus;
use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn start(home: &Path, samples: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(maljan())
            .args(["serve", "analysis", "--root"])
            .arg(samples)
            .args(extra)
            .env("MALJAN_HOME", home)
            .env("MALJAN_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server hung up"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// A tool's answer (its structured content); panics on an error answer.
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &v["result"];
        assert_ne!(result["isError"], true, "{tool}: {v}");
        result["structuredContent"].clone()
    }

    /// Closes stdin, as a client that is done does, and waits for the process to end.
    fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "still running after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let samples = tmp.path().join("evidence");
    std::fs::create_dir_all(&samples).unwrap();
    let zip = zip_of(&[("invoice.exe", &corpus::pe_bytes(4096))], None);
    std::fs::write(samples.join("invoice.zip"), zip).unwrap();
    (tmp, home, samples)
}

#[test]
fn the_default_work_dir_is_private_accepted_and_gone_when_the_server_stops() {
    let (_tmp, home, samples) = setup();
    let before = snapshot(&samples);
    let mut server = Server::start(&home, &samples, &[]);
    let sample = samples.join("invoice.zip");
    let v = server.call("extract_members", json!({"path": sample}));
    let member = PathBuf::from(v["members"][0]["carved_path"].as_str().unwrap());
    // <data dir>/work/analysis-<pid>-<random>/carved/<sha256>/members/<sha256>.exe
    let work_parent = home.join("work").canonicalize().unwrap();
    let below = member
        .strip_prefix(&work_parent)
        .expect("under <data dir>/work");
    let work_dir = work_parent.join(below.components().next().unwrap());
    let name = work_dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("analysis-{}-", server.child.id())),
        "{name}"
    );
    assert_eq!(mode(&work_dir), 0o700);
    assert_eq!(mode(member.parent().unwrap()), 0o700);
    assert_eq!(mode(&member), 0o600);
    // The server's other tools accept what it wrote.
    let pe = server.call("pe_info", json!({"carved_path": member}));
    assert!(pe["machine"].is_string(), "{pe}");

    server.stop();
    assert!(!work_dir.exists(), "{} is left behind", work_dir.display());
    assert_eq!(snapshot(&samples), before, "the evidence folder changed");
}

#[test]
fn a_given_work_dir_receives_the_members_and_is_left_to_its_owner() {
    let (tmp, home, samples) = setup();
    let work = tmp.path().join("job-1");
    let mut server = Server::start(&home, &samples, &["--work-dir", work.to_str().unwrap()]);
    let v = server.call(
        "extract_members",
        json!({"path": samples.join("invoice.zip")}),
    );
    let member = PathBuf::from(v["members"][0]["carved_path"].as_str().unwrap());
    assert!(
        member.starts_with(work.canonicalize().unwrap()),
        "{}",
        member.display()
    );
    assert_eq!(mode(&work), 0o700);
    server.stop();
    assert!(
        member.is_file(),
        "the owner of --work-dir removes it, not the server"
    );
    let leftovers: Vec<_> = std::fs::read_dir(home.join("work"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
