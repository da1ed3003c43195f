//! Newline framing with a size bound, for a blocking reader (this process's stdin) and an async
//! one (any byte stream). The framing itself reads no I/O, so both readers share it.

use std::io::BufRead;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// One framed input.
pub(crate) enum Line {
    Message(Vec<u8>),
    /// A line over the bound, skipped to its newline; its full length.
    TooLong(usize),
    Eof,
}

/// Assembles lines from the chunks a reader buffers, never holding more than `max` bytes of one:
/// an over-long line is dropped as it arrives and reported with its length.
struct Framing {
    max: usize,
    /// The line read so far (empty once it is over `max`).
    partial: Vec<u8>,
    /// Its length so far, counting bytes dropped once it went over `max`.
    seen: usize,
}

impl Framing {
    fn new(max: usize) -> Self {
        Self {
            max,
            partial: Vec::new(),
            seen: 0,
        }
    }

    /// Takes what it needs of `buf`: the bytes consumed, and a line when one ended in them.
    fn push(&mut self, buf: &[u8]) -> (usize, Option<Line>) {
        if buf.is_empty() {
            return (0, Some(self.end()));
        }
        let (chunk, found) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        self.seen += chunk.len();
        if self.seen <= self.max {
            self.partial.extend_from_slice(chunk);
        } else if !self.partial.is_empty() {
            self.partial = Vec::new();
        }
        let consumed = found.unwrap_or(chunk.len());
        (consumed, found.map(|_| self.take()))
    }

    /// At end of input: the last line when it had no newline, else `Eof`.
    fn end(&mut self) -> Line {
        if self.seen == 0 {
            Line::Eof
        } else {
            self.take()
        }
    }

    fn take(&mut self) -> Line {
        let seen = std::mem::take(&mut self.seen);
        let line = std::mem::take(&mut self.partial);
        if seen > self.max {
            Line::TooLong(seen)
        } else {
            Line::Message(line)
        }
    }
}

/// Lines from a blocking reader.
pub(crate) struct BlockingLines<R> {
    inner: R,
    framing: Framing,
}

impl<R: BufRead> BlockingLines<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            framing: Framing::new(max),
        }
    }

    pub(crate) fn next(&mut self) -> std::io::Result<Line> {
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let (consumed, line) = self.framing.push(buf);
            self.inner.consume(consumed);
            if let Some(line) = line {
                return Ok(line);
            }
        }
    }
}

/// Lines from an async reader.
///
/// Cancel-safe: a line that arrives in several reads is kept here between polls, never in the
/// future's locals, so `next()` may be dropped at any await.
pub(crate) struct AsyncLines<R> {
    inner: BufReader<R>,
    framing: Framing,
}

impl<R: AsyncRead + Unpin> AsyncLines<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(256 * 1024, reader),
            framing: Framing::new(max),
        }
    }

    pub(crate) async fn next(&mut self) -> std::io::Result<Line> {
        loop {
            let buf = self.inner.fill_buf().await?;
            let (consumed, line) = self.framing.push(buf);
            self.inner.consume(consumed);
            if let Some(line) = line {
                return Ok(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncWriteExt;

    fn message(line: Line) -> Option<Vec<u8>> {
        match line {
            Line::Message(m) => Some(m),
            _ => None,
        }
    }

    #[tokio::test]
    async fn long_lines_are_skipped_to_their_newline() {
        let input = format!("{}\n{{}}\nlast", "x".repeat(100));
        let mut r = AsyncLines::new(input.as_bytes(), 10);
        assert!(matches!(r.next().await.unwrap(), Line::TooLong(100)));
        assert_eq!(message(r.next().await.unwrap()).unwrap(), b"{}");
        assert_eq!(message(r.next().await.unwrap()).unwrap(), b"last");
        assert!(matches!(r.next().await.unwrap(), Line::Eof));
        assert!(
            matches!(r.next().await.unwrap(), Line::Eof),
            "and stays at its end"
        );
    }

    /// A line that arrives in pieces survives its `next()` being dropped between them (rmcp-style
    /// `select!` loops drop it whenever another event wins).
    #[tokio::test]
    async fn a_line_in_pieces_survives_a_dropped_read() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut r = AsyncLines::new(rx, 1 << 20);
        tx.write_all(b"{\"first\":").await.unwrap();
        let dropped = tokio::time::timeout(std::time::Duration::from_millis(50), r.next()).await;
        assert!(dropped.is_err(), "no newline yet, so no line");
        tx.write_all(b"1}\n").await.unwrap();
        assert_eq!(message(r.next().await.unwrap()).unwrap(), b"{\"first\":1}");
    }

    proptest! {
        /// Whatever the reader's buffer size, both readers frame the input as `split` would,
        /// with each over-long line reported by its length.
        #[test]
        fn both_readers_frame_like_split(
            lines in proptest::collection::vec("[a-z{}\" ]{0,40}", 0..8),
            max in 1usize..30,
            buffer in 1usize..16,
        ) {
            let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let expected: Vec<Result<Vec<u8>, usize>> = lines
                .iter()
                .map(|l| if l.len() > max { Err(l.len()) } else { Ok(l.as_bytes().to_vec()) })
                .collect();
            let mut blocking = BlockingLines::new(
                std::io::BufReader::with_capacity(buffer, input.as_bytes()),
                max,
            );
            let mut got = Vec::new();
            loop {
                match blocking.next().unwrap() {
                    Line::Message(m) => got.push(Ok(m)),
                    Line::TooLong(n) => got.push(Err(n)),
                    Line::Eof => break,
                }
            }
            prop_assert_eq!(&got, &expected);
        }
    }
}
