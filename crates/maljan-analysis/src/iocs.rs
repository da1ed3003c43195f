//! `iocs_from_text` / `iocs_from_file`: URLs, domains, IPv4/IPv6, e-mails, hashes, registry keys and
//! file paths, including defanged forms (`hxxp://`, `evil[.]com`, `1.2.3[.]4`, `user[@]x[.]com`).
//! Every indicator is returned refanged, with `defanged: true` when the text had it defanged.

use std::{
    collections::{BTreeMap, HashMap},
    net::Ipv6Addr,
    sync::{Arc, LazyLock},
};

use maljan_server::{Registry, ToolError, ToolMeta};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    common::{Page, check_cancel, on_sample, page},
    strings::{scan_ascii, scan_utf16le},
};

/// The indicator kinds, in the order answers list them.
pub const KINDS: &[&str] = &[
    "url", "domain", "ipv4", "ipv6", "email", "md5", "sha1", "sha256", "sha512", "registry",
    "filepath",
];

const DOT: &str = r"(?:\.|\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\))";
const LABEL: &str = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const OCTET: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?-u:\b)(?:h(?:tt|xx|XX)ps?|fxp|ftps?|sftp|wss?)(?:\[:\]|:)//[^\s"'<>`\\]{2,2048}"#,
    )
    .unwrap()
});
static DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)(?-u:\b){LABEL}(?:{DOT}{LABEL})+(?-u:\b)")).unwrap()
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)(?-u:\b)[a-z0-9._%+-]{{1,64}}(?:@|\[@\]|\[at\]|\(at\)){LABEL}(?:{DOT}{LABEL})+(?-u:\b)")).unwrap()
});
static IPV4: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)(?-u:\b)(?:{OCTET}{DOT}){{3}}{OCTET}(?-u:\b)"
    ))
    .unwrap()
});
static IPV6: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)[0-9a-f:]*:[0-9a-f:]*:[0-9a-f:.]*").unwrap());
static HEX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)[0-9a-fA-F]{32,128}(?-u:\b)").unwrap());
static REGISTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?-u:\b)(?:HKEY_LOCAL_MACHINE|HKEY_CURRENT_USER|HKEY_CLASSES_ROOT|HKEY_USERS|HKEY_CURRENT_CONFIG|HKLM|HKCU|HKCR|HKCC|HKU)(?:\\\\?[^\\\r\n"'<>|:]+)*\\\\?[^\\\s"'<>|]+"#,
    )
    .unwrap()
});
static WINPATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?:(?-u:\b)[a-z]:\\|\\\\[a-z0-9._$-]+\\|%[a-z_]+%\\)(?:[^\\/:*?"<>|\r\n]+\\)*[^\\/:*?"<>|\s]*"#,
    )
    .unwrap()
});
static UNIXPATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)(?:^|[\s'=(])(/(?:etc|tmp|var|usr|bin|sbin|home|root|dev|proc|opt|lib|lib64|Library|Users|System|Applications|private|run|mnt|srv)(?:/[A-Za-z0-9._+@-]+)+/?)")
        .unwrap()
});

/// Top-level domains accepted for bare domains (a name ending in `.exe` or `.dll` is a file).
const TLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "io", "co", "ru", "cn", "de", "uk", "fr", "jp", "br", "in",
    "it", "nl", "pl", "es", "eu", "us", "ca", "au", "ch", "se", "no", "fi", "dk", "be", "at", "cz",
    "sk", "hu", "ro", "bg", "gr", "pt", "ie", "tr", "ua", "by", "kz", "ir", "il", "sa", "ae", "eg",
    "za", "ng", "ke", "mx", "ar", "cl", "pe", "ve", "kr", "kp", "tw", "hk", "sg", "my", "th", "vn",
    "id", "ph", "pk", "bd", "lk", "nz", "su", "tk", "ml", "ga", "cf", "gq", "cc", "tv", "ws", "me",
    "to", "xyz", "top", "online", "site", "club", "live", "app", "dev", "cloud", "shop", "store",
    "tech", "space", "website", "icu", "vip", "win", "bid", "loan", "work", "click", "link",
    "download", "pw", "ly", "gov", "edu", "mil", "int", "onion", "name", "pro", "mobi", "asia",
    "email", "life", "world", "today", "news", "zip", "mov", "fun", "ink", "buzz", "rest", "bar",
    "cyou", "lat", "monster", "quest", "sbs", "cfd", "lol", "best", "uno", "host", "services",
    "support", "network", "digital", "local", "lan", "am", "az", "ge", "uz", "md", "lt", "lv",
    "ee", "si", "hr", "rs", "ba", "mk", "al", "is",
];

/// One indicator.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Indicator {
    pub kind: String,
    /// The indicator refanged (`hxxp` → `http`, `[.]` → `.`).
    pub value: String,
    /// How many times it occurs.
    pub count: usize,
    /// Whether it occurred defanged.
    pub defanged: bool,
}

/// Undoes the usual defanging.
pub fn refang(s: &str) -> String {
    static FANGS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\[:\]|\[@\]|\[at\]|\(at\)|^h(?:xx|XX)p|^fxp|\[://\]").unwrap()
    });
    FANGS
        .replace_all(s, |c: &regex::Captures<'_>| {
            let m = c[0].to_ascii_lowercase();
            match m.as_str() {
                "[:]" => ":".to_string(),
                "[@]" | "[at]" | "(at)" => "@".to_string(),
                "[://]" => "://".to_string(),
                "hxxp" => "http".to_string(),
                "fxp" => "ftp".to_string(),
                _ => ".".to_string(),
            }
        })
        .into_owned()
}

fn tld_ok(domain: &str) -> bool {
    let tld = domain.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    TLDS.contains(&tld.as_str())
}

fn trim_url(u: &str) -> &str {
    let mut s = u.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"']);
    for (open, close) in [('(', ')'), ('[', ']'), ('{', '}')] {
        while s.ends_with(close) && s.matches(open).count() < s.matches(close).count() {
            s = &s[..s.len() - 1];
        }
    }
    s.trim_end_matches(['.', ',', ';', ':'])
}

/// Finds the indicators of `kinds` in `text`, in kind order, each once with its count.
pub fn extract(text: &str, kinds: &[&str]) -> Vec<Indicator> {
    let mut found: Vec<Indicator> = Vec::new();
    let mut index: HashMap<(&'static str, String), usize> = HashMap::new();
    let mut add = |kind: &'static str, raw: &str, value: String| {
        let defanged = raw != value;
        match index.get(&(kind, value.clone())) {
            Some(&i) => {
                found[i].count += 1;
                found[i].defanged |= defanged;
            }
            None => {
                index.insert((kind, value.clone()), found.len());
                found.push(Indicator {
                    kind: kind.to_string(),
                    value,
                    count: 1,
                    defanged,
                });
            }
        }
    };
    for &kind in KINDS.iter().filter(|k| kinds.contains(k)) {
        match kind {
            "url" => {
                for m in URL.find_iter(text) {
                    let raw = trim_url(m.as_str());
                    add(kind, raw, refang(raw));
                }
            }
            "domain" => {
                for m in DOMAIN.find_iter(text) {
                    let raw = m.as_str();
                    let v = refang(raw).to_ascii_lowercase();
                    if tld_ok(&v) && !v.split('.').all(|l| l.bytes().all(|c| c.is_ascii_digit())) {
                        add(kind, raw, v);
                    }
                }
            }
            "email" => {
                for m in EMAIL.find_iter(text) {
                    let raw = m.as_str();
                    let v = refang(raw);
                    if tld_ok(&v) {
                        add(kind, raw, v);
                    }
                }
            }
            "ipv4" => {
                for m in IPV4.find_iter(text) {
                    // Skip the middle of longer dotted runs (version numbers like 1.2.3.4.5).
                    let after = &text[m.end()..];
                    let before = &text[..m.start()];
                    if after.starts_with('.')
                        && after[1..].starts_with(|c: char| c.is_ascii_digit())
                        || before.ends_with('.')
                            && before[..before.len() - 1].ends_with(|c: char| c.is_ascii_digit())
                    {
                        continue;
                    }
                    add(kind, m.as_str(), refang(m.as_str()));
                }
            }
            "ipv6" => {
                for m in IPV6.find_iter(text) {
                    let cand = m.as_str().trim_end_matches('.');
                    if cand.len() < 3 || cand.matches(':').count() < 2 {
                        continue;
                    }
                    if let Ok(ip) = cand.parse::<Ipv6Addr>()
                        && !ip.is_unspecified()
                        && cand.bytes().filter(u8::is_ascii_hexdigit).count() >= 2
                    {
                        add(kind, cand, ip.to_string());
                    }
                }
            }
            "md5" | "sha1" | "sha256" | "sha512" => {
                let want = match kind {
                    "md5" => 32,
                    "sha1" => 40,
                    "sha256" => 64,
                    _ => 128,
                };
                for m in HEX.find_iter(text) {
                    let h = m.as_str();
                    let letters = h.bytes().any(|c| c.is_ascii_alphabetic());
                    let digits = h.bytes().any(|c| c.is_ascii_digit());
                    if h.len() == want && letters && digits {
                        add(kind, h, h.to_ascii_lowercase());
                    }
                }
            }
            "registry" => {
                for m in REGISTRY.find_iter(text) {
                    let v = m.as_str().trim_end();
                    if v.contains('\\') {
                        add(kind, v, v.to_string());
                    }
                }
            }
            "filepath" => {
                for m in WINPATH.find_iter(text) {
                    let v = m.as_str().trim_end_matches(['.', ',', ';', ')']);
                    if v.len() > 3 {
                        add(kind, v, v.to_string());
                    }
                }
                for c in UNIXPATH.captures_iter(text) {
                    let v = c[1].trim_end_matches(['.', ',', ';']);
                    add(kind, v, v.to_string());
                }
            }
            _ => {}
        }
    }
    found
}

/// The text an indicator search runs over for a binary file: its ASCII and UTF-16LE strings of at
/// least `min_len` characters, one per line.
pub fn text_of(bytes: &[u8], min_len: usize, cancel: &dyn Fn() -> bool) -> String {
    let mut text = String::new();
    scan_ascii(bytes, min_len, cancel, |_, run| {
        text.push_str(std::str::from_utf8(run).unwrap_or_default());
        text.push('\n');
        true
    });
    scan_utf16le(bytes, min_len, cancel, |_, s| {
        text.push_str(&s);
        text.push('\n');
        true
    });
    text
}

fn parse_kinds(kinds: Option<Vec<String>>) -> Result<Vec<&'static str>, ToolError> {
    let Some(kinds) = kinds else {
        return Ok(KINDS.to_vec());
    };
    let mut out = Vec::new();
    for k in &kinds {
        let k = k.trim().to_ascii_lowercase();
        let group: &[&'static str] = match k.as_str() {
            "ip" => &["ipv4", "ipv6"],
            "hash" | "hashes" => &["md5", "sha1", "sha256", "sha512"],
            "path" | "file" | "file_path" => &["filepath"],
            "registry_key" | "regkey" => &["registry"],
            "urls" => &["url"],
            "domains" => &["domain"],
            "emails" => &["email"],
            _ => match KINDS.iter().find(|x| **x == k) {
                Some(x) => std::slice::from_ref(x),
                None => {
                    return Err(ToolError::bad_argument(format!(
                        "unknown indicator kind '{k}'; kinds are {} (or ip, hash, path)",
                        KINDS.join(", ")
                    )));
                }
            },
        };
        out.extend_from_slice(group);
    }
    Ok(out)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IocsFromTextArgs {
    /// The text to search.
    pub text: String,
    /// Only these kinds (url, domain, ipv4, ipv6, email, md5, sha1, sha256, sha512, registry, filepath;
    /// or the groups ip, hash, path). Null: all.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Most indicators returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first indicator returned (paging).
    #[serde(default)]
    pub offset: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IocsFromFileArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Only these kinds (see iocs_from_text). Null: all.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Most indicators returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first indicator returned (paging).
    #[serde(default)]
    pub offset: usize,
}

fn default_limit() -> usize {
    1000
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct IocsOutput {
    /// The file that was read (iocs_from_file only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_path: Option<String>,
    /// Distinct indicators per kind (before paging).
    pub counts: BTreeMap<String, usize>,
    #[serde(flatten)]
    pub page: Page,
    pub indicators: Vec<Indicator>,
}

fn answer(
    all: Vec<Indicator>,
    offset: usize,
    limit: usize,
    read_path: Option<String>,
) -> IocsOutput {
    let mut counts = BTreeMap::new();
    for i in &all {
        *counts.entry(i.kind.clone()).or_insert(0) += 1;
    }
    let (indicators, page) = page(all, offset, limit);
    IocsOutput {
        read_path,
        counts,
        page,
        indicators,
    }
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    registry.add(
        ToolMeta::new(
            "iocs_from_text",
            "Indicators of compromise in a text: URLs, domains, IPv4/IPv6, e-mails, MD5/SHA hashes, \
             registry keys, file paths; defanged forms (hxxp, [.]) are found and refanged.",
        )
        .title("Indicators in text")
        .timeout_s(60),
        |_ctx, a: IocsFromTextArgs| async move {
            let kinds = parse_kinds(a.kinds)?;
            maljan_server::blocking(move || Ok(answer(extract(&a.text, &kinds), a.offset, a.limit.max(1), None))).await
        },
    );
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "iocs_from_file",
            "Indicators of compromise in the sample's ASCII and UTF-16LE strings: URLs, domains, \
             IPv4/IPv6, e-mails, hashes, registry keys, file paths, defanged forms included.",
        )
        .title("Indicators in a file")
        .timeout_s(120),
        move |ctx, a: IocsFromFileArgs| {
            let config = config.clone();
            async move {
                let kinds = parse_kinds(a.kinds)?;
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let text = text_of(s.bytes(), 4, &|| ctx.is_cancelled());
                    check_cancel(ctx)?;
                    Ok(answer(
                        extract(&text, &kinds),
                        a.offset,
                        a.limit.max(1),
                        Some(s.read_path()),
                    ))
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(text: &str, kind: &str) -> Vec<String> {
        extract(text, &[kind])
            .into_iter()
            .map(|i| i.value)
            .collect()
    }

    #[test]
    fn defanged_and_plain() {
        let t = "get hxxp://evil[.]example[.]com/a.php?x=1, then https://good.org/x) and 8.8.8[.]8 or user[@]mail[.]ru";
        assert_eq!(
            find(t, "url"),
            vec!["http://evil.example.com/a.php?x=1", "https://good.org/x"]
        );
        assert!(find(t, "domain").contains(&"evil.example.com".to_string()));
        assert_eq!(find(t, "ipv4"), vec!["8.8.8.8"]);
        assert_eq!(find(t, "email"), vec!["user@mail.ru"]);
        let all = extract(t, KINDS);
        assert!(all.iter().find(|i| i.kind == "url").unwrap().defanged);
    }

    #[test]
    fn hashes_registry_paths_ipv6() {
        let t = "d41d8cd98f00b204e9800998ecf8427e HKEY_LOCAL_MACHINE\\Software\\Microsoft\\Windows\\CurrentVersion\\Run \
                 C:\\Users\\Public\\evil.exe and /tmp/.x/payload.sh fe80::1ff:fe23:4567:890a and version 1.2.3.4.5 in config.exe";
        assert_eq!(find(t, "md5"), vec!["d41d8cd98f00b204e9800998ecf8427e"]);
        assert_eq!(
            find(t, "registry"),
            vec!["HKEY_LOCAL_MACHINE\\Software\\Microsoft\\Windows\\CurrentVersion\\Run"]
        );
        let paths = find(t, "filepath");
        assert!(
            paths.contains(&"C:\\Users\\Public\\evil.exe".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"/tmp/.x/payload.sh".to_string()),
            "{paths:?}"
        );
        assert_eq!(find(t, "ipv6"), vec!["fe80::1ff:fe23:4567:890a"]);
        assert!(
            find(t, "ipv4").is_empty(),
            "a version number is not an address"
        );
        assert!(
            find(t, "domain").is_empty(),
            "config.exe is a file, not a domain"
        );
    }

    #[test]
    fn kinds_are_checked() {
        assert_eq!(
            parse_kinds(Some(vec!["bogus".into()])).unwrap_err().code,
            maljan_server::ErrorCode::BadArgument
        );
        assert_eq!(
            parse_kinds(Some(vec!["ip".into()])).unwrap(),
            vec!["ipv4", "ipv6"]
        );
    }
}
