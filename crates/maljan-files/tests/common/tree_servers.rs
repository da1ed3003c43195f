//! The file-tree servers started on 127.0.0.1 for a test, each in its own temp dir and killed
//! when dropped: OpenSSH's sshd (SFTP, key login, its own host key), pyftpdlib (FTP, or FTPS
//! with a self-signed certificate) and wsgidav (WebDAV with basic auth).
#![allow(dead_code)]

use std::{path::Path, process::Command};

use super::peers::{Server, peer};

pub const USER_PASSWORD: &str = "secret-pw";

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(path: &Path) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", ""])
        .arg("-f")
        .arg(path));
}

/// An sshd with its SFTP subsystem; `dir/data` is where the tests put files.
pub struct Sshd {
    pub server: Server,
    /// The client's private key (OpenSSH format).
    pub user_key: String,
    /// `ssh-ed25519 AAAA…` of the server's host key.
    pub host_key: String,
    /// The login user (whoever runs the test).
    pub user: String,
}

impl Sshd {
    pub fn data(&self) -> String {
        self.server
            .dir
            .path()
            .join("data")
            .to_string_lossy()
            .into_owned()
    }

    /// A known_hosts line for the server at `port` (a relay's, or its own).
    pub fn known_hosts_line(&self, port: u16) -> String {
        format!("[127.0.0.1]:{port} {}\n", self.host_key)
    }
}

pub fn sshd() -> Sshd {
    let bin = peer("MALJAN_SSHD");
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
                .unwrap()
                .trim()
                .to_string()
        });
    // sshd wants its privilege-separation directory even when it never drops privileges.
    let _ = std::fs::create_dir_all("/run/sshd");
    let mut keys = None;
    let server = Server::start("sshd", |port, dir| {
        keygen(&dir.join("host_key"));
        keygen(&dir.join("user_key"));
        std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let d = dir.display();
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n\
                 Subsystem sftp internal-sftp\n"
            ),
        )
        .unwrap();
        let host = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
        let host: Vec<&str> = host.split_whitespace().take(2).collect();
        keys = Some((
            std::fs::read_to_string(dir.join("user_key")).unwrap(),
            host.join(" "),
        ));
        let mut c = Command::new(bin);
        c.arg("-D").arg("-e").arg("-f").arg(dir.join("sshd_config"));
        c
    });
    let (user_key, host_key) = keys.unwrap();
    Sshd {
        server,
        user_key,
        host_key,
        user,
    }
}

/// A self-signed certificate for 127.0.0.1 (and its key) in one PEM file; returns its path.
pub fn self_signed(dir: &Path) -> std::path::PathBuf {
    let pem = dir.join("cert.pem");
    // An end-entity certificate (CA:FALSE), as a TLS server's must be, that is its own anchor.
    let config = dir.join("openssl.cnf");
    std::fs::write(
        &config,
        "[req]\ndistinguished_name = dn\nx509_extensions = leaf\nprompt = no\n[dn]\nCN = 127.0.0.1\n\
         [leaf]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1\n",
    )
    .unwrap();
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-config"])
        .arg(&config)
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("only-cert.pem")));
    let both = format!(
        "{}{}",
        std::fs::read_to_string(dir.join("only-cert.pem")).unwrap(),
        std::fs::read_to_string(dir.join("key.pem")).unwrap()
    );
    std::fs::write(&pem, both).unwrap();
    pem
}

const PYFTPDLIB: &str = r#"
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, TLS_FTPHandler
from pyftpdlib.servers import FTPServer
port, root, cert = int(sys.argv[1]), sys.argv[2], sys.argv[3]
auth = DummyAuthorizer()
auth.add_user("maljan", sys.argv[4], root, perm="elradfmwMT")
handler = FTPHandler
if cert != "-":
    handler = TLS_FTPHandler
    handler.certfile = cert
    handler.tls_control_required = True
    handler.tls_data_required = True
handler.authorizer = auth
FTPServer(("127.0.0.1", port), handler).serve_forever()
"#;

/// pyftpdlib serving `dir/root` to user `maljan`; with `tls`, FTPS only (AUTH TLS and
/// protected data connections required), its certificate in `dir/only-cert.pem`.
pub fn pyftpdlib(tls: bool) -> Server {
    let py = peer("MALJAN_PY");
    Server::start("pyftpdlib", |port, dir| {
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let cert = if tls {
            self_signed(dir).to_string_lossy().into_owned()
        } else {
            "-".into()
        };
        let mut c = Command::new(py);
        c.args(["-c", PYFTPDLIB, &port.to_string()])
            .arg(dir.join("root"))
            .args([cert.as_str(), USER_PASSWORD]);
        c
    })
}

/// wsgidav serving `dir/root` at `/dav` to user `maljan` (basic auth).
pub fn wsgidav() -> Server {
    let bin = peer("MALJAN_WSGIDAV");
    Server::start("wsgidav", |port, dir| {
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let config = dir.join("wsgidav.yaml");
        std::fs::write(
            &config,
            format!(
                "host: 127.0.0.1\nport: {port}\nprovider_mapping:\n  \"/dav\": \"{}\"\n\
                 http_authenticator:\n  accept_basic: true\n  accept_digest: false\n  default_to_digest: false\n\
                 simple_dc:\n  user_mapping:\n    \"*\":\n      \"maljan\":\n        password: \"{USER_PASSWORD}\"\n\
                 verbose: 0\n",
                dir.join("root").display()
            ),
        )
        .unwrap();
        let mut c = Command::new(bin);
        c.arg("--config").arg(config);
        c
    })
}
