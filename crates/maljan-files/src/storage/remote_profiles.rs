//! The operator's `[sftp.NAME]`, `[ftp.NAME]` and `[webdav.NAME]` tables, read with the same
//! rules as the object stores' (secrets inline, `_file` or `_env`; unknown keys refused).
//!
//! ```toml
//! [sftp.default]
//! host = "files.example.org"
//! port = 22
//! username = "analyst"
//! private_key_file = "id_ed25519"        # or password (inline, _file or _env)
//! known_hosts = "known_hosts"            # default ~/.ssh/known_hosts; unknown keys are refused
//! [ftp.default]
//! host = "ftp.example.org"
//! username = "analyst"
//! password_env = "FTP_PASSWORD"
//! tls = true                             # explicit FTPS (AUTH TLS), data channel protected
//! ca_file = "ftp-ca.pem"                 # optional: a CA (or self-signed cert) to trust
//! [webdav.default]
//! url = "https://dav.example.org/remote.php/dav/files/analyst/"
//! username = "analyst"
//! password_file = "dav.secret"
//! ```

use std::path::{Path, PathBuf};

use super::profiles::{Fields, Network, Secret, StorageConfig};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftpProfile {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Option<Secret>,
    /// An OpenSSH private key's text (ed25519 or ECDSA).
    pub private_key: Option<Secret>,
    pub private_key_passphrase: Option<Secret>,
    /// The known_hosts file the server's host key must be in.
    pub known_hosts: PathBuf,
    pub network: Network,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtpProfile {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Option<Secret>,
    /// Explicit FTPS: AUTH TLS on the control connection, PROT P on the data connections.
    pub tls: bool,
    /// PEM certificates trusted for FTPS (besides the system's).
    pub ca_file: Option<PathBuf>,
    pub network: Network,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebdavProfile {
    /// The collection every path is under (`http(s)://host[:port]/path/`).
    pub url: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// PEM certificates trusted for https (besides the system's).
    pub ca_file: Option<PathBuf>,
    pub network: Network,
}

/// `~/.ssh/known_hosts`, as OpenSSH and automation-file default to.
pub(crate) fn default_known_hosts() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(".ssh/known_hosts")
}

fn port(f: &mut Fields<'_>, default: u16) -> Result<u16, String> {
    match f.int("port")? {
        None => Ok(default),
        Some(p) if (1..=65535).contains(&p) => Ok(p as u16),
        Some(_) => Err(format!("{} must be between 1 and 65535", f.name("port"))),
    }
}

fn host(f: &mut Fields<'_>) -> Result<String, String> {
    let host = f
        .string("host")?
        .ok_or_else(|| format!("{} is required", f.name("host")))?;
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(format!("{} must be a host name or address", f.name("host")));
    }
    Ok(host)
}

fn path_in(base: &Path, p: Option<String>) -> Option<PathBuf> {
    p.map(|p| base.join(p))
}

/// Reads the three tables into `config`.
pub(super) fn parse(top: &mut Fields<'_>, config: &mut StorageConfig) -> Result<(), String> {
    let base = top.base().to_path_buf();
    for (name, mut f) in top.profiles("sftp")? {
        let profile = SftpProfile {
            host: host(&mut f)?,
            port: port(&mut f, 22)?,
            username: f
                .string("username")?
                .ok_or_else(|| format!("{} is required", f.name("username")))?,
            password: f.secret("password")?,
            private_key: f.secret("private_key")?,
            private_key_passphrase: f.secret("private_key_passphrase")?,
            known_hosts: path_in(&base, f.string("known_hosts")?)
                .unwrap_or_else(default_known_hosts),
            network: f.network()?,
        };
        f.finish()?;
        if profile.password.is_none() && profile.private_key.is_none() {
            return Err(format!(
                "[sftp.{name}] needs a password or a private_key (inline, _file or _env)"
            ));
        }
        config.sftp.insert(name, profile);
    }
    for (name, mut f) in top.profiles("ftp")? {
        let profile = FtpProfile {
            host: host(&mut f)?,
            port: port(&mut f, 21)?,
            username: f.string("username")?.unwrap_or_else(|| "anonymous".into()),
            password: f.secret("password")?,
            tls: f.bool("tls")?.unwrap_or(false),
            ca_file: path_in(&base, f.string("ca_file")?),
            network: f.network()?,
        };
        f.finish()?;
        config.ftp.insert(name, profile);
    }
    for (name, mut f) in top.profiles("webdav")? {
        let url = f
            .url("url")?
            .ok_or_else(|| format!("[webdav.{name}] url is required"))?;
        let profile = WebdavProfile {
            url,
            username: f.string("username")?,
            password: f.secret("password")?,
            ca_file: path_in(&base, f.string("ca_file")?),
            network: f.network()?,
        };
        f.finish()?;
        config.webdav.insert(name, profile);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StorageConfig, String> {
        let env = |name: &str| (name == "FTP_PW").then(|| "from-env".to_string());
        StorageConfig::parse(text, Path::new("/etc/maljan"), &env)
    }

    #[test]
    fn tables_and_defaults() {
        let c = parse(
            r#"
            [sftp.default]
            host = "127.0.0.1"
            port = 2222
            username = "u"
            password = "TOPSECRET"
            known_hosts = "kh"
            allow_private_endpoint = true
            [ftp.default]
            host = "ftp.example.org"
            password_env = "FTP_PW"
            tls = true
            ca_file = "ca.pem"
            [webdav.default]
            url = "http://127.0.0.1:8080/dav/"
            username = "u"
            password = "p"
        "#,
        )
        .unwrap();
        let s = &c.sftp["default"];
        assert_eq!(
            (s.port, s.known_hosts.as_path()),
            (2222, Path::new("/etc/maljan/kh"))
        );
        assert!(s.network.allow_private_endpoint);
        assert!(!format!("{c:?}").contains("TOPSECRET"));
        let f = &c.ftp["default"];
        assert_eq!(
            (f.port, f.username.as_str(), f.tls),
            (21, "anonymous", true)
        );
        assert_eq!(f.password, Some(Secret::new("from-env")));
        assert_eq!(f.ca_file.as_deref(), Some(Path::new("/etc/maljan/ca.pem")));
        assert!(!c.webdav["default"].network.allow_private_endpoint);
    }

    #[test]
    fn mistakes_are_named() {
        for (text, want) in [
            (
                "[sftp.a]\nusername = \"u\"\npassword = \"p\"\n",
                "host is required",
            ),
            (
                "[sftp.a]\nhost = \"h\"\npassword = \"p\"\n",
                "username is required",
            ),
            (
                "[sftp.a]\nhost = \"h\"\nusername = \"u\"\n",
                "needs a password or a private_key",
            ),
            (
                "[sftp.a]\nhost = \"u@h\"\nusername = \"u\"\npassword = \"p\"\n",
                "host name",
            ),
            (
                "[ftp.a]\nhost = \"h\"\nport = 70000\n",
                "between 1 and 65535",
            ),
            (
                "[ftp.a]\nhost = \"h\"\nactive = true\n",
                "unknown key [ftp.a] active",
            ),
            ("[webdav.a]\nurl = \"ftp://h/\"\n", "http or https"),
            ("[webdav.a]\nusername = \"u\"\n", "url is required"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
