//! The ledger's writer thread: the only owner of the ledger's connection (either engine).
//!
//! Records arrive over a channel, each with an acknowledgement to send once the transaction
//! holding its row has committed (WAL with `synchronous=NORMAL`: the commit is in the WAL file,
//! i.e. the OS page cache, so a process kill cannot lose it).
//!
//! Group commit: the thread takes whatever is queued (up to [`MAX_BATCH`]) and writes it in one
//! transaction, so concurrent callers share one commit. Other operations (jobs, degradations,
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

use tokio::sync::oneshot;

use super::{
    LedgerEntry,
    db::{Conn, DbResult, vals},
};

/// Enough rows per transaction that a commit's fixed cost is spread thin, few enough that the
/// first caller in a batch does not wait long for the last row to be written.
pub(super) const MAX_BATCH: usize = 1024;

/// How long records wait for a PostgreSQL server that went away before they fail.
const RECONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) type Ack = oneshot::Sender<Result<(), String>>;
type Job = Box<dyn FnOnce(&mut Conn) + Send>;

pub(super) enum Op {
    /// A record whose caller waits for the commit.
    Record(Box<LedgerEntry>, Ack),
    Run(Job),
}

/// The sending side; dropping it lets the thread finish the queue and stop (and joins it).
pub(super) struct Writer {
    tx: Option<Sender<Op>>,
    thread: Option<JoinHandle<()>>,
    /// Transactions that wrote call rows (rows per commit shows the grouping at work).
    commits: Arc<AtomicU64>,
}

impl Writer {
    pub(super) fn start(conn: Conn) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let thread = std::thread::Builder::new()
            .name("maljan-ledger".into())
            .spawn(move || run(conn, rx, &counter))?;
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

fn run(mut conn: Conn, rx: Receiver<Op>, commits: &AtomicU64) {
    let mut batch: Vec<(Box<LedgerEntry>, Ack)> = Vec::with_capacity(64);
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(op) = next {
            match op {
                Op::Record(entry, ack) => batch.push((entry, ack)),
                Op::Run(job) => {
                    // In queue order: what was recorded before it is committed first.
                    commit(&mut conn, &mut batch, commits);
                    job(&mut conn);
                }
            }
            if batch.len() >= MAX_BATCH {
                commit(&mut conn, &mut batch, commits);
            }
            // Empty ends the batch; a closed channel is seen by the next `recv`.
            next = rx.try_recv().ok();
        }
        commit(&mut conn, &mut batch, commits);
    }
}

/// Writes the rows in one transaction and acknowledges each. If the transaction fails, each row
/// is tried on its own so one bad row does not fail its neighbours.
fn commit(conn: &mut Conn, batch: &mut Vec<(Box<LedgerEntry>, Ack)>, commits: &AtomicU64) {
    if batch.is_empty() {
        return;
    }
    commits.fetch_add(1, Ordering::Relaxed);
    let mut attempt = write_rows(conn, batch.iter().map(|(e, _)| &**e));
    // PostgreSQL restarting: the callers wait for it (a while) rather than lose their rows.
    let deadline = std::time::Instant::now() + RECONNECT_WAIT;
    while attempt.as_ref().is_err_and(|e| e.connection_lost)
        && std::time::Instant::now() < deadline
        && conn.reconnect_by(deadline)
    {
        // The lost connection may have taken the COMMIT's answer, not the COMMIT: the batch is
        // one transaction, so its first row tells whether it landed.
        attempt = match committed(conn, &batch[0].0) {
            Ok(true) => Ok(()),
            Ok(false) => write_rows(conn, batch.iter().map(|(e, _)| &**e)),
            Err(e) => Err(e),
        };
    }
    if attempt.is_ok() {
        for (_, ack) in batch.drain(..) {
            let _ = ack.send(Ok(()));
        }
        return;
    }
    for (e, ack) in batch.drain(..) {
        let _ = ack.send(write_rows(conn, std::iter::once(&*e)).map_err(|e| e.to_string()));
    }
}

/// Whether the row of this call is in the ledger.
fn committed(conn: &mut Conn, e: &LedgerEntry) -> DbResult<bool> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM calls WHERE job_id = ?1 AND ev_id = ?2",
            vals![&e.job_id, &e.ev_id],
        )?
        .is_some())
}

const INSERT_CALL: &str = "INSERT INTO calls(job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

fn write_rows<'a>(conn: &mut Conn, rows: impl Iterator<Item = &'a LedgerEntry>) -> DbResult<()> {
    conn.transaction(|c| {
        for e in rows {
            c.execute(
                INSERT_CALL,
                vals![
                    &e.job_id,
                    &e.ev_id,
                    &e.server,
                    &e.tool,
                    &e.args,
                    e.result.as_ref(),
                    e.result_truncated,
                    e.ok,
                    e.error_code.as_ref(),
                    e.message.as_ref(),
                    e.remediation.as_ref(),
                    e.started_at_ms,
                    e.wait_ms,
                    e.duration_ms,
                    e.trial
                ],
            )?;
        }
        Ok(())
    })
}
