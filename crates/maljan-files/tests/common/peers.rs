//! Real storage servers started on 127.0.0.1 for a test (killed when dropped), a relay that cuts
//! a transfer halfway, and a large file with a known SHA-256.
#![allow(dead_code)]

use std::{
    io::Write,
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use sha2::{Digest, Sha256};

/// The path a peers.sh variable names; a missing one fails the test, saying what to run.
pub fn peer(var: &str) -> String {
    let value = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run `eval \"$(scripts/peers.sh)\"` (scripts/test.sh does) to install the storage servers")
    });
    assert!(
        Path::new(&value).exists(),
        "{var}={value} does not exist: run scripts/peers.sh"
    );
    value
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process, killed (with its process group) when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Server {
    /// Starts `cmd` (given the port and a temp dir) and waits until the port accepts.
    pub fn start(what: &str, cmd: impl FnOnce(u16, &Path) -> Command) -> Self {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut command = cmd(port, dir.path());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{what} did not listen on {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// moto's S3 server.
pub fn moto() -> Server {
    let bin = peer("MALJAN_MOTO_SERVER");
    Server::start("moto_server", |port, _| {
        let mut c = Command::new(bin);
        c.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        c
    })
}

/// Azurite's blob service, storing in its temp dir.
pub fn azurite() -> Server {
    let node = peer("MALJAN_NODE");
    let main = peer("MALJAN_AZURITE_BLOB");
    Server::start("azurite-blob", |port, dir| {
        let mut c = Command::new(node);
        c.arg(main).args([
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            &port.to_string(),
            "--location",
            dir.to_str().unwrap(),
            "--silent",
            "--skipApiVersionCheck",
        ]);
        c
    })
}

/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Runs a Python snippet in the peers' venv (to create a bucket or container with the
/// backend's own SDK).
pub fn python(code: &str) {
    let py = peer("MALJAN_PY");
    let out = Command::new(py).args(["-c", code]).output().unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn s3_bucket(endpoint: &str, bucket: &str) {
    python(&format!(
        "import boto3; boto3.client('s3', endpoint_url='{endpoint}', region_name='us-east-1', \
         aws_access_key_id='test', aws_secret_access_key='test').create_bucket(Bucket='{bucket}')"
    ));
}

pub fn azure_container(endpoint: &str, container: &str) {
    python(&format!(
        "from azure.storage.blob import BlobServiceClient; \
         BlobServiceClient.from_connection_string('DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};\
         AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};').create_container('{container}')"
    ));
}

/// Writes `size` bytes of incompressible data and returns their SHA-256 (hex).
pub fn big_file(path: &Path, size: usize) -> String {
    use rand::RngCore;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut hasher = Sha256::new();
    let mut rng = rand::rng();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len());
        rng.fill_bytes(&mut buf[..n]);
        hasher.update(&buf[..n]);
        f.write_all(&buf[..n]).unwrap();
        left -= n;
    }
    f.flush().unwrap();
    hex::encode(hasher.finalize())
}

pub fn sha256_of(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut hasher = Sha256::new();
    std::io::copy(&mut f, &mut hasher).unwrap();
    hex::encode(hasher.finalize())
}

/// A TCP relay in front of a server that lets through `budget` bytes in the direction chosen,
/// then cuts that connection and refuses every later one: a transfer broken halfway with the
/// server unreachable afterwards.
pub struct Cutter {
    pub port: u16,
    /// Bytes relayed so far in the counted direction.
    pub relayed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

#[derive(Clone, Copy)]
pub enum Direction {
    /// Counts what the client sends (an upload).
    Up,
    /// Counts what the server sends (a download).
    Down,
}

impl Cutter {
    pub fn new(target: u16, budget: u64, direction: Direction) -> Self {
        Self::start(target, budget, direction, false)
    }

    /// Like [`Cutter::new`], but only the first cut happens: every later connection is relayed
    /// whole, as a network that drops once and comes back.
    pub fn once(target: u16, budget: u64, direction: Direction) -> Self {
        Self::start(target, budget, direction, true)
    }

    fn start(target: u16, budget: u64, direction: Direction, once: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let relayed = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (relayed.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { break };
                let after_cut = s.load(Ordering::SeqCst);
                if after_cut && !once {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], target)))
                else {
                    continue;
                };
                // After the one cut a connection is relayed whole, with a flag of its own.
                let (budget, r, s) = if after_cut {
                    (
                        u64::MAX,
                        Arc::new(AtomicU64::new(0)),
                        Arc::new(AtomicBool::new(false)),
                    )
                } else {
                    (budget, r.clone(), s.clone())
                };
                std::thread::spawn(move || relay(client, server, budget, direction, r, s));
            }
        });
        Self {
            port,
            relayed,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn cut(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

fn relay(
    client: TcpStream,
    server: TcpStream,
    budget: u64,
    direction: Direction,
    relayed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    use std::io::Read;
    let pump = move |mut from: TcpStream, mut to: TcpStream, counted: bool| {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if counted {
                let before = relayed.fetch_add(n as u64, Ordering::SeqCst);
                if before + n as u64 > budget {
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
            } else if stop.load(Ordering::SeqCst) {
                break;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = from.shutdown(std::net::Shutdown::Both);
        let _ = to.shutdown(std::net::Shutdown::Both);
    };
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = matches!(direction, Direction::Up);
    let p1 = pump.clone();
    let t = std::thread::spawn(move || p1(client, server, up));
    pump(s2, c2, !up);
    let _ = t.join();
}

/// The client_email of the service accounts [`gcs_service_account`] makes.
pub const GCS_CLIENT_EMAIL: &str = "maljan-test@maljan-test.iam.gserviceaccount.com";

/// Writes a service-account JSON key, with a fresh 2048-bit RSA key made by the `openssl` CLI,
/// to `dir/service-account.json` and returns its path.
pub fn gcs_service_account(dir: &Path) -> std::path::PathBuf {
    let out = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("run openssl (it makes the test's service-account key)");
    assert!(
        out.status.success(),
        "openssl genpkey failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = serde_json::json!({
        "type": "service_account",
        "project_id": "maljan-test",
        "private_key_id": "fixturekey1",
        "private_key": String::from_utf8(out.stdout).unwrap(),
        "client_email": GCS_CLIENT_EMAIL,
        "client_id": "100000000000000000001",
        "token_uri": "https://oauth2.googleapis.com/token",
    });
    let path = dir.join("service-account.json");
    std::fs::write(&path, key.to_string()).unwrap();
    path
}

/// Makes a bucket with google-cloud-storage's own call (the JSON API's buckets.insert).
pub fn gcs_bucket(endpoint: &str, key_file: &Path, bucket: &str) {
    python(&format!(
        "from google.cloud import storage; from google.oauth2 import service_account; \
         c = service_account.Credentials.from_service_account_file('{}', \
         scopes=['https://www.googleapis.com/auth/devstorage.full_control']).with_always_use_jwt_access(True); \
         storage.Client(project='maljan-test', credentials=c, \
         client_options={{'api_endpoint': '{endpoint}'}}).create_bucket('{bucket}')",
        key_file.display()
    ));
}
