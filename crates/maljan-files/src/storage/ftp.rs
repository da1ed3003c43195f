//! FTP and explicit FTPS (AUTH TLS, data channels protected with PROT P) over suppaftp, TLS by
//! the workspace's rustls (the system's roots and the profile's `ca_file`).
//!
//! An FTP control connection is a sequence of commands with at most one transfer at a time,
//! so each operation logs in on its own connection and quits when done: calls never wait on one
//! another and a broken connection never outlives its call. The control connection goes to an
//! address the SSRF guard checked; passive data connections go to that same address whatever
//! the server's PASV answer says (a server cannot point them elsewhere), in binary mode.

use std::{io, sync::Arc};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use maljan_server::ToolError;
use rustls::pki_types::{CertificateDer, pem::PemObject};
use suppaftp::{
    FtpError, Status,
    list::ListParser,
    tokio::{AsyncRustlsConnector, AsyncRustlsFtpStream},
    types::FileType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    remote::connect_checked,
    remote_fs::{ByteStream, Entry, RemoteFs},
    remote_profiles::FtpProfile,
};

const READ_CHUNK: usize = 256 << 10;

type Conn = AsyncRustlsFtpStream;

/// One profile's FTP server.
pub(crate) struct Ftp {
    profile: FtpProfile,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Ftp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ftp({}:{})", self.profile.host, self.profile.port)
    }
}

/// rustls with the system's roots and the profile's extra certificates.
pub(crate) fn tls_config(
    ca_file: Option<&std::path::Path>,
) -> Result<rustls::ClientConfig, ToolError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect())
            .map_err(|e| {
                ToolError::not_configured(format!(
                    "the profile's ca_file {} cannot be read as PEM certificates: {e}",
                    path.display()
                ))
            })?;
        if certs.is_empty() {
            return Err(ToolError::not_configured(format!(
                "the profile's ca_file {} holds no certificate",
                path.display()
            )));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| {
                ToolError::not_configured(format!(
                    "a certificate of {} is refused: {e}",
                    path.display()
                ))
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ToolError::tool_failed(format!("TLS cannot be set up: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn ftp_io(e: FtpError) -> io::Error {
    match &e {
        FtpError::UnexpectedResponse(r) if r.status == Status::FileUnavailable => {
            io::Error::new(io::ErrorKind::NotFound, e.to_string())
        }
        FtpError::ConnectionError(inner) => io::Error::new(inner.kind(), inner.to_string()),
        _ => io::Error::other(e.to_string()),
    }
}

fn entry_of(f: &suppaftp::list::File, name: Option<&str>) -> Entry {
    Entry {
        name: name.unwrap_or(f.name()).to_string(),
        is_dir: f.is_directory(),
        size: f.size() as u64,
        modified: Some(chrono::DateTime::<chrono::Utc>::from(f.modified())),
    }
}

impl Ftp {
    pub(crate) fn new(profile: FtpProfile) -> Result<Self, ToolError> {
        let tls = if profile.tls {
            Some(Arc::new(tls_config(profile.ca_file.as_deref())?))
        } else {
            None
        };
        Ok(Self { profile, tls })
    }

    /// Logs in once (and quits), so a refused endpoint, certificate or login is a clear error.
    pub(crate) async fn check(&self) -> Result<(), ToolError> {
        let mut c = self.login().await?;
        let _ = c.quit().await;
        Ok(())
    }

    async fn login(&self) -> Result<Conn, ToolError> {
        let p = &self.profile;
        let at = format!("{}:{}", p.host, p.port);
        let tcp = connect_checked(&p.host, p.port, &p.network).await?;
        let peer = tcp
            .peer_addr()
            .map_err(|e| ToolError::tool_failed(format!("{at}: {e}")))?;
        let timeout = std::time::Duration::from_secs(p.network.timeout_s);
        let failed = |what: &str, e: FtpError| {
            ToolError::tool_failed(format!("FTP {what} with {at} failed: {e}"))
        };
        let mut c = tokio::time::timeout(timeout, Conn::connect_with_stream(tcp))
            .await
            .map_err(|_| {
                ToolError::tool_failed(format!(
                    "{at} sent no FTP greeting in {}s",
                    p.network.timeout_s
                ))
            })?
            .map_err(|e| failed("greeting", e))?;
        // Data connections go to the control connection's (checked) address, never to the one
        // a PASV answer names.
        c.set_passive_nat_workaround(true);
        let c = c.passive_stream_builder(move |addr| {
            Box::pin(async move {
                if addr.ip() != peer.ip() {
                    return Err(FtpError::ConnectionError(io::Error::other(
                        "a data connection to another address than the server's was refused",
                    )));
                }
                tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(FtpError::ConnectionError)
            })
        });
        let mut c = match &self.tls {
            Some(config) => {
                let connector = AsyncRustlsConnector::from(
                    suppaftp::tokio_rustls::TlsConnector::from(config.clone()),
                );
                c.into_secure(connector, &p.host).await.map_err(|e| {
                    failed("TLS negotiation", e).with_remediation(
                        "check that the server offers AUTH TLS and that its certificate is \
                         trusted (the system's roots, or the profile's ca_file)",
                    )
                })?
            }
            None => c,
        };
        let password = p.password.as_ref().map(|s| s.expose()).unwrap_or("");
        tokio::time::timeout(timeout, c.login(p.username.as_str(), password))
            .await
            .map_err(|_| {
                ToolError::tool_failed(format!(
                    "the FTP login at {at} took more than {}s",
                    p.network.timeout_s
                ))
            })?
            .map_err(|e| {
                ToolError::not_configured(format!("{at} refused the login of {}: {e}", p.username))
                    .with_remediation("check the username and password of the [ftp] profile")
            })?;
        c.transfer_type(FileType::Binary)
            .await
            .map_err(|e| failed("TYPE I", e))?;
        Ok(c)
    }

    async fn conn(&self) -> io::Result<Conn> {
        self.login().await.map_err(|e| io::Error::other(e.message))
    }
}

/// Runs one operation on a fresh connection and quits.
macro_rules! with_conn {
    ($self:ident, |$c:ident| $body:expr) => {{
        let mut $c = $self.conn().await?;
        let out = $body;
        let _ = $c.quit().await;
        out
    }};
}

#[async_trait]
impl RemoteFs for Ftp {
    fn max_retries(&self) -> usize {
        self.profile.network.max_retries
    }

    fn scheme(&self) -> &'static str {
        "ftp"
    }

    async fn stat(&self, path: &str) -> io::Result<Option<Entry>> {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        with_conn!(self, |c| {
            match c.mlst(Some(path)).await {
                Ok(line) => match ListParser::parse_mlsd(&line) {
                    Ok(f) => Ok(Some(entry_of(&f, Some(&name)))),
                    Err(e) => Err(io::Error::other(format!(
                        "an MLST answer cannot be read: {e}"
                    ))),
                },
                Err(FtpError::UnexpectedResponse(r)) if r.status == Status::FileUnavailable => {
                    Ok(None)
                }
                Err(e) => Err(ftp_io(e)),
            }
        })
    }

    async fn list_dir(&self, path: &str) -> io::Result<Vec<Entry>> {
        with_conn!(self, |c| {
            let lines = c.mlsd(Some(path)).await.map_err(ftp_io)?;
            let mut out = Vec::new();
            for line in lines {
                let f = ListParser::parse_mlsd(&line)
                    .map_err(|e| io::Error::other(format!("an MLSD line cannot be read: {e}")))?;
                if matches!(f.name(), "." | "..") {
                    continue;
                }
                // MLSD's cdir/pdir entries are neither files nor directories.
                if !f.is_file() && !f.is_directory() {
                    continue;
                }
                out.push(entry_of(&f, None));
            }
            Ok(out)
        })
    }

    async fn read(&self, path: &str, offset: u64) -> io::Result<ByteStream> {
        let mut c = self.conn().await?;
        if offset > 0 {
            c.resume_transfer(offset as usize).await.map_err(ftp_io)?;
        }
        let transfer = c.retr_as_stream(path).await.map_err(ftp_io)?;
        Ok(
            futures::stream::try_unfold(Some((transfer, c)), |state| async move {
                let Some((mut t, mut c)) = state else {
                    return Ok(None);
                };
                let mut buf = vec![0u8; READ_CHUNK];
                let n = t.read(&mut buf).await?;
                if n == 0 {
                    t.finish().await.map_err(ftp_io)?;
                    let _ = c.quit().await;
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), Some((t, c)))))
            })
            .boxed(),
        )
    }

    async fn write(&self, path: &str, mut data: ByteStream) -> io::Result<()> {
        with_conn!(self, |c| {
            let mut t = c.put_with_stream(path).await.map_err(ftp_io)?;
            let mut sent = Ok(());
            while let Some(chunk) = data.next().await {
                let chunk = match chunk {
                    Ok(b) => b,
                    Err(e) => {
                        sent = Err(e);
                        break;
                    }
                };
                if let Err(e) = t.write_all(&chunk).await {
                    sent = Err(e);
                    break;
                }
            }
            match sent {
                Ok(()) => t.finish().await.map_err(ftp_io),
                Err(e) => {
                    let _ = c.abort(t).await;
                    Err(e)
                }
            }
        })
    }

    async fn mkdir(&self, path: &str) -> io::Result<()> {
        with_conn!(self, |c| c.mkdir(path).await.map_err(ftp_io))
    }

    async fn remove_file(&self, path: &str) -> io::Result<()> {
        with_conn!(self, |c| c.rm(path).await.map_err(ftp_io))
    }

    async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        with_conn!(self, |c| {
            if c.rename(from, to).await.is_ok() {
                Ok(())
            } else {
                // Some servers do not rename over an existing file.
                match c.rm(to).await {
                    Ok(()) | Err(FtpError::UnexpectedResponse(_)) => {}
                    Err(e) => return Err(ftp_io(e)),
                }
                c.rename(from, to).await.map_err(ftp_io)
            }
        })
    }
}
