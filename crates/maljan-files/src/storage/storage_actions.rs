//! The storage-URI actions (`FA_storage_*`) and FA_copy_between, with automation-file 0.0.55's
//! names and arguments plus an optional `profile` (the storage profile every cloud URI of the
//! call uses). Answers keep automation-file's shapes: a FileInfo dict plus its `uri`, a
//! `{"algorithm","value"}` checksum.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    default_profile,
    transfer::{self, Info, Source},
    uri::{self, Location, SCHEMES},
};
use crate::{
    Config,
    hashing::{Algorithm, digests_match},
};

/// The most text FA_storage_read_text returns.
const MAX_TEXT: u64 = 16 << 20;
pub(super) const TRANSFER_TIMEOUT_S: u64 = 6 * 3600;

pub(super) fn yes() -> bool {
    true
}
fn sha256() -> String {
    "sha256".into()
}
fn utf8() -> String {
    "utf-8".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UriArgs {
    /// A storage URI (s3://, azure://, gs://, memory://, file://) or a local path.
    uri: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    uri: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MkdirArgs {
    uri: String,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    parents: bool,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    exist_ok: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadArgs {
    /// The local file (confined to the roots).
    local_path: String,
    uri: String,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadArgs {
    uri: String,
    /// The local file written (confined to the roots).
    local_path: String,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    uri: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    missing_ok: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChecksumArgs {
    uri: String,
    #[serde(default = "sha256")]
    #[schemars(default = "sha256")]
    algorithm: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyArgs {
    uri: String,
    /// The digest, bare or as `algorithm:digest`.
    expected: String,
    #[serde(default = "sha256")]
    #[schemars(default = "sha256")]
    algorithm: String,
    /// A mismatch is an error rather than `false`.
    #[serde(default)]
    strict: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyArgs {
    source: String,
    target: String,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyBetweenArgs {
    /// A storage URI or local path.
    source: String,
    /// A storage URI or local path.
    target: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadTextArgs {
    uri: String,
    #[serde(default = "utf8")]
    #[schemars(default = "utf8")]
    encoding: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteTextArgs {
    uri: String,
    text: String,
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    overwrite: bool,
    #[serde(default = "utf8")]
    #[schemars(default = "utf8")]
    encoding: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

pub(crate) async fn digest(
    c: &Config,
    at: &Location,
    algorithm: Algorithm,
) -> Result<String, ToolError> {
    use futures::StreamExt;
    let mut source = transfer::open(c, at).await?;
    let mut hasher = algorithm.hasher();
    while let Some(chunk) = source.chunks.next().await {
        hasher.update(&chunk?);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The modification time of a local file, when `at` is one.
fn local_mtime(c: &Config, at: &Location) -> Option<std::time::SystemTime> {
    let Location::Local { path } = at else {
        return None;
    };
    std::fs::metadata(c.existing(path).ok()?)
        .ok()?
        .modified()
        .ok()
}

async fn copied_info(c: &Config, to: &Location) -> Result<Info, ToolError> {
    transfer::stat(c, to).await
}

pub(crate) fn add<A, O, F, Fut>(reg: &mut Registry, cfg: &Arc<Config>, meta: ToolMeta, f: F)
where
    A: serde::de::DeserializeOwned + JsonSchema + Send + 'static,
    O: serde::Serialize + JsonSchema + Send + 'static,
    F: Fn(Arc<Config>, ToolContext, A) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<O, ToolError>> + Send + 'static,
{
    // Every call is bounded: a store that stops answering cannot hold a call forever.
    let meta = match meta.timeout {
        Some(_) => meta,
        None => meta.timeout_s(300),
    };
    let c = cfg.clone();
    reg.add(meta, move |ctx: ToolContext, a: A| {
        let (c, f) = (c.clone(), f.clone());
        async move { f(c, ctx, a).await }
    });
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_schemes",
            "The storage URI schemes this server serves.",
        ),
        |_c, _ctx, _a: NoArgs| async move { Ok(SCHEMES.to_vec()) },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_exists",
            "Whether a file or directory is at a storage URI.",
        )
        .open_world(),
        |c, _ctx, a: UriArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            transfer::exists(&c, &at).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_stat",
            "Size, modification time and etag of a storage URI.",
        )
        .open_world(),
        |c, _ctx, a: UriArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            transfer::stat(&c, &at).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_list",
            "List a directory (a key prefix) at a storage URI; recursive adds every descendant.",
        )
        .open_world()
        .timeout_s(600),
        |c, ctx, a: ListArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            transfer::list(&c, &ctx, &at, a.recursive).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_mkdir",
            "Create a directory at a storage URI (object stores have none: nothing to do there).",
        )
        .writes()
        .open_world(),
        |c, _ctx, a: MkdirArgs| async move {
            match uri::parse(&c, &a.uri, &a.profile)? {
                Location::Object { .. } => Ok(true),
                Location::Local { path } => {
                    let target = c.target(&path)?;
                    if target.exists() {
                        if !a.exist_ok || !target.is_dir() {
                            return Err(ToolError::bad_argument(format!("{path} exists")));
                        }
                        return Ok(true);
                    }
                    if !a.parents && !target.parent().is_some_and(|p| p.is_dir()) {
                        return Err(ToolError::no_such_file(format!(
                            "the parent of {path} does not exist (give parents = true)"
                        )));
                    }
                    c.roots.create_dir_all(&target, &path)?;
                    Ok(true)
                }
            }
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_upload",
            "Store a local file at a storage URI, streamed.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: UploadArgs| async move {
            let to = uri::parse(&c, &a.uri, &a.profile)?;
            let from = Location::Local { path: a.local_path };
            transfer::copy(&c, &ctx, &from, &to, a.overwrite).await?;
            copied_info(&c, &to).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_download",
            "Write the file at a storage URI to a local path, streamed; returns that path.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: DownloadArgs| async move {
            let from = uri::parse(&c, &a.uri, &a.profile)?;
            let to = Location::Local {
                path: a.local_path.clone(),
            };
            transfer::copy(&c, &ctx, &from, &to, a.overwrite).await?;
            Ok(crate::paths::show(&c.existing(&a.local_path)?))
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_delete",
            "Remove the file or directory at a storage URI; a directory with entries needs recursive.",
        )
        .destructive()
        .open_world(),
        |c, _ctx, a: DeleteArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            transfer::delete(&c, &at, a.recursive, a.missing_ok).await?;
            Ok(true)
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_checksum",
            "The digest of the file at a storage URI, streamed.",
        )
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, _ctx, a: ChecksumArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            let algorithm = Algorithm::parse(&a.algorithm)?;
            let value = digest(&c, &at, algorithm).await?;
            Ok(json!({"algorithm": algorithm.name(), "value": value}))
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_verify",
            "Whether the file at a storage URI has the expected digest (strict: a mismatch is an error).",
        )
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, _ctx, a: VerifyArgs| async move {
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            let (algorithm, expected) = match a.expected.split_once(':') {
                Some((alg, value)) => (Algorithm::parse(alg)?, value.to_string()),
                None => (Algorithm::parse(&a.algorithm)?, a.expected.clone()),
            };
            let value = digest(&c, &at, algorithm).await?;
            let matched = digests_match(&value, &expected);
            if !matched && a.strict {
                return Err(ToolError::tool_failed(format!(
                    "{} does not have the expected digest",
                    at.shown()
                ))
                .with_remediation("check the expected digest and the URI"));
            }
            Ok(matched)
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_copy",
            "Copy a file between storage URIs, in one backend (done by the store) or across backends (streamed).",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: CopyArgs| async move {
            let from = uri::parse(&c, &a.source, &a.profile)?;
            let to = uri::parse(&c, &a.target, &a.profile)?;
            transfer::copy(&c, &ctx, &from, &to, a.overwrite).await?;
            copied_info(&c, &to).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_move",
            "Move a file between storage URIs (a copy, then the source is removed).",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: CopyArgs| async move {
            let from = uri::parse(&c, &a.source, &a.profile)?;
            let to = uri::parse(&c, &a.target, &a.profile)?;
            let kept_mtime = local_mtime(&c, &from);
            transfer::copy(&c, &ctx, &from, &to, a.overwrite).await?;
            // A local move keeps the file's time, as automation-file's rename keeps it.
            if let (Some(mtime), Location::Local { path }) = (kept_mtime, &to) {
                let moved = c.existing(path)?;
                c.roots
                    .open_file(&moved, path)?
                    .set_modified(mtime)
                    .map_err(|e| ToolError::io(path, e))?;
            }
            transfer::delete(&c, &from, false, false).await?;
            copied_info(&c, &to).await
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_copy_between",
            "Copy one file from a storage location to another (any two of s3://, azure://, gs://, memory://, \
             file:// or a local path), streamed.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        |c, ctx, a: CopyBetweenArgs| async move {
            // automation-file's `s3:bucket/key` and `azure:container/blob` spellings.
            let spelled = |s: &str| -> String {
                for scheme in ["s3:", "azure:", "az:", "gs:", "memory:"] {
                    if let Some(rest) = s.strip_prefix(scheme)
                        && !rest.starts_with("//")
                    {
                        return format!("{scheme}//{rest}");
                    }
                }
                s.to_string()
            };
            let from = uri::parse(&c, &spelled(&a.source), &a.profile)?;
            let to = uri::parse(&c, &spelled(&a.target), &a.profile)?;
            transfer::copy(&c, &ctx, &from, &to, true).await?;
            Ok(true)
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_read_text",
            "The content of the file at a storage URI as text (at most 16 MiB).",
        )
        .open_world(),
        |c, _ctx, a: ReadTextArgs| async move {
            use futures::StreamExt;
            crate::encoding::codec(&a.encoding)?;
            let at = uri::parse(&c, &a.uri, &a.profile)?;
            let mut source = transfer::open(&c, &at).await?;
            if source.size > MAX_TEXT {
                return Err(ToolError::bad_argument(format!(
                    "{} is {} bytes; FA_storage_read_text reads at most {MAX_TEXT}",
                    at.shown(),
                    source.size
                ))
                .with_remediation("download it with FA_storage_download instead"));
            }
            let mut bytes = Vec::with_capacity(source.size as usize);
            while let Some(chunk) = source.chunks.next().await {
                bytes.extend_from_slice(&chunk?);
                if bytes.len() as u64 > MAX_TEXT {
                    return Err(ToolError::bad_argument("the file grew beyond 16 MiB"));
                }
            }
            // The crate's Python-style codecs (latin-1, utf-16, ...), strict.
            let text = crate::encoding::decode_text(&bytes, &a.encoding, "strict")?;
            Ok(Value::String(text))
        },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "FA_storage_write_text",
            "Store text as the content of a storage URI.",
        )
        .destructive()
        .open_world(),
        |c, ctx, a: WriteTextArgs| async move {
            let bytes = crate::encoding::encode_text(&a.text, &a.encoding, "strict")?;
            let to = uri::parse(&c, &a.uri, &a.profile)?;
            let source = Source::bytes(bytes);
            transfer::write(&c, &ctx, &to, source, a.overwrite).await?;
            copied_info(&c, &to).await
        },
    );
}
