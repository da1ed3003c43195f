//! Keeping secrets out of text a person or a log will see: URL query strings (they often carry
//! keys) and user-info are cut from any URL in a message.

/// Replaces `?query`, `#fragment` and `user:pass@` in every http(s) URL inside `text`.
pub fn scrub_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_scheme(rest) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | '<' | ','))
            .unwrap_or(tail.len());
        out.push_str(&scrub_one(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// One URL without its query, fragment and user-info.
pub fn scrub_url(url: &str) -> String {
    scrub_one(url)
}

fn find_scheme(s: &str) -> Option<usize> {
    match (s.find("http://"), s.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn scrub_one(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let (head, dropped) = url.split_at(cut);
    let mut head = head.to_string();
    if let Some(scheme_end) = head.find("://") {
        let after = scheme_end + 3;
        let host_end = head[after..]
            .find('/')
            .map(|i| after + i)
            .unwrap_or(head.len());
        if let Some(at) = head[after..host_end].rfind('@') {
            head.replace_range(after..after + at + 1, "");
        }
    }
    if !dropped.is_empty() {
        head.push_str("?…");
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_and_credentials_are_cut() {
        let s = scrub_urls(
            "error sending request for url (https://u:p@h.example/mcp?key=SECRET): refused",
        );
        assert_eq!(
            s,
            "error sending request for url (https://h.example/mcp?…): refused"
        );
        assert_eq!(scrub_urls("no url here"), "no url here");
        assert_eq!(
            scrub_url("http://127.0.0.1:3/sse"),
            "http://127.0.0.1:3/sse"
        );
    }
}
