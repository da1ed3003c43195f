//! Large base64 arguments held beside a message instead of inside it.
//!
//! rmcp's streamable HTTP client copies every message it posts (it keeps the original to send
//! again should the session need recovering): for a put_sample chunk that is a 5.6 MB string
//! copied into fresh pages on every call, about an eighth of the client's CPU in an upload. An
//! attached argument travels through rmcp as a short token; the splicing client puts the held
//! bytes in the token's place when it writes the body, without copying or scanning them (they
//! are base64 by construction, so JSON takes them verbatim).
//!
//! An attachment holds the raw bytes and is encoded 256 KiB at a time as the body is written: a
//! piece is then still in the cache when the socket copies it, where a whole 5.6 MB text had
//! left it long before (the send copy fell by ~30%, the client's CPU by ~6%).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;

/// What every token starts with; the rest is random, so no other string is taken for one.
const TOKEN: &str = "maljan-attachment-";

/// Base64 text (standard alphabet, padded) of raw bytes: only made by encoding, so never in
/// need of JSON escapes. Encoded piece by piece as it is sent, so each piece is still in the
/// cache when the socket copies it.
#[derive(Debug, Clone)]
pub struct Base64(Bytes);

/// Raw bytes per piece of the text: a multiple of 3 (no padding inside the text), and 256 KiB
/// encoded, which stays in the cache between encoding and sending.
const RAW_PIECE: usize = 3 * 64 * 1024;

impl Base64 {
    /// `raw`'s text, encoded only as it is sent (see [`Base64::into_pieces`]).
    pub fn of(raw: Vec<u8>) -> Self {
        Self(raw.into())
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        base64_simd::STANDARD.encoded_length(self.0.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text in pieces that together are the whole, each encoded when it is asked for (SIMD:
    /// on a fast link, encoding is a large share of an upload's CPU).
    pub(super) fn into_pieces(self) -> impl Iterator<Item = Bytes> + Send + Sync + 'static {
        let raw = self.0;
        (0..raw.len()).step_by(RAW_PIECE).map(move |at| {
            let piece = &raw[at..raw.len().min(at + RAW_PIECE)];
            Bytes::from(base64_simd::STANDARD.encode_type::<Vec<u8>>(piece))
        })
    }

    /// The text as a string, for a transport that does not take attachments.
    pub fn into_string(self) -> String {
        base64_simd::STANDARD.encode_type::<String>(&self.0)
    }
}

/// The attachments of one connection, by token.
#[derive(Clone, Default)]
pub struct Attachments(Arc<Mutex<HashMap<String, Base64>>>);

impl Attachments {
    /// Holds `content` until the returned guard is dropped; the guard's token goes into the
    /// message in its place.
    pub fn hold(&self, content: Base64) -> Held {
        let token = format!("{TOKEN}{}", uuid::Uuid::new_v4().simple());
        self.lock().insert(token.clone(), content);
        Held {
            token,
            set: self.clone(),
        }
    }

    /// The content behind `token` (a reference-counted handle, not a copy), while it is held.
    pub(super) fn get(&self, token: &str) -> Option<Base64> {
        if !token.starts_with(TOKEN) {
            return None;
        }
        self.lock().get(token).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Base64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// An attachment held for one call.
pub struct Held {
    token: String,
    set: Attachments,
}

impl Held {
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.set.lock().remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attachment_is_there_while_held_and_gone_after() {
        let set = Attachments::default();
        let held = set.hold(Base64::of(b"ABC".to_vec()));
        assert!(held.token().starts_with(TOKEN));
        let text = set.get(held.token()).map(Base64::into_string);
        assert_eq!(text.as_deref(), Some("QUJD"));
        assert!(set.get("QUJD").is_none(), "only tokens are looked up");
        let token = held.token().to_string();
        drop(held);
        assert!(set.get(&token).is_none());
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn base64_encodes_and_gives_its_text_back() {
        assert_eq!(Base64::of(b"hello\n".to_vec()).into_string(), "aGVsbG8K");
        assert_eq!(Base64::of(Vec::new()).into_string(), "");
    }

    /// Encoded piece by piece or at once, the text is the same, and as long as it says; only
    /// the last piece is padded.
    #[test]
    fn pieces_make_the_whole_text() {
        for n in [
            0,
            1,
            2,
            3,
            RAW_PIECE - 1,
            RAW_PIECE,
            RAW_PIECE + 1,
            3 * RAW_PIECE + 2,
        ] {
            let raw: Vec<u8> = (0..n).map(|i| (i * 7 % 256) as u8).collect();
            let whole = base64_simd::STANDARD.encode_type::<Vec<u8>>(&raw);
            let text = Base64::of(raw);
            assert_eq!(text.len(), whole.len(), "{n} bytes");
            assert_eq!(text.clone().into_string().as_bytes(), whole, "{n} bytes");
            let pieces: Vec<Bytes> = text.into_pieces().collect();
            assert_eq!(pieces.concat(), whole, "{n} bytes");
            let inner = &pieces[..pieces.len().saturating_sub(1)];
            assert!(inner.iter().all(|p| !p.ends_with(b"=")), "{n} bytes");
        }
    }
}
