//! `FA_sftp_*` and `FA_ftp_*` with automation-file 0.0.55's names and argument names (7 each:
//! later_init, upload_file, upload_dir, download_file, delete_path, list_dir, close), each with
//! an optional `profile`. A remote path that starts with `/` is absolute on the server; any
//! other is under the directory the login lands in, as automation-file has it. Transfers are
//! the object stores' (streamed, `<target>.part` renamed into place, removed on failure or
//! cancellation, progress notifications); every local path is confined to the roots.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use object_store::{ObjectStore, path::Path as Key};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    default_profile,
    object::{self, store_err},
    profiles::{Network, Secret},
    remote::{Client, Remotes, Tree, TreeProfile},
    remote_profiles::{FtpProfile, SftpProfile, default_known_hosts},
};
use crate::Config;

const TRANSFER_TIMEOUT_S: u64 = 6 * 3600;
/// The largest private key file FA_sftp_later_init reads.
const MAX_KEY_FILE: u64 = 64 << 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadFile {
    /// The local file to upload.
    file_path: String,
    /// Where it is written on the server (missing directories are created; replaced when it exists).
    remote_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadFile {
    remote_path: String,
    /// The local file written (through `<target_path>.part`, renamed when complete).
    target_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemotePath {
    remote_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn dot() -> String {
    ".".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListDir {
    /// The directory listed (not recursively); `.` is the login directory.
    #[serde(default = "dot")]
    #[schemars(default = "dot")]
    remote_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadDir {
    /// The local directory whose files are uploaded (recursively).
    dir_path: String,
    /// The remote directory they go under, by their path relative to dir_path.
    remote_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Close {
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SftpLaterInit {
    host: String,
    username: String,
    /// Never echoed, logged or kept beyond this server's lifetime.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    password: Option<String>,
    /// A private key file (OpenSSH format, ed25519 or ECDSA) inside the roots.
    #[serde(default)]
    key_filename: Option<String>,
    #[serde(default = "port_22")]
    #[schemars(default = "port_22")]
    port: u16,
    /// Not taken from a call: the host key is checked against the operator's known_hosts (the
    /// profile's, else ~/.ssh/known_hosts). Giving another one is refused.
    #[serde(default)]
    known_hosts: Option<String>,
    /// Seconds to connect and to wait for each answer.
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn port_22() -> u16 {
    22
}
fn port_21() -> u16 {
    21
}
fn anonymous() -> String {
    "anonymous".into()
}
fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FtpLaterInit {
    host: String,
    #[serde(default = "anonymous")]
    #[schemars(default = "anonymous")]
    username: String,
    /// Never echoed, logged or kept beyond this server's lifetime.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    password: String,
    #[serde(default = "port_21")]
    #[schemars(default = "port_21")]
    port: u16,
    /// Explicit FTPS (AUTH TLS); the data connections are protected too.
    #[serde(default)]
    tls: bool,
    #[serde(default)]
    timeout: Option<f64>,
    /// Passive mode (the only one: active mode would have the server connect back).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    passive: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Serialize, JsonSchema)]
struct Transferred {
    remote_path: String,
    /// The local file.
    path: String,
    bytes: u64,
}

#[derive(Serialize, JsonSchema)]
struct Configured {
    backend: &'static str,
    profile: String,
    host: String,
    port: u16,
}

/// A remote path as (store root, key): `/` roots absolute paths, `` the login directory.
fn split(remote: &str) -> Result<(&'static str, Option<Key>), ToolError> {
    let root = if remote.starts_with('/') { "/" } else { "" };
    let mut rel = remote.trim_start_matches('/').trim_end_matches('/');
    while let Some(r) = rel.strip_prefix("./") {
        rel = r;
    }
    if rel.is_empty() || rel == "." {
        return Ok((root, None));
    }
    Ok((root, Some(object::key(rel)?)))
}

fn shown(root: &str, key: &str) -> String {
    format!("{root}{key}")
}

async fn store_for(
    c: &Config,
    tree: Tree,
    profile: &str,
    root: &str,
) -> Result<Arc<dyn ObjectStore>, ToolError> {
    let (p, client): (TreeProfile, Client) =
        c.storage.remote.client(&c.storage.config, tree, profile)?;
    client.ready().await?;
    Ok(client.store(tree, root, &p.host()))
}

fn file_key(remote: &str) -> Result<(&'static str, Key), ToolError> {
    match split(remote)? {
        (root, Some(k)) => Ok((root, k)),
        _ => Err(ToolError::bad_argument(format!(
            "{remote:?} names a directory, not a file"
        ))),
    }
}

fn register_tree(reg: &mut Registry, cfg: &Arc<Config>, tree: Tree, what: &'static str) {
    let prefix = format!("FA_{}", tree.table());
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_upload_file"),
            format!("Upload a local file to remote_path over {what}, streamed (replaces the file; written to <remote_path>.part and renamed when complete)."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadFile| {
            let c = c.clone();
            async move {
                let (root, k) = file_key(&a.remote_path)?;
                let store = store_for(&c, tree, &a.profile, root).await?;
                let moved = object::upload(&c, &ctx, store, &a.file_path, &k, None).await?;
                Ok::<_, ToolError>(Transferred {
                    remote_path: a.remote_path,
                    path: a.file_path,
                    bytes: moved.bytes,
                })
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_download_file"),
            format!("Download remote_path over {what} to a local file, streamed; a failed or cancelled download leaves no partial file."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DownloadFile| {
            let c = c.clone();
            async move {
                let (root, k) = file_key(&a.remote_path)?;
                let store = store_for(&c, tree, &a.profile, root).await?;
                let moved = object::download(&c, &ctx, store, &k, &a.target_path, None).await?;
                Ok::<_, ToolError>(Transferred {
                    remote_path: a.remote_path,
                    path: a.target_path,
                    bytes: moved.bytes,
                })
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_delete_path"),
            format!("Delete a remote file over {what}."),
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: RemotePath| {
            let c = c.clone();
            async move {
                let (root, k) = file_key(&a.remote_path)?;
                let store = store_for(&c, tree, &a.profile, root).await?;
                if !object::exists(&store, &k).await? {
                    return Err(ToolError::no_such_file(format!(
                        "{} is not a file on the server",
                        a.remote_path
                    )));
                }
                object::delete(store, &k).await?;
                Ok(true)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_list_dir"),
            format!("The names in a remote directory over {what} (not recursive), sorted."),
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ListDir| {
            let c = c.clone();
            async move {
                let (root, k) = split(&a.remote_path)?;
                let store = store_for(&c, tree, &a.profile, root).await?;
                let listing = store
                    .list_with_delimiter(k.as_ref())
                    .await
                    .map_err(|e| store_err(&a.remote_path, e))?;
                let mut names: Vec<String> = listing
                    .common_prefixes
                    .iter()
                    .chain(listing.objects.iter().map(|m| &m.location))
                    .filter_map(|p| p.filename().map(String::from))
                    .collect();
                if names.len() > object::MAX_LISTED {
                    return Err(ToolError::bad_argument(format!(
                        "more than {} entries",
                        object::MAX_LISTED
                    )));
                }
                names.sort();
                Ok(names)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_upload_dir"),
            format!("Upload every file under a local directory over {what} to remote_prefix/<relative path>; returns the remote paths."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadDir| {
            let c = c.clone();
            async move {
                let (root, k) = split(&a.remote_prefix)?;
                let store = store_for(&c, tree, &a.profile, root).await?;
                let prefix = k.map(|k| k.to_string()).unwrap_or_default();
                let keys = object::upload_dir(&c, &ctx, store, &a.dir_path, &prefix).await?;
                Ok::<_, ToolError>(keys.iter().map(|k| shown(root, k)).collect::<Vec<_>>())
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_close"),
            format!("Close the {what} connection of a profile (the next call opens a new one)."),
        )
        // It talks to the server it closes the connection to.
        .open_world()
        .timeout_s(60),
        move |_ctx: ToolContext, a: Close| {
            let c = c.clone();
            async move {
                c.storage.remote.close(tree, &a.profile).await;
                Ok::<_, ToolError>(true)
            }
        },
    );
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    register_tree(reg, cfg, Tree::Sftp, "SFTP");
    register_tree(reg, cfg, Tree::Ftp, "FTP/FTPS");
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_sftp_later_init",
            "Set the SFTP server and credentials of a storage profile for this server's lifetime and \
             connect. The host key must be in the operator's known_hosts (never accepted unseen); \
             the password is never echoed or logged; a private address is reachable only if the \
             operator's profile allows it.",
        )
        .not_idempotent()
        .open_world()
        .timeout_s(120),
        move |_ctx: ToolContext, a: SftpLaterInit| {
            let c = c.clone();
            async move { sftp_later_init(&c, a).await }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_ftp_later_init",
            "Set the FTP server and login of a storage profile for this server's lifetime and log in \
             (tls = true for explicit FTPS). The password is never echoed or logged; a private address \
             is reachable only if the operator's profile allows it.",
        )
        .not_idempotent()
        .open_world()
        .timeout_s(120),
        move |_ctx: ToolContext, a: FtpLaterInit| {
            let c = c.clone();
            async move { ftp_later_init(&c, a).await }
        },
    );
}

/// The operator's network settings for this profile name (the private-endpoint permission is
/// theirs), with the call's timeout.
fn network(
    c: &Config,
    tree: Tree,
    profile: &str,
    timeout: Option<f64>,
) -> Result<Network, ToolError> {
    let mut net = match Remotes::operator_profile(&c.storage.config, tree, profile) {
        Some(TreeProfile::Sftp(p)) => p.network,
        Some(TreeProfile::Ftp(p)) => p.network,
        Some(TreeProfile::Webdav(p)) => p.network,
        None => Network::default(),
    };
    if let Some(t) = timeout {
        if !(t > 0.0 && t <= 3600.0) {
            return Err(ToolError::bad_argument(
                "timeout must be between 0 and 3600 seconds",
            ));
        }
        net.timeout_s = t.ceil() as u64;
    }
    Ok(net)
}

fn host_arg(host: &str) -> Result<String, ToolError> {
    let host = host.trim();
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(ToolError::bad_argument(
            "host must be a host name or address",
        ));
    }
    Ok(host.to_string())
}

async fn sftp_later_init(c: &Config, a: SftpLaterInit) -> Result<Configured, ToolError> {
    let operator = match Remotes::operator_profile(&c.storage.config, Tree::Sftp, &a.profile) {
        Some(TreeProfile::Sftp(p)) => Some(p),
        _ => None,
    };
    let known_hosts = operator
        .as_ref()
        .map(|p| p.known_hosts.clone())
        .unwrap_or_else(default_known_hosts);
    if let Some(given) = &a.known_hosts
        && std::path::Path::new(given) != known_hosts
    {
        return Err(ToolError::bad_argument(
            "known_hosts is the operator's choice, not a call's: the host key is checked against the \
             [sftp] profile's known_hosts (or ~/.ssh/known_hosts)",
        )
        .with_remediation("leave known_hosts out"));
    }
    let private_key = match &a.key_filename {
        Some(path) => {
            let opened = c.existing_file(path)?;
            if opened.size()? > MAX_KEY_FILE {
                return Err(ToolError::bad_argument(format!(
                    "{path} is too large to be a private key"
                )));
            }
            let mut text = String::new();
            std::io::Read::read_to_string(&mut &opened.file, &mut text)
                .map_err(|e| ToolError::io(path, e))?;
            Some(Secret::new(text))
        }
        None => None,
    };
    if a.password.is_none() && private_key.is_none() {
        return Err(ToolError::bad_argument("give a password or a key_filename"));
    }
    let p = SftpProfile {
        host: host_arg(&a.host)?,
        port: a.port,
        username: a.username,
        password: a.password.map(Secret::new),
        private_key,
        private_key_passphrase: None,
        known_hosts,
        network: network(c, Tree::Sftp, &a.profile, a.timeout)?,
    };
    let (host, port) = (p.host.clone(), p.port);
    open_session(c, Tree::Sftp, a.profile, TreeProfile::Sftp(p), host, port).await
}

async fn ftp_later_init(c: &Config, a: FtpLaterInit) -> Result<Configured, ToolError> {
    if !a.passive {
        return Err(ToolError::bad_argument(
            "active FTP (the server connecting back to this host) is not supported; use passive = true",
        ));
    }
    let ca_file = match Remotes::operator_profile(&c.storage.config, Tree::Ftp, &a.profile) {
        Some(TreeProfile::Ftp(p)) => p.ca_file,
        _ => None,
    };
    let p = FtpProfile {
        host: host_arg(&a.host)?,
        port: a.port,
        username: a.username,
        password: Some(Secret::new(a.password)),
        tls: a.tls,
        ca_file,
        network: network(c, Tree::Ftp, &a.profile, a.timeout)?,
    };
    let (host, port) = (p.host.clone(), p.port);
    open_session(c, Tree::Ftp, a.profile, TreeProfile::Ftp(p), host, port).await
}

/// Keeps a `*_later_init` session for `profile` and connects once, so a bad login or host key
/// is reported by the init call itself.
async fn open_session(
    c: &Config,
    tree: Tree,
    profile: String,
    session: TreeProfile,
    host: String,
    port: u16,
) -> Result<Configured, ToolError> {
    c.storage.remote.set_session(tree, &profile, session).await;
    let (_, client) = c.storage.remote.client(&c.storage.config, tree, &profile)?;
    client.ready().await?;
    Ok(Configured {
        backend: tree.table(),
        profile,
        host,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_split_into_root_and_key() {
        let k = |s: &str| split(s).map(|(r, k)| (r, k.map(|k| k.to_string())));
        assert_eq!(k("/srv/a.bin").unwrap(), ("/", Some("srv/a.bin".into())));
        assert_eq!(k("a/b.txt").unwrap(), ("", Some("a/b.txt".into())));
        assert_eq!(k("./a").unwrap(), ("", Some("a".into())));
        assert_eq!(k(".").unwrap(), ("", None));
        assert_eq!(k("/").unwrap(), ("/", None));
        assert!(split("/srv/../etc/passwd").is_err());
        assert!(split("a//b").is_err());
        assert!(file_key("/").is_err());
    }
}
