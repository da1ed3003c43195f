//! Storage URIs: where a `FA_storage_*` action or FA_copy_between reads or writes.
//!
//! `s3://bucket/key`, `azure://container/blob` (also `az://`), `gs://bucket/key` (also
//! `gcs://`) are objects under the call's storage profile; `memory://name/path` is an object
//! in this server's own in-memory store (gone when it stops); `file:///abs/path`,
//! `local:///abs/path` and a bare path are local files, confined to the roots like every other
//! path. `sftp://`, `ftp://` and `webdav://` are paths on a remote profile's server; the schemes
//! automation-file has and this layer does not (the SaaS drives, `smb://`, ...) are named in
//! the refusal as not served yet.

use std::sync::Arc;

use maljan_server::ToolError;
use object_store::ObjectStore;

use super::{object::Cloud, remote::Tree};
use crate::Config;

/// The schemes this server serves, as FA_storage_schemes answers.
pub(crate) const SCHEMES: &[&str] = &[
    "azure", "file", "ftp", "gs", "local", "memory", "s3", "sftp", "webdav",
];

/// Schemes automation-file has that this server does not serve yet.
const NOT_YET: &[&str] = &[
    "ftps", "webdavs", "dav", "smb", "dropbox", "onedrive", "box", "gdrive", "drive", "http",
    "https",
];

/// A place in storage.
#[derive(Clone)]
pub(crate) enum Location {
    /// An object (or, with a key that names no object, a "directory" prefix).
    Object {
        store: Arc<dyn ObjectStore>,
        /// The object's key; empty for the bucket's top.
        key: String,
        /// `scheme://authority` (for answers).
        base: String,
        /// The cloud it is in; None for memory://.
        cloud: Option<Cloud>,
        /// The bucket (container), for comparing locations.
        bucket: String,
    },
    /// A local path, still to be confined by the action.
    Local { path: String },
}

impl Location {
    pub(crate) fn shown(&self) -> String {
        match self {
            Location::Object { base, key, .. } => format!("{base}/{key}"),
            Location::Local { path } => format!("file://{path}"),
        }
    }

    /// Whether two object locations are in the same store (a server-side copy can do it).
    pub(crate) fn same_store(&self, other: &Location) -> bool {
        match (self, other) {
            (
                Location::Object {
                    cloud: c1,
                    bucket: b1,
                    store: s1,
                    ..
                },
                Location::Object {
                    cloud: c2,
                    bucket: b2,
                    store: s2,
                    ..
                },
            ) => c1 == c2 && b1 == b2 && Arc::ptr_eq(s1, s2),
            _ => false,
        }
    }
}

/// Parses a URI (or a bare path) under `profile`.
pub(crate) fn parse(c: &Config, uri: &str, profile: &str) -> Result<Location, ToolError> {
    let uri = uri.trim();
    if uri.is_empty() {
        return Err(ToolError::bad_argument("the storage URI is empty"));
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        // `local:/abs`, `local:rel` and bare paths are local.
        let path = uri.strip_prefix("local:").unwrap_or(uri);
        return Ok(Location::Local {
            path: path.to_string(),
        });
    };
    let scheme = scheme.to_ascii_lowercase();
    let cloud = match scheme.as_str() {
        "file" | "local" => {
            if !rest.starts_with('/') {
                return Err(ToolError::bad_argument(format!(
                    "{scheme}:// URIs name an absolute path ({scheme}:///dir/file); a host is not supported"
                )));
            }
            return Ok(Location::Local {
                path: percent_decoded(rest)?,
            });
        }
        "s3" => Some(Cloud::S3),
        "azure" | "az" => Some(Cloud::Azure),
        "gs" | "gcs" => Some(Cloud::Gcs),
        "memory" => None,
        "sftp" => return tree_location(c, Tree::Sftp, rest, profile),
        "ftp" => return tree_location(c, Tree::Ftp, rest, profile),
        "webdav" => return tree_location(c, Tree::Webdav, rest, profile),
        other if NOT_YET.contains(&other) => {
            return Err(ToolError::unsupported_format(format!(
                "{other}:// is not served by this files server yet"
            ))
            .with_remediation(format!(
                "use one of {}: copy through a local file with another tool if needed",
                SCHEMES.join(", ")
            )));
        }
        other => {
            return Err(ToolError::bad_argument(format!(
                "unknown storage URI scheme {other:?}; this server serves {}",
                SCHEMES.join(", ")
            )));
        }
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(ToolError::bad_argument(format!(
            "{uri:?} names no bucket ({scheme}://BUCKET/KEY)"
        )));
    }
    if bucket.contains('@') {
        return Err(ToolError::bad_argument(
            "a storage URI must not carry user information: credentials belong in the storage profile",
        ));
    }
    let key = percent_decoded(key.trim_end_matches('/'))?;
    if !key.is_empty() {
        super::object::key(&key)?;
    }
    let store = match cloud {
        Some(cloud) => c.storage.store(cloud, profile, bucket)?,
        None => c.storage.memory.clone(),
    };
    // In memory:// the name is part of the key: one store for every name.
    let (key, bucket) = match cloud {
        None if key.is_empty() => (bucket.to_string(), String::new()),
        None => (format!("{bucket}/{key}"), String::new()),
        Some(_) => (key, bucket.to_string()),
    };
    Ok(Location::Object {
        store,
        base: match cloud {
            None => "memory:/".to_string(),
            Some(_) => format!("{scheme}://{bucket}"),
        },
        key,
        cloud,
        bucket,
    })
}

/// `sftp://HOST[:PORT]/abs/path` (also `ftp://`, `webdav://`): a path on the profile's server,
/// whose host the authority must name (an empty one, `sftp:///path`, means the profile's).
fn tree_location(c: &Config, tree: Tree, rest: &str, profile: &str) -> Result<Location, ToolError> {
    let scheme = tree.table();
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.contains('@') {
        return Err(ToolError::bad_argument(
            "a storage URI must not carry user information: credentials belong in the storage profile",
        ));
    }
    let (p, client) = c.storage.remote.client(&c.storage.config, tree, profile)?;
    let host = p.host();
    if !authority.is_empty() {
        let (h, port) = match authority.rsplit_once(':') {
            Some((h, port)) if !h.ends_with(']') || authority.starts_with('[') => (
                h,
                Some(port.parse::<u16>().map_err(|_| {
                    ToolError::bad_argument(format!("{authority:?} has no valid port"))
                })?),
            ),
            _ => (authority, None),
        };
        let same_port = port.is_none_or(|port| port == p.port());
        if !h.eq_ignore_ascii_case(&host) || !same_port {
            return Err(ToolError::bad_argument(format!(
                "{scheme}://{authority} is not the server of the [{scheme}.{profile}] profile ({host}:{})",
                p.port()
            ))
            .with_remediation(format!(
                "give the profile argument that connects to {authority}, or write {scheme}:///PATH for the profile's own server"
            )));
        }
    }
    let key = percent_decoded(path.trim_end_matches('/'))?;
    if !key.is_empty() {
        super::object::key(&key)?;
    }
    let cloud = match tree {
        Tree::Sftp => Cloud::Sftp,
        Tree::Ftp => Cloud::Ftp,
        Tree::Webdav => Cloud::Webdav,
    };
    Ok(Location::Object {
        store: client.store(tree, "/", &host),
        key,
        base: format!("{scheme}://{host}"),
        cloud: Some(cloud),
        bucket: format!("{host}:{}", p.port()),
    })
}

fn percent_decoded(s: &str) -> Result<String, ToolError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = |d: u8| (d as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(b[i + 1]) * 16 + hex(b[i + 2]));
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out)
        .map_err(|_| ToolError::bad_argument("the URI's path is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::rooted_at;

    #[test]
    fn schemes_and_their_parts() {
        let dir = tempfile::tempdir().unwrap();
        let c = rooted_at(dir.path());
        match parse(&c, "memory://scratch/a/b.txt", "default").unwrap() {
            Location::Object { key, cloud, .. } => {
                assert_eq!(key, "scratch/a/b.txt");
                assert_eq!(cloud, None);
            }
            _ => panic!("memory is an object store"),
        }
        for (uri, want) in [
            ("file:///tmp/x%20y", "/tmp/x y"),
            ("local:///tmp/x", "/tmp/x"),
            ("/tmp/bare", "/tmp/bare"),
            ("local:rel/p", "rel/p"),
        ] {
            match parse(&c, uri, "default").unwrap() {
                Location::Local { path } => assert_eq!(path, want, "{uri}"),
                _ => panic!("{uri} is local"),
            }
        }
        let code = |uri: &str| match parse(&c, uri, "default") {
            Err(e) => serde_json::to_value(e.code)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
            Ok(_) => "ok".into(),
        };
        assert_eq!(code("sftp://host/x"), "not_configured");
        assert_eq!(code("webdav://host/x"), "not_configured");
        assert_eq!(code("ftp://user@host/x"), "bad_argument");
        assert_eq!(code("dropbox:///x"), "unsupported_format");
        assert_eq!(code("bogus://x/y"), "bad_argument");
        assert_eq!(code("s3:///key"), "bad_argument");
        assert_eq!(code("s3://user:pw@bucket/key"), "bad_argument");
        assert_eq!(code("s3://bucket/key"), "not_configured");
        assert_eq!(code("file://host/etc"), "bad_argument");
        assert_eq!(code("memory://n/a/../b"), "bad_argument");
        assert_eq!(code(""), "bad_argument");
    }

    proptest::proptest! {
        #[test]
        fn any_uri_is_an_answer_never_a_panic(uri in ".{0,80}") {
            let dir = tempfile::tempdir().unwrap();
            let c = rooted_at(dir.path());
            let _ = parse(&c, &uri, "default");
        }
    }
}
