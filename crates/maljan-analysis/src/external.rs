//! External analysers users install separately — capa (capabilities, ATT&CK) and FLOSS (obfuscated
//! strings). Probed on PATH at start-up; unavailable with a remedy when absent. Each run is its own
//! process group under a memory limit and the tool's timeout (a request up to the manifest's
//! ceiling); the whole group is killed on timeout or cancellation. A pinned executable
//! (`MALJAN_CAPA_SHA256`, `MALJAN_FLOSS_SHA256`) is verified before each run.

use std::{process::Stdio, sync::Arc, time::Duration};

use maljan_server::{Probe, Registry, ToolError, ToolMeta, manifest::find_on_path};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    AnalysisConfig,
    common::{Page, ReadAs, open_sample},
};

pub const CAPA_TIMEOUT_S: u64 = 300;
pub const FLOSS_TIMEOUT_S: u64 = 600;
/// Address-space limit for an external analyser (MiB), unless MALJAN_EXTERNAL_MEMORY_MB says otherwise.
const MEMORY_MB: u64 = 4096;

/// Kills the process group when dropped (timeout, cancellation, or the end of a normal run).
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // SAFETY: killpg on a group we created; ESRCH when it is already gone is fine.
        unsafe {
            libc::killpg(self.0, libc::SIGKILL);
        }
    }
}

fn verify_pin(name: &str, exe: &std::path::Path) -> Result<(), ToolError> {
    let var = format!("MALJAN_{}_SHA256", name.to_ascii_uppercase());
    let Ok(pin) = std::env::var(&var) else {
        return Ok(());
    };
    let bytes = std::fs::read(exe).map_err(|e| ToolError::io(name, e))?;
    let got = crate::hashes::sha256_hex(&bytes);
    if !got.eq_ignore_ascii_case(pin.trim()) {
        return Err(ToolError::tool_failed(format!(
            "{name} on PATH does not match the pinned SHA-256 ({var})"
        ))
        .with_remediation(format!("reinstall the pinned {name}, or update {var}")));
    }
    Ok(())
}

/// Runs `exe args…` in its own process group; returns stdout.
/// Where an external program finds the sample: the descriptor this server opened and checked
/// under its roots, as the child's fd 3, never the path opened again by name (a link swapped in
/// since would lead it outside the roots).
const SAMPLE_FD_PATH: &str = "/dev/fd/3";

/// Runs `name` with `args` (which name the sample as [`SAMPLE_FD_PATH`]), `sample` as its fd 3.
async fn run(
    name: &str,
    args: Vec<String>,
    sample: &std::fs::File,
    timeout: Duration,
) -> Result<Vec<u8>, ToolError> {
    use std::os::fd::AsRawFd;
    let sample_fd = sample.as_raw_fd();
    let exe = find_on_path(name).ok_or_else(|| {
        ToolError::missing_dependency(format!("{name} is not on PATH"))
            .with_remediation(remedy(name))
    })?;
    verify_pin(name, &exe)?;
    let memory = std::env::var("MALJAN_EXTERNAL_MEMORY_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MEMORY_MB);
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: only async-signal-safe calls (setrlimit, dup2, fcntl) between fork and exec;
    // `sample` outlives the spawn, so its descriptor is open in the child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: memory << 20,
                rlim_max: memory << 20,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            // dup2 gives fd 3 without close-on-exec; when the sample is fd 3 already, clear it.
            let kept = if sample_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(sample_fd, 3)
            };
            if kept < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| ToolError::tool_failed(format!("{name} could not be started: {e}")))?;
    let _guard = child.id().map(|pid| GroupGuard(pid as i32));
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(r) => r.map_err(|e| ToolError::tool_failed(format!("{name}: {e}")))?,
        Err(_) => {
            return Err(ToolError::timeout(format!(
                "{name} did not finish within {} s",
                timeout.as_secs()
            ))
            .with_remediation(format!(
                "raise timeout_s (up to the manifest's value), or run {name} by hand on this sample"
            )));
        }
    };
    if !out.status.success() && out.stdout.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(ToolError::tool_failed(format!(
            "{name} failed ({}): {}",
            out.status,
            tail.join(" | ")
        ))
        .with_remediation(format!(
            "check that {name} supports this file type; its message is above"
        )));
    }
    Ok(out.stdout)
}

fn remedy(name: &str) -> String {
    match name {
        "capa" => "install capa (https://github.com/mandiant/capa/releases, or `pip install flare-capa` with its rules) \
                   so that `capa` is on the server's PATH, then restart the server"
            .into(),
        _ => "install FLOSS (https://github.com/mandiant/flare-floss/releases, or `pip install flare-floss`) so that \
              `floss` is on the server's PATH, then restart the server"
            .into(),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapaArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Seconds capa may run; at most 300 (the manifest's value), less is honoured.
    #[serde(default = "capa_timeout")]
    #[schemars(default = "capa_timeout", range(min = 1, max = 300))]
    pub timeout_s: u64,
    /// capa's analysis backend ("auto": capa chooses; vivisect, pefile, dotnet, …).
    #[serde(default = "auto")]
    #[schemars(default = "auto")]
    pub backend: String,
}

fn capa_timeout() -> u64 {
    CAPA_TIMEOUT_S
}
fn auto() -> String {
    "auto".into()
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Capability {
    pub name: String,
    pub namespace: Option<String>,
    /// MITRE ATT&CK technique ids (T1055, …).
    pub attack: Vec<String>,
    /// Malware Behavior Catalog ids.
    pub mbc: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CapaOutput {
    pub read_path: String,
    pub capabilities: Vec<Capability>,
    /// ATT&CK tactics/techniques across all capabilities.
    pub attack: Vec<String>,
}

pub fn parse_capa(doc: &Value) -> (Vec<Capability>, Vec<String>) {
    let mut caps = Vec::new();
    let mut attack = std::collections::BTreeSet::new();
    if let Some(rules) = doc.get("rules").and_then(Value::as_object) {
        for (name, rule) in rules {
            let meta = rule.get("meta");
            if meta.and_then(|m| m.get("lib")).and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let ids = |key: &str| -> Vec<String> {
                meta.and_then(|m| m.get(key))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.get("id").and_then(Value::as_str).map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let att = ids("attack");
            attack.extend(att.iter().cloned());
            caps.push(Capability {
                name: name.clone(),
                namespace: meta
                    .and_then(|m| m.get("namespace"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                attack: att,
                mbc: ids("mbc"),
            });
        }
    }
    (caps, attack.into_iter().collect())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlossArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Shortest string returned.
    #[serde(default = "floss_min_len")]
    #[schemars(default = "floss_min_len")]
    pub min_len: usize,
    /// Only these kinds: static, stack, tight, decoded. Null: all.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Most strings returned in one answer.
    #[serde(default = "floss_limit")]
    #[schemars(default = "floss_limit")]
    pub limit: usize,
    /// Index of the first string returned (paging).
    #[serde(default)]
    pub offset: usize,
    /// Only strings containing this text (quotes around the whole pattern are not part of it).
    #[serde(default)]
    pub pattern: Option<String>,
    /// Seconds FLOSS may run; at most 600 (the manifest's value), less is honoured.
    #[serde(default = "floss_timeout")]
    #[schemars(default = "floss_timeout", range(min = 1, max = 600))]
    pub timeout_s: u64,
}

fn floss_min_len() -> usize {
    4
}
fn floss_limit() -> usize {
    150
}
fn floss_timeout() -> u64 {
    FLOSS_TIMEOUT_S
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct FlossString {
    /// static, stack, tight or decoded.
    pub kind: String,
    pub string: String,
    pub offset: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FlossOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_as: Option<std::collections::BTreeMap<String, Value>>,
    pub read_path: String,
    #[serde(flatten)]
    pub page: Page,
    pub strings: Vec<FlossString>,
}

pub fn parse_floss(doc: &Value) -> Vec<FlossString> {
    let mut out = Vec::new();
    let Some(strings) = doc.get("strings") else {
        return out;
    };
    for (key, kind) in [
        ("static_strings", "static"),
        ("stack_strings", "stack"),
        ("tight_strings", "tight"),
        ("decoded_strings", "decoded"),
    ] {
        for s in strings
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(text) = s.get("string").and_then(Value::as_str) {
                let offset = s
                    .get("offset")
                    .or_else(|| s.get("decoded_at"))
                    .or_else(|| s.get("address"))
                    .and_then(Value::as_u64);
                out.push(FlossString {
                    kind: kind.into(),
                    string: text.into(),
                    offset,
                });
            }
        }
    }
    out
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let c = config.clone();
    registry.add(
        ToolMeta::new(
            "capa",
            "Runs Mandiant capa on the sample (an external tool): the capabilities it recognises, with their \
             MITRE ATT&CK and MBC ids.",
        )
        .title("capa capabilities")
        .timeout_s(CAPA_TIMEOUT_S)
        .probe(Probe::binary("capa", remedy("capa"))),
        move |_ctx, a: CapaArgs| {
            let c = c.clone();
            async move {
                let roots = c.roots.clone();
                let (p, cp) = (a.path.clone(), a.carved_path.clone());
                let sample = maljan_server::blocking(move || open_sample(&roots, &p, &cp)).await?;
                let mut args = vec!["-j".to_string()];
                if a.backend != "auto" {
                    if !a.backend.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                        return Err(ToolError::bad_argument(format!("backend '{}' is not a capa backend name", a.backend)));
                    }
                    args.extend(["--backend".to_string(), a.backend.clone()]);
                }
                args.push(SAMPLE_FD_PATH.to_string());
                let out = run("capa", args, sample.file(), Duration::from_secs(a.timeout_s.clamp(1, CAPA_TIMEOUT_S - 2))).await?;
                let doc: Value = serde_json::from_slice(&out)
                    .map_err(|e| ToolError::tool_failed(format!("capa's JSON could not be read: {e}")))?;
                let (capabilities, attack) = parse_capa(&doc);
                Ok(CapaOutput { read_path: sample.read_path(), capabilities, attack })
            }
        },
    );
    let c = config.clone();
    registry.add(
        ToolMeta::new(
            "floss",
            "Runs Mandiant FLOSS on the sample (an external tool): static, stack, tight and decoded strings, \
             filtered by `pattern` and paged.",
        )
        .title("FLOSS strings")
        .timeout_s(FLOSS_TIMEOUT_S)
        .probe(Probe::binary("floss", remedy("floss"))),
        move |_ctx, a: FlossArgs| {
            let c = c.clone();
            async move {
                let mut read_as = ReadAs::default();
                let pattern = a.pattern.as_deref().map(|p| read_as.read("pattern", p)).filter(|p| !p.is_empty());
                let mut only = Vec::new();
                for k in a.kinds.iter().flatten() {
                    match k.as_str() {
                        "static" | "stack" | "tight" | "decoded" => only.push(k.clone()),
                        other => {
                            return Err(ToolError::bad_argument(format!(
                                "unknown FLOSS kind '{other}': static, stack, tight, decoded"
                            )));
                        }
                    }
                }
                let roots = c.roots.clone();
                let (p, cp) = (a.path.clone(), a.carved_path.clone());
                let sample = maljan_server::blocking(move || open_sample(&roots, &p, &cp)).await?;
                let mut args = vec!["-j".to_string(), "-q".to_string(), "-n".to_string(), a.min_len.max(1).to_string()];
                if !only.is_empty() {
                    args.push("--only".into());
                    args.extend(only.iter().cloned());
                }
                args.push(SAMPLE_FD_PATH.to_string());
                let out = run("floss", args, sample.file(), Duration::from_secs(a.timeout_s.clamp(1, FLOSS_TIMEOUT_S - 2))).await?;
                let doc: Value = serde_json::from_slice(&out)
                    .map_err(|e| ToolError::tool_failed(format!("FLOSS's JSON could not be read: {e}")))?;
                let all: Vec<FlossString> = parse_floss(&doc)
                    .into_iter()
                    .filter(|s| pattern.as_ref().is_none_or(|p| s.string.contains(p.as_str())))
                    .collect();
                let (strings, page) = crate::common::page(all, a.offset, a.limit.max(1));
                Ok(FlossOutput { read_as: read_as.into_option(), read_path: sample.read_path(), page, strings })
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_capa_and_floss_json() {
        let capa = serde_json::json!({"rules": {
            "inject thread": {"meta": {"namespace": "host-interaction/process/inject", "attack": [{"id": "T1055"}], "mbc": []}},
            "lib rule": {"meta": {"lib": true}}
        }});
        let (caps, attack) = parse_capa(&capa);
        assert_eq!(caps.len(), 1);
        assert_eq!(attack, vec!["T1055"]);
        let floss = serde_json::json!({"strings": {"static_strings": [{"string": "abc", "offset": 4}], "stack_strings": [{"string": "xyz"}]}});
        let s = parse_floss(&floss);
        assert_eq!(s[0].offset, Some(4));
        assert_eq!(s[1].kind, "stack");
    }
}
