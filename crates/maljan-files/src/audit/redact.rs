//! What of a call's arguments the trail may keep: every value under a key that a tool's schema
//! marks secret (`writeOnly`: an Azure `connection_string`, a drive's `access_token`), or that
//! names a secret (password, token, secret, key, credential, auth, cookie, passphrase,
//! signature…), every value of a `*_later_init` key (automation-file's deferred credentials),
//! and the credentials and query of every URL, are replaced by `<redacted>` — at any depth, so
//! the arguments of the calls inside an action list are redacted too.

use std::{collections::HashSet, sync::LazyLock};

use serde_json::{Map, Value};

const REDACTED: &str = "<redacted>";
/// A longer string argument (a file's content, put_sample's base64) is kept as its first
/// `KEPT_PREFIX` bytes and its length: the trail says what was called, it is not a copy.
const MAX_STRING: usize = 1024;
const KEPT_PREFIX: usize = 256;
const SECRET_WORDS: [&str; 12] = [
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "key",
    "credential",
    "auth",
    "cookie",
    "signature",
    "private",
    "session",
];
/// Argument names that say which file or object a call is about, first match wins.
const RESOURCE_KEYS: [&str; 10] = [
    "path",
    "file_path",
    "source",
    "src",
    "target",
    "root",
    "dir_path",
    "file_name",
    "uri",
    "target_path",
];

fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with("_later_init") || SECRET_WORDS.iter().any(|w| key.contains(w))
}

static URL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r#"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^/\s@'"]*@)?([^/\s'"?#]+)[^\s'")]*"#)
        .expect("a valid pattern")
});

/// `text` with each URL cut to its scheme and host.
pub(crate) fn text(text: &str) -> String {
    URL.replace_all(text, format!("${{1}}${{2}}/{REDACTED}").as_str())
        .into_owned()
}

fn value(v: &Value, marked: Option<&HashSet<String>>) -> Value {
    match v {
        Value::Object(map) => Value::Object(object(map, marked)),
        Value::Array(items) => Value::Array(items.iter().map(|i| value(i, marked)).collect()),
        Value::String(s) if s.len() > MAX_STRING => {
            let mut end = KEPT_PREFIX;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}…[{} bytes]", text(&s[..end]), s.len()))
        }
        Value::String(s) if s.contains("://") => Value::String(text(s)),
        other => other.clone(),
    }
}

fn object(map: &Map<String, Value>, marked: Option<&HashSet<String>>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            let secret = secret_key(k) || marked.is_some_and(|m| m.contains(k));
            let kept = if secret && !v.is_null() {
                Value::String(REDACTED.into())
            } else {
                value(v, marked)
            };
            (k.clone(), kept)
        })
        .collect()
}

/// The arguments as the trail keeps them; `marked` are the names the tools' schemas mark secret.
pub(crate) fn arguments(args: &Map<String, Value>, marked: Option<&HashSet<String>>) -> Value {
    Value::Object(object(args, marked))
}

/// Adds to `names` every property name `schema` marks `writeOnly`, at any depth (nested
/// objects, array items, `$defs`, `anyOf` branches).
pub(crate) fn write_only_names(schema: &Value, names: &mut HashSet<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                for (name, prop) in props {
                    if prop.get("writeOnly").and_then(Value::as_bool) == Some(true) {
                        names.insert(name.clone());
                    }
                }
            }
            for v in map.values() {
                write_only_names(v, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| write_only_names(i, names)),
        _ => {}
    }
}

/// The file or object a call was about, from its (redacted) arguments.
pub(crate) fn resource(args: &Value) -> Option<String> {
    RESOURCE_KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let args = json!({
            "path": "/data/a.txt",
            "password": "hunter2",
            "api_key": "K-123",
            "connection_later_init": {"user": "u", "pw": "p"},
            "action_list": [["FA_s3_upload", {"aws_secret_access_key": "S3SECRET", "file_url": "https://u:pw@host.example/x?sig=QUERYSECRET"}]],
        });
        let kept = arguments(args.as_object().unwrap(), None).to_string();
        for secret in [
            "hunter2",
            "K-123",
            "S3SECRET",
            "QUERYSECRET",
            "\"pw\"",
            "u:pw",
        ] {
            assert!(!kept.contains(secret), "{secret} in {kept}");
        }
        assert!(
            kept.contains("/data/a.txt") && kept.contains("host.example"),
            "{kept}"
        );
        assert_eq!(
            resource(&arguments(args.as_object().unwrap(), None)).as_deref(),
            Some("/data/a.txt")
        );
    }

    #[test]
    fn a_field_a_schema_marks_secret_is_redacted_wherever_it_appears() {
        let schema = json!({"type": "object", "properties": {
            "container": {"type": "string"},
            "connection_string": {"type": "string", "writeOnly": true},
            "nested": {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": true}}},
        }});
        let mut marked = HashSet::new();
        write_only_names(&schema, &mut marked);
        assert_eq!(marked.len(), 2, "{marked:?}");
        let args = json!({
            "container": "c",
            "connection_string": "AccountName=a;SharedAccessSignature=CONNSECRET",
            "action_list": [["FA_x", {"nested": {"pin": "PINSECRET"}}]],
        });
        let kept = arguments(args.as_object().unwrap(), Some(&marked)).to_string();
        assert!(
            !kept.contains("CONNSECRET") && !kept.contains("PINSECRET"),
            "{kept}"
        );
        assert!(kept.contains("\"container\":\"c\""), "{kept}");
    }

    #[test]
    fn long_strings_are_kept_as_a_prefix_and_a_length() {
        let big = "é".repeat(5000);
        let kept = arguments(json!({"content_b64": big}).as_object().unwrap(), None);
        let kept = kept["content_b64"].as_str().unwrap();
        assert!(
            kept.len() < 300 && kept.ends_with("…[10000 bytes]"),
            "{kept}"
        );
    }

    proptest! {
        /// Whatever a secret key holds, none of it is kept.
        #[test]
        fn a_secret_key_keeps_nothing(word in prop::sample::select(SECRET_WORDS.to_vec()), secret in "[A-Za-z0-9]{8,20}") {
            let args = json!({format!("my_{word}"): {"nested": secret.clone()}, "list": [{word: secret.clone()}]});
            let kept = arguments(args.as_object().unwrap(), None).to_string();
            prop_assert!(!kept.contains(&secret), "{}", kept);
        }

        #[test]
        fn url_text_never_keeps_a_query(host in "[a-z]{1,10}\\.example", q in "[A-Za-z0-9]{6,12}") {
            let kept = text(&format!("fetch https://{host}/p?token={q} failed"));
            prop_assert!(!kept.contains(&q) && kept.contains(&host), "{}", kept);
        }
    }
}
