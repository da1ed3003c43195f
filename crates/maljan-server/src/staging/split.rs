//! A put_sample request body taken apart while it arrives: the JSON around `content_b64` kept
//! as it came, the base64 inside decoded frame by frame, straight into a page-aligned buffer.
//!
//! Decoding as the frames come saves what reading the whole body first costs: a copy of every
//! byte into one buffer, a scan for the closing quote, and a decode that finds the bytes long
//! gone from the cache. The decoder itself finds where the content ends: the quote is the first
//! character it refuses, so only the frame holding it is scanned.
//!
//! The decoder is strict (padding only at the end, no spare bits), so every decoded byte
//! encodes back to exactly the characters it came from. Whatever turns out not to be a staging
//! call with plain base64 (an escape, a stray character, another tool, a body that stops
//! short) is put back together byte for byte and goes on as it came.

use super::write::{ALIGN, Decoded};

/// What a body turned out to be.
pub(super) enum Split {
    /// The body with `ticket` in the content's place, and the content decoded.
    Cut { rest: Vec<u8>, decoded: Decoded },
    /// The body exactly as it came.
    Whole(Vec<u8>),
}

/// The key is looked for this far into a body: a put_sample call names it early (its other
/// arguments are short), and a body that does not is taken whole.
const HEAD_MAX: usize = 64 * 1024;

/// Decode buffers are sized in steps of this.
const SIZE_STEP: usize = 64 * 1024;

enum Phase {
    /// Looking for `"content_b64":"`; `head` holds the body so far.
    Head,
    /// Decoding; `head` ends with the content's opening quote.
    Content,
    /// After the content; `tail` holds the body from the closing quote on.
    Tail,
    /// Not ours: `tail` holds the whole body.
    Whole,
}

pub(super) struct Splitter {
    phase: Phase,
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Decoded content at `out[at..]`.
    out: Vec<u8>,
    at: usize,
    /// Up to three characters of a group the next frame completes.
    carry: [u8; 4],
    carried: usize,
    /// The last group decoded had padding: the content can only end here.
    padded: bool,
    /// The declared body length: nothing more is taken.
    length: usize,
    seen: usize,
}

/// How far a frame took the content.
enum Fed {
    More,
    /// The content ended at this index of the frame (its closing quote).
    Ended(usize),
    /// Not plain base64 from this index of the frame on; everything before it is decoded or
    /// in the carry.
    Bad(usize),
}

impl Splitter {
    /// A splitter for a body of `length` bytes, decoding into `buffer` (empty, any capacity).
    pub(super) fn new(mut buffer: Vec<u8>, length: usize) -> Self {
        buffer.clear();
        // Rounded up, so a spare buffer from the last chunk fits the next, whose body is a few
        // bytes longer (a growing seq): growing it would mean a fresh allocation's page faults.
        buffer.reserve((ALIGN + length / 4 * 3 + 3).next_multiple_of(SIZE_STEP));
        let at = (buffer.as_ptr() as usize).next_multiple_of(ALIGN) - buffer.as_ptr() as usize;
        buffer.resize(at, 0);
        Self {
            phase: Phase::Head,
            head: Vec::new(),
            tail: Vec::new(),
            out: buffer,
            at,
            carry: [0; 4],
            carried: 0,
            padded: false,
            length,
            seen: 0,
        }
    }

    /// Takes the next frame of the body. Err when the body runs past its declared length.
    pub(super) fn push(&mut self, frame: &[u8]) -> Result<(), &'static str> {
        self.seen += frame.len();
        if self.seen > self.length {
            return Err("the body is longer than its Content-Length");
        }
        match self.phase {
            Phase::Head => {
                // The usual case: the content starts in the first frame, and only the bytes
                // before it are kept (a first frame can hold hundreds of kilobytes of it).
                if self.head.is_empty()
                    && let Start::At(start) = content_start(frame)
                {
                    self.head.extend_from_slice(&frame[..start]);
                    self.phase = Phase::Content;
                    self.content(&frame[start..]);
                    return Ok(());
                }
                self.head.extend_from_slice(frame);
                match content_start(&self.head) {
                    Start::NeedMore => {}
                    Start::No => self.give_up_head(),
                    Start::At(start) => {
                        let first = self.head.split_off(start);
                        self.phase = Phase::Content;
                        self.content(&first);
                    }
                }
            }
            Phase::Content => self.content(frame),
            Phase::Tail | Phase::Whole => self.tail.extend_from_slice(frame),
        }
        Ok(())
    }

    /// The body is complete: a cut when it is a staging call (checked by `is_ours` on the body
    /// with `ticket` in the content's place), else the body as it came.
    pub(super) fn finish(mut self, ticket: &str, is_ours: impl Fn(&[u8]) -> bool) -> Split {
        match self.phase {
            Phase::Head => self.give_up_head(),
            Phase::Content => self.give_up(&[]),
            Phase::Tail => {
                let mut rest = Vec::with_capacity(self.head.len() + ticket.len() + self.tail.len());
                rest.extend_from_slice(&self.head);
                rest.extend_from_slice(ticket.as_bytes());
                rest.extend_from_slice(&self.tail);
                if is_ours(&rest) {
                    let decoded = Decoded::aligned(self.out, self.at);
                    return Split::Cut { rest, decoded };
                }
                let tail = std::mem::take(&mut self.tail);
                self.phase = Phase::Content;
                self.give_up(&tail);
            }
            Phase::Whole => {}
        }
        Split::Whole(self.tail)
    }

    fn content(&mut self, frame: &[u8]) {
        match self.feed(frame) {
            Fed::More => {}
            Fed::Ended(quote) => {
                self.phase = Phase::Tail;
                self.tail.extend_from_slice(&frame[quote..]);
            }
            Fed::Bad(from) => self.give_up(&frame[from..]),
        }
    }

    fn feed(&mut self, frame: &[u8]) -> Fed {
        let mut i = 0;
        if self.carried > 0 {
            let take = (4 - self.carried).min(frame.len());
            self.carry[self.carried..self.carried + take].copy_from_slice(&frame[..take]);
            self.carried += take;
            if self.carried < 4 {
                return Fed::More;
            }
            let group = self.carry;
            if !self.decode(&group) {
                return Fed::Bad(take);
            }
            self.carried = 0;
            i = take;
        }
        let rest = &frame[i..];
        if self.padded {
            return match rest.first() {
                None => Fed::More,
                Some(b'"') => Fed::Ended(i),
                Some(_) => Fed::Bad(i),
            };
        }
        let whole_groups = rest.len() / 4 * 4;
        if !self.decode(&rest[..whole_groups]) {
            // The content ends in this frame, or holds what base64 does not: only here is the
            // frame scanned for the quote.
            return match memchr::memchr2(b'"', b'\\', rest) {
                Some(q) if rest[q] == b'"' && q % 4 == 0 && self.decode(&rest[..q]) => {
                    Fed::Ended(i + q)
                }
                _ => Fed::Bad(i),
            };
        }
        let left = &rest[whole_groups..];
        let at = i + whole_groups;
        match left.first() {
            None => Fed::More,
            Some(b'"') => Fed::Ended(at),
            Some(_) if self.padded || left.iter().any(|&b| b == b'"' || b == b'\\') => Fed::Bad(at),
            Some(_) => {
                self.carry[..left.len()].copy_from_slice(left);
                self.carried = left.len();
                Fed::More
            }
        }
    }

    /// Decodes whole groups onto `out`; false, with nothing added, when `src` is not base64 (or
    /// would not fit, which the declared length rules out).
    fn decode(&mut self, src: &[u8]) -> bool {
        let room = self.out.spare_capacity_mut();
        if src.len() / 4 * 3 > room.len() {
            return false;
        }
        let out = base64_simd::Out::from_uninit_slice(room);
        let Ok(decoded) = base64_simd::STANDARD.decode(src, out) else {
            return false;
        };
        let n = decoded.len();
        // SAFETY: the decoder has just initialised the first `n` bytes of the spare capacity.
        unsafe { self.out.set_len(self.out.len() + n) };
        self.padded = src.last() == Some(&b'=');
        true
    }

    /// The key was not found where a put_sample call has it: the body goes on whole.
    fn give_up_head(&mut self) {
        let mut whole = std::mem::take(&mut self.head);
        whole.reserve(self.length.saturating_sub(whole.len()));
        self.tail = whole;
        self.phase = Phase::Whole;
    }

    /// Puts the body back together as it came, from what is kept and decoded so far, the
    /// carry, and `from_here` (the bytes after them); what follows is taken whole.
    fn give_up(&mut self, from_here: &[u8]) {
        let mut whole = Vec::with_capacity(self.length);
        whole.extend_from_slice(&self.head);
        base64_simd::STANDARD.encode_append(&self.out[self.at..], &mut whole);
        whole.extend_from_slice(&self.carry[..self.carried]);
        whole.extend_from_slice(from_here);
        self.out.truncate(self.at);
        self.carried = 0;
        self.tail = whole;
        self.phase = Phase::Whole;
    }
}

enum Start {
    At(usize),
    NeedMore,
    No,
}

/// Where the string after the first `"content_b64"` key starts, if the body has one there.
fn content_start(head: &[u8]) -> Start {
    const KEY: &[u8] = b"\"content_b64\"";
    let Some(key) = memchr::memmem::find(head, KEY) else {
        return if head.len() > HEAD_MAX {
            Start::No
        } else {
            Start::NeedMore
        };
    };
    let blank = |b: &&u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let mut at = key + KEY.len();
    for expected in [b':', b'"'] {
        at += head[at..].iter().take_while(blank).count();
        match head.get(at) {
            None => return Start::NeedMore,
            Some(&b) if b == expected => at += 1,
            Some(_) => return Start::No,
        }
    }
    Start::At(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: &str = "@stashed:0f0f";

    fn body(content: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "put_sample_chunk", "arguments": {"upload_id": "u", "content_b64": content}},
        }))
        .unwrap()
    }

    /// The body in frames of the given sizes (the last frame takes the rest).
    fn split(b: &[u8], frames: &[usize]) -> Split {
        let mut s = Splitter::new(Vec::new(), b.len());
        let mut rest = b;
        for &n in frames {
            let (frame, after) = rest.split_at(n.min(rest.len()));
            s.push(frame).unwrap();
            rest = after;
        }
        s.push(rest).unwrap();
        s.finish(T, |rest| {
            serde_json::from_slice::<serde_json::Value>(rest)
                .is_ok_and(|v| v["params"]["arguments"]["content_b64"] == T)
        })
    }

    #[test]
    fn plain_base64_is_decoded_aligned_in_any_framing() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for n in [data.len(), data.len() - 1, data.len() - 2] {
            let b = body(&base64_simd::STANDARD.encode_to_string(&data[..n]));
            for frames in [&[][..], &[1, 1, 1, 90, 3, 5, 7], &[95, 13_000], &[77, 2, 1]] {
                let Split::Cut { rest, decoded } = split(&b, frames) else {
                    panic!("not cut: {frames:?}");
                };
                assert_eq!(decoded.as_slice(), &data[..n], "{frames:?}");
                assert!((decoded.as_slice().as_ptr() as usize).is_multiple_of(ALIGN));
                let v: serde_json::Value = serde_json::from_slice(&rest).unwrap();
                assert_eq!(v["params"]["arguments"]["upload_id"], "u");
            }
        }
    }

    #[test]
    fn anything_else_goes_on_byte_for_byte() {
        let odd = [
            "QUJD!EFG",
            "QUJDRA",
            "QQ==QUJD",
            "QR==",
            " QUJD",
            "QUJD\"",
            "QU\\u0041D",
        ];
        for content in odd {
            let b = body(content);
            for frames in [&[][..], &[60, 1, 1, 1, 1, 1, 1, 1]] {
                match split(&b, frames) {
                    Split::Whole(body) => assert_eq!(body, b, "{content}"),
                    Split::Cut { .. } => panic!("cut: {content}"),
                }
            }
        }
        let other = serde_json::to_vec(&serde_json::json!({"content_b64": 4})).unwrap();
        assert!(matches!(split(&other, &[]), Split::Whole(body) if body == other));
        let short = &body("QUJD")[..70];
        assert!(matches!(split(short, &[]), Split::Whole(body) if body == short));
    }

    #[test]
    fn a_body_longer_than_declared_is_refused() {
        let mut s = Splitter::new(Vec::new(), 3);
        assert!(s.push(b"ab").is_ok());
        assert!(s.push(b"cd").is_err());
    }

    proptest! {
        /// Any body, in any framing: a cut holds exactly the decoding of the string serde_json
        /// reads there, and anything not cut goes on exactly as it came.
        #[test]
        fn a_cut_is_what_serde_json_reads_and_the_rest_is_untouched(
            content in "[A-Za-z0-9+/=\"\\\\é \u{1}]{0,40}",
            cut_at in 0usize..200,
            noise in proptest::option::of((0usize..200, any::<u8>())),
            frames in proptest::collection::vec(0usize..40, 0..8),
        ) {
            let mut b = body(&content);
            if cut_at < b.len() { b.truncate(cut_at); }
            if let Some((at, byte)) = noise && at < b.len() { b[at] = byte; }
            match split(&b, &frames) {
                Split::Cut { decoded, .. } => {
                    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
                    let read = v["params"]["arguments"]["content_b64"].as_str().unwrap();
                    let expected = base64_simd::STANDARD.decode_to_vec(read).unwrap();
                    prop_assert_eq!(decoded.as_slice(), &expected[..]);
                }
                Split::Whole(body) => prop_assert_eq!(body, b),
            }
        }
    }
}
