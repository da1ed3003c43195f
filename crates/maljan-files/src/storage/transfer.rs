//! Moving bytes between any two [`Location`]s as a stream of bounded chunks, and what the
//! storage-URI actions ask of a location (exists, stat, list, delete). Writing an object goes
//! through an aborted-on-failure multipart upload; writing a local file through `<path>.part`
//! renamed into place, removed on failure: the same guarantees as the backend actions.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use maljan_server::{Renamed, ToolContext, ToolError, Write as Create};
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, path::Path as Key};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    object::{MAX_LISTED, PIECE, Partial, Upload, io_message, key, store_err},
    uri::Location,
};
use crate::{Config, paths::show};

/// The largest file memory:// keeps (it lives in the server's own memory).
const MAX_MEMORY_OBJECT: u64 = 64 << 20;

pub(crate) type Chunks = BoxStream<'static, Result<Bytes, ToolError>>;

/// An open source: its chunks and its size.
pub(crate) struct Source {
    pub(crate) chunks: Chunks,
    pub(crate) size: u64,
}

impl Source {
    pub(crate) fn bytes(data: Vec<u8>) -> Self {
        let size = data.len() as u64;
        Self {
            chunks: futures::stream::once(async move { Ok(Bytes::from(data)) }).boxed(),
            size,
        }
    }
}

fn bounded(c: &Config, size: u64, what: &str) -> Result<(), ToolError> {
    let max = c.storage.config.max_object_bytes;
    if size > max {
        return Err(ToolError::bad_argument(format!(
            "{what} is {size} bytes, more than the server's max_object_bytes {max}"
        )));
    }
    Ok(())
}

fn object_key(k: &str) -> Result<Key, ToolError> {
    key(k)
}

/// Opens a file (an object or a confined local file) for reading.
pub(crate) async fn open(c: &Config, from: &Location) -> Result<Source, ToolError> {
    open_from(c, from, 0).await
}

/// Opens a file for reading from byte `offset` on (a ranged GET, a seek): the source's size is
/// what is left after it. The file as a whole must fit the server's bounds.
pub(crate) async fn open_from(
    c: &Config,
    from: &Location,
    offset: u64,
) -> Result<Source, ToolError> {
    match from {
        Location::Object { store, key: k, .. } => {
            let shown = from.shown();
            let options = object_store::GetOptions {
                range: (offset > 0).then_some(object_store::GetRange::Offset(offset)),
                ..Default::default()
            };
            let got = store
                .get_opts(&object_key(k)?, options)
                .await
                .map_err(|e| store_err(&shown, e))?;
            bounded(c, got.meta.size, &shown)?;
            let size = got.range.end - got.range.start;
            let chunks = got
                .into_stream()
                .map_err(move |e| store_err(&format!("reading {shown}"), e))
                .boxed();
            Ok(Source { chunks, size })
        }
        Location::Local { path } => {
            let opened = c.existing_file(path)?;
            let size = opened.size()?;
            bounded(c, size, path)?;
            let mut file = opened.file;
            if offset > 0 {
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(offset))
                    .map_err(|e| ToolError::io(path, e))?;
            }
            let file = tokio::fs::File::from_std(file);
            let given = path.clone();
            let chunks = futures::stream::try_unfold(file, |mut f| async move {
                let mut buf = vec![0u8; PIECE];
                let n = f.read(&mut buf).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), f)))
            })
            .map_err(move |e: std::io::Error| ToolError::io(&given, e))
            .boxed();
            Ok(Source {
                chunks,
                size: size.saturating_sub(offset),
            })
        }
    }
}

/// Writes a source to a location; returns the bytes written. With `overwrite` false an
/// existing file is an error.
pub(crate) async fn write(
    c: &Config,
    ctx: &ToolContext,
    to: &Location,
    mut source: Source,
    overwrite: bool,
) -> Result<u64, ToolError> {
    if !overwrite && exists(c, to).await? {
        return Err(ToolError::bad_argument(format!(
            "{} exists and overwrite is false",
            to.shown()
        )));
    }
    let mut written = 0u64;
    let max = source.size;
    match to {
        Location::Object {
            store,
            key: k,
            cloud,
            ..
        } => {
            if cloud.is_none() && source.size > MAX_MEMORY_OBJECT {
                return Err(ToolError::bad_argument(format!(
                    "memory:// holds files of at most {MAX_MEMORY_OBJECT} bytes; this one is {}",
                    source.size
                ))
                .with_remediation("store it in a local file or an object store instead"));
            }
            let mut upload = Upload::new(store.clone(), &object_key(k)?);
            while let Some(chunk) = source.chunks.next().await {
                let chunk = chunk?;
                written += chunk.len() as u64;
                if written > max {
                    return Err(ToolError::tool_failed(
                        "the source sent more than its size; the upload was aborted",
                    ));
                }
                let w = upload.writer.as_mut().expect("held until the end");
                w.write_all(&chunk).await.map_err(|e| {
                    ToolError::tool_failed(format!(
                        "writing {} failed: {}",
                        to.shown(),
                        io_message(&e)
                    ))
                })?;
                ctx.progress(written as f64, Some(source.size as f64), None);
                if ctx.is_cancelled() {
                    return Err(crate::paths::cancelled());
                }
            }
            let mut w = upload.writer.take().expect("held until the end");
            // A failed shutdown has already aborted the multipart upload (object_store's
            // WriteMultipart::finish does); aborting again panics inside object_store.
            if let Err(e) = w.shutdown().await {
                return Err(ToolError::tool_failed(format!(
                    "writing {} failed: {}",
                    to.shown(),
                    io_message(&e)
                )));
            }
        }
        Location::Local { path } => {
            let target = c.target(path)?;
            if target.is_dir() {
                return Err(ToolError::bad_argument(format!("{path} is a directory")));
            }
            // Missing folders are made, as automation-file's local backend makes them.
            if let Some(parent) = target.parent() {
                c.roots.create_dir_all(parent, path)?;
            }
            let part = c.target(&format!("{}.part", show(&target)))?;
            let file = c.roots.create_file(&part, path, Create::Truncate)?;
            let mut guard = Partial {
                c,
                path: part.clone(),
                shown: path.clone(),
                done: false,
            };
            let mut file = tokio::fs::File::from_std(file);
            while let Some(chunk) = source.chunks.next().await {
                let chunk = chunk?;
                written += chunk.len() as u64;
                if written > max {
                    return Err(ToolError::tool_failed(
                        "the source sent more than its size; the partial file was removed",
                    ));
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| ToolError::io(path, e))?;
                ctx.progress(written as f64, Some(source.size as f64), None);
                if ctx.is_cancelled() {
                    return Err(crate::paths::cancelled());
                }
            }
            file.flush().await.map_err(|e| ToolError::io(path, e))?;
            file.sync_data().await.map_err(|e| ToolError::io(path, e))?;
            drop(file);
            if c.roots.rename(&part, &target, path)? != Renamed::Done {
                return Err(ToolError::tool_failed(format!(
                    "{path} could not be renamed into place"
                )));
            }
            guard.done = true;
        }
    }
    if written != source.size {
        return Err(ToolError::tool_failed(format!(
            "the source ended at {written} of {} bytes",
            source.size
        )));
    }
    Ok(written)
}

/// Copies one file; a copy inside one bucket is done by the store itself.
pub(crate) async fn copy(
    c: &Config,
    ctx: &ToolContext,
    from: &Location,
    to: &Location,
    overwrite: bool,
) -> Result<u64, ToolError> {
    if let (Location::Object { store, key: fk, .. }, Location::Object { key: tk, .. }) = (from, to)
        && from.same_store(to)
    {
        if fk == tk {
            return Err(ToolError::bad_argument(
                "source and target are the same object",
            ));
        }
        if !overwrite && exists(c, to).await? {
            return Err(ToolError::bad_argument(format!(
                "{} exists and overwrite is false",
                to.shown()
            )));
        }
        let meta = store
            .head(&object_key(fk)?)
            .await
            .map_err(|e| store_err(&from.shown(), e))?;
        store
            .copy(&object_key(fk)?, &object_key(tk)?)
            .await
            .map_err(|e| store_err(&format!("copying to {}", to.shown()), e))?;
        return Ok(meta.size);
    }
    let source = open(c, from).await?;
    write(c, ctx, to, source, overwrite).await
}

/// One entry as automation-file's FileInfo shows it, plus its URI.
#[derive(Serialize, schemars::JsonSchema, Clone)]
pub(crate) struct Info {
    pub(crate) uri: String,
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) is_dir: bool,
    pub(crate) size: Option<u64>,
    pub(crate) modified_at: Option<String>,
    pub(crate) etag: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) metadata: serde_json::Map<String, serde_json::Value>,
}

fn name_of(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

fn object_info(base: &str, rel: String, meta: Option<&ObjectMeta>) -> Info {
    Info {
        uri: format!("{base}/{rel}"),
        name: name_of(&rel),
        is_dir: meta.is_none(),
        size: meta.map(|m| m.size),
        modified_at: meta.map(|m| m.last_modified.to_rfc3339()),
        etag: meta.and_then(|m| m.e_tag.clone()),
        version: meta.and_then(|m| m.version.clone()),
        content_type: None,
        metadata: Default::default(),
        path: rel,
    }
}

fn local_info(path: &std::path::Path, rel: String, meta: &std::fs::Metadata) -> Info {
    let modified = meta
        .modified()
        .ok()
        .map(|t| chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339());
    let is_file = !meta.is_dir();
    Info {
        // automation-file's local backend names its files local:///abs/path.
        uri: format!("local://{}", show(path)),
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        is_dir: meta.is_dir(),
        size: meta.is_file().then_some(meta.len()),
        modified_at: modified,
        etag: None,
        version: None,
        content_type: is_file
            .then(|| super::mimetypes::guess(&path.to_string_lossy()))
            .flatten(),
        metadata: Default::default(),
        path: rel,
    }
}

fn prefix_of(k: &str) -> Result<Option<Key>, ToolError> {
    if k.is_empty() {
        Ok(None)
    } else {
        object_key(k).map(Some)
    }
}

/// Whether a file or directory is there.
pub(crate) async fn exists(c: &Config, at: &Location) -> Result<bool, ToolError> {
    match at {
        Location::Object { store, key: k, .. } => {
            if k.is_empty() {
                return Ok(true);
            }
            match store.head(&object_key(k)?).await {
                Ok(_) => return Ok(true),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_err(&at.shown(), e)),
            }
            has_children(store, k, &at.shown()).await
        }
        Location::Local { path } => {
            let resolved = c.roots.resolve(path)?;
            Ok(std::fs::symlink_metadata(resolved).is_ok())
        }
    }
}

async fn has_children(
    store: &Arc<dyn ObjectStore>,
    k: &str,
    shown: &str,
) -> Result<bool, ToolError> {
    let mut listing = store.list(prefix_of(k)?.as_ref());
    Ok(listing
        .try_next()
        .await
        .map_err(|e| store_err(shown, e))?
        .is_some())
}

pub(crate) async fn stat(c: &Config, at: &Location) -> Result<Info, ToolError> {
    match at {
        Location::Object {
            store,
            key: k,
            base,
            ..
        } => {
            if !k.is_empty() {
                match store.head(&object_key(k)?).await {
                    Ok(meta) => {
                        let mut info = object_info(base, k.clone(), Some(&meta));
                        info.path = name_of(k);
                        return Ok(info);
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(store_err(&at.shown(), e)),
                }
            }
            if k.is_empty() || has_children(store, k, &at.shown()).await? {
                let mut info = object_info(base, k.clone(), None);
                info.path = name_of(k);
                return Ok(info);
            }
            Err(ToolError::no_such_file(format!(
                "{} does not exist",
                at.shown()
            )))
        }
        Location::Local { path } => {
            let resolved = c.existing(path)?;
            let meta = std::fs::metadata(&resolved).map_err(|e| ToolError::io(path, e))?;
            // automation-file's path of a local file: the absolute path without its leading /.
            let rooted = show(&resolved).trim_start_matches('/').to_string();
            Ok(local_info(&resolved, rooted, &meta))
        }
    }
}

/// A directory's entries (relative paths); `recursive` adds every descendant.
pub(crate) async fn list(
    c: &Config,
    ctx: &ToolContext,
    at: &Location,
    recursive: bool,
) -> Result<Vec<Info>, ToolError> {
    let too_many = || {
        ToolError::bad_argument(format!("more than {MAX_LISTED} entries"))
            .with_remediation("list a narrower directory")
    };
    match at {
        Location::Object {
            store,
            key: k,
            base,
            ..
        } => {
            let prefix = prefix_of(k)?;
            let rel = |p: &Key| {
                let full = p.to_string();
                full.strip_prefix(k.as_str())
                    .map(|r| r.trim_start_matches('/').to_string())
                    .unwrap_or(full)
            };
            let dir_base = if k.is_empty() {
                base.clone()
            } else {
                format!("{base}/{k}")
            };
            let mut out = Vec::new();
            if recursive {
                let mut listing = store.list(prefix.as_ref());
                while let Some(meta) = listing
                    .try_next()
                    .await
                    .map_err(|e| store_err(&at.shown(), e))?
                {
                    if out.len() == MAX_LISTED {
                        return Err(too_many());
                    }
                    out.push(object_info(&dir_base, rel(&meta.location), Some(&meta)));
                }
            } else {
                let listing = store
                    .list_with_delimiter(prefix.as_ref())
                    .await
                    .map_err(|e| store_err(&at.shown(), e))?;
                for p in &listing.common_prefixes {
                    out.push(object_info(&dir_base, rel(p), None));
                }
                for meta in &listing.objects {
                    out.push(object_info(&dir_base, rel(&meta.location), Some(meta)));
                }
                if out.len() > MAX_LISTED {
                    return Err(too_many());
                }
            }
            Ok(out)
        }
        Location::Local { path } => {
            let dir = c.existing_dir(path)?;
            let walk_dir = dir.clone();
            let stop = ctx.clone();
            maljan_server::blocking(move || {
                let mut out = Vec::new();
                let depth = if recursive { usize::MAX } else { 1 };
                for entry in walkdir::WalkDir::new(&walk_dir)
                    .min_depth(1)
                    .max_depth(depth)
                {
                    if stop.is_cancelled() {
                        return Err(crate::paths::cancelled());
                    }
                    let Ok(entry) = entry else { continue };
                    let Ok(meta) = entry.metadata() else { continue };
                    let rel = entry
                        .path()
                        .strip_prefix(&walk_dir)
                        .map(|r| r.to_string_lossy().replace('\\', "/"))
                        .unwrap_or_default();
                    if out.len() == MAX_LISTED {
                        return Err(ToolError::bad_argument(format!(
                            "more than {MAX_LISTED} entries"
                        )));
                    }
                    out.push(local_info(entry.path(), rel, &meta));
                }
                Ok(out)
            })
            .await
        }
    }
}

/// Removes a file, or a directory (with `recursive` when it has entries).
pub(crate) async fn delete(
    c: &Config,
    at: &Location,
    recursive: bool,
    missing_ok: bool,
) -> Result<(), ToolError> {
    match at {
        Location::Object { store, key: k, .. } => {
            if !k.is_empty() {
                match store.head(&object_key(k)?).await {
                    Ok(_) => {
                        return store
                            .delete(&object_key(k)?)
                            .await
                            .map_err(|e| store_err(&at.shown(), e));
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(store_err(&at.shown(), e)),
                }
            }
            let prefix = prefix_of(k)?;
            let children: Vec<Key> = store
                .list(prefix.as_ref())
                .map_ok(|m| m.location)
                .take(MAX_LISTED + 1)
                .try_collect()
                .await
                .map_err(|e| store_err(&at.shown(), e))?;
            if children.is_empty() {
                return if missing_ok {
                    Ok(())
                } else {
                    Err(ToolError::no_such_file(format!(
                        "{} does not exist",
                        at.shown()
                    )))
                };
            }
            if !recursive {
                return Err(ToolError::bad_argument(format!(
                    "{} is a directory with entries; give recursive = true",
                    at.shown()
                )));
            }
            if children.len() > MAX_LISTED {
                return Err(ToolError::bad_argument(format!(
                    "more than {MAX_LISTED} objects under {}",
                    at.shown()
                )));
            }
            for child in children {
                store
                    .delete(&child)
                    .await
                    .map_err(|e| store_err(&format!("deleting {child}"), e))?;
            }
            Ok(())
        }
        Location::Local { path } => {
            let entry = match c.entry(path) {
                Ok(e) => e,
                Err(e) if missing_ok && e.code == maljan_server::ErrorCode::NoSuchFile => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let meta = std::fs::symlink_metadata(&entry).map_err(|e| ToolError::io(path, e))?;
            if meta.is_dir() {
                let empty = std::fs::read_dir(&entry)
                    .map_err(|e| ToolError::io(path, e))?
                    .next()
                    .is_none();
                if !empty && !recursive {
                    return Err(ToolError::bad_argument(format!(
                        "{path} is a directory with entries; give recursive = true"
                    )));
                }
                c.roots.remove_tree(&entry, path)
            } else {
                c.roots.remove_file(&entry, path)
            }
        }
    }
}
