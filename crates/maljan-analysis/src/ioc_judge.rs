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
//!   the original generic TLDs (com, net, org, info, biz), a multi-label suffix (co.uk, github.io)
//!   or .onion: names under country and new generic TLDs are as often file names (`setup.py`,
//!   `run.sh`, `main.rs`, `a.zip`), property accesses (`x.id`, `e.target.name`) or compiler and
//!   runtime vocabulary (`omp.body.next`, `llvm.dbg.cu`, `geometry.instances.data`) as hosts; in a
//!   URL or an e-mail address they count. Mixed-case names (`System.IO`), names preceded by a
//!   dot (`.data.rel.ro`) or followed by `(`, and reverse-DNS names (`com.sun.management.host`,
//!   `org.apache.x`) are identifiers.
//! - **Versions are not addresses.** A dotted quad preceded by a version word (`version`, `ver`,
//!   `v`, `build`, `release`, `FileVersion`, …), inside a longer dotted run (`1.2.3.4.5`), in a
//!   version resource, the whole string argument of a .NET custom attribute
//!   (`AssemblyFileVersion`), or ending in `.0` (a network address, as in `6.0.0.0`) is a version string;
//!   private, loopback, link-local, multicast, documentation and reserved addresses are context.
//! - **Defanged** indicators (`hxxp`, `[.]`, `(.)`, `[:]`, `[@]`) were written by someone on
//!   purpose: they are high confidence once the rules above pass.

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::LazyLock,
};

use regex::Regex;
use schemars::JsonSchema;
use serde::Serialize;

pub use crate::ioc_places::{FileFacts, LONG_RUN};

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
pub const OBJECT_IDENTIFIER: &str = "ASN.1 object identifier, not an address";
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

/// First labels of names written in reverse domain name notation (`com.sun.x`, `org.apache.y`).
const REVERSE_DNS_ROOTS: &[&str] = &["com", "org", "net", "edu", "gov", "mil", "int", "io"];

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
}

/// A dotted-quad's judgement; `version_field` when the string holding it is a version field by
/// its place in the file (a .NET custom attribute's string argument).
pub fn ipv4(value: &str, raw: &str, around: &Around<'_>, version_field: bool) -> Judgement {
    let Ok(ip) = value.parse::<Ipv4Addr>() else {
        return context(VERSION_STRING);
    };
    if version_field || around.version_before() || ip.octets()[3] == 0 {
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
    // Reverse domain name notation: a Java/Android package or a property name.
    let reverse_dns = value.split('.').count() > 2
        && value
            .split('.')
            .next()
            .is_some_and(|first| REVERSE_DNS_ROOTS.contains(&first));
    if identifier || reverse_dns {
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
    if CLASSIC_TLDS.contains(&tld) || suffix.contains('.') {
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
            bare("host \"cdn.bad-actor.ru\"", "cdn.bad-actor.ru").1,
            Some(BARE_NAME)
        );
        assert_eq!(bare("omp.body.next", "omp.body.next").1, Some(BARE_NAME));
        assert_eq!(
            bare(
                "com.sun.management.jmxremote.host",
                "com.sun.management.jmxremote.host"
            )
            .1,
            Some(IDENTIFIER)
        );
        assert_eq!(
            bare("c2 www.bad-actor.com", "www.bad-actor.com").0,
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
}
