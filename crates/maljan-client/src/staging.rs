//! Handing the sample over (DESIGN.md, "Handing over the sample"). The transport decides, not
//! the manifest: a stdio server gets the local path. An HTTP server that advertises put_sample
//! gets an upload before the job's first call; one with `mirror_dir` gets a copy on the shared
//! volume. Staging never fails a run: what goes wrong becomes a degradation reason and the server
//! is called with the local path.
//!
//! This is the hook issue 5 fills in: [`hand_over`] runs once per (job, server) before the first
//! call ([`crate::ServerHandle::handover`]), and [`rewrite_arguments`] puts the returned path into
//! the arguments that name the sample. The ledger keeps the caller's arguments, not the rewritten
//! ones.

use std::path::PathBuf;

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

/// Decides and performs the hand-over for one server.
pub async fn hand_over(server: &ServerHandle, sample: &Sample) -> Handover {
    let local = Handover::Local {
        path: sample.path.to_string_lossy().into_owned(),
    };
    if !server.slot().cfg.transport.is_http() {
        return local;
    }
    // Issue 5: mirror_dir copy, put_sample / chunked upload with the (server, sha256) cache.
    // Until then an HTTP server gets the local path, which works when it shares this host.
    local
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

/// Removes what a job left on shared volumes (issue 5: mirror copies). Called when a job ends.
pub fn cleanup_job(job: &Job) {
    let _: Option<PathBuf> = None;
    let _ = job;
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
}
