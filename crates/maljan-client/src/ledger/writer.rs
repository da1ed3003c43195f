//! The ledger's writer thread: the only owner of the SQLite connection.
//!
//! Records arrive over a channel, either journaled already (the caller has returned; see
//! [`super::journal`]) or with an acknowledgement to send once the transaction holding the row
//! committed (WAL with `synchronous=NORMAL`: the commit is in the WAL file, i.e. the OS page cache,
//! so a process kill cannot lose it).
//!
//! Group commit: the thread takes whatever is queued (up to [`MAX_BATCH`]) and writes it in one
//! transaction, so many concurrent callers share one commit; journaled rows first linger a
//! moment ([`LINGER`]) so that sequential callers share one too. Other operations (jobs, degradations,
//! reads) run on the same thread in queue order, each after the records queued before it are
//! committed; they are rare, and one connection keeps in-memory ledgers and ordering simple.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, Sender},
    },
    thread::JoinHandle,
};

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::{LedgerEntry, journal::Journal};

/// Enough rows per transaction that a commit's fixed cost is spread thin, few enough that the
/// first caller in a batch does not wait long for the last row to be written.
pub(super) const MAX_BATCH: usize = 1024;

/// How long the thread lets journaled rows gather before committing them. Rows are safe in the
/// journal meanwhile; only their appearance in SQLite waits, and work queued behind them (a
/// commit-mode record, a read) waits at most this long.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

pub(super) type Ack = oneshot::Sender<Result<(), String>>;
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

pub(super) enum Op {
    /// A record whose caller waits for the commit.
    Record(Box<LedgerEntry>, Ack),
    /// A record already safe in the journal under this sequence number; nobody waits.
    Journaled(Box<LedgerEntry>, u64),
    Run(Job),
}

/// One row of a batch and who to tell when it is committed.
enum Done {
    Ack(Ack),
    Journal(u64),
}

/// The sending side; dropping it lets the thread finish the queue and stop (and joins it).
pub(super) struct Writer {
    tx: Option<Sender<Op>>,
    thread: Option<JoinHandle<()>>,
    /// Transactions that wrote call rows (rows per commit shows the grouping at work).
    commits: Arc<AtomicU64>,
}

impl Writer {
    pub(super) fn start(conn: Connection, journal: Option<Arc<Journal>>) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let thread = std::thread::Builder::new()
            .name("maljan-ledger".into())
            .spawn(move || run(conn, rx, &counter, journal.as_deref()))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            commits,
        })
    }

    pub(super) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Queues an operation; `false` when the thread is gone (it panicked).
    pub(super) fn send(&self, op: Op) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.send(op).is_ok())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the loop once everything queued is written.
        drop(self.tx.take());
        if let Some(t) = self.thread.take()
            && t.thread().id() != std::thread::current().id()
        {
            let _ = t.join();
        }
    }
}

struct Batch<'a> {
    rows: Vec<(Box<LedgerEntry>, Done)>,
    commits: &'a AtomicU64,
    journal: Option<&'a Journal>,
    /// The highest journal sequence number committed.
    applied: u64,
}

fn run(mut conn: Connection, rx: Receiver<Op>, commits: &AtomicU64, journal: Option<&Journal>) {
    let mut batch = Batch {
        rows: Vec::with_capacity(64),
        commits,
        journal,
        applied: 0,
    };
    while let Ok(first) = rx.recv() {
        if matches!(first, Op::Journaled(..)) {
            // Nobody waits for a journaled row, so it can wait for company: sequential calls
            // then share one commit instead of paying one each, and their senders find the
            // thread asleep rather than parked on the channel (no wake-up to pay for).
            std::thread::sleep(LINGER);
        }
        let mut next = Some(first);
        while let Some(op) = next {
            match op {
                Op::Record(entry, ack) => batch.rows.push((entry, Done::Ack(ack))),
                Op::Journaled(entry, seq) => batch.rows.push((entry, Done::Journal(seq))),
                Op::Run(job) => {
                    // In queue order: what was recorded before it is committed first.
                    batch.commit(&mut conn);
                    job(&mut conn);
                }
            }
            if batch.rows.len() >= MAX_BATCH {
                batch.commit(&mut conn);
            }
            // Empty ends the batch; a closed channel is seen by the next `recv`.
            next = rx.try_recv().ok();
        }
        batch.commit(&mut conn);
        // Idle: a good moment to empty a grown journal whose records are all committed.
        if let Some(j) = journal {
            j.truncate_if_applied(batch.applied);
        }
    }
}

impl Batch<'_> {
    /// Writes the rows in one transaction and acknowledges each. If the transaction fails, each
    /// row is tried on its own so one bad row does not fail its neighbours.
    fn commit(&mut self, conn: &mut Connection) {
        if self.rows.is_empty() {
            return;
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        let journal = self.journal.map(|j| j.id.as_str());
        let top = self.rows.iter().fold(None, |top, (_, d)| match d {
            Done::Journal(seq) => Some(*seq),
            Done::Ack(_) => top,
        });
        let all = write_rows(conn, self.rows.iter().map(|(e, _)| &**e), journal.zip(top));
        let rows = std::mem::take(&mut self.rows);
        if all.is_ok() {
            self.applied = top.unwrap_or(self.applied);
            for (_, done) in rows {
                if let Done::Ack(ack) = done {
                    let _ = ack.send(Ok(()));
                }
            }
            return;
        }
        for (e, done) in rows {
            let seq = match &done {
                Done::Journal(seq) => Some(*seq),
                Done::Ack(_) => None,
            };
            let r =
                write_rows(conn, std::iter::once(&*e), journal.zip(seq)).map_err(|e| e.to_string());
            match done {
                Done::Ack(ack) => {
                    let _ = ack.send(r);
                }
                Done::Journal(seq) => {
                    self.applied = seq;
                    if let Err(err) = r {
                        // Its caller has returned; all that is left is to say so.
                        tracing::warn!(job = %e.job_id, ev = %e.ev_id, "ledger: a journaled call could not be written: {err}");
                    }
                }
            }
        }
    }
}

pub(super) const INSERT_CALL: &str = "INSERT INTO calls(job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

fn write_rows<'a>(
    conn: &mut Connection,
    rows: impl Iterator<Item = &'a LedgerEntry>,
    applied: Option<(&str, u64)>,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(INSERT_CALL)?;
        for e in rows {
            insert(&mut stmt, e)?;
        }
    }
    if let Some((journal, seq)) = applied {
        super::journal::mark_applied(&tx, journal, seq)?;
    }
    tx.commit()
}

pub(super) fn insert(
    stmt: &mut rusqlite::CachedStatement<'_>,
    e: &LedgerEntry,
) -> rusqlite::Result<()> {
    stmt.execute(params![
        e.job_id,
        e.ev_id,
        e.server,
        e.tool,
        e.args,
        e.result,
        e.result_truncated,
        e.ok,
        e.error_code,
        e.message,
        e.remediation,
        e.started_at_ms,
        e.wait_ms,
        e.duration_ms,
        e.trial
    ])
    .map(|_| ())
}
