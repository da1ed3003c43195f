//! The upload cache: which servers already hold which sample, per (server name, its URL,
//! sha256), for 30 minutes. The runtime holds one (no globals), shared by all its jobs. It is
//! single-flight: two jobs that hand the same sample to the same server at the same moment share
//! one upload; a failed upload is not cached, so the next job tries again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;

/// How long a server is trusted to still hold an uploaded sample.
pub const UPLOAD_TTL: Duration = Duration::from_secs(30 * 60);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    server: String,
    /// The server's URL: a server renamed or re-pointed in the config is another server.
    url: String,
    sha256: String,
}

struct Entry {
    cell: OnceCell<(String, Instant)>,
}

/// Where each sample was staged, per server.
pub struct UploadCache {
    ttl: Duration,
    entries: Mutex<HashMap<Key, Arc<Entry>>>,
}

impl std::fmt::Debug for UploadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadCache")
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Default for UploadCache {
    fn default() -> Self {
        Self::with_ttl(UPLOAD_TTL)
    }
}

impl UploadCache {
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The staged path for (server, url, sha256): from the cache (`cached` = true), or by running
    /// `upload` — once, however many callers ask at the same time. An error is returned to the
    /// caller whose upload failed and is not kept; a caller that was waiting then tries its own.
    pub async fn get_or_upload<F, Fut, E>(
        &self,
        server: &str,
        url: &str,
        sha256: &str,
        upload: F,
    ) -> Result<(String, bool), E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<String, E>>,
    {
        let key = Key {
            server: server.to_string(),
            url: url.to_string(),
            sha256: sha256.to_string(),
        };
        let entry = {
            let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            let ttl = self.ttl;
            // Drop what has expired, so the map stays the size of the live uploads.
            map.retain(|_, e| e.cell.get().is_none_or(|(_, at)| at.elapsed() < ttl));
            map.entry(key)
                .or_insert_with(|| {
                    Arc::new(Entry {
                        cell: OnceCell::new(),
                    })
                })
                .clone()
        };
        let mut ran = false;
        let (path, _) = entry
            .cell
            .get_or_try_init(|| {
                ran = true;
                async { upload().await.map(|p| (p, Instant::now())) }
            })
            .await?;
        Ok((path.clone(), !ran))
    }

    /// Forgets every upload (tests; a server known to have lost its staging directory).
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn concurrent_callers_share_one_upload_and_later_ones_hit_the_cache() {
        let cache = Arc::new(UploadCache::default());
        let uploads = Arc::new(AtomicU32::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (cache, uploads, gate) = (cache.clone(), uploads.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_upload("s", "http://h/mcp", "ab", || async move {
                        uploads.fetch_add(1, Ordering::SeqCst);
                        gate.notified().await;
                        Ok::<_, String>("/srv/ab/x".to_string())
                    })
                    .await
            }));
        }
        tokio::task::yield_now().await;
        // Wake the one uploader (notify_one stores a permit if it is not waiting yet).
        gate.notify_one();
        let mut cached = 0;
        for t in tasks {
            let (path, was_cached) = t.await.unwrap().unwrap();
            assert_eq!(path, "/srv/ab/x");
            cached += usize::from(was_cached);
        }
        assert_eq!(
            uploads.load(Ordering::SeqCst),
            1,
            "one upload for four callers"
        );
        assert_eq!(cached, 3);
        let again = cache
            .get_or_upload("s", "http://h/mcp", "ab", || async {
                Err("must not run".to_string())
            })
            .await
            .unwrap();
        assert_eq!(again, ("/srv/ab/x".to_string(), true));
        // Another URL under the same name is another server.
        let other = cache
            .get_or_upload("s", "http://other/mcp", "ab", || async {
                Ok::<_, String>("/o".to_string())
            })
            .await
            .unwrap();
        assert_eq!(other, ("/o".to_string(), false));
    }

    #[tokio::test]
    async fn failures_are_not_cached_and_entries_expire() {
        let cache = UploadCache::with_ttl(Duration::from_millis(30));
        let failed = cache
            .get_or_upload("s", "u", "ab", || async { Err::<String, _>("boom") })
            .await;
        assert_eq!(failed, Err("boom"));
        let ok = cache
            .get_or_upload("s", "u", "ab", || async { Ok::<_, &str>("/p".to_string()) })
            .await;
        assert_eq!(ok, Ok(("/p".to_string(), false)));
        tokio::time::sleep(Duration::from_millis(40)).await;
        let fresh = cache
            .get_or_upload("s", "u", "ab", || async { Ok::<_, &str>("/q".to_string()) })
            .await;
        assert_eq!(
            fresh,
            Ok(("/q".to_string(), false)),
            "an expired entry is uploaded again"
        );
    }
}
