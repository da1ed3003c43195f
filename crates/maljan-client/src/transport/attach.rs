//! Large base64 arguments held beside a message instead of inside it.
//!
//! rmcp's streamable HTTP client copies every message it posts (it keeps the original to send
//! again should the session need recovering): for a put_sample chunk that is a 5.6 MB string
//! copied into fresh pages on every call, about an eighth of the client's CPU in an upload. An
//! attached argument travels through rmcp as a short token; the splicing client puts the held
//! bytes in the token's place when it writes the body, without copying or scanning them (they
//! are base64 by construction, so JSON takes them verbatim).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;

/// What every token starts with; the rest is random, so no other string is taken for one.
const TOKEN: &str = "maljan-attachment-";

/// Base64 text (standard alphabet, padded): only made by encoding bytes, so never in need of
/// JSON escapes.
#[derive(Debug, Clone)]
pub struct Base64(Bytes);

impl Base64 {
    pub fn encode(raw: &[u8]) -> Self {
        // SIMD: on a fast link, encoding is a large share of an upload's CPU.
        Self(base64_simd::STANDARD.encode_type::<Vec<u8>>(raw).into())
    }

    /// The text as a string, for a transport that does not take attachments.
    pub fn into_string(self) -> String {
        String::from_utf8(Vec::from(self.0))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The attachments of one connection, by token.
#[derive(Clone, Default)]
pub struct Attachments(Arc<Mutex<HashMap<String, Bytes>>>);

impl Attachments {
    /// Holds `content` until the returned guard is dropped; the guard's token goes into the
    /// message in its place.
    pub fn hold(&self, content: Base64) -> Held {
        let token = format!("{TOKEN}{}", uuid::Uuid::new_v4().simple());
        self.lock().insert(token.clone(), content.0);
        Held {
            token,
            set: self.clone(),
        }
    }

    /// The content behind `token` (a reference-counted handle, not a copy), while it is held.
    pub(super) fn get(&self, token: &str) -> Option<Bytes> {
        if !token.starts_with(TOKEN) {
            return None;
        }
        self.lock().get(token).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Bytes>> {
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
        let held = set.hold(Base64::encode(b"ABC"));
        assert!(held.token().starts_with(TOKEN));
        assert_eq!(set.get(held.token()).as_deref(), Some(&b"QUJD"[..]));
        assert_eq!(set.get("QUJD"), None, "only tokens are looked up");
        let token = held.token().to_string();
        drop(held);
        assert_eq!(set.get(&token), None);
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn base64_encodes_and_gives_its_text_back() {
        assert_eq!(Base64::encode(b"hello\n").into_string(), "aGVsbG8K");
        assert_eq!(Base64::encode(b"").into_string(), "");
    }
}
