//! FA_download_file behind an SSRF guard: http(s) only; the host is resolved once, every address
//! is checked, and the connection is pinned to the checked address (no second lookup, so no DNS
//! rebinding); proxies are never used (a proxy would resolve the name itself); each redirect hop
//! is checked the same way, at most 5. Loopback is reachable only with the server's
//! `allow_loopback_downloads` opt-in (for tests). URLs are never logged.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use futures::StreamExt;
use maljan_server::{Registry, Renamed, ToolContext, ToolError, ToolMeta, Write as Create};
use reqwest::{StatusCode, Url, header};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::{
    Config,
    hashing::{Algorithm, Watch, digests_match, hash_file},
    paths::show,
};

const MAX_REDIRECTS: usize = 5;

fn default_chunk() -> i64 {
    65536
}
fn default_timeout() -> i64 {
    15
}
fn default_max_bytes() -> i64 {
    20 * 1024 * 1024
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadArgs {
    /// The http or https URL.
    file_url: String,
    /// The file written.
    file_name: String,
    /// Bytes written per progress step.
    #[serde(default = "default_chunk")]
    #[schemars(default = "default_chunk")]
    chunk_size: i64,
    /// Seconds to wait for the connection and for each read.
    #[serde(default = "default_timeout")]
    #[schemars(default = "default_timeout")]
    timeout: i64,
    /// The download is refused or stopped beyond this many bytes.
    #[serde(default = "default_max_bytes")]
    #[schemars(default = "default_max_bytes")]
    max_bytes: i64,
    /// A label for progress notifications.
    #[serde(default)]
    progress_name: Option<String>,
    /// Continue an interrupted download from `<file_name>.part` with an HTTP Range request.
    #[serde(default)]
    #[schemars(default)]
    resume: bool,
    /// The finished file's expected SHA-256 (hex); on a mismatch the file is removed.
    #[serde(default)]
    expected_sha256: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct DownloadOut {
    path: String,
    /// Size of the finished file.
    bytes: u64,
    /// Bytes already on disk that a resumed download kept.
    resumed_from: u64,
    /// HTTP redirects followed.
    redirects: usize,
    sha256: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_download_file",
            "Download an http(s) URL to a file, guarded against SSRF (no private, loopback, link-local or reserved \
             addresses, checked on every redirect), with a size cap, resume and SHA-256 verification.",
        )
        .destructive()
        .open_world()
        .not_idempotent()
        .timeout_s(3600),
        move |ctx: ToolContext, a: DownloadArgs| {
            let c = c.clone();
            async move { download(&c, &ctx, a).await }
        },
    );
}

/// Whether an address may be fetched. `loopback` is the test opt-in.
pub(crate) fn allowed(ip: IpAddr, loopback: bool) -> bool {
    match ip {
        IpAddr::V4(v4) => allowed_v4(v4, loopback),
        IpAddr::V6(v6) => allowed_v6(v6, loopback),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn allowed_v4(ip: Ipv4Addr, loopback: bool) -> bool {
    if in_v4(ip, [127, 0, 0, 0], 8) {
        return loopback;
    }
    const REFUSED: &[([u8; 4], u32)] = &[
        ([0, 0, 0, 0], 8),       // "this network", unspecified
        ([10, 0, 0, 0], 8),      // private
        ([100, 64, 0, 0], 10),   // carrier-grade NAT
        ([169, 254, 0, 0], 16),  // link-local (cloud metadata)
        ([172, 16, 0, 0], 12),   // private
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // documentation
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast
        ([192, 168, 0, 0], 16),  // private
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // documentation
        ([203, 0, 113, 0], 24),  // documentation
        ([224, 0, 0, 0], 4),     // multicast
        ([240, 0, 0, 0], 4),     // reserved, broadcast
    ];
    !REFUSED.iter().any(|(net, prefix)| in_v4(ip, *net, *prefix))
}

fn allowed_v6(ip: Ipv6Addr, loopback: bool) -> bool {
    let s = ip.segments();
    let bits = u128::from(ip);
    let embedded = |b: u32| Ipv4Addr::from(b);
    if ip.is_unspecified() {
        return false;
    }
    if ip == Ipv6Addr::LOCALHOST {
        return loopback;
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated): judge the IPv4 inside.
    if bits >> 32 == 0xffff || bits >> 32 == 0 {
        return allowed_v4(embedded(bits as u32), loopback);
    }
    // NAT64 well-known prefix 64:ff9b::/96.
    if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return allowed_v4(embedded(bits as u32), loopback);
    }
    // 6to4 2002::/16 carries the IPv4 in bits 16..48.
    if s[0] == 0x2002 {
        return allowed_v4(embedded(((s[1] as u32) << 16) | s[2] as u32), loopback);
    }
    // Teredo 2001::/32: server IPv4 in bits 32..64, client IPv4 inverted in the last 32.
    if s[0] == 0x2001 && s[1] == 0 {
        let server = embedded(((s[2] as u32) << 16) | s[3] as u32);
        let client = embedded(!(bits as u32));
        return allowed_v4(server, false) && allowed_v4(client, false);
    }
    let refused = s[0] & 0xfe00 == 0xfc00 // unique local fc00::/7
        || s[0] & 0xffc0 == 0xfe80 // link-local
        || s[0] & 0xffc0 == 0xfec0 // site-local (deprecated)
        || s[0] & 0xff00 == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] & 0xfe00 == 0) // IETF protocol assignments 2001::/23
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x3fff && s[1] & 0xf000 == 0) // documentation 3fff::/20
        || (s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64 64:ff9b:1::/48
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0) // discard-only 100::/64
        || s[0] & 0xe000 != 0x2000; // outside global unicast 2000::/3
    !refused
}

/// Reads a host the way inet_aton does: 1 to 4 parts, each decimal, octal (leading 0) or hex
/// (0x), the last part filling the remaining bytes (`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`).
pub(crate) fn parse_numeric_v4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X"))
        {
            (h, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        let n = if digits.is_empty() {
            0
        } else {
            u64::from_str_radix(digits, radix).ok()?
        };
        nums.push(n);
    }
    let (last, head) = nums.split_last()?;
    if head.iter().any(|&n| n > 255) || *last >= 1u64 << (8 * (5 - nums.len())) {
        return None;
    }
    let mut v: u32 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= (n as u32) << (24 - 8 * i);
    }
    Some(Ipv4Addr::from(v | *last as u32))
}

fn refused(host: &str, ip: IpAddr) -> ToolError {
    ToolError::bad_argument(format!(
        "refusing to download from {host}: it resolves to {ip}, a loopback, private, link-local or reserved address"
    ))
    .with_remediation("only public http(s) servers can be downloaded from")
}

/// Checks one URL and returns the address to connect to (host, checked socket address).
async fn check(url: &Url, loopback: bool) -> Result<(String, SocketAddr), ToolError> {
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ToolError::bad_argument(format!(
            "only http and https URLs can be downloaded, not {}:",
            url.scheme()
        )));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url
        .host()
        .ok_or_else(|| ToolError::bad_argument("the URL has no host"))?;
    let ip = match host {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(d) => parse_numeric_v4(d).map(IpAddr::V4),
    };
    let name = url.host_str().unwrap_or_default().to_string();
    if let Some(ip) = ip {
        if !allowed(ip, loopback) {
            return Err(refused(&name, ip));
        }
        return Ok((name, SocketAddr::new(ip, port)));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), port))
        .await
        .map_err(|e| ToolError::tool_failed(format!("cannot resolve {name}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(ToolError::tool_failed(format!("{name} has no address")));
    }
    // Every address must pass: a name that also points inward is refused whole.
    if let Some(bad) = addrs.iter().find(|a| !allowed(a.ip(), loopback)) {
        return Err(refused(&name, bad.ip()));
    }
    Ok((name, addrs[0]))
}

fn client_for(
    host: &str,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<reqwest::Client, ToolError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .user_agent(concat!("maljan-files/", env!("CARGO_PKG_VERSION")));
    if host.parse::<IpAddr>().is_err() && !host.starts_with('[') {
        // Pin the name to the checked address: reqwest will not look it up again.
        b = b.resolve(host, addr);
    }
    b.build().map_err(|e| {
        ToolError::tool_failed(format!("cannot build the HTTP client: {}", e.without_url()))
    })
}

fn http_err(host: &str, e: reqwest::Error) -> ToolError {
    let e = e.without_url();
    if e.is_timeout() {
        ToolError::timeout(format!("{host} did not answer in time"))
    } else {
        ToolError::tool_failed(format!("request to {host} failed: {e}"))
    }
}

async fn download(
    c: &Config,
    ctx: &ToolContext,
    a: DownloadArgs,
) -> Result<DownloadOut, ToolError> {
    if a.chunk_size <= 0 {
        return Err(ToolError::bad_argument("chunk_size must be positive"));
    }
    if a.timeout <= 0 || a.timeout > 3600 {
        return Err(ToolError::bad_argument(
            "timeout must be between 1 and 3600 seconds",
        ));
    }
    if a.max_bytes <= 0 {
        return Err(ToolError::bad_argument("max_bytes must be positive"));
    }
    let expected = match &a.expected_sha256 {
        Some(h) if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            return Err(ToolError::bad_argument(
                "expected_sha256 must be 64 hex digits",
            ));
        }
        other => other.clone(),
    };
    let mut url = Url::parse(&a.file_url)
        .map_err(|e| ToolError::bad_argument(format!("file_url is not a URL: {e}")))?;
    let target = c.target(&a.file_name)?;
    if target.is_dir() {
        return Err(ToolError::bad_argument(format!(
            "{} is a directory",
            a.file_name
        )));
    }
    let part = if a.resume {
        c.target(&format!("{}.part", show(&target)))?
    } else {
        target.clone()
    };
    let max = a.max_bytes as u64;
    let timeout = Duration::from_secs(a.timeout as u64);
    let mut start = if a.resume {
        tokio::fs::metadata(&part)
            .await
            .map(|m| m.len())
            .unwrap_or(0)
    } else {
        0
    };

    let mut redirects = 0;
    let response = loop {
        let (host, addr) = check(&url, c.allow_loopback_downloads).await?;
        let client = client_for(&host, addr, timeout)?;
        let mut req = client.get(url.clone());
        if start > 0 {
            req = req.header(header::RANGE, format!("bytes={start}-"));
        }
        let resp = req.send().await.map_err(|e| http_err(&host, e))?;
        if resp.status().is_redirection() {
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(ToolError::tool_failed(format!(
                    "more than {MAX_REDIRECTS} redirects"
                )));
            }
            let location = resp
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| {
                    ToolError::tool_failed(format!("{host} redirected without a Location"))
                })?;
            url = url.join(location).map_err(|_| {
                ToolError::tool_failed(format!("{host} redirected to an invalid URL"))
            })?;
            continue;
        }
        if resp.status() == StatusCode::RANGE_NOT_SATISFIABLE && start > 0 {
            // The partial file is not a prefix the server can continue: start over.
            start = 0;
            continue;
        }
        if !resp.status().is_success() {
            return Err(ToolError::tool_failed(format!(
                "{host} answered HTTP {}",
                resp.status().as_u16()
            )));
        }
        break resp;
    };

    // A server that ignores Range sends the whole file again: overwrite rather than append.
    if start > 0 && response.status() != StatusCode::PARTIAL_CONTENT {
        start = 0;
    }
    if let Some(len) = response.content_length()
        && start + len > max
    {
        return Err(ToolError::bad_argument(format!(
            "the download is {} bytes, more than max_bytes {max}",
            start + len
        )));
    }
    let total = response.content_length().map(|l| (start + l) as f64);
    // Opened from the root's handle (never through a link swapped in since the check); the
    // open does not block (O_NONBLOCK), so it is done here.
    let how = if start > 0 {
        Create::Append
    } else {
        Create::Truncate
    };
    let mut file = tokio::fs::File::from_std(c.roots.create_file(&part, &a.file_name, how)?);
    let mut written = start;
    let mut next_report = written + a.chunk_size as u64;
    let mut stream = response.bytes_stream();
    let host = url.host_str().unwrap_or_default().to_string();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| http_err(&host, e))?;
        written += chunk.len() as u64;
        if written > max {
            drop(file);
            let _ = c.roots.remove_file(&part, &a.file_name);
            return Err(ToolError::bad_argument(format!(
                "the download exceeded max_bytes {max}; the partial file was removed"
            )));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ToolError::io(&a.file_name, e))?;
        if written >= next_report {
            ctx.progress(written as f64, total, a.progress_name.clone());
            next_report = written + a.chunk_size as u64;
        }
    }
    file.flush()
        .await
        .map_err(|e| ToolError::io(&a.file_name, e))?;
    file.sync_data()
        .await
        .map_err(|e| ToolError::io(&a.file_name, e))?;
    drop(file);
    if part != target && c.roots.rename(&part, &target, &a.file_name)? != Renamed::Done {
        return Err(ToolError::tool_failed(format!(
            "{} could not be renamed into place",
            a.file_name
        )));
    }
    let written_file = c.roots.open_file(&target, &a.file_name)?;
    let given = a.file_name.clone();
    let call = ctx.clone();
    let (sha256, bytes) = maljan_server::blocking(move || {
        hash_file(
            written_file,
            &given,
            Algorithm::parse("sha256")?,
            1 << 20,
            Watch::Call(&call),
        )
    })
    .await?;
    if let Some(exp) = expected
        && !digests_match(&sha256, &exp)
    {
        {
            let _ = c.roots.remove_file(&target, &a.file_name);
            return Err(ToolError::tool_failed(format!(
                "the download's SHA-256 is {sha256}, not the expected {exp}; the file was removed"
            ))
            .with_remediation(
                "check expected_sha256 and the URL; the server may have sent something else",
            ));
        }
    }
    Ok(DownloadOut {
        path: show(&target),
        bytes,
        resumed_from: start,
        redirects,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_spellings_parse_as_inet_aton() {
        let lo = Some(Ipv4Addr::new(127, 0, 0, 1));
        for s in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "0177.0.0.1",
            "127.1",
            "127.0.1",
            "0x7F.0.0.1.",
        ] {
            assert_eq!(parse_numeric_v4(s), lo, "{s}");
        }
        assert_eq!(parse_numeric_v4("10.1"), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(parse_numeric_v4("example.com"), None);
        assert_eq!(parse_numeric_v4("256.0.0.1"), None);
        assert_eq!(parse_numeric_v4("1.2.3.4.5"), None);
        assert_eq!(parse_numeric_v4("08.0.0.1"), None);
    }

    #[test]
    fn address_policy() {
        let no = |s: &str| assert!(!allowed(s.parse().unwrap(), false), "{s} should be refused");
        let yes = |s: &str| assert!(allowed(s.parse().unwrap(), false), "{s} should be allowed");
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:0101::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "2001:db8::1",
        ] {
            no(s);
        }
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            yes(s);
        }
        assert!(allowed("127.0.0.1".parse().unwrap(), true));
        assert!(allowed("::1".parse().unwrap(), true));
        assert!(!allowed("10.0.0.1".parse().unwrap(), true));
    }
}
