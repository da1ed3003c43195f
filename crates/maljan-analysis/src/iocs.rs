//! `iocs_from_text` / `iocs_from_file`: URLs, domains, IPv4/IPv6, e-mails, hashes, registry keys and
//! file paths, including defanged forms (`hxxp://`, `evil[.]com`, `1.2.3[.]4`, `user[@]x[.]com`).
//! Every indicator is returned refanged, with `defanged: true` when the text had it defanged, a
//! confidence and the offset it came from; [`crate::ioc_judge`] says which ones are scored and
//! which are only context (and why).

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
    ioc_judge::{self, Around, Confidence, FileFacts, Host, Judgement},
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

/// One indicator.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Indicator {
    pub kind: String,
    /// The indicator refanged (`hxxp` → `http`, `[.]` → `.`).
    pub value: String,
    /// How many times it occurs.
    pub count: usize,
    /// Whether it occurred really defanged (`hxxp`, `[.]`, `(.)`, `[:]`, `[@]`).
    pub defanged: bool,
    /// How far it can be trusted (its best occurrence): high and medium are scored, low is
    /// context only (see `reason`).
    pub confidence: Confidence,
    /// Where its best occurrence starts: the byte offset in the file (iocs_from_file) or in the
    /// text (iocs_from_text).
    pub offset: u64,
    /// Why a low-confidence indicator is context, never scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Indicator {
    /// Whether it counts (towards the counts and the network fact), not only reported.
    pub fn scored(&self) -> bool {
        self.confidence.scored()
    }
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

fn trim_url(u: &str) -> &str {
    let mut s = u.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"']);
    for (open, close) in [('(', ')'), ('[', ']'), ('{', '}')] {
        while s.ends_with(close) && s.matches(open).count() < s.matches(close).count() {
            s = &s[..s.len() - 1];
        }
    }
    s.trim_end_matches(['.', ',', ';', ':'])
}

/// One printable run of a file, as laid into the scanned text.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Where the run starts in the text.
    text_start: usize,
    /// Where it starts in the file.
    offset: u64,
    /// UTF-16LE (two bytes a character) rather than ASCII.
    wide: bool,
    /// Its length in characters.
    len: usize,
}

/// Where the searched text came from.
enum Origin<'a> {
    /// Text given as such: offsets are the text's own.
    Text,
    /// The printable runs of a file.
    File {
        runs: &'a [Run],
        facts: &'a FileFacts<'a>,
    },
}

impl Origin<'_> {
    /// The offset of text position `at`, and the reason the place makes a match there context.
    fn locate(&self, at: usize) -> (u64, Option<&'static str>) {
        match self {
            Origin::Text => (at as u64, None),
            Origin::File { runs, facts } => {
                let i = runs
                    .partition_point(|r| r.text_start <= at)
                    .saturating_sub(1);
                let Some(r) = runs.get(i) else {
                    return (at as u64, None);
                };
                let chars = (at - r.text_start.min(at)) as u64;
                let offset = r.offset + if r.wide { 2 * chars } else { chars };
                (offset, facts.place(offset, r.len))
            }
        }
    }

    /// Whether the string holding text position `at` is a .NET custom attribute's string
    /// argument (the blob prolog 01 00, then the string's length): where assemblies keep
    /// `AssemblyFileVersion("2.1.5.3")` and the like.
    fn attribute_string(&self, at: usize) -> bool {
        let Origin::File { runs, facts } = self else {
            return false;
        };
        let i = runs
            .partition_point(|r| r.text_start <= at)
            .saturating_sub(1);
        runs.get(i).is_some_and(|r| {
            !r.wide
                && r.len < 0x80
                && (r.offset as usize)
                    .checked_sub(3)
                    .and_then(|from| facts.bytes().get(from..r.offset as usize))
                    == Some(&[0x01, 0x00, r.len as u8][..])
        })
    }
}

/// Collects indicators, one per (kind, value), keeping the best-judged occurrence.
#[derive(Default)]
struct Found {
    list: Vec<Indicator>,
    index: HashMap<(&'static str, String), usize>,
}

impl Found {
    fn add(&mut self, kind: &'static str, raw: &str, value: String, offset: u64, j: Judgement) {
        let defanged = NETWORK_KINDS.contains(&kind) && ioc_judge::defanged(raw);
        let (confidence, reason) = j;
        match self.index.get(&(kind, value.clone())) {
            Some(&i) => {
                let f = &mut self.list[i];
                f.count += 1;
                f.defanged |= defanged;
                if confidence > f.confidence {
                    f.confidence = confidence;
                    f.offset = offset;
                    f.reason = reason.map(str::to_string);
                }
            }
            None => {
                self.index.insert((kind, value.clone()), self.list.len());
                self.list.push(Indicator {
                    kind: kind.to_string(),
                    value,
                    count: 1,
                    defanged,
                    confidence,
                    offset,
                    reason: reason.map(str::to_string),
                });
            }
        }
    }
}

/// The kinds that name a place on the network.
pub const NETWORK_KINDS: &[&str] = &["url", "domain", "ipv4", "ipv6", "email"];

/// A URL or e-mail match: its span in the text, its refanged value and how it was judged.
struct Span {
    range: std::ops::Range<usize>,
    host: Option<String>,
    judgement: Judgement,
}

/// Finds the indicators of `kinds` in `text`, in kind order, each once with its count, its
/// confidence and the offset in `text` of its best occurrence.
pub fn extract(text: &str, kinds: &[&str]) -> Vec<Indicator> {
    extract_in(text, kinds, &Origin::Text)
}

/// Finds the indicators of `kinds` in a file's ASCII and UTF-16LE strings (of at least 4
/// characters), judged by where they lie in the file (see [`ioc_judge`]); offsets are the file's.
pub fn extract_from_bytes(
    bytes: &[u8],
    kinds: &[&str],
    cancel: &dyn Fn() -> bool,
) -> Vec<Indicator> {
    let (text, runs) = text_and_runs(bytes, 4, cancel);
    if cancel() {
        return Vec::new();
    }
    let facts = FileFacts::read(bytes, cancel);
    extract_in(
        &text,
        kinds,
        &Origin::File {
            runs: &runs,
            facts: &facts,
        },
    )
}

fn extract_in(text: &str, kinds: &[&str], origin: &Origin<'_>) -> Vec<Indicator> {
    let mut found = Found::default();
    let judge = |start: usize, end: usize, rule: &dyn Fn(&Around<'_>) -> Judgement| {
        let (offset, place) = origin.locate(start);
        let j = match place {
            Some(reason) => (Confidence::Low, Some(reason)),
            None => rule(&Around::of(text, start, end)),
        };
        (offset, j)
    };
    let wants = |k: &str| kinds.contains(&k);
    // URLs and e-mails first: a domain inside one is judged as its host.
    let mut urls: Vec<Span> = Vec::new();
    if wants("url") || wants("domain") {
        for m in URL.find_iter(text) {
            let raw = trim_url(m.as_str());
            let value = refang(raw);
            let (offset, j) = judge(m.start(), m.start() + raw.len(), &|a| {
                ioc_judge::url(&value, raw, a)
            });
            if wants("url") {
                found.add("url", raw, value.clone(), offset, j);
            }
            urls.push(Span {
                range: m.start()..m.start() + raw.len(),
                host: ioc_judge::url_host(&value),
                judgement: j,
            });
        }
    }
    if wants("email") || wants("domain") {
        for m in EMAIL.find_iter(text) {
            let raw = m.as_str();
            let value = refang(raw);
            let (offset, j) = judge(m.start(), m.end(), &|_| ioc_judge::email(&value, raw));
            let domain = value.rsplit('@').next().unwrap_or("").to_ascii_lowercase();
            if wants("email")
                && psl::domain(domain.as_bytes()).is_some_and(|d| d.suffix().is_known())
            {
                found.add("email", raw, value.clone(), offset, j);
            }
            urls.push(Span {
                range: m.range(),
                host: value.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()),
                judgement: j,
            });
        }
    }
    for &kind in KINDS.iter().filter(|k| wants(k)) {
        match kind {
            "domain" => {
                for m in DOMAIN.find_iter(text) {
                    let raw = m.as_str();
                    let v = refang(raw).to_ascii_lowercase();
                    if psl::domain(v.as_bytes()).is_none_or(|d| !d.suffix().is_known())
                        || v.split('.').all(|l| l.bytes().all(|c| c.is_ascii_digit()))
                    {
                        // No public suffix at all (a file name, a member access): not a domain.
                        continue;
                    }
                    let within = urls
                        .iter()
                        .find(|s| s.range.start <= m.start() && m.end() <= s.range.end);
                    let host = match within {
                        None => Host::Bare,
                        Some(s) if s.host.as_deref() == Some(v.as_str()) => Host::Of(s.judgement.0),
                        // A name in a URL's path or query, not its host.
                        Some(_) => continue,
                    };
                    let (offset, j) =
                        judge(m.start(), m.end(), &|a| ioc_judge::domain(&v, raw, a, host));
                    found.add(kind, raw, v.clone(), offset, j);
                }
            }
            "ipv4" => {
                let oid_roots = oid_roots(text);
                for m in IPV4.find_iter(text) {
                    // The middle of a longer dotted run (1.2.3.4.5) is a version, not an address.
                    let after = &text[m.end()..];
                    let before = &text[..m.start()];
                    if after.starts_with('.')
                        && after[1..].starts_with(|c: char| c.is_ascii_digit())
                        || before.ends_with('.')
                            && before[..before.len() - 1].ends_with(|c: char| c.is_ascii_digit())
                    {
                        continue;
                    }
                    let raw = m.as_str();
                    let value = refang(raw);
                    let root: String = value.split('.').take(2).collect::<Vec<_>>().join(".");
                    let (offset, j) = judge(m.start(), m.end(), &|a| {
                        if oid_roots.contains(&root) {
                            return (Confidence::Low, Some(ioc_judge::OBJECT_IDENTIFIER));
                        }
                        ioc_judge::ipv4(&value, raw, a, origin.attribute_string(m.start()))
                    });
                    found.add(kind, raw, value.clone(), offset, j);
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
                        let (offset, j) = judge(m.start(), m.start() + cand.len(), &|_| {
                            ioc_judge::ipv6(ip, cand)
                        });
                        found.add(kind, cand, ip.to_string(), offset, j);
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
                        let (offset, j) =
                            judge(m.start(), m.end(), &|_| (Confidence::Medium, None));
                        found.add(kind, h, h.to_ascii_lowercase(), offset, j);
                    }
                }
            }
            "registry" => {
                for m in REGISTRY.find_iter(text) {
                    let v = m.as_str().trim_end();
                    if v.contains('\\') {
                        let (offset, j) =
                            judge(m.start(), m.end(), &|_| (Confidence::Medium, None));
                        found.add(kind, v, v.to_string(), offset, j);
                    }
                }
            }
            "filepath" => {
                for m in WINPATH.find_iter(text) {
                    let v = m.as_str().trim_end_matches(['.', ',', ';', ')']);
                    if v.len() > 3 {
                        let (offset, j) =
                            judge(m.start(), m.end(), &|_| (Confidence::Medium, None));
                        found.add(kind, v, v.to_string(), offset, j);
                    }
                }
                for c in UNIXPATH.captures_iter(text) {
                    let m = c.get(1).expect("group 1 always takes part");
                    let v = m.as_str().trim_end_matches(['.', ',', ';']);
                    let (offset, j) = judge(m.start(), m.end(), &|_| (Confidence::Medium, None));
                    found.add(kind, v, v.to_string(), offset, j);
                }
            }
            _ => {}
        }
    }
    // Kind order, as the kinds were walked (URLs and e-mails were found first).
    let mut list = found.list;
    list.sort_by_key(|i| KINDS.iter().position(|k| *k == i.kind));
    list
}

/// The first two arcs of the ASN.1 object identifiers written out in `text` (dotted runs of five
/// or more numbers starting 0, 1 or 2, such as 1.3.6.1.5.5.7.3.1): a dotted quad under one of
/// them (2.5.29.17 beside 2.5.29.32.0) is an OID too, not an address.
fn oid_roots(text: &str) -> std::collections::HashSet<String> {
    static OID: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?-u:\b)([0-2])\.([0-9]{1,2})(?:\.[0-9]{1,10}){3,}(?-u:\b)").unwrap()
    });
    OID.captures_iter(text)
        .map(|c| format!("{}.{}", &c[1], &c[2]))
        .collect()
}

/// The text an indicator search runs over for a binary file: its ASCII and UTF-16LE strings of at
/// least `min_len` characters, one per line.
pub fn text_of(bytes: &[u8], min_len: usize, cancel: &dyn Fn() -> bool) -> String {
    text_and_runs(bytes, min_len, cancel).0
}

fn text_and_runs(bytes: &[u8], min_len: usize, cancel: &dyn Fn() -> bool) -> (String, Vec<Run>) {
    let mut text = String::new();
    let mut runs = Vec::new();
    scan_ascii(bytes, min_len, cancel, |at, run| {
        runs.push(Run {
            text_start: text.len(),
            offset: at as u64,
            wide: false,
            len: run.len(),
        });
        text.push_str(std::str::from_utf8(run).unwrap_or_default());
        text.push('\n');
        true
    });
    scan_utf16le(bytes, min_len, cancel, |at, s| {
        runs.push(Run {
            text_start: text.len(),
            offset: at as u64,
            wide: true,
            len: s.len(),
        });
        text.push_str(&s);
        text.push('\n');
        true
    });
    (text, runs)
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
    /// Distinct *scored* indicators per kind (confidence high or medium; before paging): what a
    /// verdict may count. Context indicators are counted in `context_counts`.
    pub counts: BTreeMap<String, usize>,
    #[serde(flatten)]
    pub page: Page,
    /// The scored indicators (confidence high or medium), paged.
    pub indicators: Vec<Indicator>,
    /// Distinct context indicators per kind: reported, never scored.
    pub context_counts: BTreeMap<String, usize>,
    /// The context indicators (confidence low), each with the reason it is not scored: found in a
    /// high-entropy region, a section or symbol name, a namespace, a version string, … (at most
    /// `limit` of them).
    pub context: Vec<Indicator>,
}

fn answer(
    all: Vec<Indicator>,
    offset: usize,
    limit: usize,
    read_path: Option<String>,
) -> IocsOutput {
    let (scored, mut context): (Vec<Indicator>, Vec<Indicator>) =
        all.into_iter().partition(Indicator::scored);
    let count = |list: &[Indicator]| {
        let mut counts = BTreeMap::new();
        for i in list {
            *counts.entry(i.kind.clone()).or_insert(0) += 1;
        }
        counts
    };
    let counts = count(&scored);
    let context_counts = count(&context);
    context.truncate(limit);
    let (indicators, page) = page(scored, offset, limit);
    IocsOutput {
        read_path,
        counts,
        page,
        indicators,
        context_counts,
        context,
    }
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    registry.add(
        ToolMeta::new(
            "iocs_from_text",
            "Indicators of compromise in a text: URLs, domains, IPv4/IPv6, e-mails, MD5/SHA hashes, \
             registry keys, file paths; defanged forms (hxxp, [.]) are found and refanged. Each has a \
             confidence and an offset; `counts` counts only the confident ones, the rest (namespaces, \
             version strings, names without a public suffix, …) are listed in `context` with why.",
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
             IPv4/IPv6, e-mails, hashes, registry keys, file paths, defanged forms included. Each has a \
             confidence and its file offset; `counts` counts only the confident ones; what lies in \
             high-entropy regions, section or symbol names, certificates, version resources or \
             document namespaces is listed in `context` with why, never counted.",
        )
        .title("Indicators in a file")
        .timeout_s(120),
        move |ctx, a: IocsFromFileArgs| {
            let config = config.clone();
            async move {
                let kinds = parse_kinds(a.kinds)?;
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let found = extract_from_bytes(s.bytes(), &kinds, &|| ctx.is_cancelled());
                    check_cancel(ctx)?;
                    Ok(answer(
                        found,
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
            !find(t, "domain").contains(&"config.exe".to_string()),
            "config.exe is a file, not a domain"
        );
        assert!(
            extract(t, &["domain"]).iter().all(|i| !i.scored()),
            "payload.sh is a file name, reported as context only"
        );
    }

    #[test]
    fn object_identifiers_are_not_addresses() {
        let t = "2.5.29.17\n2.5.29.32.0\n1.3.6.1.5.5.7.3.1\n1.3.101.110\nrelay 185.220.101.45";
        let found = extract(t, &["ipv4"]);
        let scored: Vec<&str> = found
            .iter()
            .filter(|i| i.scored())
            .map(|i| i.value.as_str())
            .collect();
        assert_eq!(scored, ["185.220.101.45"]);
        assert!(
            found
                .iter()
                .filter(|i| !i.scored())
                .all(|i| i.reason.as_deref() == Some(ioc_judge::OBJECT_IDENTIFIER))
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
