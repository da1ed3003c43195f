//! The drives' tables of the storage config, one per drive and profile name:
//!
//! ```toml
//! [dropbox.default]
//! access_token_file = "/etc/maljan/dropbox.token"   # or access_token, or access_token_env
//! [onedrive.default]
//! access_token_env = "GRAPH_TOKEN"
//! client_id = "…"            # for FA_onedrive_device_code_login (a public client; no secret)
//! tenant_id = "organizations"
//! [box.default]
//! access_token_env = "BOX_TOKEN"
//! [drive.default]
//! access_token_env = "GDRIVE_TOKEN"
//! ```
//!
//! Each table may also move the drive's hosts (`api_url`, `upload_url`, `auth_url`: a proxy the
//! operator runs, or the test fixture) and takes the same `allow_private_endpoint`, `timeout_s`
//! and `max_retries` as the object stores. Secrets follow the `X` / `X_file` / `X_env` rule.

use std::collections::BTreeMap;

use crate::storage::profiles::{Fields, Network, Secret};

use super::Service;

/// One drive profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriveProfile {
    pub access_token: Option<Secret>,
    /// OneDrive's device-code login and Box's app; never needed with a token.
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    /// OneDrive: the directory to log in to (`common`, `organizations`, `consumers` or an id).
    pub tenant_id: Option<String>,
    /// The drive's API host, without a trailing slash (the public one unless given).
    pub api_url: Option<String>,
    /// Where file content goes (Dropbox's content host, Box's and Google's upload hosts).
    pub upload_url: Option<String>,
    /// The login host (OneDrive's device-code login).
    pub auth_url: Option<String>,
    pub network: Network,
}

/// Every drive profile the operator configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriveProfiles {
    pub dropbox: BTreeMap<String, DriveProfile>,
    pub onedrive: BTreeMap<String, DriveProfile>,
    pub r#box: BTreeMap<String, DriveProfile>,
    pub drive: BTreeMap<String, DriveProfile>,
}

impl DriveProfiles {
    /// Takes the drives' tables out of the config's top level.
    pub(crate) fn parse(top: &mut Fields<'_>) -> Result<Self, String> {
        let mut out = Self::default();
        for drive in Service::ALL {
            for (name, mut f) in top.profiles(drive.table())? {
                let profile = DriveProfile {
                    access_token: f.secret("access_token")?,
                    client_id: f.string("client_id")?,
                    client_secret: f.secret("client_secret")?,
                    tenant_id: f.string("tenant_id")?,
                    api_url: trimmed(f.url("api_url")?),
                    upload_url: trimmed(f.url("upload_url")?),
                    auth_url: trimmed(f.url("auth_url")?),
                    network: f.network()?,
                };
                f.finish()?;
                out.of_mut(drive).insert(name, profile);
            }
        }
        Ok(out)
    }

    pub(crate) fn of(&self, drive: Service) -> &BTreeMap<String, DriveProfile> {
        match drive {
            Service::Dropbox => &self.dropbox,
            Service::OneDrive => &self.onedrive,
            Service::Box => &self.r#box,
            Service::Google => &self.drive,
        }
    }

    fn of_mut(&mut self, drive: Service) -> &mut BTreeMap<String, DriveProfile> {
        match drive {
            Service::Dropbox => &mut self.dropbox,
            Service::OneDrive => &mut self.onedrive,
            Service::Box => &mut self.r#box,
            Service::Google => &mut self.drive,
        }
    }
}

fn trimmed(url: Option<String>) -> Option<String> {
    url.map(|u| u.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use crate::storage::StorageConfig;
    use std::path::Path;

    #[test]
    fn drive_tables_are_read_and_misspelt_keys_refused() {
        let env = |k: &str| (k == "DBX").then(|| "from-env".to_string());
        let c = StorageConfig::parse(
            "[dropbox.default]\naccess_token_env = \"DBX\"\napi_url = \"http://127.0.0.1:1/api/\"\n\
             allow_private_endpoint = true\n[onedrive.work]\nclient_id = \"abc\"\ntenant_id = \"organizations\"\n\
             [box.default]\naccess_token = \"t\"\n[drive.default]\naccess_token = \"g\"\n",
            Path::new("/"),
            &env,
        )
        .unwrap();
        let d = &c.drives.dropbox["default"];
        assert_eq!(d.access_token.as_ref().unwrap().expose(), "from-env");
        assert_eq!(d.api_url.as_deref(), Some("http://127.0.0.1:1/api"));
        assert!(d.network.allow_private_endpoint);
        assert_eq!(c.drives.onedrive["work"].client_id.as_deref(), Some("abc"));
        assert!(c.drives.r#box.contains_key("default") && c.drives.drive.contains_key("default"));
        let e = StorageConfig::parse(
            "[dropbox.default]\naccess_tokn = \"SECRET\"\n",
            Path::new("/"),
            &|_| None,
        )
        .unwrap_err();
        assert!(e.contains("access_tokn") && !e.contains("SECRET"), "{e}");
        let e = StorageConfig::parse(
            "[box.default]\napi_url = \"ftp://x\"\n",
            Path::new("/"),
            &|_| None,
        )
        .unwrap_err();
        assert!(e.contains("api_url"), "{e}");
    }
}
