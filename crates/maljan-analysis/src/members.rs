//! `extract_members`: the files a sample carries, written out as child samples — archive members
//! (zip in every method incl. Deflate64 and implode, ZipCrypto / AES ones opened with the
//! analysts' usual passwords, and a lying central directory read from its local headers; tar,
//! gzip, bzip2, xz, lzma / lzip, zstd, lz4, 7z, RAR 4 and 5, cab, cpio, ISO 9660, CHM help files), mail
//! attachments (MIME base64 / quoted-printable, nested messages, uuencode, BinHex, winmail.dat),
//! RTF packaged files, HTML base64 payloads and, for anything else, the payloads `carve_payloads` finds
//! (installer and SFX overlays, droppers), and a UPX-packed program's unpacked image
//! (`source: "unpacked"`, see [`crate::unpack`]; skipped with the reason when upx is absent).
//! Each member is hashed, identified and written (0o600,
//! never overwriting, named by its SHA-256) under the server's work directory,
//! `<work dir>/carved/<sha256 of the outermost sample>/members/` — never beside the sample, whose
//! folder may be read-only evidence — where every tool accepts it as `carved_path`; a member's own
//! members go to the same directory, so a whole tree stays under the outermost sample's directory.
//!
//! Bounded so that a decompression bomb ends as a finding, never an outage: at most `max_members`
//! members and `max_total_bytes` bytes per call, and no member may expand to more than `max_ratio`
//! times the bytes it was packed in. What a limit stopped is in `limits_hit`; the recursion over
//! members (depth, job-wide count and bytes) is the triage job's.

use std::{
    io::{Read, Write as _},
    path::{Component, Path, PathBuf},
    sync::Arc,
};

use maljan_server::{Registry, Roots, ToolError, ToolMeta, Write};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    common::on_sample,
    hashes::{Cancel, sha256_hex},
    identify::identify,
};

/// The passwords analysts and sample exchanges use for encrypted archives, tried in this order.
pub const USUAL_PASSWORDS: &[&str] = &["infected", "malware", "virus"];
/// Bytes a member may take beyond `max_ratio` times its packed size (small members of
/// incompressible formats have a few bytes of framing).
const RATIO_SLACK: u64 = 64 * 1024;

/// The bounds of one extraction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_members: usize,
    pub max_total_bytes: u64,
    pub max_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_members: 1000,
            max_total_bytes: 256 << 20,
            max_ratio: 200,
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Member {
    /// The member's path inside its parent (an archive path, an attachment's file name, or
    /// `overlay@0x…` for a carved payload).
    pub name: String,
    pub size: u64,
    pub sha256: String,
    pub sha1: String,
    pub md5: String,
    /// identify_file's kind and description of the member's bytes.
    pub kind: String,
    pub description: String,
    /// Where it was written; pass it as `carved_path` to any tool.
    pub carved_path: Option<String>,
    /// It was encrypted in its parent; `password` is the one that opened it.
    pub encrypted: bool,
    pub password: Option<String>,
    /// The container format it came out of (zip, tar, mime, uuencode, carved, …).
    pub source: String,
    /// Dangerous names (traversal, double extension, …), as archive_list flags them.
    pub flags: Vec<String>,
}

/// A member that was seen but not extracted.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// A bound that stopped the extraction (a finding: a bomb, or a container too big to open whole).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct LimitHit {
    /// ratio, total_bytes or members.
    pub limit: String,
    pub member: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Default)]
pub struct Extraction {
    /// The container format read (zip, tar.gz, email, carved, …); `none` when the sample carries
    /// nothing to extract.
    pub format: String,
    pub members: Vec<Member>,
    pub skipped: Vec<Skipped>,
    pub limits_hit: Vec<LimitHit>,
    /// Bytes extracted in all.
    pub total_bytes: u64,
    /// What this answer could not do and why.
    pub without: Vec<String>,
}

/// Gathers members under the limits; the format readers feed it.
pub(crate) struct Collector<'a> {
    limits: Limits,
    cancel: Cancel<'a>,
    pub(crate) out: Extraction,
    data: Vec<Vec<u8>>,
    stopped: bool,
}

impl<'a> Collector<'a> {
    pub(crate) fn new(limits: Limits, cancel: Cancel<'a>) -> Self {
        Self {
            limits,
            cancel,
            out: Extraction::default(),
            data: vec![],
            stopped: false,
        }
    }

    /// The extraction and each member's bytes, in the order of its `members`.
    pub(crate) fn finish(self) -> (Extraction, Vec<Vec<u8>>) {
        (self.out, self.data)
    }

    /// Whether the readers should stop (a limit was hit, or the call was cancelled).
    pub(crate) fn done(&self) -> bool {
        self.stopped || (self.cancel)()
    }

    pub(crate) fn skip(&mut self, name: &str, reason: impl Into<String>) {
        if self.out.skipped.len() < 1000 {
            self.out.skipped.push(Skipped {
                name: name.to_string(),
                reason: reason.into(),
            });
        }
    }

    fn hit(&mut self, limit: &str, member: Option<&str>, detail: String) {
        self.out.limits_hit.push(LimitHit {
            limit: limit.into(),
            member: member.map(str::to_string),
            detail,
        });
    }

    /// The bounds of this extraction (a reader that must decode a whole stream sizes it by them).
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// The most bytes a stream packed in `packed` bytes may expand to.
    pub(crate) fn ratio_limit(&self, packed: u64) -> u64 {
        packed
            .max(1)
            .saturating_mul(self.limits.max_ratio)
            .saturating_add(RATIO_SLACK)
    }

    /// A whole stream (a tar.gz, …) expanded past its ratio.
    pub(crate) fn ratio_hit(&mut self, format: &str, packed: u64) {
        let ratio = self.limits.max_ratio;
        self.hit(
            "ratio",
            None,
            format!("the {format} stream expands more than {ratio}x its {packed} bytes (a decompression bomb): stopped"),
        );
    }

    /// Reads one member from `reader`, packed in `packed` bytes (None: not known, the ratio is
    /// not checked). Returns false once extraction must stop.
    pub(crate) fn add(
        &mut self,
        name: &str,
        source: &str,
        packed: Option<u64>,
        reader: &mut dyn Read,
        password: Option<&str>,
    ) -> bool {
        let cap = match self.room_for(name, packed) {
            Ok(cap) => cap,
            Err(go_on) => return go_on,
        };
        let mut data = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let mut limited = reader.take(cap.saturating_add(1));
        loop {
            if (self.cancel)() {
                self.stopped = true;
                return false;
            }
            match limited.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    self.skip(name, format!("damaged or unreadable member: {e}"));
                    return true;
                }
            }
        }
        if data.len() as u64 > cap {
            return self.over(name, packed, cap);
        }
        self.keep(name, source, data, password)
    }

    /// How many bytes the next member may have (the rest of the total budget, and its ratio to
    /// `packed`), or Err(whether to go on) when no member may come at all.
    fn room_for(&mut self, name: &str, packed: Option<u64>) -> Result<u64, bool> {
        if self.done() {
            return Err(false);
        }
        if self.out.members.len() >= self.limits.max_members {
            let max = self.limits.max_members;
            self.hit(
                "members",
                Some(name),
                format!("more than {max} members: the rest were not extracted"),
            );
            self.stopped = true;
            return Err(false);
        }
        let remaining = self
            .limits
            .max_total_bytes
            .saturating_sub(self.out.total_bytes);
        let ratio_cap = packed.map(|p| self.ratio_limit(p));
        Ok(ratio_cap.unwrap_or(u64::MAX).min(remaining))
    }

    /// Records the limit a member larger than `cap` passes; returns whether to go on.
    fn over(&mut self, name: &str, packed: Option<u64>, cap: u64) -> bool {
        let remaining = self
            .limits
            .max_total_bytes
            .saturating_sub(self.out.total_bytes);
        if packed.is_some_and(|p| self.ratio_limit(p) <= remaining) {
            let ratio = self.limits.max_ratio;
            self.hit(
                "ratio",
                Some(name),
                format!(
                    "expands more than {ratio}x its {} packed bytes (a decompression bomb): stopped at {cap} bytes",
                    packed.unwrap_or(0)
                ),
            );
            // One bomb member is a finding; the other members are still worth reading.
            return true;
        }
        let max = self.limits.max_total_bytes;
        self.hit(
            "total_bytes",
            Some(name),
            format!("extracting it would pass {max} bytes in all: stopped"),
        );
        self.stopped = true;
        false
    }

    /// For a reader that can only decode a member whole (RAR): whether a member declaring
    /// `size` bytes fits: Ok(()) to decode it and hand it to [`Collector::add`], Err(whether to
    /// go on) when the limit it passes is recorded instead.
    pub(crate) fn admit(&mut self, name: &str, packed: u64, size: u64) -> Result<(), bool> {
        let cap = self.room_for(name, Some(packed))?;
        if size > cap {
            return Err(self.over(name, Some(packed), cap));
        }
        Ok(())
    }

    /// A member already in memory (a carved slice, a decoded attachment).
    pub(crate) fn add_bytes(&mut self, name: &str, source: &str, data: &[u8]) -> bool {
        self.add(name, source, None, &mut &data[..], None)
    }

    fn keep(&mut self, name: &str, source: &str, data: Vec<u8>, password: Option<&str>) -> bool {
        let Ok(h) = crate::hashes::hash_bytes(&data, false, self.cancel) else {
            self.stopped = true;
            return false;
        };
        let id = identify(&data);
        self.out.total_bytes += data.len() as u64;
        self.out.members.push(Member {
            name: name.to_string(),
            size: data.len() as u64,
            sha256: h.sha256,
            sha1: h.sha1,
            md5: h.md5,
            kind: id.kind,
            description: id.description,
            carved_path: None,
            encrypted: password.is_some(),
            password: password.map(str::to_string),
            source: source.to_string(),
            flags: crate::archive::name_flags(name),
        });
        self.data.push(data);
        true
    }
}

/// The members of `b` within `limits` (nothing is written). The second value holds each
/// member's bytes, in the order of `members`.
pub fn extract(b: &[u8], limits: Limits, cancel: Cancel) -> (Extraction, Vec<Vec<u8>>) {
    extract_in(b, limits, cancel, None)
}

/// [`extract`], and with `scratch` (a private directory of the server's) a packed program's
/// unpacked image too (see [`crate::unpack`]): the copy unpacking needs is made there.
pub fn extract_in(
    b: &[u8],
    limits: Limits,
    cancel: Cancel,
    scratch: Option<&Path>,
) -> (Extraction, Vec<Vec<u8>>) {
    let mut c = Collector::new(limits, cancel);
    let result = crate::common::contain("member extraction", || {
        c.out.format = crate::members_formats::read(b, &mut c);
        if let Some(scratch) = scratch {
            crate::unpack::add_unpacked(
                b,
                &mut c,
                scratch,
                crate::unpack::upx_program().as_deref(),
            );
            if c.out.format.is_empty() && !c.out.members.is_empty() {
                c.out.format = "unpacked".into();
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        c.out.without.push(e.message);
    }
    if c.out.members.is_empty() && c.out.format.is_empty() {
        c.out.format = "none".into();
    }
    (c.out, c.data)
}

/// The directory a sample's members go to: the work directory's `carved/<sha256>/` directory the
/// sample already lies in (a member of a member), else `<work>/carved/<sha256 of it>/`; then
/// `members/`. A sample outside the work directory never has its own folder written to, even one
/// that looks like a `carved/` tree.
fn members_dir(work: &Path, sample: &Path, bytes: &[u8]) -> PathBuf {
    let mut carved_root: Option<PathBuf> = None;
    if let Ok(below) = sample.strip_prefix(work) {
        let parts: Vec<Component> = below.components().collect();
        if let (Some(Component::Normal(name)), Some(Component::Normal(next))) =
            (parts.first(), parts.get(1))
            && *name == "carved"
            && parts.len() > 2
            && next
                .to_str()
                .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            carved_root = Some(work.join("carved").join(next));
        }
    }
    carved_root
        .unwrap_or_else(|| work.join("carved").join(sha256_hex(bytes)))
        .join("members")
}

/// A short extension kept from the member's name (some tools read it: scripts).
fn extension(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    match base.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            format!(".{}", ext.to_ascii_lowercase())
        }
        _ => String::new(),
    }
}

pub(crate) fn write_members(
    roots: &Roots,
    work: &Path,
    sample: &Path,
    bytes: &[u8],
    out: &mut Extraction,
    data: &[Vec<u8>],
) -> Result<(), ToolError> {
    if out.members.is_empty() {
        return Ok(());
    }
    let dir = members_dir(work, sample, bytes);
    let handle = roots.create_dir_all_mode(&dir, "members directory", 0o700)?;
    for (m, d) in out.members.iter_mut().zip(data) {
        let name = format!("{}{}", m.sha256, extension(&m.name));
        match handle.open_write(Path::new(&name), Write::New { mode: 0o600 }) {
            Ok(mut f) => f
                .write_all(d)
                .map_err(|e| ToolError::io("extracted member", e))?,
            // Content-addressed: the same bytes are already there.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(maljan_server::roots::io_error("extracted member", e)),
        }
        m.carved_path = Some(dir.join(&name).display().to_string());
    }
    Ok(())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved or extracted from the sample; read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Most members extracted (default 1000).
    #[serde(default)]
    pub max_members: Option<usize>,
    /// Most bytes extracted in all (default 256 MiB).
    #[serde(default)]
    pub max_total_bytes: Option<u64>,
    /// Most a member may expand over its packed size (default 200).
    #[serde(default)]
    pub max_ratio: Option<u64>,
    /// List and hash only; write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExtractOutput {
    pub read_path: String,
    pub size: u64,
    #[serde(flatten)]
    pub extraction: Extraction,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "extract_members",
            "Writes out the files the sample carries as child samples: archive members (zip in any method incl. \
             Deflate64, encrypted with infected/malware/virus, or with a lying central directory; tar, gzip, bzip2, \
             xz, zstd, lz4, 7z, rar, cab, cpio, ISO 9660 images, CHM help files), mail attachments (MIME, uuencode, BinHex, winmail.dat), \
             RTF embedded objects and packaged files, HTML/SVG base64 payloads (data: URIs, smuggling scripts), \
             carved payloads and a UPX-packed program's unpacked image (when upx is on the host), each hashed \
             and identified, bounded in count, bytes and expansion ratio.",
        )
        .title("Extract members")
        .writes()
        .timeout_s(300),
        move |ctx, a: ExtractArgs| {
            let config = config.clone();
            async move {
                let roots = config.roots.clone();
                let work = config.work_dir.path().to_path_buf();
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let d = Limits::default();
                    let limits = Limits {
                        max_members: a.max_members.unwrap_or(d.max_members).min(100_000),
                        max_total_bytes: a.max_total_bytes.unwrap_or(d.max_total_bytes),
                        max_ratio: a.max_ratio.unwrap_or(d.max_ratio).max(1),
                    };
                    let b = s.bytes();
                    // Unpacking makes a private copy: only when writing is allowed.
                    let scratch = work.join("unpack");
                    let scratch = (!a.dry_run).then_some(scratch.as_path());
                    let (mut extraction, data) = extract_in(b, limits, &|| ctx.is_cancelled(), scratch);
                    crate::common::check_cancel(ctx)?;
                    if !a.dry_run {
                        write_members(&roots, &work, &s.path, b, &mut extraction, &data)?;
                    }
                    Ok(ExtractOutput { read_path: s.read_path(), size: b.len() as u64, extraction })
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_go_to_the_work_directory_and_members_of_members_stay_under_the_outermost() {
        let work = Path::new("/w");
        let sha = "ab".repeat(32);
        let nested = PathBuf::from(format!("/w/carved/{sha}/members/x.zip"));
        assert_eq!(
            members_dir(work, &nested, b"zip"),
            PathBuf::from(format!("/w/carved/{sha}/members"))
        );
        let top = members_dir(work, Path::new("/evidence/a.zip"), b"abc");
        assert_eq!(
            top,
            PathBuf::from(format!("/w/carved/{}/members", sha256_hex(b"abc")))
        );
        // A carved/ tree in the evidence folder is the evidence's, not ours.
        let theirs = PathBuf::from(format!("/evidence/carved/{sha}/members/x.zip"));
        assert_eq!(
            members_dir(work, &theirs, b"zip"),
            PathBuf::from(format!("/w/carved/{}/members", sha256_hex(b"zip")))
        );
    }

    #[test]
    fn extensions_are_short_and_plain() {
        assert_eq!(extension("dir/Invoice.PDF.exe"), ".exe");
        assert_eq!(extension(".bashrc"), "");
        assert_eq!(extension("a.b/c"), "");
        assert_eq!(extension("x.<script>"), "");
    }

    #[test]
    fn a_member_over_the_ratio_is_a_finding_and_the_rest_still_count() {
        let zeros = vec![0u8; 2 << 20];
        let mut c = Collector::new(
            Limits {
                max_ratio: 10,
                ..Limits::default()
            },
            &|| false,
        );
        assert!(c.add("bomb", "test", Some(10), &mut &zeros[..], None));
        assert!(c.add_bytes("ok", "test", b"fine"));
        assert_eq!(c.out.limits_hit.len(), 1);
        assert_eq!(c.out.limits_hit[0].limit, "ratio");
        assert_eq!(c.out.members.len(), 1);
        let mut c = Collector::new(
            Limits {
                max_total_bytes: 5,
                max_members: 1,
                ..Limits::default()
            },
            &|| false,
        );
        assert!(!c.add_bytes("big", "test", b"123456"));
        assert_eq!(c.out.limits_hit[0].limit, "total_bytes");
        assert!(c.done());
    }
}
