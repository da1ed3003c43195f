//! Handing the sample over (DESIGN.md, "Handing over the sample"). The transport decides, not
//! the manifest: a stdio server gets the local path. A server with `mirror_dir` (a shared volume)
//! reads a copy there, removed when the job ends. An HTTP server that advertises put_sample in
//! its tools/list gets an upload before the job's first call to it (chunked over 8 MiB when it
//! has all three chunk tools), cached per (server, URL, sha256) for 30 minutes by the runtime.
//! Staging never fails a run: what goes wrong becomes a degradation reason on the job
//! ("sample staging failed for '<server>': <why>") and the server is called with the local path.
//!
//! [`hand_over`] runs once per (job, server) before the first call
//! ([`crate::ServerHandle::handover`]), and [`rewrite_arguments`] puts the returned path into
//! the arguments that name the sample. The ledger keeps the caller's arguments, not the
//! rewritten ones.
//!
//! Staging sits below the job: what it needs from the job's server is the [`StagingTarget`]
//! trait, which `job::ServerHandle` implements.

mod cache;
mod mirror;
mod upload;

pub use cache::{UPLOAD_TTL, UploadCache};
pub use upload::{CHUNK_BYTES, CHUNKED_ABOVE};

use std::{future::Future, path::PathBuf};

use maljan_protocol::{PUT_SAMPLE, PUT_SAMPLE_BEGIN, PUT_SAMPLE_CHUNK, PUT_SAMPLE_FINISH};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{config::ServerConfig, outcome::CallRecord, sample::Sample};

/// What staging needs from the server it hands a job's sample to.
pub(crate) trait StagingTarget: Sync {
    /// The server's name in the configuration.
    fn server(&self) -> &str;
    fn config(&self) -> &ServerConfig;
    /// Where a relative `mirror_dir` is resolved (the config file's directory).
    fn base_dir(&self) -> PathBuf;
    fn job_id(&self) -> &str;
    /// The runtime's upload cache, shared by all its jobs.
    fn uploads(&self) -> &UploadCache;
    /// The most calls the runtime has in flight to this server at once (0: no cap).
    fn call_cap(&self) -> usize;
    /// Adds a degradation reason to the job.
    fn degrade(&self, reason: String);
    /// Remembers a mirror copy, removed when the job ends.
    fn keep_mirror(&self, path: PathBuf);
    /// Counts bytes handed over through put_sample (the runtime's `/metrics`).
    fn uploaded(&self, _bytes: u64) {}
    fn report_progress(&self, progress: &UploadProgress);
    /// The put_sample tools the server advertises; None when it could not be reached (already a
    /// degradation reason of its own).
    fn staging_tools(&self) -> impl Future<Output = Option<Vec<String>>> + Send;
    /// One staging call through the runtime's call path (breaker, cap, timeout), recorded in the
    /// ledger with `summary` in place of the arguments (the ledger never holds the content).
    fn call_staging(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        summary: Value,
    ) -> impl Future<Output = CallRecord> + Send;
}

/// How the sample reached a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Handover {
    /// The server reads the local path (stdio, or staging failed / was not possible).
    Local { path: String },
    /// Uploaded through put_sample; the server's own path.
    Uploaded { path: String, cached: bool },
    /// Copied to the server's `mirror_dir`.
    Mirrored { path: String },
}

impl Handover {
    pub fn path(&self) -> &str {
        match self {
            Self::Local { path } | Self::Uploaded { path, .. } | Self::Mirrored { path } => path,
        }
    }
}

/// An upload in progress: `sent` of `total` bytes of the sample acknowledged by `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadProgress {
    pub server: String,
    pub sent: u64,
    pub total: u64,
}

/// Decides and performs the hand-over for one server. Never fails: a failure is a degradation
/// reason on the job and the local path.
pub(crate) async fn hand_over(server: &impl StagingTarget, sample: &Sample) -> Handover {
    let local = Handover::Local {
        path: sample.path.to_string_lossy().into_owned(),
    };
    let cfg = server.config();
    let degrade = |why: String| {
        server.degrade(format!(
            "sample staging failed for '{}': {why}",
            server.server()
        ));
    };
    // An operator's mirror_dir is explicit: it wins over an upload, for any transport (a stdio
    // server in a container reads the shared volume too).
    if !cfg.mirror_dir.trim().is_empty() {
        // Relative to the config file's directory, like a stdio server's cwd.
        let dir = server.base_dir().join(cfg.mirror_dir.trim());
        let (job_id, name, s) = (
            server.job_id().to_string(),
            server.server().to_string(),
            sample.clone(),
        );
        let copied =
            tokio::task::spawn_blocking(move || mirror::copy_to(&dir, &job_id, &name, &s)).await;
        match copied {
            Ok(Ok(path)) => {
                server.keep_mirror(path.clone());
                return Handover::Mirrored {
                    path: path.to_string_lossy().into_owned(),
                };
            }
            Ok(Err(e)) => degrade(format!("copying to mirror_dir: {e}")),
            Err(e) => degrade(format!("copying to mirror_dir: {e}")),
        }
    }
    if !cfg.transport.is_http() {
        return local;
    }
    let Some(advertised) = server.staging_tools().await else {
        // Unreachable: already a degradation reason of its own ("mcp server … unavailable").
        return local;
    };
    let advertises = |tool: &str| advertised.iter().any(|t| t == tool);
    if !advertises(PUT_SAMPLE) {
        return local;
    }
    let chunked = sample.size > CHUNKED_ABOVE
        && [PUT_SAMPLE_BEGIN, PUT_SAMPLE_CHUNK, PUT_SAMPLE_FINISH]
            .into_iter()
            .all(advertises);
    let uploaded = server
        .uploads()
        .get_or_upload(server.server(), &cfg.url, &sample.sha256, || async {
            let path = upload::upload(server, sample, chunked).await?;
            server.uploaded(sample.size);
            check_returned_path(&path)?;
            Ok::<_, String>(path)
        })
        .await;
    match uploaded {
        Ok((path, cached)) => Handover::Uploaded { path, cached },
        Err(why) => {
            degrade(why);
            local
        }
    }
}

/// A path the server's tools can be called with: absolute (POSIX or a Windows drive), no `..`,
/// no control characters. Anything else is refused rather than passed on to the tools.
fn check_returned_path(path: &str) -> Result<(), String> {
    let absolute = path.starts_with('/')
        || (path.len() > 2
            && path.as_bytes()[1] == b':'
            && path.as_bytes()[0].is_ascii_alphabetic());
    let traversal = path.split(['/', '\\']).any(|c| c == "..");
    if !absolute || traversal || path.chars().any(char::is_control) {
        return Err(format!(
            "the server returned an unusable path ({} characters, absolute: {absolute}, '..': {traversal})",
            path.chars().count()
        ));
    }
    Ok(())
}

/// A name safe to send and to put in a file name: the same reduction the server applies
/// (base name, control characters and separators replaced, no leading dots, at most 200
/// characters, never empty), done here too so hostile bytes stay off the wire and out of the
/// mirror directory.
pub fn safe_name(name: &str) -> String {
    maljan_protocol::sanitize_filename(name)
}

/// Replaces the sample's local path (or its bare file name) with `handover`'s path in the tool's
/// sample argument `param` (see `maljan_protocol::sample_param`), and nowhere else.
pub fn rewrite_arguments(
    arguments: Option<Map<String, Value>>,
    sample: Option<&Sample>,
    handover: &Handover,
    param: Option<&str>,
) -> Option<Map<String, Value>> {
    let (Some(mut args), Some(sample)) = (arguments, sample) else {
        return None;
    };
    let local = sample.path.to_string_lossy();
    if handover.path() == local {
        return Some(args);
    }
    if let Some(Value::String(s)) = param.and_then(|p| args.get_mut(p))
        && (s == &local || *s == sample.name)
    {
        *s = handover.path().to_string();
    }
    Some(args)
}

/// Removes a job's mirror copies. Called when a job ends (finished, failed or dropped).
pub fn remove_mirrors(copies: Vec<PathBuf>) {
    mirror::remove(copies);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_declared_sample_argument_naming_the_sample_is_rewritten() {
        let sample = Sample {
            path: "/tmp/x/a.exe".into(),
            name: "a.exe".into(),
            size: 1,
            sha256: String::new(),
        };
        let args: Map<String, Value> = serde_json::from_str(
            r#"{"file_path":"/tmp/x/a.exe","target_file":"a.exe","query":"a.exe","path":"/other"}"#,
        )
        .unwrap();
        let h = Handover::Uploaded {
            path: "/srv/staging/a.exe".into(),
            cached: false,
        };
        let out =
            rewrite_arguments(Some(args.clone()), Some(&sample), &h, Some("file_path")).unwrap();
        assert_eq!(out["file_path"], "/srv/staging/a.exe");
        assert_eq!(out["target_file"], "a.exe", "not declared: not guessed");
        assert_eq!(out["query"], "a.exe");
        assert_eq!(out["path"], "/other");
        let out =
            rewrite_arguments(Some(args.clone()), Some(&sample), &h, Some("target_file")).unwrap();
        assert_eq!(out["target_file"], "/srv/staging/a.exe");
        assert_eq!(out["file_path"], "/tmp/x/a.exe");
        let out = rewrite_arguments(Some(args.clone()), Some(&sample), &h, None).unwrap();
        assert_eq!(out, args, "a tool without a sample argument is left alone");
    }

    #[test]
    fn names_and_returned_paths_are_checked() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("a\x07b\nc.exe"), "a_b_c.exe");
        assert_eq!(safe_name(".."), "sample");
        assert_eq!(safe_name("..\\..\\x.dll"), "x.dll");
        assert!(check_returned_path("/srv/staging/ab/x.exe").is_ok());
        assert!(check_returned_path("C:\\staging\\x.exe").is_ok());
        let refused = |path: &str| check_returned_path(path).unwrap_err();
        assert!(refused("../../etc/passwd").contains("absolute: false, '..': true"));
        assert!(refused("/srv/../etc/passwd").contains("absolute: true, '..': true"));
        assert!(refused("/srv/x\n.exe").contains("(11 characters, absolute: true, '..': false)"));
        assert!(refused("").contains("(0 characters, absolute: false"));
    }
}
