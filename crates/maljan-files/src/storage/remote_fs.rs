//! The file-tree backends (SFTP, FTP/FTPS, WebDAV) as `object_store` stores, so the
//! transfers, listings, storage URIs and FA_copy_between written for S3 serve them unchanged.
//!
//! A backend implements the few file operations of [`RemoteFs`]; [`FsStore`] maps object keys
//! to paths under a root and adds what an object store promises on top: a write lands whole or
//! not at all (it goes to `<path>.part` and is renamed into place when complete; a failed,
//! aborted or cancelled one removes the partial file), parents are created as needed, and a
//! listing walks directories. Bytes are streamed both ways, never held whole.

use std::{fmt, io, ops::Range, sync::Arc};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, RenameTargetMode, UploadPart, path::Path as Key,
};
use tokio::sync::{mpsc, oneshot};

/// One directory entry, or what a stat says.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) is_dir: bool,
    pub(crate) size: u64,
    pub(crate) modified: Option<DateTime<Utc>>,
}

pub(crate) type ByteStream = BoxStream<'static, io::Result<Bytes>>;

/// What a file-tree backend does. Paths are the server's (`/abs/path` or relative to the
/// login directory); errors of kind `NotFound` mean a missing file.
#[async_trait]
pub(crate) trait RemoteFs: Send + Sync + fmt::Debug + 'static {
    /// `sftp`, `ftp`, `webdav` (for messages).
    fn scheme(&self) -> &'static str;
    /// How many times a read cut off is opened again at the byte it reached (the profile's
    /// max_retries).
    fn max_retries(&self) -> usize;
    /// None when nothing is at `path`.
    async fn stat(&self, path: &str) -> io::Result<Option<Entry>>;
    /// A directory's entries (without `.` and `..`).
    async fn list_dir(&self, path: &str) -> io::Result<Vec<Entry>>;
    /// The file's bytes from `offset` on.
    async fn read(&self, path: &str, offset: u64) -> io::Result<ByteStream>;
    /// Creates or truncates `path` and writes the stream to it; an error from the stream stops
    /// the write and is returned.
    async fn write(&self, path: &str, data: ByteStream) -> io::Result<()>;
    /// One directory (its parent exists).
    async fn mkdir(&self, path: &str) -> io::Result<()>;
    async fn remove_file(&self, path: &str) -> io::Result<()>;
    /// Renames, replacing `to` when it exists.
    async fn rename(&self, from: &str, to: &str) -> io::Result<()>;
}

/// A [`RemoteFs`] under a root, as an object store.
#[derive(Clone)]
pub(crate) struct FsStore {
    fs: Arc<dyn RemoteFs>,
    /// `/` (absolute paths), `` (the login directory) or a directory.
    root: String,
    /// `sftp://host` (for Display).
    shown: String,
}

/// A read that a cut connection interrupted: opened again at the byte it reached, up to the
/// profile's max_retries, as object_store resumes an object's GET, unless the file changed (its
/// size or modification time) in between.
struct Resumed {
    store: FsStore,
    path: String,
    entry: Entry,
    tries: usize,
}

impl Resumed {
    async fn again(&mut self, cut: io::Error, at: u64) -> object_store::Result<ByteStream> {
        let fs = &self.store.fs;
        if self.tries >= fs.max_retries() {
            return Err(self.store.err(&self.path, cut));
        }
        self.tries += 1;
        // The scheme and the attempt only: a path is a tool argument, never logged.
        tracing::info!(
            scheme = fs.scheme(),
            attempt = self.tries,
            "a read was cut off; opening it again where it stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250 * self.tries as u64)).await;
        let now = fs
            .stat(&self.path)
            .await
            .map_err(|e| self.store.err(&self.path, e))?;
        let same =
            now.is_some_and(|n| n.size == self.entry.size && n.modified == self.entry.modified);
        if !same {
            return Err(self.store.err(&self.path, cut));
        }
        fs.read(&self.path, at)
            .await
            .map_err(|e| self.store.err(&self.path, e))
    }
}

impl fmt::Debug for FsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FsStore({})", self.shown)
    }
}

impl fmt::Display for FsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

fn not_found(path: &str) -> object_store::Error {
    object_store::Error::NotFound {
        path: path.to_string(),
        source: "no such file".into(),
    }
}

impl FsStore {
    pub(crate) fn new(fs: Arc<dyn RemoteFs>, root: &str, shown: String) -> Self {
        Self {
            fs,
            root: root.to_string(),
            shown,
        }
    }

    /// The server path of a key (or of the root, for None).
    pub(crate) fn path(&self, key: Option<&Key>) -> String {
        let k = key.map(|k| k.as_ref()).unwrap_or("");
        match (self.root.as_str(), k) {
            ("", "") => ".".to_string(),
            ("", k) => k.to_string(),
            (root, "") => root.to_string(),
            ("/", k) => format!("/{k}"),
            (root, k) => format!("{}/{k}", root.trim_end_matches('/')),
        }
    }

    fn err(&self, path: &str, e: io::Error) -> object_store::Error {
        match e.kind() {
            io::ErrorKind::NotFound => not_found(path),
            io::ErrorKind::AlreadyExists => object_store::Error::AlreadyExists {
                path: path.to_string(),
                source: Box::new(e),
            },
            _ => object_store::Error::Generic {
                store: self.fs.scheme(),
                source: format!("{path}: {e}").into(),
            },
        }
    }

    fn meta(&self, key: Key, e: &Entry) -> ObjectMeta {
        ObjectMeta {
            location: key,
            last_modified: e.modified.unwrap_or_default(),
            size: e.size,
            e_tag: None,
            version: None,
        }
    }

    async fn file(&self, key: &Key) -> object_store::Result<(String, Entry)> {
        let path = self.path(Some(key));
        match self.fs.stat(&path).await.map_err(|e| self.err(&path, e))? {
            Some(e) if !e.is_dir => Ok((path, e)),
            _ => Err(not_found(&path)),
        }
    }

    /// Creates the directories above a key that are missing.
    async fn parents(&self, key: &Key) -> object_store::Result<()> {
        let parts: Vec<_> = key.parts().collect();
        let mut dir: Option<Key> = None;
        for part in &parts[..parts.len().saturating_sub(1)] {
            let next = match &dir {
                None => Key::from_iter([part.clone()]),
                Some(d) => d.clone().join(part.clone()),
            };
            let path = self.path(Some(&next));
            match self.fs.stat(&path).await.map_err(|e| self.err(&path, e))? {
                Some(e) if e.is_dir => {}
                Some(_) => {
                    return Err(self.err(
                        &path,
                        io::Error::other("a file is where a directory is needed"),
                    ));
                }
                None => match self.fs.mkdir(&path).await {
                    Ok(()) => {}
                    // Another writer made it in between.
                    Err(_) if matches!(self.fs.stat(&path).await, Ok(Some(e)) if e.is_dir) => {}
                    Err(e) => return Err(self.err(&path, e)),
                },
            }
            dir = Some(next);
        }
        Ok(())
    }

    async fn refuse_existing(&self, key: &Key) -> object_store::Result<()> {
        let path = self.path(Some(key));
        if self
            .fs
            .stat(&path)
            .await
            .map_err(|e| self.err(&path, e))?
            .is_some()
        {
            return Err(object_store::Error::AlreadyExists {
                path,
                source: "the target exists".into(),
            });
        }
        Ok(())
    }

    /// Writes a stream to `<path>.part`, then renames it over the key's path.
    async fn write_whole(&self, key: &Key, data: ByteStream) -> object_store::Result<()> {
        self.parents(key).await?;
        let path = self.path(Some(key));
        let part = format!("{path}.part");
        if let Err(e) = self.fs.write(&part, data).await {
            let _ = self.fs.remove_file(&part).await;
            return Err(self.err(&path, e));
        }
        if let Err(e) = self.fs.rename(&part, &path).await {
            let _ = self.fs.remove_file(&part).await;
            return Err(self.err(&path, e));
        }
        Ok(())
    }

    fn walk(&self, prefix: Option<&Key>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let store = self.clone();
        let start = prefix.cloned();
        futures::stream::try_unfold(
            (vec![start], Vec::<ObjectMeta>::new()),
            move |(mut dirs, mut ready)| {
                let store = store.clone();
                async move {
                    loop {
                        if let Some(m) = ready.pop() {
                            return Ok(Some((m, (dirs, ready))));
                        }
                        let Some(dir) = dirs.pop() else {
                            return Ok(None);
                        };
                        let path = store.path(dir.as_ref());
                        let entries = match store.fs.list_dir(&path).await {
                            Ok(e) => e,
                            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                            Err(e) => return Err(store.err(&path, e)),
                        };
                        for e in entries {
                            let key = match &dir {
                                None => Key::from_iter([e.name.as_str()]),
                                Some(d) => d.clone().join(e.name.as_str()),
                            };
                            if e.is_dir {
                                dirs.push(Some(key));
                            } else {
                                ready.push(store.meta(key, &e));
                            }
                        }
                    }
                }
            },
        )
        .boxed()
    }
}

fn range_of(r: &GetRange, size: u64) -> object_store::Result<Range<u64>> {
    let bad = |what: String| object_store::Error::Generic {
        store: "range",
        source: what.into(),
    };
    match r {
        GetRange::Bounded(r) if r.start < r.end && r.start < size => Ok(r.start..r.end.min(size)),
        GetRange::Offset(o) if *o < size => Ok(*o..size),
        GetRange::Suffix(n) => Ok(size.saturating_sub(*n)..size),
        other => Err(bad(format!("{other} is outside a file of {size} bytes"))),
    }
}

#[async_trait]
impl ObjectStore for FsStore {
    async fn put_opts(
        &self,
        location: &Key,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match opts.mode {
            PutMode::Overwrite => {}
            PutMode::Create => self.refuse_existing(location).await?,
            PutMode::Update(_) => {
                return Err(object_store::Error::NotImplemented {
                    operation: "conditional update".into(),
                    implementer: self.fs.scheme().into(),
                });
            }
        }
        let chunks: Vec<io::Result<Bytes>> = payload.into_iter().map(Ok).collect();
        self.write_whole(location, futures::stream::iter(chunks).boxed())
            .await?;
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Key,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.parents(location).await?;
        let path = self.path(Some(location));
        let part = format!("{path}.part");
        let (tx, rx) = mpsc::unbounded_channel::<(PutPayload, oneshot::Sender<()>)>();
        // Each part is acknowledged once the backend has taken its last byte, so the parts in
        // flight stay bounded by the writer's concurrency.
        let data = futures::stream::unfold(rx, |mut rx| async move {
            let (payload, ack) = rx.recv().await?;
            let bytes = futures::stream::iter(payload.into_iter().map(Ok));
            let acked = futures::stream::once(async move {
                let _ = ack.send(());
                Ok(Bytes::new())
            });
            Some((bytes.chain(acked), rx))
        })
        .flatten()
        .try_filter(|b| std::future::ready(!b.is_empty()))
        .boxed();
        let fs = self.fs.clone();
        let to = part.clone();
        let task = tokio::spawn(async move { fs.write(&to, data).await });
        Ok(Box::new(FsUpload {
            store: self.clone(),
            path,
            part,
            parts: Some(tx),
            task: Some(task),
        }))
    }

    async fn get_opts(
        &self,
        location: &Key,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let (path, entry) = self.file(location).await?;
        let meta = self.meta(location.clone(), &entry);
        let range = match &options.range {
            Some(r) => range_of(r, entry.size)?,
            None => 0..entry.size,
        };
        let payload = if options.head {
            futures::stream::empty().boxed()
        } else {
            let stream = self
                .fs
                .read(&path, range.start)
                .await
                .map_err(|e| self.err(&path, e))?;
            let read = Resumed {
                store: self.clone(),
                path,
                entry: entry.clone(),
                tries: 0,
            };
            let left = range.end - range.start;
            futures::stream::try_unfold(
                (stream, left, range.start, read),
                |(mut s, left, at, mut read)| async move {
                    loop {
                        if left == 0 {
                            return Ok(None);
                        }
                        match s.next().await {
                            // Ended before the size the stat gave: cut off as well.
                            None => {
                                let early = io::Error::new(
                                    io::ErrorKind::UnexpectedEof,
                                    format!("the read ended {left} bytes early"),
                                );
                                s = read.again(early, at).await?;
                            }
                            Some(Ok(mut b)) => {
                                if b.len() as u64 > left {
                                    b.truncate(left as usize);
                                }
                                let n = b.len() as u64;
                                return Ok(Some((b, (s, left - n, at + n, read))));
                            }
                            Some(Err(e)) => s = read.again(e, at).await?,
                        }
                    }
                },
            )
            .boxed()
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(payload),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Key>>,
    ) -> BoxStream<'static, object_store::Result<Key>> {
        let store = self.clone();
        locations
            .and_then(move |k| {
                let store = store.clone();
                async move {
                    let path = store.path(Some(&k));
                    match store.fs.remove_file(&path).await {
                        Ok(()) => Ok(k),
                        // As an object store's delete: a missing object is not an error.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(k),
                        Err(e) => Err(store.err(&path, e)),
                    }
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Key>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.walk(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Key>) -> object_store::Result<ListResult> {
        let path = self.path(prefix);
        let entries = match self.fs.list_dir(&path).await {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(self.err(&path, e)),
        };
        let mut out = ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
            extensions: Default::default(),
        };
        for e in entries {
            let key = match prefix {
                None => Key::from_iter([e.name.as_str()]),
                Some(p) => p.clone().join(e.name.as_str()),
            };
            if e.is_dir {
                out.common_prefixes.push(key);
            } else {
                out.objects.push(self.meta(key, &e));
            }
        }
        Ok(out)
    }

    async fn copy_opts(
        &self,
        from: &Key,
        to: &Key,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        if options.mode == CopyMode::Create {
            self.refuse_existing(to).await?;
        }
        let (path, _) = self.file(from).await?;
        let data = self
            .fs
            .read(&path, 0)
            .await
            .map_err(|e| self.err(&path, e))?;
        self.write_whole(to, data).await
    }

    async fn rename_opts(
        &self,
        from: &Key,
        to: &Key,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        if options.target_mode == RenameTargetMode::Create {
            self.refuse_existing(to).await?;
        }
        let (path, _) = self.file(from).await?;
        self.parents(to).await?;
        let target = self.path(Some(to));
        self.fs
            .rename(&path, &target)
            .await
            .map_err(|e| self.err(&target, e))
    }
}

/// A write in progress: parts go to the backend's writer task in order.
struct FsUpload {
    store: FsStore,
    path: String,
    part: String,
    parts: Option<mpsc::UnboundedSender<(PutPayload, oneshot::Sender<()>)>>,
    task: Option<tokio::task::JoinHandle<io::Result<()>>>,
}

impl fmt::Debug for FsUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FsUpload({})", self.path)
    }
}

impl FsUpload {
    async fn finish_task(&mut self) -> io::Result<()> {
        self.parts = None;
        match self.task.take() {
            Some(t) => t.await.unwrap_or_else(|e| Err(io::Error::other(e))),
            None => Err(io::Error::other("the upload was already finished")),
        }
    }
}

impl Drop for FsUpload {
    fn drop(&mut self) {
        // Neither completed nor aborted (the call was dropped): stop and remove the part file.
        if let Some(task) = self.task.take() {
            task.abort();
            let fs = self.store.fs.clone();
            let part = self.part.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = fs.remove_file(&part).await;
                });
            }
        }
    }
}

#[async_trait]
impl MultipartUpload for FsUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let (ack, acked) = oneshot::channel();
        let sent = self.parts.as_ref().map(|p| p.send((data, ack)).is_ok());
        let scheme = self.store.fs.scheme();
        Box::pin(async move {
            if sent == Some(true) && acked.await.is_ok() {
                return Ok(());
            }
            Err(object_store::Error::Generic {
                store: scheme,
                source: "the remote write stopped".into(),
            })
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if let Err(e) = self.finish_task().await {
            let _ = self.store.fs.remove_file(&self.part).await;
            return Err(self.store.err(&self.path, e));
        }
        if let Err(e) = self.store.fs.rename(&self.part, &self.path).await {
            let _ = self.store.fs.remove_file(&self.part).await;
            return Err(self.store.err(&self.path, e));
        }
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.parts = None;
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        match self.store.fs.remove_file(&self.part).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.store.err(&self.part, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    #[async_trait]
    impl RemoteFs for Nothing {
        fn max_retries(&self) -> usize {
            0
        }
        fn scheme(&self) -> &'static str {
            "test"
        }
        async fn stat(&self, _: &str) -> io::Result<Option<Entry>> {
            Ok(None)
        }
        async fn list_dir(&self, _: &str) -> io::Result<Vec<Entry>> {
            Ok(Vec::new())
        }
        async fn read(&self, _: &str, _: u64) -> io::Result<ByteStream> {
            Err(io::ErrorKind::NotFound.into())
        }
        async fn write(&self, _: &str, _: ByteStream) -> io::Result<()> {
            Ok(())
        }
        async fn mkdir(&self, _: &str) -> io::Result<()> {
            Ok(())
        }
        async fn remove_file(&self, _: &str) -> io::Result<()> {
            Ok(())
        }
        async fn rename(&self, _: &str, _: &str) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn keys_map_under_the_root() {
        let k = Key::parse("a/b.txt").unwrap();
        let at = |root: &str| FsStore::new(Arc::new(Nothing), root, "t".into());
        assert_eq!(at("/").path(Some(&k)), "/a/b.txt");
        assert_eq!(at("").path(Some(&k)), "a/b.txt");
        assert_eq!(at("/srv/").path(Some(&k)), "/srv/a/b.txt");
        assert_eq!(at("").path(None), ".");
        assert_eq!(at("/").path(None), "/");
    }

    #[test]
    fn ranges_inside_the_file() {
        assert_eq!(range_of(&GetRange::Bounded(2..50), 10).unwrap(), 2..10);
        assert_eq!(range_of(&GetRange::Offset(3), 10).unwrap(), 3..10);
        assert_eq!(range_of(&GetRange::Suffix(4), 10).unwrap(), 6..10);
        assert!(range_of(&GetRange::Offset(10), 10).is_err());
        assert!(range_of(&GetRange::Bounded(5..5), 10).is_err());
    }
}
