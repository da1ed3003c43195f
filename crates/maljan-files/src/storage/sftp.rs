//! SFTP over russh (SSH) and russh-sftp (the SFTP protocol on its channel).
//!
//! The server's host key must be in the profile's known_hosts file (OpenSSH's format, hashed
//! names too): an unknown key is refused, never added, and a key that differs from the recorded
//! one is refused as a possible interception. The host is resolved once per connection and every
//! address checked by the SSRF guard before the TCP connection is made to a checked address.
//! One SSH connection per profile is kept and shared by the calls (SFTP multiplexes requests);
//! a closed one is reopened on the next call.

use std::{io, sync::Arc, time::Duration};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use maljan_server::ToolError;
use russh::{
    client,
    keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate, check_known_hosts_path},
};
use russh_sftp::{client::SftpSession, protocol::StatusCode};
use tokio::{
    io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt},
    sync::Mutex,
};

use super::{
    remote::connect_checked,
    remote_fs::{ByteStream, Entry, RemoteFs},
    remote_profiles::SftpProfile,
};

/// What to do about a private key maljan cannot use.
const RSA_REMEDY: &str = "give an Ed25519 or ECDSA key in OpenSSH format (`ssh-keygen -t ed25519`, \
     its public half in the server's authorized_keys) and its private_key_passphrase if it has one";

/// Bytes asked for per read from the file (russh-sftp pipelines the requests).
const READ_CHUNK: usize = 256 << 10;

/// What the host-key check found, for the refusal's message.
#[derive(Default)]
struct HostKeyVerdict(std::sync::Mutex<Option<String>>);

struct Checker {
    host: String,
    port: u16,
    known_hosts: std::path::PathBuf,
    verdict: Arc<HostKeyVerdict>,
}

impl client::Handler for Checker {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            *self.verdict.0.lock().unwrap() = Some(
                "the server offered a host certificate; only known_hosts keys are accepted".into(),
            );
            return Ok(false);
        };
        let fingerprint = key.fingerprint(Default::default());
        let refused = match check_known_hosts_path(&self.host, self.port, key, &self.known_hosts) {
            Ok(true) => return Ok(true),
            Ok(false) => format!(
                "the host key of {}:{} ({fingerprint}) is not in {}; it is never accepted \
                 unseen: check it out of band and add it to that known_hosts file",
                self.host,
                self.port,
                self.known_hosts.display()
            ),
            Err(russh::keys::Error::KeyChanged { line }) => format!(
                "the host key of {}:{} ({fingerprint}) differs from the one recorded at line \
                 {line} of {}: the connection may be intercepted; it was refused",
                self.host,
                self.port,
                self.known_hosts.display()
            ),
            Err(e) => format!("{} cannot be read: {e}", self.known_hosts.display()),
        };
        *self.verdict.0.lock().unwrap() = Some(refused);
        Ok(false)
    }
}

struct Conn {
    handle: client::Handle<Checker>,
    sftp: SftpSession,
}

/// One profile's SFTP server.
pub(crate) struct Sftp {
    profile: SftpProfile,
    conn: Mutex<Option<Arc<Conn>>>,
}

impl std::fmt::Debug for Sftp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sftp({}:{})", self.profile.host, self.profile.port)
    }
}

fn sftp_io(e: russh_sftp::client::error::Error) -> io::Error {
    use russh_sftp::client::error::Error as E;
    match &e {
        E::Status(s) if s.status_code == StatusCode::NoSuchFile => {
            io::Error::new(io::ErrorKind::NotFound, e.to_string())
        }
        E::Status(s) if s.status_code == StatusCode::PermissionDenied => {
            io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
        }
        _ => io::Error::other(e.to_string()),
    }
}

fn entry(name: String, m: &russh_sftp::client::fs::Metadata) -> Entry {
    Entry {
        name,
        is_dir: m.is_dir(),
        size: m.size.unwrap_or(0),
        modified: m
            .mtime
            .and_then(|t| chrono::DateTime::from_timestamp(t as i64, 0)),
    }
}

impl Sftp {
    pub(crate) fn new(profile: SftpProfile) -> Self {
        Self {
            profile,
            conn: Mutex::new(None),
        }
    }

    /// The open connection, opened (and authenticated) if needed.
    pub(crate) async fn connect(&self) -> Result<(), ToolError> {
        self.session().await.map(|_| ())
    }

    async fn session(&self) -> Result<Arc<Conn>, ToolError> {
        let mut held = self.conn.lock().await;
        if let Some(c) = held.as_ref()
            && !c.handle.is_closed()
        {
            return Ok(c.clone());
        }
        *held = None;
        let c = Arc::new(self.open().await?);
        *held = Some(c.clone());
        Ok(c)
    }

    async fn open(&self) -> Result<Conn, ToolError> {
        let p = &self.profile;
        let timeout = Duration::from_secs(p.network.timeout_s);
        let tcp = connect_checked(&p.host, p.port, &p.network).await?;
        let config = Arc::new(client::Config {
            inactivity_timeout: Some(Duration::from_secs(600)),
            keepalive_interval: Some(Duration::from_secs(30)),
            nodelay: true,
            ..Default::default()
        });
        let verdict = Arc::new(HostKeyVerdict::default());
        let checker = Checker {
            host: p.host.clone(),
            port: p.port,
            known_hosts: p.known_hosts.clone(),
            verdict: verdict.clone(),
        };
        let at = format!("{}:{}", p.host, p.port);
        let failed = |what: &str, e: russh::Error| {
            ToolError::tool_failed(format!("the SSH connection to {at} failed ({what}): {e}"))
        };
        let mut handle =
            match tokio::time::timeout(timeout, client::connect_stream(config, tcp, checker)).await
            {
                Err(_) => {
                    return Err(ToolError::tool_failed(format!(
                        "the SSH handshake with {at} took more than {}s",
                        p.network.timeout_s
                    )));
                }
                Ok(Ok(h)) => h,
                Ok(Err(e)) => {
                    if let Some(refused) = verdict.0.lock().unwrap().take() {
                        return Err(ToolError::not_configured(refused).with_remediation(
                        "the operator adds the key to the known_hosts file of the [sftp] profile \
                         (e.g. from `ssh-keyscan`, compared with the fingerprint the server's \
                         administrator gives)",
                    ));
                    }
                    return Err(failed("handshake", e));
                }
            };
        let auth = if let Some(key) = &p.private_key {
            let key = russh::keys::decode_secret_key(
                key.expose(),
                p.private_key_passphrase.as_ref().map(|s| s.expose()),
            )
            .map_err(|e| {
                ToolError::not_configured(format!(
                    "the [sftp] profile's private_key cannot be read: {e}"
                ))
                .with_remediation(RSA_REMEDY)
            })?;
            // RSA is left out on purpose: the rsa crate's private-key operations are not
            // constant-time (RUSTSEC-2023-0071, the Marvin attack), so the key is refused here,
            // saying why, rather than failing later as a login the server refused.
            if matches!(key.algorithm(), russh::keys::Algorithm::Rsa { .. }) {
                return Err(ToolError::not_configured(
                    "the [sftp] profile's private_key is an RSA key: Ed25519 and ECDSA keys are \
                     accepted, RSA keys are not (their signing is not constant-time in the Rust \
                     implementation, RUSTSEC-2023-0071)",
                )
                .with_remediation(RSA_REMEDY));
            }
            let key = PrivateKeyWithHashAlg::new(Arc::new(key), None);
            handle
                .authenticate_publickey(&p.username, key)
                .await
                .map_err(|e| failed("public-key authentication", e))?
        } else if let Some(pw) = &p.password {
            handle
                .authenticate_password(&p.username, pw.expose())
                .await
                .map_err(|e| failed("password authentication", e))?
        } else {
            return Err(ToolError::not_configured(
                "the [sftp] profile has neither a password nor a private_key",
            ));
        };
        if !auth.success() {
            return Err(ToolError::not_configured(format!(
                "{at} refused the credentials of {}",
                p.username
            ))
            .with_remediation("check the username and key or password of the [sftp] profile"));
        }
        let channel = handle
            .channel_open_session()
            .await
            .map_err(|e| failed("opening a channel", e))?;
        channel
            .request_subsystem(true, "sftp")
            .await
            .map_err(|e| failed("starting the sftp subsystem", e))?;
        let sftp = SftpSession::new(channel.into_stream()).await.map_err(|e| {
            ToolError::tool_failed(format!("the SFTP session with {at} failed: {e}"))
        })?;
        sftp.set_timeout(p.network.timeout_s);
        Ok(Conn { handle, sftp })
    }

    /// Ends the connection (FA_sftp_close).
    pub(crate) async fn close(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            let _ = c.sftp.close().await;
            let _ = c
                .handle
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
        }
    }

    async fn sftp(&self) -> io::Result<Arc<Conn>> {
        self.session()
            .await
            .map_err(|e| io::Error::other(e.message))
    }
}

#[async_trait]
impl RemoteFs for Sftp {
    fn max_retries(&self) -> usize {
        self.profile.network.max_retries
    }

    fn scheme(&self) -> &'static str {
        "sftp"
    }

    async fn stat(&self, path: &str) -> io::Result<Option<Entry>> {
        let c = self.sftp().await?;
        match c.sftp.metadata(path).await.map_err(sftp_io) {
            Ok(m) => Ok(Some(entry(
                path.rsplit('/').next().unwrap_or(path).into(),
                &m,
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list_dir(&self, path: &str) -> io::Result<Vec<Entry>> {
        let c = self.sftp().await?;
        let dir = c.sftp.read_dir(path).await.map_err(sftp_io)?;
        Ok(dir
            .filter(|e| e.file_name() != "." && e.file_name() != "..")
            .map(|e| entry(e.file_name(), &e.metadata()))
            .collect())
    }

    async fn read(&self, path: &str, offset: u64) -> io::Result<ByteStream> {
        let c = self.sftp().await?;
        let mut file = c.sftp.open(path).await.map_err(sftp_io)?;
        if offset > 0 {
            file.seek(io::SeekFrom::Start(offset)).await?;
        }
        // The connection is held by the stream so it outlives a `close` in between.
        Ok(
            futures::stream::try_unfold((file, c), |(mut f, c)| async move {
                let mut buf = vec![0u8; READ_CHUNK];
                let n = f.read(&mut buf).await?;
                if n == 0 {
                    let _ = f.shutdown().await;
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), (f, c))))
            })
            .boxed(),
        )
    }

    async fn write(&self, path: &str, mut data: ByteStream) -> io::Result<()> {
        let c = self.sftp().await?;
        let mut file = c.sftp.create(path).await.map_err(sftp_io)?;
        while let Some(chunk) = data.next().await {
            file.write_all(&chunk?).await?;
        }
        file.flush().await?;
        file.shutdown().await?;
        Ok(())
    }

    async fn mkdir(&self, path: &str) -> io::Result<()> {
        let c = self.sftp().await?;
        c.sftp.create_dir(path).await.map_err(sftp_io)
    }

    async fn remove_file(&self, path: &str) -> io::Result<()> {
        let c = self.sftp().await?;
        c.sftp.remove_file(path).await.map_err(sftp_io)
    }

    async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let c = self.sftp().await?;
        // SFTP v3's rename does not replace an existing file.
        if c.sftp.rename(from, to).await.is_ok() {
            return Ok(());
        }
        match c.sftp.remove_file(to).await.map_err(sftp_io) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        c.sftp.rename(from, to).await.map_err(sftp_io)
    }
}
