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

mod cache;
mod mirror;
mod upload;

pub use cache::{UPLOAD_TTL, UploadCache};
pub use upload::{CHUNK_BYTES, CHUNKED_ABOVE};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::job::{Job, Sample, ServerHandle};

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
pub async fn hand_over(server: &ServerHandle, sample: &Sample) -> Handover {
    let local = Handover::Local {
        path: sample.path.to_string_lossy().into_owned(),
    };
    let cfg = &server.slot().cfg;
    let job = server.job();
    let degrade = |why: String| {
        job.degrade(format!(
            "sample staging failed for '{}': {why}",
            server.name()
        ));
    };
    // An operator's mirror_dir is explicit: it wins over an upload, for any transport (a stdio
    // server in a container reads the shared volume too).
    if !cfg.mirror_dir.trim().is_empty() {
        // Relative to the config file's directory, like a stdio server's cwd.
        let dir = job
            .runtime()
            .config()
            .base_dir()
            .join(cfg.mirror_dir.trim());
        let (job_id, name, s) = (
            job.id().to_string(),
            server.name().to_string(),
            sample.clone(),
        );
        let copied =
            tokio::task::spawn_blocking(move || mirror::copy_to(&dir, &job_id, &name, &s)).await;
        match copied {
            Ok(Ok(path)) => {
                job.add_mirror(path.clone());
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
    let Ok(view) = server.view().await else {
        // Unreachable: already a degradation reason of its own ("mcp server … unavailable").
        return local;
    };
    if !view.advertises("put_sample") {
        return local;
    }
    let chunked = sample.size > CHUNKED_ABOVE
        && ["put_sample_begin", "put_sample_chunk", "put_sample_finish"]
            .iter()
            .all(|t| view.advertises(t));
    let cache = job.runtime().uploads();
    let uploaded = cache
        .get_or_upload(server.name(), &cfg.url, &sample.sha256, || async {
            let path = upload::upload(server, sample, chunked).await?;
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
    maljan_server::staging::sanitize_filename(name)
}

/// Replaces the sample's local path (or its bare file name) with `handover`'s path in arguments
/// whose name says they hold a path (contains "path" or "file", or is sample/target/binary/program).
pub fn rewrite_arguments(
    arguments: Option<Map<String, Value>>,
    sample: Option<&Sample>,
    handover: &Handover,
) -> Option<Map<String, Value>> {
    let (Some(mut args), Some(sample)) = (arguments, sample) else {
        return None;
    };
    let local = sample.path.to_string_lossy();
    if handover.path() == local {
        return Some(args);
    }
    for (key, value) in args.iter_mut() {
        let k = key.to_ascii_lowercase();
        let path_like = k.contains("path")
            || k.contains("file")
            || matches!(k.as_str(), "sample" | "target" | "binary" | "program");
        if !path_like {
            continue;
        }
        if let Value::String(s) = value
            && (s == &local || *s == sample.name)
        {
            *s = handover.path().to_string();
        }
    }
    Some(args)
}

/// Removes the job's mirror copies. Called when a job ends (finished, failed or dropped).
pub fn cleanup_job(job: &Job) {
    mirror::remove(job.take_mirrors());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_path_like_arguments_naming_the_sample_are_rewritten() {
        let sample = Sample {
            path: "/tmp/x/a.exe".into(),
            name: "a.exe".into(),
            size: 1,
            sha256: String::new(),
        };
        let args: Map<String, Value> = serde_json::from_str(
            r#"{"file_path":"/tmp/x/a.exe","sample":"a.exe","query":"a.exe","path":"/other"}"#,
        )
        .unwrap();
        let h = Handover::Uploaded {
            path: "/srv/staging/a.exe".into(),
            cached: false,
        };
        let out = rewrite_arguments(Some(args), Some(&sample), &h).unwrap();
        assert_eq!(out["file_path"], "/srv/staging/a.exe");
        assert_eq!(out["sample"], "/srv/staging/a.exe");
        assert_eq!(out["query"], "a.exe");
        assert_eq!(out["path"], "/other");
    }

    #[test]
    fn names_and_returned_paths_are_checked() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("a\x07b\nc.exe"), "a_b_c.exe");
        assert_eq!(safe_name(".."), "sample");
        assert_eq!(safe_name("..\\..\\x.dll"), "x.dll");
        assert!(check_returned_path("/srv/staging/ab/x.exe").is_ok());
        assert!(check_returned_path("C:\\staging\\x.exe").is_ok());
        assert!(check_returned_path("../../etc/passwd").is_err());
        assert!(check_returned_path("/srv/../etc/passwd").is_err());
        assert!(check_returned_path("/srv/x\n.exe").is_err());
        assert!(check_returned_path("").is_err());
    }
}
