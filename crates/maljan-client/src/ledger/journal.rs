//! The ledger's journal: how a call's record survives a process kill without the call waiting for
//! a SQLite commit.
//!
//! A record is appended to this process's journal file with one `write(2)` before the call
//! returns. Once `write` returns the bytes belong to the kernel (page cache), so a process kill
//! cannot take them back (an OS crash can, as with `synchronous=NORMAL`). The writer thread then
//! commits the record to SQLite in a batch and, in the same transaction, notes the highest journal
//! sequence number applied (`journal_applied`). When the journal holds nothing uncommitted and has
//! grown, the writer empties it.
//!
//! Every process has its own journal (`<db>.journal-<pid>-<random>`) and holds an exclusive
//! `flock` on it while it lives. Opening a ledger replays the journals whose lock can be taken
//! (their process is gone): rows with a sequence above the one applied are inserted, then the
//! file is removed. A line cut short by the kill (no newline, unparsable) was never acknowledged
//! and is skipped.

use std::{
    fs::File,
    io::{BufRead, BufReader, Write},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    sync::Mutex,
};

use rusqlite::{Connection, params};

use super::LedgerEntry;

/// Empty the file once it is this big and fully committed (a few thousand records).
const TRUNCATE_AT: u64 = 4 << 20;

pub(super) const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS journal_applied(journal TEXT PRIMARY KEY, seq INTEGER NOT NULL);";

pub(super) struct Journal {
    /// The file name, which is also its key in `journal_applied`.
    pub(super) id: String,
    path: PathBuf,
    state: Mutex<State>,
}

pub(super) struct State {
    file: File,
    /// The last sequence number written.
    pub(super) last_seq: u64,
    len: u64,
    buf: Vec<u8>,
}

fn prefix(db: &Path) -> String {
    format!(
        "{}.journal-",
        db.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    )
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a descriptor this File owns; no memory is involved.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

impl Journal {
    /// Creates this process's journal beside `db`, locked for as long as it lives. It is created
    /// and locked under a temporary name and then renamed, so a replay in another process never
    /// sees it unlocked.
    pub(super) fn create(db: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = db.parent().unwrap_or(Path::new("."));
        let id = format!(
            "{}{}-{:08x}",
            prefix(db),
            std::process::id(),
            rand::random::<u32>()
        );
        let tmp = dir.join(format!(".{id}.new"));
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        if !try_lock(&file) {
            let _ = std::fs::remove_file(&tmp);
            return Err(std::io::Error::other("could not lock a new journal file"));
        }
        let path = dir.join(&id);
        std::fs::rename(&tmp, &path)?;
        Ok(Self {
            id,
            path,
            state: Mutex::new(State {
                file,
                last_seq: 0,
                len: 0,
                buf: Vec::with_capacity(1024),
            }),
        })
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Empties the file when everything written to it is committed and it has grown.
    pub(super) fn truncate_if_applied(&self, applied: u64) {
        let mut s = self.lock();
        if s.last_seq == applied && s.len >= TRUNCATE_AT && s.file.set_len(0).is_ok() {
            s.len = 0;
        }
    }
}

impl State {
    /// Appends one record with one `write(2)` (so a kill leaves it whole or absent) and returns
    /// its sequence number. The caller holds the lock until the record is queued to the writer,
    /// so records reach the writer in sequence order.
    pub(super) fn append(&mut self, entry: &LedgerEntry) -> std::io::Result<u64> {
        let seq = self.last_seq + 1;
        self.buf.clear();
        write!(self.buf, "{seq}\t")?;
        serde_json::to_writer(&mut self.buf, entry)?;
        self.buf.push(b'\n');
        self.file.write_all(&self.buf)?;
        self.last_seq = seq;
        self.len += self.buf.len() as u64;
        Ok(seq)
    }
}

impl Drop for Journal {
    /// Runs after the writer thread has committed everything (see `Inner`'s field order), so the
    /// file holds nothing that is not in SQLite.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Marks `seq` of `journal` applied, inside the caller's transaction.
pub(super) fn mark_applied(tx: &Connection, journal: &str, seq: u64) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO journal_applied(journal, seq) VALUES (?1, ?2) ON CONFLICT(journal) DO UPDATE SET seq = excluded.seq",
    )?
    .execute(params![journal, seq as i64])
    .map(|_| ())
}

/// Replays the journals of processes that are gone into `conn`; returns how many rows it added.
pub(super) fn replay(db: &Path, conn: &mut Connection) -> Result<usize, String> {
    let dir = db.parent().unwrap_or(Path::new("."));
    let prefix = prefix(db);
    let Ok(read) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let mut added = 0;
    for item in read.flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let Ok(file) = File::open(item.path()) else {
            continue;
        };
        if !try_lock(&file) {
            continue; // its process is alive
        }
        added += replay_one(conn, &name, &file).map_err(|e| format!("journal {name}: {e}"))?;
        std::fs::remove_file(item.path()).map_err(|e| format!("journal {name}: {e}"))?;
    }
    Ok(added)
}

fn replay_one(conn: &mut Connection, name: &str, file: &File) -> rusqlite::Result<usize> {
    let tx = conn.transaction()?;
    let applied: u64 = tx
        .query_row(
            "SELECT seq FROM journal_applied WHERE journal = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .map(|s| s as u64)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(0),
            e => Err(e),
        })?;
    let mut added = 0;
    {
        let mut stmt = tx.prepare_cached(super::writer::INSERT_CALL)?;
        for line in BufReader::new(file).split(b'\n') {
            let Ok(line) = line else { break };
            let Some((seq, entry)) = parse(&line) else {
                continue; // cut short by the kill: never acknowledged
            };
            if seq <= applied {
                continue;
            }
            super::writer::insert(&mut stmt, &entry)?;
            added += 1;
        }
    }
    tx.execute("DELETE FROM journal_applied WHERE journal = ?1", [name])?;
    tx.commit()?;
    Ok(added)
}

fn parse(line: &[u8]) -> Option<(u64, LedgerEntry)> {
    let tab = line.iter().position(|b| *b == b'\t')?;
    let seq = std::str::from_utf8(&line[..tab]).ok()?.parse().ok()?;
    let entry = serde_json::from_slice(&line[tab + 1..]).ok()?;
    Some((seq, entry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ledger;

    fn line(seq: u64, ev: &str) -> String {
        let mut e = crate::ledger::tests::entry("j", ev);
        e.ev_id = ev.into();
        format!("{seq}\t{}\n", serde_json::to_string(&e).unwrap())
    }

    #[test]
    fn a_dead_process_journal_is_replayed_past_what_was_applied() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("l.sqlite3");
        drop(Ledger::open_with(&db, 1024, crate::ledger::Durability::Commit).unwrap());
        let name = "l.sqlite3.journal-1-deadbeef";
        {
            let c = Connection::open(&db).unwrap();
            c.execute(
                "INSERT INTO journal_applied(journal, seq) VALUES (?1, 1)",
                [name],
            )
            .unwrap();
        }
        // seq 1 is already in SQLite; 2 and 3 are not; the last line was cut by the kill.
        let torn = &line(4, "ev_0004")[..30];
        let text = format!(
            "{}{}{}{torn}",
            line(1, "ev_0001"),
            line(2, "ev_0002"),
            line(3, "ev_0003")
        );
        std::fs::write(dir.path().join(name), text).unwrap();
        let l = Ledger::open(&db, 1024).unwrap();
        let evs: Vec<_> = l
            .calls(Some("j"), 10)
            .unwrap()
            .into_iter()
            .map(|c| c.ev_id)
            .collect();
        assert_eq!(evs, ["ev_0002", "ev_0003"]);
        assert!(!dir.path().join(name).exists());
        // This process's own journal is locked, so a second open leaves it alone.
        let own: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".journal-"))
            .collect();
        assert_eq!(own.len(), 1);
        let again = Ledger::open(&db, 1024).unwrap();
        assert_eq!(again.count(Some("j")).unwrap(), 2);
        assert!(own[0].path().exists());
    }

    #[test]
    fn journaled_appends_are_committed_and_the_file_goes_with_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("l.sqlite3");
        let l = Ledger::open(&db, 1024).unwrap();
        let file = l.inner.journal.as_ref().unwrap().path.clone();
        for i in 0..100 {
            l.record(crate::ledger::tests::entry("j", &format!("ev_{i}")))
                .unwrap();
        }
        assert!(std::fs::metadata(&file).unwrap().len() > 0);
        // count() runs after everything queued before it: all 100 are committed.
        assert_eq!(l.count(Some("j")).unwrap(), 100);
        drop(l);
        assert!(!file.exists());
        let l = Ledger::open(&db, 1024).unwrap();
        assert_eq!(l.count(Some("j")).unwrap(), 100);
    }
}
