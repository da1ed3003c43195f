//! `unpack`: the image a packer hid, restored, so that its real imports, strings and capabilities
//! can be read. A UPX-packed program shows only the stub's handful of imports; the program inside
//! is what an analyst needs to see.
//!
//! UPX is undone by the `upx` program itself (`upx -d`) when the host has it — Debian's
//! `upx-ucl`, found on PATH as `upx` or `upx-ucl`, or wherever `MALJAN_UPX` names it: an optional
//! dependency, probed in the manifest with its remedy. It runs on a private copy in the server's
//! own work directory (`<work dir>/unpack/unpack-<random>/`, 0700, removed at once), never on the
//! sample or in its folder, in its own process group, under a time limit, an address-space limit
//! and a file-size limit (the unpacked image may not pass `max_bytes`), and is killed with its
//! group when the limit or a cancellation comes first.
//!
//! `extract_members` calls the same code on a UPX-packed sample, so the unpacked image is a child
//! sample (`source: "unpacked"`) analysed with its own steps. Unpacking is never required for a
//! run to complete: without `upx`, or when it cannot restore the image, the member is listed as
//! skipped with the reason (a degradation note), and the rest of the answer stands.

use std::{
    io::Write as _,
    os::unix::{
        fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use maljan_server::{Probe, Registry, ToolError, ToolMeta, Unavailable, manifest::find_on_path};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    common::{le_u16, on_sample},
    identify::pe_header_offset,
    members::{Collector, Extraction, Limits, Member},
};

/// Seconds `upx -d` may run on one sample.
pub const UNPACK_TIMEOUT_S: u64 = 60;
/// The largest unpacked image written (UPX's own limit on what it packs is far below).
pub const MAX_UNPACKED_BYTES: u64 = 256 << 20;
/// Address-space limit of the unpacker (MiB).
const MEMORY_MB: u64 = 1024;
/// The environment variable that names the upx executable when it is not on PATH as `upx`.
pub const UPX_ENV: &str = "MALJAN_UPX";
/// The member name of an unpacked image (its extension is the image's kind).
const UNPACKED_NAME: &str = "upx-unpacked";
/// What to do when upx is missing.
pub const UPX_REMEDY: &str = "install UPX so that `upx` (or Debian's `upx-ucl`) is on the server's PATH, \
     or set MALJAN_UPX to the upx executable, then restart the server";

/// The upx executable: `MALJAN_UPX` when set, else `upx` or `upx-ucl` on PATH.
pub fn upx_program() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(UPX_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    find_on_path("upx").or_else(|| find_on_path("upx-ucl"))
}

/// Whether `b` is a program UPX packed: a PE with a section named UPX0/UPX1/UPX2 or the `UPX!`
/// block in its headers, or an ELF with the `UPX!` block in its first 4 KiB.
pub fn upx_packed(b: &[u8]) -> bool {
    let head = &b[..b.len().min(4096)];
    let magic = memchr::memmem::find(head, b"UPX!").is_some();
    if b.starts_with(b"\x7FELF") {
        return magic;
    }
    let Some(pe) = pe_header_offset(b) else {
        return false;
    };
    if magic {
        return true;
    }
    let (Some(nsec), Some(opt)) = (le_u16(b, pe + 6), le_u16(b, pe + 20)) else {
        return false;
    };
    let table = pe + 24 + usize::from(opt);
    (0..usize::from(nsec).min(96)).any(|i| {
        b.get(table + i * 40..table + i * 40 + 8)
            .is_some_and(|name| name.starts_with(b"UPX"))
    })
}

/// Why an image was not unpacked.
#[derive(Debug, Clone, PartialEq)]
pub enum UnpackError {
    /// upx is not on this host.
    NoProgram,
    /// upx ran and refused or failed (its message, without our paths).
    Failed(String),
    TimedOut(u64),
    /// The unpacked image would pass the size budget.
    TooBig(u64),
    Cancelled,
    Io(String),
}

impl std::fmt::Display for UnpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoProgram => write!(f, "upx is not on the server's PATH ({UPX_REMEDY})"),
            Self::Failed(m) => write!(f, "upx could not restore the image: {m}"),
            Self::TimedOut(s) => write!(f, "upx did not finish within {s} s"),
            Self::TooBig(n) => write!(f, "the unpacked image would pass {n} bytes"),
            Self::Cancelled => write!(f, "cancelled"),
            Self::Io(m) => write!(f, "the private copy could not be made: {m}"),
        }
    }
}

/// The time and size an unpacking may take.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub timeout: Duration,
    pub max_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(UNPACK_TIMEOUT_S),
            max_bytes: MAX_UNPACKED_BYTES,
        }
    }
}

/// Kills the unpacker's process group when dropped (a normal end, a timeout, a cancellation).
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // SAFETY: killpg on the group the child leads; ESRCH when it is gone already is fine.
        unsafe {
            libc::killpg(self.0, libc::SIGKILL);
        }
    }
}

/// Restores a UPX-packed image with `program -d` on a private copy under `scratch` (made 0700;
/// the copy's directory is removed before this returns).
pub fn unpack_upx(
    program: &Path,
    packed: &[u8],
    scratch: &Path,
    budget: Budget,
    cancel: &dyn Fn() -> bool,
) -> Result<Vec<u8>, UnpackError> {
    let io = |e: std::io::Error| UnpackError::Io(e.to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(scratch)
        .map_err(io)?;
    let dir = tempfile::Builder::new()
        .prefix("unpack-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(scratch)
        .map_err(io)?;
    let input = dir.path().join("packed.bin");
    let output = dir.path().join("unpacked.bin");
    let errors = dir.path().join("stderr.txt");
    let private_file = |path: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
    };
    private_file(&input)
        .and_then(|mut f| f.write_all(packed))
        .map_err(io)?;
    let stderr = private_file(&errors).map_err(io)?;
    let mut cmd = Command::new(program);
    cmd.args(["-d", "-q", "-q", "--no-color", "-o"])
        .arg(&output)
        .arg(&input)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .process_group(0);
    let file_limit = budget.max_bytes.saturating_add(1);
    // SAFETY: only setrlimit (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let set = |resource, value: u64| {
                let lim = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                libc::setrlimit(resource, &lim);
            };
            set(libc::RLIMIT_AS, MEMORY_MB << 20);
            set(libc::RLIMIT_FSIZE, file_limit);
            set(libc::RLIMIT_CORE, 0);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| UnpackError::Failed(e.to_string()))?;
    let _group = GroupGuard(child.id() as i32);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            break status;
        }
        if cancel() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(UnpackError::Cancelled);
        }
        if started.elapsed() > budget.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(UnpackError::TimedOut(budget.timeout.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    use std::os::unix::process::ExitStatusExt;
    if status.signal() == Some(libc::SIGXFSZ) {
        return Err(UnpackError::TooBig(budget.max_bytes));
    }
    if !status.success() {
        let text = std::fs::read(&errors).unwrap_or_default();
        let text = String::from_utf8_lossy(&text[..text.len().min(4096)])
            .replace(&dir.path().display().to_string(), "")
            .replace("/packed.bin", "the copy");
        let last: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let message = last.last().map(|l| l.trim()).unwrap_or("no message");
        return Err(UnpackError::Failed(format!("{status}: {message}")));
    }
    let size = std::fs::metadata(&output).map_err(io)?.len();
    if size > budget.max_bytes {
        return Err(UnpackError::TooBig(budget.max_bytes));
    }
    std::fs::read(&output).map_err(io)
}

/// The member name of an image unpacked from `packed`.
fn member_name(packed: &[u8]) -> String {
    let ext = if packed.starts_with(b"\x7FELF") {
        "elf"
    } else {
        "exe"
    };
    format!("{UNPACKED_NAME}.{ext}")
}

/// Adds the unpacked image of a UPX-packed `b` to the collector's members (`source: "unpacked"`,
/// bounded by its limits like any member), or lists it as skipped with why it could not be
/// unpacked. `scratch` is where the private copy is made; `program` is upx ([`upx_program`]).
pub(crate) fn add_unpacked(b: &[u8], c: &mut Collector, scratch: &Path, program: Option<&Path>) {
    if !upx_packed(b) || c.done() {
        return;
    }
    let name = member_name(b);
    let Some(program) = program else {
        c.skip(&name, format!("not unpacked: {}", UnpackError::NoProgram));
        return;
    };
    let result = unpack_upx(program, b, scratch, Budget::default(), &|| c.done());
    match result {
        Ok(image) => {
            c.add(
                &name,
                "unpacked",
                Some(b.len() as u64),
                &mut &image[..],
                None,
            );
        }
        Err(e) => c.skip(&name, format!("not unpacked: {e}")),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnpackArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved or extracted from the sample; read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Seconds the unpacker may run; at most 120.
    #[serde(default = "default_timeout")]
    #[schemars(default = "default_timeout", range(min = 1, max = 120))]
    pub timeout_s: u64,
    /// Most bytes the unpacked image may have (default and ceiling 256 MiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

fn default_timeout() -> u64 {
    UNPACK_TIMEOUT_S
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct UnpackOutput {
    pub read_path: String,
    /// The packer undone (`UPX`), or null when the sample is not packed by one this tool restores.
    pub packer: Option<String>,
    /// The unpacked image, written under the work directory (pass its carved_path to any tool).
    pub unpacked: Option<Member>,
    /// Why there is no unpacked image, when there is none.
    pub note: Option<String>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "unpack",
            "Restores a packed program's original image (UPX, through the host's `upx -d` on a private copy, \
             bounded in time and size) and writes it where carved_path accepts it, so its real imports, \
             strings and capabilities can be read.",
        )
        .title("Unpack")
        .writes()
        .timeout_s(120)
        .probe(Probe::custom("upx", || match upx_program() {
            Some(_) => Ok(()),
            None => Err(Unavailable {
                reason: "upx not found on PATH (nor MALJAN_UPX)".into(),
                remediation: UPX_REMEDY.into(),
                without: None,
            }),
        })),
        move |ctx, a: UnpackArgs| {
            let config = config.clone();
            async move {
                let roots = config.roots.clone();
                let work = config.work_dir.path().to_path_buf();
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let read_path = s.read_path();
                    if !upx_packed(b) {
                        return Ok(UnpackOutput {
                            read_path,
                            packer: None,
                            unpacked: None,
                            note: Some("not packed by a packer this tool restores (UPX)".into()),
                        });
                    }
                    let program = upx_program().ok_or_else(|| {
                        ToolError::missing_dependency(UnpackError::NoProgram.to_string())
                            .with_remediation(UPX_REMEDY)
                    })?;
                    let budget = Budget {
                        timeout: Duration::from_secs(a.timeout_s.clamp(1, 120)),
                        max_bytes: a.max_bytes.unwrap_or(MAX_UNPACKED_BYTES).clamp(1, MAX_UNPACKED_BYTES),
                    };
                    let scratch = work.join("unpack");
                    let image = match unpack_upx(&program, b, &scratch, budget, &|| ctx.is_cancelled()) {
                        Ok(image) => image,
                        Err(UnpackError::Cancelled) => {
                            crate::common::check_cancel(ctx)?;
                            return Err(ToolError::tool_failed("cancelled"));
                        }
                        Err(UnpackError::TimedOut(s)) => {
                            return Err(ToolError::timeout(format!("upx did not finish within {s} s"))
                                .with_remediation("raise timeout_s (up to 120)"));
                        }
                        Err(e) => {
                            return Ok(UnpackOutput { read_path, packer: Some("UPX".into()), unpacked: None, note: Some(e.to_string()) });
                        }
                    };
                    let limits = Limits { max_members: 1, max_total_bytes: budget.max_bytes, max_ratio: u64::MAX };
                    let cancelled = || ctx.is_cancelled();
                    let mut c = Collector::new(limits, &cancelled);
                    c.add(&member_name(b), "unpacked", None, &mut &image[..], None);
                    let (mut extraction, data): (Extraction, Vec<Vec<u8>>) = c.finish();
                    crate::members::write_members(&roots, &work, &s.path, b, &mut extraction, &data)?;
                    Ok(UnpackOutput {
                        read_path,
                        packer: Some("UPX".into()),
                        unpacked: extraction.members.into_iter().next(),
                        note: None,
                    })
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PE header (at 0x40) with a section table of `names` and nothing else.
    fn pe_with_sections(names: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0u8; 0x40];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c] = 0x40;
        b.extend_from_slice(b"PE\0\0");
        let mut coff = [0u8; 20];
        coff[2..4].copy_from_slice(&(names.len() as u16).to_le_bytes());
        b.extend_from_slice(&coff);
        for name in names {
            let mut section = [0u8; 40];
            section[..name.len()].copy_from_slice(name);
            b.extend_from_slice(&section);
        }
        b
    }

    #[test]
    fn upx_is_told_by_its_sections_or_its_block() {
        assert!(upx_packed(&pe_with_sections(&[b"UPX0", b"UPX1"])));
        assert!(!upx_packed(&pe_with_sections(&[b".text", b".data"])));
        let mut elf = b"\x7FELF\x02\x01\x01".to_vec();
        elf.resize(200, 0);
        assert!(!upx_packed(&elf));
        elf.extend_from_slice(b"UPX!");
        assert!(upx_packed(&elf));
        assert!(!upx_packed(b"UPX! in a text file"));
    }

    #[test]
    fn without_upx_the_image_is_a_skipped_member_naming_the_remedy() {
        let packed = pe_with_sections(&[b"UPX0", b"UPX1"]);
        let scratch = tempfile::tempdir().unwrap();
        let mut c = Collector::new(Limits::default(), &|| false);
        add_unpacked(&packed, &mut c, scratch.path(), None);
        let (x, _) = c.finish();
        assert!(x.members.is_empty());
        assert_eq!(x.skipped.len(), 1);
        assert_eq!(x.skipped[0].name, "upx-unpacked.exe");
        assert!(
            x.skipped[0]
                .reason
                .contains("upx is not on the server's PATH")
        );
        assert!(x.skipped[0].reason.contains("MALJAN_UPX"));
    }

    #[test]
    fn a_failing_unpacker_is_an_error_that_names_it_and_leaves_no_copy() {
        let scratch = tempfile::tempdir().unwrap();
        let r = unpack_upx(
            Path::new("/bin/false"),
            b"MZ",
            scratch.path(),
            Budget::default(),
            &|| false,
        );
        assert!(matches!(r, Err(UnpackError::Failed(_))), "{r:?}");
        let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
        assert!(left.is_empty(), "the private copy is removed");
    }

    #[test]
    fn an_unpacker_past_its_time_is_killed() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let slow = dir.path().join("slow-upx");
        std::fs::write(&slow, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o700)).unwrap();
        let budget = Budget {
            timeout: Duration::from_millis(200),
            max_bytes: 1 << 20,
        };
        let r = unpack_upx(&slow, b"MZ", scratch.path(), budget, &|| false);
        assert_eq!(r, Err(UnpackError::TimedOut(0)));
        assert!(std::fs::read_dir(scratch.path()).unwrap().next().is_none());
    }
}
