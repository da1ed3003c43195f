//! Remote storage: the operator's profiles (`profiles`), the SSRF-guarded HTTP client every
//! request goes through (`guard`), S3 / Azure Blob / GCS as one `object_store` implementation
//! (`object`) and the `FA_s3_*`, `FA_azure_blob_*`, `FA_gcs_*` actions over it (`cloud_actions`),
//! the storage-URI actions (`storage_actions`) and directory copy and sync over them (`mirror`).
//!
//! A profile is chosen by an action's optional `profile` argument (default `default`). The
//! `*_later_init` actions keep automation-file's arguments: what they receive replaces the
//! named profile's credentials and endpoint for this server's lifetime, held in memory only,
//! never logged or echoed; whether a private endpoint may be reached still comes from the
//! operator's file, never from the call.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use maljan_server::ToolError;
use object_store::ObjectStore;

pub(crate) mod cloud_actions;
mod ftp;
pub(crate) mod guard;
pub(crate) mod mimetypes;
pub(crate) mod mirror;
pub(crate) mod object;
pub mod profiles;
pub(crate) mod remote;
mod remote_fs;
pub mod remote_profiles;
mod sftp;
pub(crate) mod storage_actions;
pub(crate) mod transfer;
pub(crate) mod tree_actions;
pub(crate) mod uri;
mod webdav;

use object::{Cloud, CloudProfile};
pub use profiles::{Secret, StorageConfig};

pub(crate) const DEFAULT_PROFILE: &str = "default";

pub(crate) fn default_profile() -> String {
    DEFAULT_PROFILE.to_string()
}

impl Default for Storage {
    fn default() -> Self {
        Self::new(StorageConfig::default())
    }
}

/// A store's identity: backend, profile, bucket (container).
type StoreKey = (Cloud, String, String);

/// The storage state of one files server.
pub(crate) struct Storage {
    pub(crate) config: StorageConfig,
    /// memory:// (one store for every name, gone when the server stops).
    pub(crate) memory: Arc<dyn ObjectStore>,
    /// Profiles set by `*_later_init`, over the file's.
    session: Mutex<HashMap<(Cloud, String), CloudProfile>>,
    /// One store per (backend, profile, bucket): its connection pool is kept between calls.
    stores: Mutex<HashMap<StoreKey, Arc<dyn ObjectStore>>>,
    /// The SFTP, FTP and WebDAV clients.
    pub(crate) remote: remote::Remotes,
}

impl Storage {
    pub(crate) fn new(config: StorageConfig) -> Self {
        Self {
            config,
            memory: Arc::new(object_store::memory::InMemory::new()),
            session: Default::default(),
            stores: Default::default(),
            remote: Default::default(),
        }
    }

    /// The profile a call names: the one `*_later_init` set, else the operator's.
    pub(crate) fn profile(&self, cloud: Cloud, name: &str) -> Result<CloudProfile, ToolError> {
        if let Some(p) = self.session.lock().unwrap().get(&(cloud, name.to_string())) {
            return Ok(p.clone());
        }
        self.file_profile(cloud, name).ok_or_else(|| {
            ToolError::not_configured(format!(
                "no [{}.{name}] storage profile is configured",
                cloud.table()
            ))
            .with_remediation(format!(
                "add a [{}.{name}] table to the storage config given with \
                 `maljan serve files --storage-config FILE` (or MALJAN_STORAGE_CONFIG), \
                 or call the backend's later_init action",
                cloud.table()
            ))
        })
    }

    pub(crate) fn file_profile(&self, cloud: Cloud, name: &str) -> Option<CloudProfile> {
        match cloud {
            Cloud::S3 => self.config.s3.get(name).cloned().map(CloudProfile::S3),
            Cloud::Azure => self
                .config
                .azure_blob
                .get(name)
                .cloned()
                .map(CloudProfile::Azure),
            Cloud::Gcs => self.config.gcs.get(name).cloned().map(CloudProfile::Gcs),
            // Their profiles are `remote`'s.
            Cloud::Sftp | Cloud::Ftp | Cloud::Webdav => None,
        }
    }

    /// Replaces a profile for this server's lifetime (and forgets the stores built from it).
    pub(crate) fn set_session(&self, cloud: Cloud, name: &str, profile: CloudProfile) {
        self.stores
            .lock()
            .unwrap()
            .retain(|(c, p, _), _| !(*c == cloud && p == name));
        self.session
            .lock()
            .unwrap()
            .insert((cloud, name.to_string()), profile);
    }

    /// The store for one bucket under a profile, built once.
    pub(crate) fn store(
        &self,
        cloud: Cloud,
        profile: &str,
        bucket: &str,
    ) -> Result<Arc<dyn ObjectStore>, ToolError> {
        let k = (cloud, profile.to_string(), bucket.to_string());
        if let Some(s) = self.stores.lock().unwrap().get(&k) {
            return Ok(s.clone());
        }
        let store = object::build(&self.profile(cloud, profile)?, bucket)?;
        self.stores.lock().unwrap().insert(k, store.clone());
        Ok(store)
    }
}
