//! A real PostgreSQL server for tests: Debian's `postgresql` (installed by scripts/peers.sh,
//! found through MALJAN_PG_BIN or /usr/lib/postgresql/*/bin), a fresh cluster (`initdb`) in a
//! directory of its own, on a free 127.0.0.1 port, trust authentication for the one local user.
//!
//! One server per test process, started on first use; each caller gets a database of its own
//! ([`fresh_database`]), so tests never see each other's rows. The server dies with the test
//! process (a parent-death signal, set by `setpriv` after it drops root: PostgreSQL refuses to run
//! as root), and the cluster directories of dead test processes are removed at the next start.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        OnceLock,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

const USER: &str = "maljan";

struct Server {
    port: u16,
    bin: PathBuf,
    restart: std::sync::Mutex<(
        std::sync::mpsc::Sender<Duration>,
        std::sync::mpsc::Receiver<()>,
    )>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The directory holding `initdb`, `postgres` and `createdb`; panics with the remedy if absent.
fn bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("MALJAN_PG_BIN") {
        return dir.into();
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed: run `eval \"$(scripts/peers.sh)\"` (installs Debian's \
             postgresql) or set MALJAN_PG_BIN to the directory holding initdb and postgres"
        )
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// `program args…`, as the `postgres` user when we are root, killed when our process ends.
fn as_server_user(program: &Path, pdeathsig: bool) -> Command {
    let mut cmd = Command::new("setpriv");
    if is_root() {
        cmd.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]);
    }
    if pdeathsig {
        cmd.arg("--pdeathsig=KILL");
    }
    cmd.arg("--").arg(program);
    cmd
}

fn chown_to_server_user(path: &Path) {
    if !is_root() {
        return;
    }
    let status = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown {} to postgres", path.display());
}

fn remove_stale_clusters() {
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("maljan-pg-")
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free local port")
        .port()
}

fn start() -> Server {
    let bin = bin_dir();
    remove_stale_clusters();
    let root = std::env::temp_dir().join(format!("maljan-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("cluster directory");
    let data = root.join("data");
    chown_to_server_user(&root);
    let out = as_server_user(&bin.join("initdb"), false)
        .arg("-D")
        .arg(&data)
        .args(["-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .output()
        .expect("running initdb (is setpriv from util-linux there?)");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    // Spawned from a thread that lives as long as the process: a parent-death signal follows
    // the thread that forked, not the process. The thread also restarts the server on request.
    let (tx, rx) = std::sync::mpsc::channel::<Duration>();
    let (started_tx, started) = std::sync::mpsc::channel();
    let postgres = bin.join("postgres");
    let log = root.join("server.log");
    std::thread::spawn(move || {
        let spawn = || {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("server log");
            as_server_user(&postgres, true)
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-k"])
                .arg(&root)
                .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
                .args(["-c", "max_connections=200"])
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("starting postgres")
        };
        let mut child = spawn();
        let _ = started_tx.send(());
        // Each request: a fast shutdown (SIGINT), down for the time asked, started again.
        while let Ok(down) = rx.recv() {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let _ = child.wait();
            std::thread::sleep(down);
            child = spawn();
            let _ = started_tx.send(());
        }
        // No more restarts: the thread stays with the server until the process ends.
        let _ = child.wait();
    });
    started.recv().expect("postgres spawner");
    wait_ready(&bin, port);
    Server {
        port,
        bin,
        restart: std::sync::Mutex::new((tx, started)),
    }
}

fn wait_ready(bin: &Path, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", USER])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "postgres did not start within 30 s; see its log in {}",
            std::env::temp_dir()
                .join(format!("maljan-pg-{}", std::process::id()))
                .display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the test server (a fast shutdown: every connection is closed), keeps it down for
/// `down`, starts it again on the same port and data, and returns once it accepts connections.
/// For a test file of its own: every test of the process shares the server.
pub fn restart_server(down: Duration) {
    let server = SERVER.get_or_init(start);
    let (tx, started) = &*server.restart.lock().expect("restart");
    tx.send(down).expect("postgres spawner");
    started.recv().expect("postgres restarted");
    wait_ready(&server.bin, server.port);
}

/// A new, empty database on the test PostgreSQL server (started on first use); its URL.
pub fn fresh_database() -> String {
    let server = SERVER.get_or_init(start);
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT_DB.fetch_add(1, Ordering::Relaxed)
    );
    let out = Command::new(server.bin.join("createdb"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            USER,
            &name,
        ])
        .output()
        .expect("running createdb");
    assert!(
        out.status.success(),
        "createdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("postgres://{USER}@127.0.0.1:{}/{name}", server.port)
}
