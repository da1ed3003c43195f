//! S3, Azure Blob and GCS as one thing: an `object_store` store per (backend, profile, bucket),
//! built from the operator's profile with the guarded HTTP client, and the transfers every
//! backend's actions share. Transfers stream in bounded pieces (8 MiB parts up, the store's
//! chunks down): no file is ever held whole in memory. A download goes to `<target>.part` and is
//! renamed into place only when complete; a failed or cancelled one removes the partial file. An
//! upload goes through a multipart upload that is aborted on failure or cancellation, so no half
//! object appears.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use maljan_server::{Renamed, ToolContext, ToolError, Write as Create};
use object_store::{
    ObjectStore, ObjectStoreExt, RetryConfig, aws::AmazonS3Builder, azure::MicrosoftAzureBuilder,
    buffered::BufWriter, gcp::GoogleCloudStorageBuilder, path::Path as Key,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    guard::{GuardedConnector, check_endpoint},
    profiles::{AzureProfile, GcsProfile, Network, S3Profile},
};
use crate::{Config, paths::show};

/// Bytes read from a local file per write into the upload (and per progress step).
pub(crate) const PIECE: usize = 1 << 20;
/// The multipart upload's part size (S3 wants at least 5 MiB for every part but the last).
const PART: usize = 8 << 20;
/// How many keys one listing returns at most.
pub(crate) const MAX_LISTED: usize = 100_000;

/// Which object store a profile is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Cloud {
    S3,
    Azure,
    Gcs,
    /// The file-tree servers (storage URIs only; their clients are in `remote`).
    Sftp,
    Ftp,
    Webdav,
}

impl Cloud {
    pub(crate) fn table(self) -> &'static str {
        match self {
            Cloud::S3 => "s3",
            Cloud::Azure => "azure_blob",
            Cloud::Gcs => "gcs",
            Cloud::Sftp => "sftp",
            Cloud::Ftp => "ftp",
            Cloud::Webdav => "webdav",
        }
    }
}

/// A profile of any of the three.
#[derive(Debug, Clone)]
pub(crate) enum CloudProfile {
    S3(S3Profile),
    Azure(AzureProfile),
    Gcs(GcsProfile),
}

fn retry(net: &Network) -> RetryConfig {
    RetryConfig {
        max_retries: net.max_retries,
        retry_timeout: std::time::Duration::from_secs(net.timeout_s * (net.max_retries as u64 + 1)),
        ..Default::default()
    }
}

fn build_err(cloud: Cloud, e: object_store::Error) -> ToolError {
    ToolError::not_configured(format!(
        "the {} profile cannot be used: {}",
        cloud.table(),
        store_message(&e)
    ))
    .with_remediation("fix the profile in the storage config given with --storage-config")
}

/// Builds the store for one bucket (container).
pub(crate) fn build(
    profile: &CloudProfile,
    bucket: &str,
) -> Result<Arc<dyn ObjectStore>, ToolError> {
    if bucket.is_empty() || bucket.contains('/') {
        return Err(ToolError::bad_argument(
            "the bucket (container) name must be non-empty and hold no '/'",
        ));
    }
    match profile {
        CloudProfile::S3(p) => {
            let mut b = AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region(p.region.as_deref().unwrap_or("us-east-1"))
                .with_http_connector(GuardedConnector::new(&p.network))
                .with_retry(retry(&p.network));
            if let Some(endpoint) = &p.endpoint_url {
                check_endpoint(endpoint, &p.network)?;
                b = b
                    .with_endpoint(endpoint)
                    .with_allow_http(endpoint.starts_with("http:"))
                    .with_virtual_hosted_style_request(p.virtual_hosted_style.unwrap_or(false));
            } else if let Some(v) = p.virtual_hosted_style {
                b = b.with_virtual_hosted_style_request(v);
            }
            match (&p.access_key_id, &p.secret_access_key) {
                (Some(id), Some(secret)) => {
                    b = b
                        .with_access_key_id(id.expose())
                        .with_secret_access_key(secret.expose());
                    if let Some(token) = &p.session_token {
                        b = b.with_token(token.expose());
                    }
                }
                // Never the instance-metadata chain: it would reach 169.254.169.254.
                _ if p.anonymous => b = b.with_skip_signature(true),
                _ => {
                    return Err(ToolError::not_configured(
                        "the s3 profile has no access_key_id and secret_access_key",
                    )
                    .with_remediation(
                        "give both in the profile (inline, _file or _env), call FA_s3_later_init, \
                         or set anonymous = true for a public bucket",
                    ));
                }
            }
            b.build()
                .map(|s| Arc::new(s) as _)
                .map_err(|e| build_err(Cloud::S3, e))
        }
        CloudProfile::Azure(p) => {
            let account = p
                .account
                .clone()
                .unwrap_or_else(|| "devstoreaccount1".into());
            let url = p
                .account_url
                .clone()
                .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
            check_endpoint(&url, &p.network)?;
            let mut b = MicrosoftAzureBuilder::new()
                .with_account(&account)
                .with_container_name(bucket)
                .with_endpoint(url.trim_end_matches('/').to_string())
                .with_allow_http(url.starts_with("http:"))
                .with_http_connector(GuardedConnector::new(&p.network))
                .with_retry(retry(&p.network));
            if let Some(key) = &p.access_key {
                b = b.with_access_key(key.expose());
            } else if let Some(sas) = &p.sas_token {
                let pairs: Vec<(String, String)> =
                    url::form_urlencoded::parse(sas.expose().trim_start_matches('?').as_bytes())
                        .into_owned()
                        .collect();
                b = b.with_sas_authorization(pairs);
            } else {
                // Never managed identity: it would reach the metadata service.
                return Err(ToolError::not_configured(
                    "the azure_blob profile has no access_key, sas_token or connection_string",
                )
                .with_remediation(
                    "give one in the profile (inline, _file or _env) or call FA_azure_blob_later_init",
                ));
            }
            b.build()
                .map(|s| Arc::new(s) as _)
                .map_err(|e| build_err(Cloud::Azure, e))
        }
        CloudProfile::Gcs(p) => {
            let mut b = GoogleCloudStorageBuilder::new()
                .with_bucket_name(bucket)
                .with_http_connector(GuardedConnector::new(&p.network))
                .with_retry(retry(&p.network));
            if let Some(base) = &p.base_url {
                check_endpoint(base, &p.network)?;
                b = b.with_base_url(base);
            }
            if let Some(key) = &p.service_account_key {
                b = b.with_service_account_key(key.expose());
            } else if p.anonymous {
                b = b.with_skip_signature(true);
            } else {
                return Err(ToolError::not_configured(
                    "the gcs profile has no service_account_key",
                )
                .with_remediation(
                    "give service_account_key (inline, _file or _env) in the profile, or \
                     anonymous = true for a public bucket",
                ));
            }
            b.build()
                .map(|s| Arc::new(s) as _)
                .map_err(|e| build_err(Cloud::Gcs, e))
        }
    }
}

/// A store error's message without request URLs (they may carry a SAS token in the query).
pub(crate) fn store_message(e: &object_store::Error) -> String {
    let mut text = e.to_string();
    while let Some(start) = text.find("http://").or_else(|| text.find("https://")) {
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == ',')
            .map_or(text.len(), |n| start + n);
        let shown = text[start..end].split('?').next().unwrap_or("").to_string();
        let shown = shown.replacen("://", ":\u{2060}//", 1);
        text.replace_range(start..end, &shown);
    }
    text.replace(":\u{2060}//", "://")
}

pub(crate) fn store_err(what: &str, e: object_store::Error) -> ToolError {
    match e {
        object_store::Error::NotFound { .. } => {
            ToolError::no_such_file(format!("{what} does not exist"))
        }
        e => ToolError::tool_failed(format!("{what}: {}", store_message(&e))),
    }
}

/// An object key as the backend's path (no empty, `.` or `..` segments).
pub(crate) fn key(k: &str) -> Result<Key, ToolError> {
    if k.is_empty() {
        return Err(ToolError::bad_argument("the key (blob name) is empty"));
    }
    Key::parse(k).map_err(|e| ToolError::bad_argument(format!("not a valid object key: {e}")))
}

/// Removes a partial download unless it was finished.
pub(crate) struct Partial<'a> {
    pub(crate) c: &'a Config,
    pub(crate) path: std::path::PathBuf,
    pub(crate) shown: String,
    pub(crate) done: bool,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.c.roots.remove_file(&self.path, &self.shown);
        }
    }
}

/// Aborts a multipart upload that was not finished (an error, or the call dropped on
/// cancellation), so the store keeps no half object and no orphaned parts.
pub(crate) struct Upload {
    pub(crate) writer: Option<BufWriter>,
}

impl Upload {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, to: &Key) -> Self {
        Self {
            writer: Some(BufWriter::with_capacity(store, to.clone(), PART).with_max_concurrency(2)),
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if let Some(mut w) = self.writer.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = w.abort().await;
            });
        }
    }
}

/// What a transfer reports.
pub(crate) struct Moved {
    pub(crate) bytes: u64,
}

/// Uploads one confined local file to `key`.
pub(crate) async fn upload(
    c: &Config,
    ctx: &ToolContext,
    store: Arc<dyn ObjectStore>,
    local: &str,
    to: &Key,
    progress: Option<String>,
) -> Result<Moved, ToolError> {
    let opened = c.existing_file(local)?;
    let size = opened.size()?;
    let max = c.storage.config.max_object_bytes;
    if size > max {
        return Err(ToolError::bad_argument(format!(
            "{local} is {size} bytes, more than the server's max_object_bytes {max}"
        )));
    }
    let mut file = tokio::fs::File::from_std(opened.file);
    let mut upload = Upload::new(store, to);
    let mut buf = vec![0u8; PIECE];
    let mut sent = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .await
            .map_err(|e| ToolError::io(local, e))?;
        if n == 0 {
            break;
        }
        sent += n as u64;
        if sent > max {
            return Err(ToolError::bad_argument(format!(
                "{local} grew beyond max_object_bytes {max} while being uploaded; the upload was aborted"
            )));
        }
        let writer = upload
            .writer
            .as_mut()
            .expect("the writer is held until the end");
        writer.write_all(&buf[..n]).await.map_err(|e| {
            ToolError::tool_failed(format!("uploading {local} failed: {}", io_message(&e)))
        })?;
        ctx.progress(sent as f64, Some(size as f64), progress.clone());
        if ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
    }
    let mut writer = upload
        .writer
        .take()
        .expect("the writer is held until the end");
    // A failed shutdown has already aborted the multipart upload (object_store's
    // WriteMultipart::finish does); aborting again panics inside object_store.
    if let Err(e) = writer.shutdown().await {
        return Err(ToolError::tool_failed(format!(
            "uploading {local} failed: {}",
            io_message(&e)
        )));
    }
    Ok(Moved { bytes: sent })
}

/// An I/O error from the upload writer, without URLs.
pub(crate) fn io_message(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<object_store::Error>())
    {
        Some(store) => store_message(store),
        None => e.to_string(),
    }
}

/// Downloads `from` to a confined local file, through `<target>.part`.
pub(crate) async fn download(
    c: &Config,
    ctx: &ToolContext,
    store: Arc<dyn ObjectStore>,
    from: &Key,
    local: &str,
    progress: Option<String>,
) -> Result<Moved, ToolError> {
    let target = c.target(local)?;
    if target.is_dir() {
        return Err(ToolError::bad_argument(format!("{local} is a directory")));
    }
    let part = c.target(&format!("{}.part", show(&target)))?;
    let got = store
        .get(from)
        .await
        .map_err(|e| store_err(&format!("the object {from}"), e))?;
    let size = got.meta.size;
    let max = c.storage.config.max_object_bytes;
    if size > max {
        return Err(ToolError::bad_argument(format!(
            "the object is {size} bytes, more than the server's max_object_bytes {max}"
        )));
    }
    let file = c.roots.create_file(&part, local, Create::Truncate)?;
    let mut guard = Partial {
        c,
        path: part.clone(),
        shown: local.to_string(),
        done: false,
    };
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = got.into_stream();
    let mut written = 0u64;
    let mut next_report = PIECE as u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            store_err(
                &format!("downloading {from} (the partial file was removed)"),
                e,
            )
        })?;
        written += chunk.len() as u64;
        if written > size {
            return Err(ToolError::tool_failed(
                "the store sent more bytes than the object's size; the partial file was removed",
            ));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ToolError::io(local, e))?;
        if written >= next_report {
            ctx.progress(written as f64, Some(size as f64), progress.clone());
            next_report = written + PIECE as u64;
        }
        if ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
    }
    if written != size {
        return Err(ToolError::tool_failed(format!(
            "the download stopped at {written} of {size} bytes; the partial file was removed"
        )));
    }
    file.flush().await.map_err(|e| ToolError::io(local, e))?;
    file.sync_data()
        .await
        .map_err(|e| ToolError::io(local, e))?;
    drop(file);
    if c.roots.rename(&part, &target, local)? != Renamed::Done {
        return Err(ToolError::tool_failed(format!(
            "{local} could not be renamed into place"
        )));
    }
    guard.done = true;
    Ok(Moved { bytes: written })
}

/// Every key under a prefix, in the store's order, at most [`MAX_LISTED`].
pub(crate) async fn list(
    store: Arc<dyn ObjectStore>,
    prefix: &str,
) -> Result<Vec<String>, ToolError> {
    // A prefix is matched as text, as S3's own is (`logs/2024` finds `logs/2024-01.txt`):
    // list under its directory part and filter.
    let dir = match prefix.rfind('/') {
        Some(i) => Some(key(&prefix[..i])?),
        None => None,
    };
    let mut out = Vec::new();
    let mut stream = store.list(dir.as_ref());
    while let Some(meta) = stream
        .try_next()
        .await
        .map_err(|e| store_err("the listing", e))?
    {
        let k = meta.location.to_string();
        if !k.starts_with(prefix) {
            continue;
        }
        if out.len() == MAX_LISTED {
            return Err(ToolError::bad_argument(format!(
                "more than {MAX_LISTED} keys under {prefix:?}"
            ))
            .with_remediation("list a narrower prefix"));
        }
        out.push(k);
    }
    Ok(out)
}

/// Whether `key` exists.
pub(crate) async fn exists(store: &Arc<dyn ObjectStore>, k: &Key) -> Result<bool, ToolError> {
    match store.head(k).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(store_err(&format!("the object {k}"), e)),
    }
}

pub(crate) async fn delete(store: Arc<dyn ObjectStore>, k: &Key) -> Result<(), ToolError> {
    store
        .delete(k)
        .await
        .map_err(|e| store_err(&format!("deleting {k}"), e))
}

/// Uploads every file under a confined directory to `prefix` + its relative path.
pub(crate) async fn upload_dir(
    c: &Config,
    ctx: &ToolContext,
    store: Arc<dyn ObjectStore>,
    dir: &str,
    prefix: &str,
) -> Result<Vec<String>, ToolError> {
    let root = c.existing_dir(dir)?;
    let stop = ctx.clone();
    let walk_root = root.clone();
    let found = maljan_server::blocking(move || {
        crate::paths::walk_files(&walk_root, &|| stop.is_cancelled())
    })
    .await?;
    let mut keys = Vec::new();
    for f in found {
        let name = if prefix.is_empty() || prefix.ends_with('/') {
            format!("{prefix}{}", f.rel)
        } else {
            format!("{prefix}/{}", f.rel)
        };
        let k = key(&name)?;
        upload(c, ctx, store.clone(), &show(&f.abs), &k, None).await?;
        keys.push(name);
    }
    Ok(keys)
}
