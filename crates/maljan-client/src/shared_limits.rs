//! Per-server limits held across workers. Workers that share a PostgreSQL database share, for each
//! remote (HTTP) tool server:
//!
//! - **the concurrency cap**: a call in flight holds one of the server's `max_concurrent_calls`
//!   slots, each a session advisory lock (`pg_try_advisory_lock(server key, slot)`) taken on this
//!   process's limits connection. PostgreSQL frees a dead worker's slots with its session, so there
//!   is no lease to renew and no row to clean up.
//! - **the breaker's rest**: the worker whose breaker opens writes the rest to `server_rests` and
//!   announces it (`NOTIFY maljan_breaker`); every worker's breaker then rests until the same time.
//!   After the cooldown one worker claims the trial in that row and the others are refused until
//!   it is answered (the row deleted, announced) or its claim runs out.
//!
//! The per-process cap and breaker stay in front ([`crate::breaker`], the runtime's semaphore); the
//! database is asked only by calls that passed them. A stdio server is each worker's own child
//! process and keeps per-process limits. When the database cannot be reached, calls go on under
//! the per-process limits alone (said once in the log): an outage of the queue's database must not
//! stop the calls of jobs already running.
//!
//! One thread owns the connection the slots are held on (session locks belong to one session);
//! another waits for announcements on a connection of its own.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, mpsc},
    time::{Duration, Instant, SystemTime},
};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::breaker::Breaker;

/// The channel rests and recoveries are announced on.
pub const BREAKER_CHANNEL: &str = "maljan_breaker";
/// The channel a slot given back is announced on, so waiting workers try again at once.
pub const SLOTS_CHANNEL: &str = "maljan_slots";

/// How often the listener looks up from waiting to see whether it is still wanted.
const POLL: Duration = Duration::from_millis(100);
/// How long after a failed connection the next attempt waits.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between two tries for a slot while every slot is held, unless one is
/// announced free sooner.
const MAX_SLOT_PAUSE: Duration = Duration::from_millis(50);

/// What a try for a slot found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acquired {
    Slot(i32),
    /// Every slot is held, by this worker or others.
    Full,
    /// The database cannot be reached: the per-process cap alone applies.
    Unavailable,
}

/// What a claim for the trial call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trial {
    /// This worker sends the trial (or no worker rests the server any more).
    Mine,
    /// Another worker's trial is out, or the rest was made longer.
    Elsewhere,
    /// The database cannot be reached: the per-process breaker alone decides.
    Unavailable,
}

/// An announcement on [`BREAKER_CHANNEL`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Announcement {
    server: String,
    /// Resting until then (ms since the epoch); `None`: the server answered again.
    until_ms: Option<i64>,
    #[serde(default)]
    failures: u32,
    #[serde(default)]
    reason: String,
}

enum Request {
    Acquire {
        key: i32,
        cap: usize,
        reply: oneshot::Sender<Acquired>,
    },
    Release {
        key: i32,
        slot: i32,
    },
    Rest(Announcement),
    ClaimTrial {
        server: String,
        lease: Duration,
        reply: oneshot::Sender<Trial>,
    },
    Recovered {
        server: String,
    },
}

/// The limits a process shares with the other workers on one database.
pub struct SharedLimits {
    tx: mpsc::Sender<Request>,
    /// Woken when a slot is given back, here or (announced) by another worker.
    freed: tokio::sync::Notify,
}

impl std::fmt::Debug for SharedLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedLimits")
    }
}

/// One slot of a server's shared cap, given back when dropped.
pub(crate) struct SharedPermit {
    limits: Arc<SharedLimits>,
    key: i32,
    slot: i32,
}

impl Drop for SharedPermit {
    fn drop(&mut self) {
        let _ = self.limits.tx.send(Request::Release {
            key: self.key,
            slot: self.slot,
        });
    }
}

impl SharedLimits {
    /// Starts the limits thread on the PostgreSQL database at `url`; `breakers` are the shared
    /// servers' breakers, which announced rests and recoveries are applied to.
    pub fn start(url: &str, breakers: HashMap<String, Arc<Breaker>>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel();
        let link = Link {
            url: url.to_string(),
            worker: format!("{}-{:016x}", std::process::id(), rand::random::<u64>()),
            client: None,
            next_attempt: Instant::now(),
            held: HashMap::new(),
            said_down: false,
        };
        let limits = Arc::new(Self {
            tx,
            freed: tokio::sync::Notify::new(),
        });
        let weak = Arc::downgrade(&limits);
        let url = url.to_string();
        let spawned = std::thread::Builder::new()
            .name("maljan-limits".into())
            .spawn(move || link.run(rx))
            .and_then(|_| {
                std::thread::Builder::new()
                    .name("maljan-rests".into())
                    .spawn(move || listen(&url, &weak, &breakers))
            });
        if let Err(e) = spawned {
            tracing::warn!("shared limits: {e}; each worker keeps its own limits");
        }
        limits
    }

    /// Waits for one of `cap` slots of `server`; `None` when the database cannot be reached.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        server: &str,
        cap: usize,
    ) -> Option<SharedPermit> {
        let key = server_key(server);
        let mut pause = Duration::from_millis(2);
        loop {
            // Listening before the try: a slot freed between the try and the wait is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let (reply, answer) = oneshot::channel();
            self.tx.send(Request::Acquire { key, cap, reply }).ok()?;
            match answer.await.unwrap_or(Acquired::Unavailable) {
                Acquired::Slot(slot) => {
                    return Some(SharedPermit {
                        limits: self.clone(),
                        key,
                        slot,
                    });
                }
                Acquired::Full => {
                    let _ = tokio::time::timeout(pause, freed).await;
                    pause = (pause * 2).min(MAX_SLOT_PAUSE);
                }
                Acquired::Unavailable => return None,
            }
        }
    }

    /// Tells every worker that `server` rests until `until`.
    pub(crate) fn announce_rest(
        &self,
        server: &str,
        until: SystemTime,
        failures: u32,
        reason: &str,
    ) {
        let _ = self.tx.send(Request::Rest(Announcement {
            server: server.to_string(),
            until_ms: Some(epoch_ms(until)),
            failures,
            reason: reason.to_string(),
        }));
    }

    /// Tells every worker that `server` answered its trial.
    pub(crate) fn announce_recovered(&self, server: &str) {
        let _ = self.tx.send(Request::Recovered {
            server: server.to_string(),
        });
    }

    /// Claims the one trial call after a rest, for `lease` (the call's own time limit and a
    /// margin: a worker that dies mid-trial hands it on then).
    pub(crate) async fn claim_trial(&self, server: &str, lease: Duration) -> Trial {
        let (reply, answer) = oneshot::channel();
        let sent = self.tx.send(Request::ClaimTrial {
            server: server.to_string(),
            lease,
            reply,
        });
        if sent.is_err() {
            return Trial::Unavailable;
        }
        answer.await.unwrap_or(Trial::Unavailable)
    }
}

/// The advisory-lock key of a server's cap: its name hashed (FNV-1a), the same in every worker.
fn server_key(server: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in "maljan-cap:".bytes().chain(server.bytes()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h as i32
}

fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The limits thread's side: the connection and the slots this process holds on it.
struct Link {
    url: String,
    worker: String,
    client: Option<postgres::Client>,
    next_attempt: Instant,
    /// Slots held per server key. A session may take an advisory lock it already holds again, so
    /// the database cannot tell two calls of this process apart: this set does.
    held: HashMap<i32, BTreeSet<i32>>,
    said_down: bool,
}

impl Link {
    fn run(mut self, rx: mpsc::Receiver<Request>) {
        while let Ok(request) = rx.recv() {
            self.handle(request);
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Acquire { key, cap, reply } => {
                let _ = reply.send(self.acquire(key, cap));
            }
            Request::Release { key, slot } => self.release(key, slot),
            Request::Rest(a) => {
                let _ = self.with_client(|c, _| rest(c, &a));
            }
            Request::ClaimTrial {
                server,
                lease,
                reply,
            } => {
                let claim = self.with_client(|c, worker| claim_trial(c, worker, &server, lease));
                let _ = reply.send(claim.unwrap_or(Trial::Unavailable));
            }
            Request::Recovered { server } => {
                let _ = self.with_client(|c, _| recovered(c, &server));
            }
        }
    }

    fn acquire(&mut self, key: i32, cap: usize) -> Acquired {
        let held = self.held.get(&key).cloned().unwrap_or_default();
        let got = self.with_client(|c, _| {
            for slot in (0..cap as i32).filter(|s| !held.contains(s)) {
                let row = c.query_one("SELECT pg_try_advisory_lock($1, $2)", &[&key, &slot])?;
                if row.get::<_, bool>(0) {
                    return Ok(Some(slot));
                }
            }
            Ok(None)
        });
        match got {
            Some(Some(slot)) => {
                self.held.entry(key).or_default().insert(slot);
                Acquired::Slot(slot)
            }
            Some(None) => Acquired::Full,
            None => Acquired::Unavailable,
        }
    }

    fn release(&mut self, key: i32, slot: i32) {
        // A slot taken on a session that has since been lost is free already.
        let was_held = self.held.get_mut(&key).is_some_and(|s| s.remove(&slot));
        if was_held {
            let _ = self.with_client(|c, _| {
                c.execute(
                    "SELECT pg_advisory_unlock($1, $2), pg_notify($3, '')",
                    &[&key, &slot, &SLOTS_CHANNEL],
                )
                .map(|_| ())
            });
        }
    }

    /// Runs `f` on the connection, made if needed; `None` when the database cannot be reached
    /// (the connection is then dropped, and with it the slots it held).
    fn with_client<T>(
        &mut self,
        f: impl FnOnce(&mut postgres::Client, &str) -> Result<T, postgres::Error>,
    ) -> Option<T> {
        if self.client.is_none() && Instant::now() >= self.next_attempt {
            self.connect();
        }
        let client = self.client.as_mut()?;
        match f(client, &self.worker) {
            Ok(v) => Some(v),
            Err(e) => {
                self.lost(&e.to_string());
                None
            }
        }
    }

    fn connect(&mut self) {
        match postgres::Client::connect(&self.url, postgres::NoTls) {
            Ok(client) => {
                if self.said_down {
                    tracing::info!("shared limits: the database answers again");
                }
                self.said_down = false;
                self.client = Some(client);
            }
            Err(e) => self.lost(&e.to_string()),
        }
    }

    fn lost(&mut self, why: &str) {
        if !self.said_down {
            tracing::warn!(
                "shared limits: {why}; each worker keeps its own cap and breaker until the database answers"
            );
            self.said_down = true;
        }
        self.client = None;
        self.held.clear();
        self.next_attempt = Instant::now() + RECONNECT_PAUSE;
    }
}

/// The listener's side: hears rests and recoveries on its own connection (a session waiting for
/// announcements cannot also serve the slot requests promptly) and applies them to the breakers.
/// It ends once the [`SharedLimits`] it serves is dropped.
fn listen(
    url: &str,
    limits: &std::sync::Weak<SharedLimits>,
    breakers: &HashMap<String, Arc<Breaker>>,
) {
    let mut said_down = false;
    while limits.strong_count() > 0 {
        match listen_once(url, limits, breakers) {
            Err(e) if !said_down => {
                tracing::warn!("shared limits: listening for rests: {e}; trying again");
                said_down = true;
            }
            _ => {}
        }
        std::thread::sleep(RECONNECT_PAUSE);
    }
}

fn listen_once(
    url: &str,
    limits: &std::sync::Weak<SharedLimits>,
    breakers: &HashMap<String, Arc<Breaker>>,
) -> Result<(), postgres::Error> {
    use postgres::fallible_iterator::FallibleIterator;
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(&format!("LISTEN {BREAKER_CHANNEL}; LISTEN {SLOTS_CHANNEL}"))?;
    // Rests announced before this worker listened.
    for r in client.query(
        "SELECT server, until_ms, failures, reason FROM server_rests",
        &[],
    )? {
        apply(
            breakers,
            &Announcement {
                server: r.get(0),
                until_ms: Some(r.get(1)),
                failures: u32::try_from(r.get::<_, i64>(2)).unwrap_or(u32::MAX),
                reason: r.get(3),
            },
        );
    }
    let mut notes = client.notifications();
    while limits.strong_count() > 0 {
        // A fresh iterator each time: one whose timeout has passed no longer waits.
        if let Some(n) = notes.timeout_iter(POLL).next()? {
            if n.channel() == SLOTS_CHANNEL {
                if let Some(l) = limits.upgrade() {
                    l.freed.notify_waiters();
                }
                continue;
            }
            match serde_json::from_str::<Announcement>(n.payload()) {
                Ok(a) => apply(breakers, &a),
                Err(e) => tracing::warn!("shared limits: an announcement that is not one: {e}"),
            }
        }
    }
    Ok(())
}

fn apply(breakers: &HashMap<String, Arc<Breaker>>, a: &Announcement) {
    let Some(breaker) = breakers.get(&a.server) else {
        return;
    };
    match a.until_ms {
        Some(ms) => breaker.rest_from_peer(
            SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64),
            a.failures,
            &a.reason,
        ),
        None => breaker.close_from_peer(),
    }
}

fn announce(c: &mut postgres::Client, a: &Announcement) -> Result<(), postgres::Error> {
    let payload = serde_json::to_string(a).unwrap_or_default();
    c.execute("SELECT pg_notify($1, $2)", &[&BREAKER_CHANNEL, &payload])
        .map(|_| ())
}

fn rest(c: &mut postgres::Client, a: &Announcement) -> Result<(), postgres::Error> {
    let until = a.until_ms.unwrap_or(0);
    c.execute(
        "INSERT INTO server_rests(server, until_ms, failures, reason) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (server) DO UPDATE SET until_ms = GREATEST(server_rests.until_ms, EXCLUDED.until_ms), \
         failures = EXCLUDED.failures, reason = EXCLUDED.reason, trial_by = NULL, trial_until_ms = NULL",
        &[&a.server, &until, &i64::from(a.failures), &a.reason],
    )?;
    announce(c, a)
}

fn claim_trial(
    c: &mut postgres::Client,
    worker: &str,
    server: &str,
    lease: Duration,
) -> Result<Trial, postgres::Error> {
    let now = crate::time::now_ms();
    let lease_until = now + lease.as_millis() as i64;
    let claimed = c.execute(
        "UPDATE server_rests SET trial_by = $2, trial_until_ms = $3 WHERE server = $1 AND until_ms <= $4 \
         AND (trial_by IS NULL OR trial_by = $2 OR trial_until_ms < $4)",
        &[&server, &worker, &lease_until, &now],
    )?;
    if claimed == 1 {
        return Ok(Trial::Mine);
    }
    let resting = c
        .query_opt("SELECT 1 FROM server_rests WHERE server = $1", &[&server])?
        .is_some();
    Ok(if resting {
        Trial::Elsewhere
    } else {
        Trial::Mine
    })
}

fn recovered(c: &mut postgres::Client, server: &str) -> Result<(), postgres::Error> {
    c.execute("DELETE FROM server_rests WHERE server = $1", &[&server])?;
    announce(
        c,
        &Announcement {
            server: server.to_string(),
            until_ms: None,
            failures: 0,
            reason: String::new(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_keys_are_stable_and_tell_servers_apart() {
        assert_eq!(server_key("analysis"), server_key("analysis"));
        assert_ne!(server_key("analysis"), server_key("files"));
    }

    #[test]
    fn announcements_read_back_and_junk_is_refused() {
        let a = Announcement {
            server: "s".into(),
            until_ms: Some(5),
            failures: 3,
            reason: "timeout".into(),
        };
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Announcement>(&text).unwrap(), a);
        let closed: Announcement =
            serde_json::from_str(r#"{"server":"s","until_ms":null}"#).unwrap();
        assert_eq!(closed.until_ms, None);
        assert!(serde_json::from_str::<Announcement>("{not json").is_err());
    }
}
