//! What FA_sftp_* and FA_ftp_* must both do (the same actions and arguments), written once and
//! run against each real server. `remote` is a directory as the server names it; `on_disk` is
//! the same directory on this machine (the server is local), to check what it holds.
#![allow(dead_code)]

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use maljan_server::ProgressSink;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Harness,
    peers::{big_file, sha256_of},
};

/// Everything under a directory on disk, relative, sorted (to see what a server was left with).
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    out.sort();
    out
}

/// 100 MiB up and down with its SHA-256 checked, list_dir, upload_dir, delete_path, and a
/// missing file that leaves no partial download.
pub async fn round_trip(h: &Harness, fa: &str, remote: &str, on_disk: &Path) {
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call(
            &format!("{fa}_upload_file"),
            json!({"file_path": h.p("big.bin"), "remote_path": format!("{remote}/samples/big.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    assert_eq!(
        sha256_of(&on_disk.join("samples/big.bin")),
        sha,
        "the server got other bytes"
    );
    let back = h
        .call(
            &format!("{fa}_download_file"),
            json!({"remote_path": format!("{remote}/samples/big.bin"), "target_path": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(back["bytes"], size as u64, "{back}");
    assert_eq!(
        sha256_of(&h.path("back.bin")),
        sha,
        "the downloaded file differs"
    );
    assert!(!h.path("back.bin.part").exists());

    h.write("tree/a.txt", "a");
    h.write("tree/sub/b.txt", "bb");
    let mut sent: Vec<String> = serde_json::from_value(
        h.call(
            &format!("{fa}_upload_dir"),
            json!({"dir_path": h.p("tree"), "remote_prefix": format!("{remote}/up")}),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    sent.sort();
    let want: Vec<String> = ["up/a.txt", "up/sub/b.txt"]
        .iter()
        .map(|p| format!("{}/{p}", remote.trim_start_matches('/')))
        .map(|p| {
            if remote.starts_with('/') {
                format!("/{p}")
            } else {
                p
            }
        })
        .collect();
    assert_eq!(sent, want);
    assert_eq!(
        std::fs::read_to_string(on_disk.join("up/sub/b.txt")).unwrap(),
        "bb"
    );

    let list = |path: String| async move {
        h.call(&format!("{fa}_list_dir"), json!({"remote_path": path}))
            .await
            .unwrap()
    };
    assert_eq!(list(remote.to_string()).await, json!(["samples", "up"]));
    assert_eq!(list(format!("{remote}/up")).await, json!(["a.txt", "sub"]));

    let deleted = h
        .call(
            &format!("{fa}_delete_path"),
            json!({"remote_path": format!("{remote}/samples/big.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(deleted, json!(true));
    assert!(!on_disk.join("samples/big.bin").exists());
    assert_eq!(list(format!("{remote}/samples")).await, json!([]));
    let again = h
        .call(
            &format!("{fa}_delete_path"),
            json!({"remote_path": format!("{remote}/samples/big.bin")}),
        )
        .await;
    assert_eq!(again, Err("no_such_file".into()));
    let missing = h
        .call(
            &format!("{fa}_download_file"),
            json!({"remote_path": format!("{remote}/samples/big.bin"), "target_path": h.p("gone.bin")}),
        )
        .await;
    assert_eq!(missing, Err("no_such_file".into()));
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());
    for bad in [
        format!("{remote}/../escape"),
        format!("{remote}//x"),
        "/".to_string(),
    ] {
        let r = h
            .call(
                &format!("{fa}_upload_file"),
                json!({"file_path": h.p("tree/a.txt"), "remote_path": bad}),
            )
            .await;
        assert_eq!(r, Err("bad_argument".into()), "{bad}");
    }
}

/// Local paths outside the roots are refused on both sides before any byte moves.
pub async fn confinement(h: &Harness, fa: &str, remote: &str, on_disk: &Path) {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "not yours").unwrap();
    for local in [
        secret.to_string_lossy().into_owned(),
        h.p("../../etc/passwd"),
    ] {
        let r = h
            .call(
                &format!("{fa}_upload_file"),
                json!({"file_path": local, "remote_path": format!("{remote}/leak")}),
            )
            .await;
        assert_eq!(r, Err("path_outside_roots".into()));
    }
    assert!(!on_disk.join("leak").exists());
    h.write("small.txt", "small");
    h.call(
        &format!("{fa}_upload_file"),
        json!({"file_path": h.p("small.txt"), "remote_path": format!("{remote}/small.txt")}),
    )
    .await
    .unwrap();
    let target = outside.path().join("dropped.txt");
    let r = h
        .call(
            &format!("{fa}_download_file"),
            json!({"remote_path": format!("{remote}/small.txt"), "target_path": target}),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(!target.exists());
    std::os::unix::fs::symlink(outside.path(), h.path("link")).unwrap();
    let r = h
        .call(
            &format!("{fa}_download_file"),
            json!({"remote_path": format!("{remote}/small.txt"), "target_path": h.p("link/x.txt")}),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(!outside.path().join("x.txt").exists());
}

/// The profile `closed` names the same server without allow_private_endpoint: refused, with
/// the remedy named, and nothing reaches the server.
pub async fn refused_private_endpoint(h: &Harness, fa: &str, remote: &str, on_disk: &Path) {
    h.write("f.txt", "x");
    let (code, message) = h
        .error(
            &format!("{fa}_upload_file"),
            json!({"file_path": h.p("f.txt"), "remote_path": format!("{remote}/f.txt"), "profile": "closed"}),
        )
        .await;
    assert_eq!(code, "bad_argument", "{message}");
    assert!(message.contains("allow_private_endpoint"), "{message}");
    let (code, _) = h
        .error(
            &format!("{fa}_list_dir"),
            json!({"remote_path": remote, "profile": "closed"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(!on_disk.join("f.txt").exists());
}

/// Records progress and cancels the call once `cancel_at` bytes are reported.
struct Sink {
    seen: Mutex<Vec<f64>>,
    cancel_at: f64,
    token: CancellationToken,
}

impl ProgressSink for Sink {
    fn report(&self, progress: f64, _total: Option<f64>, _message: Option<String>) {
        self.seen.lock().unwrap().push(progress);
        if progress >= self.cancel_at {
            self.token.cancel();
        }
    }
}

/// Runs a call that is cancelled once `cancel_at` bytes moved; whether it failed, and the
/// progress it reported.
pub async fn cancelled_at(
    h: &Harness,
    tool: &str,
    args: Value,
    cancel_at: f64,
) -> (bool, Vec<f64>) {
    let token = CancellationToken::new();
    let sink = Arc::new(Sink {
        seen: Mutex::new(Vec::new()),
        cancel_at,
        token: token.clone(),
    });
    let Value::Object(map) = args else {
        unreachable!()
    };
    let out = h
        .server
        .call(
            tool,
            map,
            token,
            Some(sink.clone() as Arc<dyn ProgressSink>),
        )
        .await
        .unwrap();
    let seen = sink.seen.lock().unwrap().clone();
    (out.is_error, seen)
}

/// A download and an upload stopped halfway (cancelled at 16 of 48 MiB): each fails, the
/// download leaves no local file or `.part`, the upload no remote file or `.part`; progress
/// went up to the cancellation and not beyond the size.
pub async fn interrupted(h: &Harness, fa: &str, remote: &str, on_disk: &Path) {
    let size = 48u64 << 20;
    big_file(&h.path("mid.bin"), size as usize);
    h.call(
        &format!("{fa}_upload_file"),
        json!({"file_path": h.p("mid.bin"), "remote_path": format!("{remote}/mid.bin")}),
    )
    .await
    .unwrap();
    let (failed, seen) = cancelled_at(
        h,
        &format!("{fa}_download_file"),
        json!({"remote_path": format!("{remote}/mid.bin"), "target_path": h.p("cut.bin")}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed, "the interrupted download succeeded");
    assert!(seen.iter().any(|p| *p >= (16 << 20) as f64), "{seen:?}");
    assert!(seen.iter().all(|p| *p < size as f64), "it ran to the end");
    assert!(!h.path("cut.bin").exists() && !h.path("cut.bin.part").exists());

    let (failed, seen) = cancelled_at(
        h,
        &format!("{fa}_upload_file"),
        json!({"file_path": h.p("mid.bin"), "remote_path": format!("{remote}/cut-up/mid.bin")}),
        (16 << 20) as f64,
    )
    .await;
    assert!(failed, "the interrupted upload succeeded");
    assert!(seen.iter().all(|p| *p < size as f64), "it ran to the end");
    // The partial remote file is removed by a task of its own: give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !files_under(&on_disk.join("cut-up")).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        files_under(&on_disk.join("cut-up")),
        Vec::<String>::new(),
        "a partial remote file was left"
    );
}
