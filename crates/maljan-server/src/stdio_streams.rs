//! This process's stdin and stdout as async streams, as cheap per message as the OS allows.
//!
//! tokio's `stdin()`/`stdout()` do every read and write on the blocking pool: each message costs
//! a hop to a pool thread and back, in each direction. When stdin or stdout is a pipe or a socket
//! (how every MCP client starts a server), it is put in non-blocking mode and driven by the
//! runtime's reactor instead: a message wakes the runtime thread directly. Terminals and files
//! keep tokio's streams (non-blocking mode would leak into the shell that owns a terminal).
//!
//! stdout stays on tokio's stream when stderr shares its pipe (`2>&1`): logs are written to
//! stderr with blocking writes that must never meet `EAGAIN`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) type Reader = Box<dyn AsyncRead + Unpin + Send>;
pub(crate) type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout for serving, and a guard that puts back the blocking mode it changed.
pub(crate) fn open() -> (Reader, Writer, RestoreBlocking) {
    let mut restore = RestoreBlocking(Vec::new());
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let reader = on_reactor(stdin.as_fd(), &mut restore, reactor_reader)
        .unwrap_or_else(|| Box::new(tokio::io::stdin()));
    let writer = if same_file(stdout.as_fd(), std::io::stderr().as_fd()) {
        None
    } else {
        on_reactor(stdout.as_fd(), &mut restore, reactor_writer)
    };
    let writer = writer.unwrap_or_else(|| Box::new(tokio::io::stdout()));
    (reader, writer, restore)
}

/// `fd` as a stream on the reactor when it is a pipe or a socket; `None` leaves it to tokio's
/// blocking-pool stream.
fn on_reactor<T>(
    fd: BorrowedFd<'_>,
    restore: &mut RestoreBlocking,
    stream: fn(OwnedFd, Kind) -> std::io::Result<T>,
) -> Option<T> {
    let kind = kind(fd);
    if kind == Kind::Other {
        return None;
    }
    let made = nonblocking_dup(fd).and_then(|owned| {
        restore.0.push(fd.as_raw_fd());
        stream(owned, kind)
    });
    made.inspect_err(|e| tracing::debug!("fd {} stays on the blocking pool: {e}", fd.as_raw_fd()))
        .ok()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn stat(fd: BorrowedFd<'_>) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a full `stat` into the buffer when it returns 0.
    (unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } == 0)
        .then(|| unsafe { st.assume_init() })
}

fn kind(fd: BorrowedFd<'_>) -> Kind {
    match stat(fd).map(|s| s.st_mode & libc::S_IFMT) {
        Some(libc::S_IFIFO) => Kind::Pipe,
        Some(libc::S_IFSOCK) => Kind::Socket,
        _ => Kind::Other,
    }
}

fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (stat(a), stat(b)) {
        (Some(a), Some(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

/// A duplicate of `fd` (so dropping the stream never closes fd 0 or 1) in non-blocking mode.
fn nonblocking_dup(fd: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let owned = fd.try_clone_to_owned()?;
    set_nonblocking(owned.as_raw_fd(), true)?;
    Ok(owned)
}

fn reactor_reader(owned: OwnedFd, kind: Kind) -> std::io::Result<Reader> {
    Ok(match kind {
        Kind::Pipe => Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(
            owned,
        )?),
        _ => Box::new(tokio::net::UnixStream::from_std(owned.into())?),
    })
}

fn reactor_writer(owned: OwnedFd, kind: Kind) -> std::io::Result<Writer> {
    Ok(match kind {
        Kind::Pipe => Box::new(tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(
            owned,
        )?),
        _ => Box::new(tokio::net::UnixStream::from_std(owned.into())?),
    })
}

fn set_nonblocking(fd: RawFd, on: bool) -> std::io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on a descriptor this process holds open.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Non-blocking mode belongs to the open file, which the process that started this one may
/// share; when serving ends it is put back.
pub(crate) struct RestoreBlocking(Vec<RawFd>);

impl Drop for RestoreBlocking {
    fn drop(&mut self) {
        for fd in &self.0 {
            let _ = set_nonblocking(*fd, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two new descriptors, each owned once below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn pipes_sockets_and_files_are_told_apart() {
        let (r, _w) = pipe();
        assert!(kind(r.as_fd()) == Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(kind(a.as_fd()) == Kind::Socket);
        let f = tempfile::tempfile().unwrap();
        assert!(kind(f.as_fd()) == Kind::Other);
        assert!(same_file(r.as_fd(), r.as_fd()));
        assert!(!same_file(r.as_fd(), a.as_fd()));
    }

    #[tokio::test]
    async fn a_pipe_carries_lines_both_ways_and_gets_its_blocking_mode_back() {
        let (r, w) = pipe();
        let mut restore = RestoreBlocking(Vec::new());
        let mut writer = on_reactor(w.as_fd(), &mut restore, reactor_writer).unwrap();
        let reader = on_reactor(r.as_fd(), &mut restore, reactor_reader).unwrap();
        // More than a pipe holds: the write must wait for the reader, not fail with EAGAIN.
        let line = format!("{}\n", "x".repeat(200_000));
        let sent = line.clone();
        let send = tokio::spawn(async move {
            writer.write_all(sent.as_bytes()).await.unwrap();
            writer.write_all(b"second\n").await.unwrap();
        });
        let mut lines = BufReader::new(reader).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap().len(), 200_000);
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "second");
        send.await.unwrap();
        let flags = |fd: RawFd| unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert_ne!(flags(r.as_raw_fd()) & libc::O_NONBLOCK, 0);
        drop(restore);
        assert_eq!(flags(r.as_raw_fd()) & libc::O_NONBLOCK, 0);
        assert_eq!(flags(w.as_raw_fd()) & libc::O_NONBLOCK, 0);
    }
}
