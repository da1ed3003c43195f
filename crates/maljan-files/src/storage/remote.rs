//! The file-tree servers of one files server (SFTP, FTP/FTPS, WebDAV): their clients, one per
//! profile, kept between calls; the profiles `*_later_init` set for this server's lifetime;
//! and the SSRF-checked TCP connection the SFTP and FTP clients start from.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use maljan_server::ToolError;
use tokio::net::TcpStream;

use super::{
    ftp::Ftp,
    profiles::{Network, StorageConfig},
    remote_fs::{FsStore, RemoteFs},
    remote_profiles::{FtpProfile, SftpProfile, WebdavProfile},
    sftp::Sftp,
    webdav::Webdav,
};
use crate::download::allowed;

/// Which file-tree backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tree {
    Sftp,
    Ftp,
    Webdav,
}

impl Tree {
    pub(crate) fn table(self) -> &'static str {
        match self {
            Tree::Sftp => "sftp",
            Tree::Ftp => "ftp",
            Tree::Webdav => "webdav",
        }
    }
}

/// A profile of any of the three.
#[derive(Debug, Clone)]
pub(crate) enum TreeProfile {
    Sftp(SftpProfile),
    Ftp(FtpProfile),
    Webdav(WebdavProfile),
}

impl TreeProfile {
    /// The host a URI's authority must name.
    pub(crate) fn host(&self) -> String {
        match self {
            TreeProfile::Sftp(p) => p.host.clone(),
            TreeProfile::Ftp(p) => p.host.clone(),
            TreeProfile::Webdav(p) => url::Url::parse(&p.url)
                .ok()
                .and_then(|u| u.host_str().map(String::from))
                .unwrap_or_default(),
        }
    }
    pub(crate) fn port(&self) -> u16 {
        match self {
            TreeProfile::Sftp(p) => p.port,
            TreeProfile::Ftp(p) => p.port,
            TreeProfile::Webdav(p) => url::Url::parse(&p.url)
                .ok()
                .and_then(|u| u.port_or_known_default())
                .unwrap_or(443),
        }
    }
}

/// A client and what it is, for `close`.
#[derive(Clone)]
pub(crate) enum Client {
    Sftp(Arc<Sftp>),
    Ftp(Arc<Ftp>),
    Webdav(Arc<Webdav>),
}

impl Client {
    pub(crate) fn fs(&self) -> Arc<dyn RemoteFs> {
        match self {
            Client::Sftp(s) => s.clone(),
            Client::Ftp(f) => f.clone(),
            Client::Webdav(w) => w.clone(),
        }
    }

    /// Connects (and logs in) now, so a refused host key, endpoint or login is a clear error.
    pub(crate) async fn ready(&self) -> Result<(), ToolError> {
        match self {
            Client::Sftp(s) => s.connect().await,
            Client::Ftp(f) => f.check().await,
            Client::Webdav(w) => w.check().await,
        }
    }

    /// The store of paths under `root` (`/`, or `` for the login directory).
    pub(crate) fn store(&self, tree: Tree, root: &str, host: &str) -> Arc<FsStore> {
        Arc::new(FsStore::new(
            self.fs(),
            root,
            format!("{}://{host}", tree.table()),
        ))
    }
}

#[derive(Default)]
pub(crate) struct Remotes {
    session: Mutex<HashMap<(Tree, String), TreeProfile>>,
    clients: Mutex<HashMap<(Tree, String), (TreeProfile, Client)>>,
}

impl Remotes {
    fn file_profile(config: &StorageConfig, tree: Tree, name: &str) -> Option<TreeProfile> {
        match tree {
            Tree::Sftp => config.sftp.get(name).cloned().map(TreeProfile::Sftp),
            Tree::Ftp => config.ftp.get(name).cloned().map(TreeProfile::Ftp),
            Tree::Webdav => config.webdav.get(name).cloned().map(TreeProfile::Webdav),
        }
    }

    /// The operator's profile of this name, for what `later_init` leaves unset.
    pub(crate) fn operator_profile(
        config: &StorageConfig,
        tree: Tree,
        name: &str,
    ) -> Option<TreeProfile> {
        Self::file_profile(config, tree, name)
    }

    pub(crate) fn profile(
        &self,
        config: &StorageConfig,
        tree: Tree,
        name: &str,
    ) -> Result<TreeProfile, ToolError> {
        if let Some(p) = self.session.lock().unwrap().get(&(tree, name.to_string())) {
            return Ok(p.clone());
        }
        Self::file_profile(config, tree, name).ok_or_else(|| {
            ToolError::not_configured(format!(
                "no [{}.{name}] storage profile is configured",
                tree.table()
            ))
            .with_remediation(format!(
                "add a [{}.{name}] table to the storage config given with \
                 `maljan serve files --storage-config FILE` (or MALJAN_STORAGE_CONFIG), \
                 or call FA_{}_later_init",
                tree.table(),
                tree.table()
            ))
        })
    }

    /// The profile's client, built once.
    pub(crate) fn client(
        &self,
        config: &StorageConfig,
        tree: Tree,
        name: &str,
    ) -> Result<(TreeProfile, Client), ToolError> {
        let k = (tree, name.to_string());
        if let Some(c) = self.clients.lock().unwrap().get(&k) {
            return Ok(c.clone());
        }
        let profile = self.profile(config, tree, name)?;
        let client = match &profile {
            TreeProfile::Sftp(p) => Client::Sftp(Arc::new(Sftp::new(p.clone()))),
            TreeProfile::Ftp(p) => Client::Ftp(Arc::new(Ftp::new(p.clone())?)),
            TreeProfile::Webdav(p) => Client::Webdav(Arc::new(Webdav::new(p.clone())?)),
        };
        self.clients
            .lock()
            .unwrap()
            .insert(k, (profile.clone(), client.clone()));
        Ok((profile, client))
    }

    /// Replaces a profile for this server's lifetime; the old client is closed.
    pub(crate) async fn set_session(&self, tree: Tree, name: &str, profile: TreeProfile) {
        self.close(tree, name).await;
        self.session
            .lock()
            .unwrap()
            .insert((tree, name.to_string()), profile);
    }

    /// Closes and forgets the profile's client (the next call opens a new one).
    pub(crate) async fn close(&self, tree: Tree, name: &str) -> bool {
        let old = self
            .clients
            .lock()
            .unwrap()
            .remove(&(tree, name.to_string()));
        match old {
            Some((_, Client::Sftp(s))) => {
                s.close().await;
                true
            }
            Some(_) => true,
            None => false,
        }
    }
}

pub(crate) fn refusal(host: &str, addr: SocketAddr) -> ToolError {
    ToolError::bad_argument(format!(
        "{host} is {}, a loopback, private, link-local or reserved address; only a storage \
         profile with allow_private_endpoint = true may reach one",
        addr.ip()
    ))
    .with_remediation(
        "point the profile at a public host, or (the operator's choice) set \
         allow_private_endpoint = true in its table of the storage config",
    )
}

/// Resolves `host` and connects to one of its addresses, each checked by the SSRF guard first:
/// when any address is not public the whole name is refused (unless the operator's profile
/// allows private endpoints), and the connection goes to an address that was checked.
pub(crate) async fn connect_checked(
    host: &str,
    port: u16,
    net: &Network,
) -> Result<TcpStream, ToolError> {
    let timeout = Duration::from_secs(net.timeout_s);
    let addrs = checked_addrs(host, port, net).await?;
    let mut last = None;
    for a in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = Some(e.to_string()),
            Err(_) => last = Some(format!("no answer in {}s", net.timeout_s)),
        }
    }
    Err(ToolError::tool_failed(format!(
        "cannot connect to {host}:{port}: {}",
        last.unwrap_or_else(|| "no address".into())
    )))
}

/// The addresses of `host`, every one allowed by the guard.
pub(crate) async fn checked_addrs(
    host: &str,
    port: u16,
    net: &Network,
) -> Result<Vec<SocketAddr>, ToolError> {
    let timeout = Duration::from_secs(net.timeout_s);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout(timeout, tokio::net::lookup_host((bare, port))).await {
            Ok(Ok(a)) => a.collect(),
            Ok(Err(e)) => {
                return Err(ToolError::tool_failed(format!(
                    "cannot resolve {host}: {e}"
                )));
            }
            Err(_) => {
                return Err(ToolError::tool_failed(format!(
                    "resolving {host} took more than {}s",
                    net.timeout_s
                )));
            }
        };
    if !net.allow_private_endpoint
        && let Some(bad) = addrs.iter().find(|a| !allowed(a.ip(), false))
    {
        return Err(refusal(host, *bad));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn private_hosts_need_the_profile() {
        let closed = Network::default();
        for host in [
            "127.0.0.1",
            "localhost",
            "2130706433",
            "[::1]",
            "10.1.2.3",
            "169.254.169.254",
        ] {
            let e = checked_addrs(host, 22, &closed).await.unwrap_err();
            assert!(
                e.message.contains("allow_private_endpoint"),
                "{host}: {}",
                e.message
            );
        }
        let open = Network {
            allow_private_endpoint: true,
            ..Default::default()
        };
        assert!(
            !checked_addrs("127.0.0.1", 22, &open)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
