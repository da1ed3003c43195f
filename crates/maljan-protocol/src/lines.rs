//! Newline-delimited JSON-RPC framing with a bound, as both ends of a stdio connection read it:
//! the server its requests, the client its answers. A line over the bound is skipped as it
//! arrives, never held whole, and reported with its length and its first bytes, where a
//! JSON-RPC message usually names its id, so the side that reads it can say what it refused.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// How much of an over-long line is kept to report it.
pub const HEAD_BYTES: usize = 256;

/// One line of input.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A line, its newline removed.
    Line(BytesMut),
    /// A line over the bound, skipped to its newline: its full length, and its first
    /// [`HEAD_BYTES`] bytes.
    TooLong { len: usize, head: Bytes },
}

/// Newline framing with a bound: a line longer than `max` bytes is dropped as it arrives (no
/// more than about `max` plus one read is ever held) and reported with its length.
pub struct LineCodec {
    max: usize,
    /// How much of the buffer is known to hold no newline.
    searched: usize,
    /// While skipping an over-long line: its length so far, and its head.
    skipping: Option<(usize, Bytes)>,
}

impl LineCodec {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            searched: 0,
            skipping: None,
        }
    }

    /// The longest line passed on whole.
    pub fn max(&self) -> usize {
        self.max
    }
}

fn head_of(buf: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&buf[..buf.len().min(HEAD_BYTES)])
}

impl Decoder for LineCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        let Some(end) = memchr::memchr(b'\n', &buf[self.searched..]).map(|i| i + self.searched)
        else {
            if let Some((skipped, _)) = &mut self.skipping {
                *skipped += buf.len();
                buf.clear();
            } else if buf.len() > self.max {
                self.skipping = Some((buf.len(), head_of(buf)));
                buf.clear();
            }
            self.searched = buf.len();
            return Ok(None);
        };
        self.searched = 0;
        let mut line = buf.split_to(end + 1);
        line.truncate(end);
        Ok(Some(match self.skipping.take() {
            Some((skipped, head)) => Frame::TooLong {
                len: skipped + end,
                head,
            },
            None if end > self.max => Frame::TooLong {
                len: end,
                head: head_of(&line),
            },
            None => Frame::Line(line),
        }))
    }

    /// The last line may end without a newline.
    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.searched = 0;
        Ok(match self.skipping.take() {
            Some((len, head)) => Some(Frame::TooLong { len, head }),
            None if buf.is_empty() => None,
            None => Some(Frame::Line(buf.split())),
        })
    }
}

/// Writes lines in the order they were sent, flushing once no more are waiting, until every
/// sender is gone or the output closes. Senders never wait, so a message is queued whole even
/// when the future that sent it is dropped.
pub async fn write_lines<W: tokio::io::AsyncWrite + Unpin>(
    mut lines: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    mut writer: W,
) {
    use tokio::io::AsyncWriteExt;
    while let Some(line) = lines.recv().await {
        let written = match writer.write_all(&line).await {
            Ok(()) if lines.is_empty() => writer.flush().await,
            other => other,
        };
        if let Err(e) = written {
            // The reader went away: nothing more can be said to it.
            let _ = e;
            return;
        }
    }
}

/// The id a JSON-RPC message names near its start (`"id":7` or `"id":"a"`), read from the head
/// of a line that could not be parsed whole: an over-long line, or a malformed one.
pub fn id_in_head(head: &[u8]) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(head);
    let at = text.find("\"id\"")? + 4;
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find('"')?;
        return Some(quoted[..end].into());
    }
    let digits: &str = &rest[..rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len())];
    // A number cut off by the head's end is not an id that can be trusted.
    if digits.len() == rest.len() {
        return None;
    }
    digits.parse::<i64>().ok().map(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use proptest::prelude::*;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;

    fn line(text: &str) -> Frame {
        Frame::Line(BytesMut::from(text))
    }

    fn too_long(frame: Frame) -> usize {
        match frame {
            Frame::TooLong { len, .. } => len,
            other => panic!("expected an over-long line, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn long_lines_are_skipped_to_their_newline_and_reported_by_length() {
        let input = format!("{}\n{{}}\n{}\nlast", "x".repeat(100), "y".repeat(11));
        let mut lines = FramedRead::with_capacity(input.as_bytes(), LineCodec::new(10), 4);
        assert_eq!(too_long(lines.next().await.unwrap().unwrap()), 100);
        assert_eq!(lines.next().await.unwrap().unwrap(), line("{}"));
        assert_eq!(too_long(lines.next().await.unwrap().unwrap()), 11);
        assert_eq!(lines.next().await.unwrap().unwrap(), line("last"));
        assert!(lines.next().await.is_none());
        let unended = "z".repeat(50);
        let mut lines = FramedRead::with_capacity(unended.as_bytes(), LineCodec::new(10), 4);
        assert_eq!(too_long(lines.next().await.unwrap().unwrap()), 50);
        assert!(lines.next().await.is_none());
    }

    /// Memory stays bounded while an over-long line streams in: what is held never grows
    /// much past the bound, however long the line; its head is kept to report it.
    #[test]
    fn an_over_long_line_is_not_held() {
        let mut codec = LineCodec::new(1024);
        let mut buf = BytesMut::from(&br#"{"jsonrpc":"2.0","id":42,"result":"#[..]);
        for _ in 0..1000 {
            buf.extend_from_slice(&[b'x'; 4096]);
            assert!(codec.decode(&mut buf).unwrap().is_none());
            assert!(buf.len() <= 1024 + 4096, "{}", buf.len());
        }
        buf.extend_from_slice(b"x\n{}\n");
        let Some(Frame::TooLong { len, head }) = codec.decode(&mut buf).unwrap() else {
            panic!("not reported")
        };
        assert_eq!(len, 4096 * 1000 + 1 + 34);
        assert_eq!(head.len(), HEAD_BYTES);
        assert_eq!(id_in_head(&head), Some(42.into()));
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(line("{}")));
    }

    /// A line that arrives in pieces survives its read being dropped between them (rmcp's
    /// service loop drops a pending `receive` whenever another event wins its `select!`).
    #[tokio::test]
    async fn a_line_in_pieces_survives_a_dropped_read() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut lines = FramedRead::new(rx, LineCodec::new(1 << 20));
        tx.write_all(b"{\"first\":").await.unwrap();
        let read = tokio::time::timeout(std::time::Duration::from_millis(50), lines.next());
        assert!(read.await.is_err(), "no newline yet, so no line");
        tx.write_all(b"1}\n").await.unwrap();
        assert_eq!(lines.next().await.unwrap().unwrap(), line("{\"first\":1}"));
    }

    #[test]
    fn an_id_is_read_from_a_head_only_when_it_is_whole() {
        assert_eq!(
            id_in_head(br#"{"jsonrpc":"2.0","id":7,"result":{"#),
            Some(7.into())
        );
        assert_eq!(id_in_head(br#"{"id" : "a-1","#), Some("a-1".into()));
        assert_eq!(id_in_head(br#"{"jsonrpc":"2.0","id":12"#), None, "cut off");
        assert_eq!(id_in_head(br#"{"id":null,"#), None);
        assert_eq!(id_in_head(br#"{"result":1}"#), None);
        assert_eq!(id_in_head(b"\xff\xfe"), None);
    }

    proptest! {
        /// Whatever the read size, lines come out as `split` would cut them, with each
        /// over-long line reported by its length.
        #[test]
        fn framing_matches_split(
            lines in proptest::collection::vec("[a-z{}\" ]{0,40}", 0..8),
            max in 1usize..30,
            read_size in 1usize..16,
        ) {
            let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let expected: Vec<Result<String, usize>> = lines
                .iter()
                .map(|l| if l.len() > max { Err(l.len()) } else { Ok(l.clone()) })
                .collect();
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got: Vec<Frame> = runtime.block_on(
                FramedRead::with_capacity(input.as_bytes(), LineCodec::new(max), read_size)
                    .map(Result::unwrap)
                    .collect(),
            );
            let got: Vec<Result<String, usize>> = got
                .into_iter()
                .map(|f| match f {
                    Frame::Line(l) => Ok(String::from_utf8(l.to_vec()).unwrap()),
                    Frame::TooLong { len, .. } => Err(len),
                })
                .collect();
            prop_assert_eq!(got, expected);
        }

        /// No head, however malformed, panics the id reader.
        #[test]
        fn any_head_is_read_without_panic(head in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = id_in_head(&head);
        }
    }
}
