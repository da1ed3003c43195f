//! How far an indicator found by [`crate::iocs`] can be trusted: its confidence, and for the ones
//! that are only *context* (reported, never scored) the reason why.
//!
//! The rules, each from what produces false indicators in practice:
//!
//! - **High-entropy regions.** In random, compressed or encrypted bytes short printable runs occur
//!   by chance (50 MB of random bytes holds hundreds of `2.cz`-like names). A match whose 1 KiB
//!   window around it is at least 7.2 bits per byte (the entropy tool's "likely compressed or
//!   encrypted") is context — unless the printable run holding it is 32 characters or longer,
//!   which random bytes produce less than once in 10^13 bytes: such a run is a real string.
//! - **Where in an executable.** Section and symbol name tables (ELF string tables, the PE section
//!   table and COFF string table, Mach-O load commands and string table) hold names such as
//!   `.data.rel.ro`; a PE's Authenticode certificate holds the CA's CRL/OCSP/CPS URLs; a version
//!   resource (`VS_VERSION_INFO`) holds product metadata and four-part version numbers. All context.
//! - **Namespaces.** XML/XMP/schema namespaces and the vendor identifiers every document carries
//!   (w3.org, ns.adobe.com, purl.org, schemas.openxmlformats.org, schemas.microsoft.com, …), and any
//!   URL written as an `xmlns`/`schemaLocation`/DOCTYPE value, are context.
//! - **Public Suffix List.** A domain (bare, a URL's host, an e-mail's domain) counts only when it
//!   ends in a known public suffix (the `psl` crate's compiled-in list) and has a registrable
//!   label before it. A *bare* name (no scheme, no `@`, not defanged) is moreover scored only under
//!   the original generic TLDs (com, net, org, info, biz), a multi-label suffix (co.uk), .onion,
//!   or with three or more labels standing alone as a token: two-label names under country and
//!   new generic TLDs are as often file names (`setup.py`, `run.sh`, `main.rs`, `a.zip`) or
//!   property accesses (`x.id`, `this.name`, `e.app`) as hosts. Mixed-case names (`System.IO`),
//!   names preceded by a dot (`.data.rel.ro`) or followed by `(` are identifiers.
//! - **Versions are not addresses.** A dotted quad preceded by a version word (`version`, `ver`,
//!   `v`, `build`, `release`, `FileVersion`, …), inside a longer dotted run (`1.2.3.4.5`), in a
//!   version resource, or ending in `.0` (a network address, as in `6.0.0.0`) is a version string;
//!   private, loopback, link-local, multicast, documentation and reserved addresses are context.
//! - **Defanged** indicators (`hxxp`, `[.]`, `(.)`, `[:]`, `[@]`) were written by someone on
//!   purpose: they are high confidence once the rules above pass.

use std::{
    cell::RefCell,
    collections::HashMap,
    net::{Ipv4Addr, Ipv6Addr},
    ops::Range,
    sync::LazyLock,
};

use regex::Regex;
use schemars::JsonSchema;
use serde::Serialize;

use crate::common::{le_u16, le_u32};

/// How far an indicator can be trusted. High and medium are *scored* (they count towards the
/// network fact); low is *context*: reported with its reason, never scored.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    /// Whether an indicator of this confidence is scored (counted), not only reported.
    pub fn scored(self) -> bool {
        self != Confidence::Low
    }
}

/// A confidence, and for context the reason it is not scored.
pub type Judgement = (Confidence, Option<&'static str>);

fn context(reason: &'static str) -> Judgement {
    (Confidence::Low, Some(reason))
}

pub const HIGH_ENTROPY: &str = "high-entropy region (compressed, encrypted or random bytes)";
pub const SYMBOL_NAME: &str = "section or symbol name";
pub const CERTIFICATE: &str = "code-signing certificate (CA infrastructure)";
pub const VERSION_RESOURCE: &str = "version resource (product metadata)";
pub const NAMESPACE: &str = "document namespace or schema identifier";
pub const VERSION_STRING: &str = "version string, not an address";
pub const RESERVED_ADDRESS: &str = "private, reserved or special-purpose address";
pub const NO_PUBLIC_SUFFIX: &str = "no known public suffix";
pub const BARE_NAME: &str =
    "bare name under a country or new generic TLD (as often a file or property name)";
pub const IDENTIFIER: &str = "identifier (mixed case, member access or call)";

/// Hosts whose URLs are namespace or schema identifiers that documents carry, never fetched as an
/// indicator of anything (a name matches itself and its sub-domains).
const NAMESPACE_HOSTS: &[&str] = &[
    "w3.org",
    "purl.org",
    "purl.oclc.org",
    "ns.adobe.com",
    "openxmlformats.org",
    "schemas.microsoft.com",
    "schemas.xmlsoap.org",
    "schemas.android.com",
    "xml.org",
    "iptc.org",
    "ns.useplus.org",
    "npes.org",
    "aiim.org",
    "prismstandard.org",
    "cipa.jp",
    "xmlns.com",
    "schema.org",
    "ogp.me",
    "iec.ch",
    "color.org",
    "docs.oasis-open.org",
    "openoffice.org",
    "relaxng.org",
    "inkscape.org",
    "sodipodi.sourceforge.net",
    "creativecommons.org",
    "xml.apache.org",
    "java.sun.com",
    "xmlns.jcp.org",
    "opengis.net",
];

/// Generic TLDs whose bare two-label names are rarely anything but host names.
const CLASSIC_TLDS: &[&str] = &["com", "net", "org", "info", "biz", "onion"];

/// Whether the raw text carried a real defanging mark.
pub fn defanged(raw: &str) -> bool {
    static MARK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\[:\]|\[://\]|\[@\]|\[at\]|\(at\)|^h(?:xx)ps?|^fxp")
            .unwrap()
    });
    MARK.is_match(raw)
}

/// Whether `host` (lower case) is, or is under, a namespace host.
pub fn namespace_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    NAMESPACE_HOSTS
        .iter()
        .any(|n| host == *n || host.strip_suffix(n).is_some_and(|rest| rest.ends_with('.')))
}

/// What the file says about a byte offset: which tables hold it, and how random it looks.
pub struct FileFacts<'a> {
    bytes: &'a [u8],
    names: Vec<Range<u64>>,
    certificates: Vec<Range<u64>>,
    version_info: Vec<Range<u64>>,
    entropy: RefCell<HashMap<usize, f64>>,
}

/// Half the window whose entropy decides whether a match lies in a high-entropy region.
const HALF_WINDOW: usize = 512;
/// Bits per byte from which a window reads as compressed, encrypted or random.
const HIGH_ENTROPY_BITS: f64 = 7.2;
/// A printable run this long is a real string wherever it lies.
pub const LONG_RUN: usize = 32;

impl<'a> FileFacts<'a> {
    /// Reads the tables of `bytes`; stops looking for version resources once `cancel` answers
    /// true (asked once a MiB).
    pub fn read(bytes: &'a [u8], cancel: &dyn Fn() -> bool) -> Self {
        let mut facts = FileFacts {
            bytes,
            names: Vec::new(),
            certificates: Vec::new(),
            version_info: Vec::new(),
            entropy: RefCell::new(HashMap::new()),
        };
        facts.read_elf();
        facts.read_pe();
        facts.read_macho();
        facts.read_version_info(cancel);
        facts
    }

    fn clamp(&self, start: u64, len: u64) -> Option<Range<u64>> {
        let n = self.bytes.len() as u64;
        (start < n && len > 0).then(|| start..start.saturating_add(len).min(n))
    }

    /// ELF: every SHT_STRTAB section (.shstrtab, .strtab, .dynstr) holds section or symbol names.
    fn read_elf(&mut self) {
        let b = self.bytes;
        if !b.starts_with(b"\x7fELF") || b.len() < 0x40 {
            return;
        }
        let wide = b[4] == 2;
        let big = b[5] == 2;
        let u16_at = |at: usize| {
            b.get(at..at + 2).map(|s| {
                let a = [s[0], s[1]];
                if big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }
            })
        };
        let u32_at = |at: usize| {
            b.get(at..at + 4).map(|s| {
                let a = [s[0], s[1], s[2], s[3]];
                if big {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            })
        };
        let u64_at = |at: usize| {
            b.get(at..at + 8).map(|s| {
                let a: [u8; 8] = s.try_into().unwrap_or_default();
                if big {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                }
            })
        };
        let (shoff, entsize, count) = if wide {
            (u64_at(0x28), u16_at(0x3a), u16_at(0x3c))
        } else {
            (u32_at(0x20).map(u64::from), u16_at(0x2e), u16_at(0x30))
        };
        let (Some(shoff), Some(entsize), Some(count)) = (shoff, entsize, count) else {
            return;
        };
        for i in 0..usize::from(count) {
            let Some(at) = usize::try_from(shoff)
                .ok()
                .and_then(|s| s.checked_add(i * usize::from(entsize)))
            else {
                return;
            };
            let (kind, offset, size) = if wide {
                (u32_at(at + 4), u64_at(at + 24), u64_at(at + 32))
            } else {
                (
                    u32_at(at + 4),
                    u32_at(at + 16).map(u64::from),
                    u32_at(at + 20).map(u64::from),
                )
            };
            let (Some(kind), Some(offset), Some(size)) = (kind, offset, size) else {
                return;
            };
            const SHT_STRTAB: u32 = 3;
            if kind == SHT_STRTAB
                && let Some(r) = self.clamp(offset, size)
            {
                self.names.push(r);
            }
        }
    }

    /// PE: the section table and the COFF symbol and string tables hold names; the security
    /// directory holds the Authenticode certificates.
    fn read_pe(&mut self) {
        let b = self.bytes;
        if !b.starts_with(b"MZ") {
            return;
        }
        let Some(pe) = le_u32(b, 0x3c).map(|v| v as usize) else {
            return;
        };
        if b.get(pe..pe + 4) != Some(b"PE\0\0") {
            return;
        }
        let coff = pe + 4;
        let (Some(sections), Some(symbols), Some(nsyms), Some(opt_size)) = (
            le_u16(b, coff + 2),
            le_u32(b, coff + 8),
            le_u32(b, coff + 12),
            le_u16(b, coff + 16),
        ) else {
            return;
        };
        let opt = coff + 20;
        let table = opt + usize::from(opt_size);
        if let Some(r) = self.clamp(table as u64, 40 * u64::from(sections)) {
            self.names.push(r);
        }
        if symbols != 0 {
            let strings = u64::from(symbols) + 18 * u64::from(nsyms);
            if let Some(r) = self.clamp(u64::from(symbols), 18 * u64::from(nsyms)) {
                self.names.push(r);
            }
            let size = usize::try_from(strings)
                .ok()
                .and_then(|s| le_u32(b, s))
                .unwrap_or(0);
            if let Some(r) = self.clamp(strings, u64::from(size)) {
                self.names.push(r);
            }
        }
        // The data directories: PE32 at +96, PE32+ at +112; the security directory is entry 4,
        // and its "address" is a file offset.
        let dirs = match le_u16(b, opt) {
            Some(0x10b) => opt + 96,
            Some(0x20b) => opt + 112,
            _ => return,
        };
        let count = match le_u16(b, opt) {
            Some(0x10b) => le_u32(b, opt + 92),
            _ => le_u32(b, opt + 108),
        };
        if count.unwrap_or(0) > 4
            && dirs + 5 * 8 <= opt + usize::from(opt_size)
            && let (Some(at), Some(size)) = (le_u32(b, dirs + 32), le_u32(b, dirs + 36))
            && let Some(r) = self.clamp(u64::from(at), u64::from(size))
        {
            self.certificates.push(r);
        }
    }

    /// Mach-O (thin, little-endian): the load commands (segment and section names, dylib
    /// paths) and the symbol string table.
    fn read_macho(&mut self) {
        let b = self.bytes;
        let header = match b.get(..4) {
            Some([0xce, 0xfa, 0xed, 0xfe]) => 28,
            Some([0xcf, 0xfa, 0xed, 0xfe]) => 32,
            _ => return,
        };
        let (Some(ncmds), Some(size)) = (le_u32(b, 16), le_u32(b, 20)) else {
            return;
        };
        if let Some(r) = self.clamp(header as u64, u64::from(size)) {
            self.names.push(r);
        }
        let mut at = header;
        for _ in 0..ncmds.min(10_000) {
            let (Some(cmd), Some(len)) = (le_u32(b, at), le_u32(b, at + 4)) else {
                return;
            };
            const LC_SYMTAB: u32 = 2;
            if cmd == LC_SYMTAB
                && let (Some(stroff), Some(strsize)) = (le_u32(b, at + 16), le_u32(b, at + 20))
                && let Some(r) = self.clamp(u64::from(stroff), u64::from(strsize))
            {
                self.names.push(r);
            }
            if len < 8 {
                return;
            }
            at += len as usize;
        }
    }

    /// Every `VS_VERSION_INFO` block (a PE's version resource, or a .res file): its key is
    /// UTF-16LE, preceded by the block's length, value length and type (three u16).
    fn read_version_info(&mut self, cancel: &dyn Fn() -> bool) {
        static KEY: LazyLock<Vec<u8>> = LazyLock::new(|| {
            "VS_VERSION_INFO"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect()
        });
        let finder = memchr::memmem::Finder::new(KEY.as_slice());
        let mut found = Vec::new();
        // A MiB at a time, overlapping by the key's length, so a cancelled call stops here too.
        let step = 1 << 20;
        let mut at = 0;
        while at < self.bytes.len() && found.len() < 64 {
            if cancel() {
                return;
            }
            let end = (at + step + KEY.len()).min(self.bytes.len());
            found.extend(finder.find_iter(&self.bytes[at..end]).map(|p| p + at));
            at += step;
        }
        found.dedup();
        for pos in found.into_iter().take(64) {
            let Some(start) = pos.checked_sub(6) else {
                continue;
            };
            let len = le_u16(self.bytes, start).unwrap_or(0).max(0x100);
            if let Some(r) = self.clamp(start as u64, u64::from(len)) {
                self.version_info.push(r);
            }
        }
    }

    fn in_any(ranges: &[Range<u64>], offset: u64) -> bool {
        ranges.iter().any(|r| r.contains(&offset))
    }

    /// The entropy of the window around `offset` (cached per 256-byte step).
    fn window_entropy(&self, offset: u64) -> (f64, usize) {
        let n = self.bytes.len();
        let key = (offset as usize).min(n) / 256;
        let centre = key * 256 + 128;
        let start = centre.saturating_sub(HALF_WINDOW);
        let end = (start + 2 * HALF_WINDOW).min(n);
        let start = end.saturating_sub(2 * HALF_WINDOW);
        let h = *self
            .entropy
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| crate::entropy::shannon(&self.bytes[start..end]));
        (h, end - start)
    }

    /// Whether a match at `offset`, in a printable run of `run_len` characters, lies in a
    /// high-entropy region.
    pub fn high_entropy(&self, offset: u64, run_len: usize) -> bool {
        if run_len >= LONG_RUN || self.bytes.is_empty() {
            return false;
        }
        let (h, n) = self.window_entropy(offset);
        h >= entropy_threshold(n)
    }

    /// The reason a match at `offset` is context because of where it lies in the file, if any.
    pub fn place(&self, offset: u64, run_len: usize) -> Option<&'static str> {
        if Self::in_any(&self.certificates, offset) {
            Some(CERTIFICATE)
        } else if Self::in_any(&self.names, offset) {
            Some(SYMBOL_NAME)
        } else if Self::in_any(&self.version_info, offset) {
            Some(VERSION_RESOURCE)
        } else if self.high_entropy(offset, run_len) {
            Some(HIGH_ENTROPY)
        } else {
            None
        }
    }
}

/// The entropy from which a window of `n` bytes reads as random: 7.2 bits per byte, lowered for
/// windows too short for random bytes to reach it (their expected entropy is about
/// 8 - 255 / (2 n ln 2)).
fn entropy_threshold(n: usize) -> f64 {
    let n = n.max(1) as f64;
    let random = 8.0 - 255.0 / (2.0 * n * std::f64::consts::LN_2);
    (random - 0.5).clamp(6.0, HIGH_ENTROPY_BITS)
}

/// The text around a match, for the lexical rules.
pub struct Around<'t> {
    /// Up to 64 bytes before the match.
    pub before: &'t str,
    /// Up to 16 bytes after the match.
    pub after: &'t str,
}

impl<'t> Around<'t> {
    pub fn of(text: &'t str, start: usize, end: usize) -> Self {
        let mut from = start.saturating_sub(64);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        let mut to = (end + 16).min(text.len());
        while !text.is_char_boundary(to) {
            to -= 1;
        }
        Around {
            before: &text[from..start],
            after: &text[end..to],
        }
    }

    /// Whether the match is the value of an `xmlns`, `schemaLocation` or DOCTYPE declaration.
    fn namespace_value(&self) -> bool {
        static DECL: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r#"(?i)(?:xmlns(?::[\w.-]+)?|schemaLocation|targetNamespace|<!DOCTYPE[^>]*)\s*=?\s*["']?(?:[^"'<>\s]+\s+)?$"#)
                .unwrap()
        });
        DECL.is_match(self.before)
    }

    /// Whether a version word (or a dotted run) comes right before the match.
    fn version_before(&self) -> bool {
        static WORD: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r#"(?i)(?:\b(?:v|ver|vers|version|rev|revision|build|release|fileversion|productversion|assemblyversion|fileversioninfo)[\s:=_#"'\-]*|[0-9]\.)$"#)
                .unwrap()
        });
        WORD.is_match(self.before)
    }

    /// The match stands alone as a token: a string's whole value, a quoted or spaced word,
    /// or a host followed by a port or path.
    fn standalone(&self) -> bool {
        let before_ok = self
            .before
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || "\"'`=@/<>,[".contains(c));
        let after_ok = self
            .after
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || "\"'`:/<>,]".contains(c));
        before_ok && after_ok
    }
}

/// A dotted-quad's judgement.
pub fn ipv4(value: &str, raw: &str, around: &Around<'_>, in_version_run: bool) -> Judgement {
    let Ok(ip) = value.parse::<Ipv4Addr>() else {
        return context(VERSION_STRING);
    };
    if in_version_run || around.version_before() || ip.octets()[3] == 0 {
        return context(VERSION_STRING);
    }
    if !global_v4(ip) {
        return context(RESERVED_ADDRESS);
    }
    if defanged(raw) {
        (Confidence::High, None)
    } else {
        (Confidence::Medium, None)
    }
}

fn global_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_unspecified()
        || ip.is_multicast()
        || o[0] == 0
        || o[0] >= 240
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 198 && (18..20).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0))
}

/// An IPv6 address's judgement: only global unicast (2000::/3, not documentation) with at least
/// three groups written out is scored.
pub fn ipv6(ip: Ipv6Addr, raw: &str) -> Judgement {
    let s = ip.segments();
    let written = raw
        .split(':')
        .filter(|g| !g.is_empty() && g.bytes().all(|c| c.is_ascii_hexdigit()))
        .count();
    let global = (0x2000..0x4000).contains(&s[0]) && !(s[0] == 0x2001 && s[1] == 0x0db8);
    if global && written >= 3 {
        (Confidence::Medium, None)
    } else {
        context(RESERVED_ADDRESS)
    }
}

/// A host name's standing under the Public Suffix List: `None` when it ends in a known public
/// suffix with a registrable label before it, else the reason.
fn psl_reason(host: &str) -> Option<&'static str> {
    if namespace_host(host) {
        return Some(NAMESPACE);
    }
    match psl::domain(host.as_bytes()) {
        Some(d) if d.suffix().is_known() => None,
        _ => Some(NO_PUBLIC_SUFFIX),
    }
}

/// The host of a URL (lower case, without user, port or brackets), if it has one.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#', '\\']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.trim_end_matches('.').to_ascii_lowercase())
}

/// A URL's judgement (the URL refanged).
pub fn url(value: &str, raw: &str, around: &Around<'_>) -> Judgement {
    if around.namespace_value() {
        return context(NAMESPACE);
    }
    let Some(host) = url_host(value) else {
        return context(NO_PUBLIC_SUFFIX);
    };
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return if global_v4(ip) {
            (Confidence::High, None)
        } else {
            context(RESERVED_ADDRESS)
        };
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return ipv6(ip, &host);
    }
    if !host
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
    {
        return context(NO_PUBLIC_SUFFIX);
    }
    match psl_reason(&host) {
        Some(reason) => context(reason),
        None if defanged(raw) || host.contains('.') => (Confidence::High, None),
        None => context(NO_PUBLIC_SUFFIX),
    }
}

/// An e-mail address's judgement (refanged).
pub fn email(value: &str, raw: &str) -> Judgement {
    let Some((_, domain)) = value.rsplit_once('@') else {
        return context(NO_PUBLIC_SUFFIX);
    };
    let domain = domain.to_ascii_lowercase();
    match psl_reason(&domain) {
        Some(reason) => context(reason),
        None if defanged(raw) => (Confidence::High, None),
        None => (Confidence::Medium, None),
    }
}

/// How a domain match relates to a URL or e-mail around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// Written on its own.
    Bare,
    /// Inside a URL or an e-mail address that was itself judged so.
    Of(Confidence),
}

/// A domain's judgement: `value` refanged and lower-cased, `raw` as written.
pub fn domain(value: &str, raw: &str, around: &Around<'_>, host: Host) -> Judgement {
    if let Some(reason) = psl_reason(value) {
        return context(reason);
    }
    if let Host::Of(c) = host {
        return if c.scored() {
            (c, None)
        } else {
            context(NO_PUBLIC_SUFFIX)
        };
    }
    let identifier = around.before.ends_with(['.', '$', '#', '-', '\\'])
        || around.after.starts_with(['(', '_'])
        || (raw.bytes().any(|c| c.is_ascii_lowercase())
            && raw.bytes().any(|c| c.is_ascii_uppercase()));
    if identifier {
        return context(IDENTIFIER);
    }
    if defanged(raw) {
        return (Confidence::High, None);
    }
    let Some(d) = psl::domain(value.as_bytes()) else {
        return context(NO_PUBLIC_SUFFIX);
    };
    let suffix = std::str::from_utf8(d.suffix().as_bytes()).unwrap_or("");
    let tld = suffix.rsplit('.').next().unwrap_or("");
    let labels = value.split('.').count();
    if CLASSIC_TLDS.contains(&tld) || suffix.contains('.') || (labels >= 3 && around.standalone()) {
        (Confidence::Medium, None)
    } else {
        context(BARE_NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare(text: &str, m: &str) -> Judgement {
        let start = text.find(m).unwrap();
        let around = Around::of(text, start, start + m.len());
        domain(
            &crate::iocs::refang(m).to_ascii_lowercase(),
            m,
            &around,
            Host::Bare,
        )
    }

    #[test]
    fn public_suffixes_decide_domains() {
        assert_eq!(
            bare("c2 evil-host.com here", "evil-host.com").0,
            Confidence::Medium
        );
        assert_eq!(
            bare("call x.example.co.uk", "x.example.co.uk").0,
            Confidence::Medium
        );
        assert_eq!(
            bare("see a.invalidtld", "a.invalidtld").1,
            Some(NO_PUBLIC_SUFFIX)
        );
        assert_eq!(
            bare("python setup.py install", "setup.py").1,
            Some(BARE_NAME)
        );
        assert_eq!(bare("x = e.target.id;", "e.target.id").1, Some(BARE_NAME));
        assert_eq!(
            bare("host \"cdn.bad-actor.ru\"", "cdn.bad-actor.ru").0,
            Confidence::Medium
        );
        assert_eq!(bare("using System.IO;", "System.IO").1, Some(IDENTIFIER));
        assert_eq!(bare(".data.rel.ro", "data.rel.ro").1, Some(IDENTIFIER));
        assert_eq!(bare("bad[.]tk", "bad[.]tk").0, Confidence::High);
        assert_eq!(bare("www.w3.org", "www.w3.org").1, Some(NAMESPACE));
    }

    #[test]
    fn urls_namespaces_and_hosts() {
        let t = r#"<x:xmpmeta xmlns:x="http://example.com/custom/ns/">"#;
        let at = t.find("http").unwrap();
        let u = "http://example.com/custom/ns/";
        assert_eq!(
            url(u, u, &Around::of(t, at, at + u.len())).1,
            Some(NAMESPACE)
        );
        let plain = Around {
            before: "get ",
            after: "",
        };
        assert_eq!(
            url("https://ns.adobe.com/xap/1.0/", "", &plain).1,
            Some(NAMESPACE)
        );
        assert_eq!(
            url("http://evil.example.com/a", "", &plain).0,
            Confidence::High
        );
        assert_eq!(
            url("http://10.1.2.3/a", "", &plain).1,
            Some(RESERVED_ADDRESS)
        );
        assert_eq!(
            url("http://185.220.101.45:8443/", "", &plain).0,
            Confidence::High
        );
        assert_eq!(
            url("http://localhost/", "", &plain).1,
            Some(NO_PUBLIC_SUFFIX)
        );
        assert_eq!(
            url_host("https://u:p@[2a00:1450::1]:443/x").as_deref(),
            Some("2a00:1450::1")
        );
    }

    #[test]
    fn versions_are_not_addresses() {
        let judge = |text: &str, ip: &str| {
            let start = text.find(ip).unwrap();
            ipv4(ip, ip, &Around::of(text, start, start + ip.len()), false)
        };
        assert_eq!(judge("version 1.2.3.4", "1.2.3.4").1, Some(VERSION_STRING));
        assert_eq!(judge("v5.1.2.3", "5.1.2.3").1, Some(VERSION_STRING));
        assert_eq!(
            judge("FileVersion: 3.14.15.92", "3.14.15.92").1,
            Some(VERSION_STRING)
        );
        assert_eq!(
            judge("version=\"6.0.0.0\"", "6.0.0.0").1,
            Some(VERSION_STRING)
        );
        assert_eq!(
            judge("relay 185.220.101.45:8443", "185.220.101.45").0,
            Confidence::Medium
        );
        assert_eq!(
            judge("gw 192.168.1.1", "192.168.1.1").1,
            Some(RESERVED_ADDRESS)
        );
        assert_eq!(judge("srv 8.8.8.8", "8.8.8.8").0, Confidence::Medium);
    }

    #[test]
    fn defanging_is_only_real_marks() {
        assert!(defanged("hxxp://a[.]b"));
        assert!(defanged("evil[.]com") && defanged("1.2.3(.)4") && defanged("a[:]80"));
        assert!(!defanged("http://a.b") && !defanged("D41D8CD98F00B204E9800998ECF8427E"));
        assert!(!defanged("Example.COM"));
    }

    #[test]
    fn ipv6_only_global() {
        let j = |s: &str| ipv6(s.parse().unwrap(), s);
        assert_eq!(j("2a00:1450:4001:82a::200e").0, Confidence::Medium);
        assert_eq!(j("fe80::1ff:fe23:4567:890a").1, Some(RESERVED_ADDRESS));
        assert_eq!(j("2001:db8::dead:beef").1, Some(RESERVED_ADDRESS));
        assert_eq!(j("2::1").1, Some(RESERVED_ADDRESS));
    }

    #[test]
    fn thresholds_follow_window_size() {
        assert_eq!(entropy_threshold(1024), HIGH_ENTROPY_BITS);
        assert!(entropy_threshold(256) < 7.0 && entropy_threshold(16) == 6.0);
    }
}
