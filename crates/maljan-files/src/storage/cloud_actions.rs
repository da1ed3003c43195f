//! `FA_s3_*` and `FA_azure_blob_*` with automation-file 0.0.55's names and argument names, and
//! `FA_gcs_*` (automation-file reaches GCS only through fsspec URIs) with S3's. Each takes an
//! optional `profile`. Uploads, downloads and deletes are destructive (hidden by --read-only);
//! listings are read-only. Every local path is confined to the roots.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    default_profile,
    object::{self, Cloud, CloudProfile},
    profiles::{AzureProfile, S3Profile, Secret, parse_connection_string},
};
use crate::Config;

const TRANSFER_TIMEOUT_S: u64 = 6 * 3600;

#[derive(Serialize, JsonSchema)]
struct Transferred {
    /// The object's bucket (container).
    bucket: String,
    key: String,
    /// The local file.
    path: String,
    bytes: u64,
}

#[derive(Serialize, JsonSchema)]
struct Configured {
    backend: &'static str,
    profile: String,
    /// What the call set (names only, never values).
    set: Vec<&'static str>,
}

// ---- S3 and GCS: bucket + key --------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadFile {
    /// The local file to upload.
    file_path: String,
    bucket: String,
    /// The object key written (replaced when it exists).
    key: String,
    /// A label for progress notifications.
    #[serde(default)]
    progress_name: Option<String>,
    /// The storage profile (a table of the server's storage config).
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadFile {
    bucket: String,
    key: String,
    /// The local file written (through `<target_path>.part`, renamed when complete).
    target_path: String,
    #[serde(default)]
    progress_name: Option<String>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteObject {
    bucket: String,
    key: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListBucket {
    bucket: String,
    /// Keys starting with this text.
    #[serde(default)]
    prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadDir {
    /// The local directory whose files are uploaded (recursively).
    dir_path: String,
    bucket: String,
    /// Put before each file's path relative to dir_path.
    #[serde(default)]
    key_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct S3LaterInit {
    /// Never echoed, logged or kept beyond this server's lifetime.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    aws_access_key_id: Option<String>,
    /// Never echoed, logged or kept beyond this server's lifetime.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    aws_secret_access_key: Option<String>,
    #[serde(default)]
    region_name: Option<String>,
    /// An S3-compatible store's URL. A private address is reached only if the operator's
    /// profile of this name allows it.
    #[serde(default)]
    endpoint_url: Option<String>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

// ---- Azure Blob: container + blob_name -------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzUploadFile {
    file_path: String,
    container: String,
    blob_name: String,
    /// Replace the blob when it exists; when false an existing blob is an error.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzDownloadFile {
    container: String,
    blob_name: String,
    target_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzDeleteBlob {
    container: String,
    blob_name: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzListContainer {
    container: String,
    #[serde(default)]
    name_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzUploadDir {
    dir_path: String,
    container: String,
    #[serde(default)]
    name_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AzLaterInit {
    /// `AccountName=…;AccountKey=…;BlobEndpoint=…`. Never echoed, logged or kept beyond this
    /// server's lifetime.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    connection_string: Option<String>,
    /// The blob service URL. A private address is reached only if the operator's profile of
    /// this name allows it.
    #[serde(default)]
    account_url: Option<String>,
    /// An account key, or a SAS token (starting with `?` or holding `sig=`). Never echoed.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    credential: Option<String>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn transferred(bucket: String, key: String, path: String, bytes: u64) -> Transferred {
    Transferred {
        bucket,
        key,
        path,
        bytes,
    }
}

/// Registers upload/download/delete/list/upload_dir for a bucket+key backend.
fn register_bucket_actions(
    reg: &mut Registry,
    cfg: &Arc<Config>,
    cloud: Cloud,
    prefix: &str,
    what: &str,
) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_upload_file"),
            format!("Upload a local file to {what} as bucket/key, streamed in parts (replaces the object)."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadFile| {
            let c = c.clone();
            async move {
                let store = c.storage.store(cloud, &a.profile, &a.bucket)?;
                let k = object::key(&a.key)?;
                let moved = object::upload(&c, &ctx, store, &a.file_path, &k, a.progress_name).await?;
                Ok::<_, ToolError>(transferred(a.bucket, a.key, a.file_path, moved.bytes))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_download_file"),
            format!("Download bucket/key from {what} to a local file, streamed; a failed download leaves no partial file."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DownloadFile| {
            let c = c.clone();
            async move {
                let store = c.storage.store(cloud, &a.profile, &a.bucket)?;
                let k = object::key(&a.key)?;
                let moved =
                    object::download(&c, &ctx, store, &k, &a.target_path, a.progress_name).await?;
                Ok::<_, ToolError>(transferred(a.bucket, a.key, a.target_path, moved.bytes))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_delete_object"),
            format!("Delete bucket/key from {what}."),
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: DeleteObject| {
            let c = c.clone();
            async move {
                let store = c.storage.store(cloud, &a.profile, &a.bucket)?;
                object::delete(store, &object::key(&a.key)?).await?;
                Ok::<_, ToolError>(true)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_list_bucket"),
            format!(
                "Every key in a {what} bucket starting with prefix (paginated; at most {} keys).",
                object::MAX_LISTED
            ),
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ListBucket| {
            let c = c.clone();
            async move {
                let store = c.storage.store(cloud, &a.profile, &a.bucket)?;
                object::list(store, &a.prefix).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            format!("{prefix}_upload_dir"),
            format!("Upload every file under a local directory to a {what} bucket under key_prefix; returns the keys."),
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadDir| {
            let c = c.clone();
            async move {
                let store = c.storage.store(cloud, &a.profile, &a.bucket)?;
                object::upload_dir(&c, &ctx, store, &a.dir_path, &a.key_prefix).await
            }
        },
    );
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    register_bucket_actions(
        reg,
        cfg,
        Cloud::S3,
        "FA_s3",
        "S3 (or an S3-compatible store)",
    );
    register_bucket_actions(reg, cfg, Cloud::Gcs, "FA_gcs", "Google Cloud Storage");

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_s3_later_init",
            "Set the S3 credentials, region or endpoint of a storage profile for this server's lifetime \
             (unset ones keep the operator's). The secrets are never echoed or logged; a private endpoint \
             is reachable only if the operator's profile allows it.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: S3LaterInit| {
            let c = c.clone();
            async move { s3_later_init(&c, a) }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_upload_file",
            "Upload a local file to an Azure Blob container, streamed in blocks.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: AzUploadFile| {
            let c = c.clone();
            async move {
                let store = c.storage.store(Cloud::Azure, &a.profile, &a.container)?;
                let k = object::key(&a.blob_name)?;
                if !a.overwrite && object::exists(&store, &k).await? {
                    return Err(ToolError::bad_argument(format!(
                        "the blob {} exists and overwrite is false",
                        a.blob_name
                    )));
                }
                let moved = object::upload(&c, &ctx, store, &a.file_path, &k, None).await?;
                Ok(transferred(
                    a.container,
                    a.blob_name,
                    a.file_path,
                    moved.bytes,
                ))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_download_file",
            "Download an Azure blob to a local file, streamed; a failed download leaves no partial file.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: AzDownloadFile| {
            let c = c.clone();
            async move {
                let store = c.storage.store(Cloud::Azure, &a.profile, &a.container)?;
                let k = object::key(&a.blob_name)?;
                let moved = object::download(&c, &ctx, store, &k, &a.target_path, None).await?;
                Ok::<_, ToolError>(transferred(a.container, a.blob_name, a.target_path, moved.bytes))
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_delete_blob",
            "Delete a blob from an Azure container.",
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: AzDeleteBlob| {
            let c = c.clone();
            async move {
                let store = c.storage.store(Cloud::Azure, &a.profile, &a.container)?;
                object::delete(store, &object::key(&a.blob_name)?).await?;
                Ok::<_, ToolError>(true)
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_list_container",
            format!(
                "Every blob name in an Azure container starting with name_prefix (at most {}).",
                object::MAX_LISTED
            ),
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: AzListContainer| {
            let c = c.clone();
            async move {
                let store = c.storage.store(Cloud::Azure, &a.profile, &a.container)?;
                object::list(store, &a.name_prefix).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_upload_dir",
            "Upload every file under a local directory to an Azure container under name_prefix; returns the blob names.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: AzUploadDir| {
            let c = c.clone();
            async move {
                let store = c.storage.store(Cloud::Azure, &a.profile, &a.container)?;
                object::upload_dir(&c, &ctx, store, &a.dir_path, &a.name_prefix).await
            }
        },
    );
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_azure_blob_later_init",
            "Set the Azure Blob connection string, account URL or credential of a storage profile for this \
             server's lifetime. The secrets are never echoed or logged; a private endpoint is reachable only \
             if the operator's profile allows it.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: AzLaterInit| {
            let c = c.clone();
            async move { azure_later_init(&c, a) }
        },
    );
}

/// The operator's profile of this name (for what the call leaves unset, and for the
/// private-endpoint permission), or an empty one.
fn base_s3(c: &Config, name: &str) -> S3Profile {
    match c.storage.file_profile(Cloud::S3, name) {
        Some(CloudProfile::S3(p)) => p,
        _ => S3Profile::default(),
    }
}

fn checked_url(url: &str, arg: &str) -> Result<(), ToolError> {
    let parsed = url::Url::parse(url)
        .map_err(|e| ToolError::bad_argument(format!("{arg} is not a URL: {e}")))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(ToolError::bad_argument(format!(
            "{arg} must be an http or https URL"
        )));
    }
    Ok(())
}

fn s3_later_init(c: &Config, a: S3LaterInit) -> Result<Configured, ToolError> {
    let mut p = base_s3(c, &a.profile);
    let mut set = Vec::new();
    if a.aws_access_key_id.is_some() != a.aws_secret_access_key.is_some() {
        return Err(ToolError::bad_argument(
            "give aws_access_key_id and aws_secret_access_key together",
        ));
    }
    if let (Some(id), Some(secret)) = (a.aws_access_key_id, a.aws_secret_access_key) {
        p.access_key_id = Some(Secret::new(id));
        p.secret_access_key = Some(Secret::new(secret));
        p.session_token = None;
        p.anonymous = false;
        set.extend(["aws_access_key_id", "aws_secret_access_key"]);
    }
    if let Some(region) = a.region_name {
        p.region = Some(region);
        set.push("region_name");
    }
    if let Some(endpoint) = a.endpoint_url {
        checked_url(&endpoint, "endpoint_url")?;
        p.endpoint_url = Some(endpoint);
        set.push("endpoint_url");
    }
    // Refuse a private endpoint now rather than at the first transfer.
    if let Some(endpoint) = &p.endpoint_url {
        super::guard::check_endpoint(endpoint, &p.network)?;
    }
    c.storage
        .set_session(Cloud::S3, &a.profile, CloudProfile::S3(p));
    Ok(Configured {
        backend: "s3",
        profile: a.profile,
        set,
    })
}

fn azure_later_init(c: &Config, a: AzLaterInit) -> Result<Configured, ToolError> {
    let mut p = match c.storage.file_profile(Cloud::Azure, &a.profile) {
        Some(CloudProfile::Azure(p)) => p,
        _ => AzureProfile::default(),
    };
    let mut set = Vec::new();
    if let Some(cs) = a.connection_string {
        let parsed = parse_connection_string(&cs)
            .map_err(|e| ToolError::bad_argument(format!("connection_string: {e}")))?;
        p = parsed.merged_into(p);
        set.push("connection_string");
    }
    if let Some(url) = a.account_url {
        checked_url(&url, "account_url")?;
        // The account is the first label of https://ACCOUNT.blob.core.windows.net.
        if p.account.is_none()
            && let Some(host) = url::Url::parse(&url)
                .ok()
                .and_then(|u| u.host_str().map(String::from))
            && host.contains(".blob.")
        {
            p.account = host.split('.').next().map(String::from);
        }
        p.account_url = Some(url);
        set.push("account_url");
    }
    if let Some(cred) = a.credential {
        if cred.starts_with('?') || cred.contains("sig=") {
            p.sas_token = Some(Secret::new(cred));
            p.access_key = None;
        } else {
            p.access_key = Some(Secret::new(cred));
            p.sas_token = None;
        }
        set.push("credential");
    }
    if let Some(url) = &p.account_url {
        super::guard::check_endpoint(url, &p.network)?;
    }
    c.storage
        .set_session(Cloud::Azure, &a.profile, CloudProfile::Azure(p));
    Ok(Configured {
        backend: "azure_blob",
        profile: a.profile,
        set,
    })
}
