//! What every object-store backend must do, written once and run against each real server: the
//! backends differ only in their actions' names and argument names.
#![allow(dead_code)]

use serde_json::{Value, json};

use super::{
    Harness,
    peers::{Cutter, Direction, big_file, sha256_of},
};

/// One backend's action and argument names.
pub struct Names {
    pub upload: &'static str,
    pub download: &'static str,
    pub delete: &'static str,
    pub list: &'static str,
    pub upload_dir: &'static str,
    pub bucket: &'static str,
    pub key: &'static str,
    pub prefix: &'static str,
    pub dir_prefix: &'static str,
}

pub const S3: Names = Names {
    upload: "FA_s3_upload_file",
    download: "FA_s3_download_file",
    delete: "FA_s3_delete_object",
    list: "FA_s3_list_bucket",
    upload_dir: "FA_s3_upload_dir",
    bucket: "bucket",
    key: "key",
    prefix: "prefix",
    dir_prefix: "key_prefix",
};

/// GCS's actions take S3's argument names (cloud_actions.rs).
pub const GCS: Names = Names {
    upload: "FA_gcs_upload_file",
    download: "FA_gcs_download_file",
    delete: "FA_gcs_delete_object",
    list: "FA_gcs_list_bucket",
    upload_dir: "FA_gcs_upload_dir",
    bucket: "bucket",
    key: "key",
    prefix: "prefix",
    dir_prefix: "key_prefix",
};

pub const AZURE: Names = Names {
    upload: "FA_azure_blob_upload_file",
    download: "FA_azure_blob_download_file",
    delete: "FA_azure_blob_delete_blob",
    list: "FA_azure_blob_list_container",
    upload_dir: "FA_azure_blob_upload_dir",
    bucket: "container",
    key: "blob_name",
    prefix: "name_prefix",
    dir_prefix: "name_prefix",
};

fn args(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

impl Names {
    pub fn upload_args(&self, file: &str, bucket: &str, key: &str, profile: &str) -> Value {
        args(&[
            ("file_path", json!(file)),
            (self.bucket, json!(bucket)),
            (self.key, json!(key)),
            ("profile", json!(profile)),
        ])
    }
    pub fn download_args(&self, bucket: &str, key: &str, target: &str, profile: &str) -> Value {
        args(&[
            (self.bucket, json!(bucket)),
            (self.key, json!(key)),
            ("target_path", json!(target)),
            ("profile", json!(profile)),
        ])
    }
    pub fn list_args(&self, bucket: &str, prefix: &str, profile: &str) -> Value {
        args(&[
            (self.bucket, json!(bucket)),
            (self.prefix, json!(prefix)),
            ("profile", json!(profile)),
        ])
    }
    pub fn delete_args(&self, bucket: &str, key: &str, profile: &str) -> Value {
        args(&[
            (self.bucket, json!(bucket)),
            (self.key, json!(key)),
            ("profile", json!(profile)),
        ])
    }
}

pub async fn list(h: &Harness, n: &Names, bucket: &str, prefix: &str) -> Vec<String> {
    let v = h
        .call(n.list, n.list_args(bucket, prefix, "default"))
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

/// 100 MiB up and down with its SHA-256 checked, listing by prefix, upload_dir, delete.
pub async fn round_trip(h: &Harness, n: &Names, bucket: &str) {
    let size = 100 << 20;
    let src = h.path("big.bin");
    let sha = big_file(&src, size);
    let up = h
        .call(
            n.upload,
            n.upload_args(&h.p("big.bin"), bucket, "samples/big.bin", "default"),
        )
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    let back = h
        .call(
            n.download,
            n.download_args(bucket, "samples/big.bin", &h.p("back.bin"), "default"),
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
    let mut keys: Vec<String> = serde_json::from_value(
        h.call(
            n.upload_dir,
            args(&[
                ("dir_path", json!(h.p("tree"))),
                (n.bucket, json!(bucket)),
                (n.dir_prefix, json!("up")),
            ]),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    keys.sort();
    assert_eq!(keys, ["up/a.txt", "up/sub/b.txt"]);

    let mut all = list(h, n, bucket, "").await;
    all.sort();
    assert_eq!(all, ["samples/big.bin", "up/a.txt", "up/sub/b.txt"]);
    assert_eq!(list(h, n, bucket, "up/s").await, ["up/sub/b.txt"]);
    assert_eq!(list(h, n, bucket, "sam").await, ["samples/big.bin"]);

    assert_eq!(
        h.call(
            n.delete,
            n.delete_args(bucket, "samples/big.bin", "default")
        )
        .await
        .unwrap(),
        json!(true)
    );
    assert_eq!(list(h, n, bucket, "samples").await, Vec::<String>::new());
    let missing = h
        .call(
            n.download,
            n.download_args(bucket, "samples/big.bin", &h.p("gone.bin"), "default"),
        )
        .await;
    assert_eq!(missing, Err("no_such_file".into()));
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());
}

/// Local paths outside the roots are refused on both sides, before any byte moves.
pub async fn confinement(h: &Harness, n: &Names, bucket: &str) {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "not yours").unwrap();
    let r = h
        .call(
            n.upload,
            n.upload_args(secret.to_str().unwrap(), bucket, "leak", "default"),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    let r = h
        .call(
            n.upload,
            n.upload_args(&h.p("../../etc/passwd"), bucket, "leak", "default"),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(list(h, n, bucket, "leak").await.is_empty());

    h.write("small.txt", "small");
    h.call(
        n.upload,
        n.upload_args(&h.p("small.txt"), bucket, "small.txt", "default"),
    )
    .await
    .unwrap();
    let target = outside.path().join("dropped.txt");
    let r = h
        .call(
            n.download,
            n.download_args(bucket, "small.txt", target.to_str().unwrap(), "default"),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(!target.exists());
    // A symlink inside the root that points out is not written through.
    std::os::unix::fs::symlink(outside.path(), h.path("link")).unwrap();
    let r = h
        .call(
            n.download,
            n.download_args(bucket, "small.txt", &h.p("link/x.txt"), "default"),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    assert!(!outside.path().join("x.txt").exists());
}

/// A profile whose endpoint is private (127.0.0.1) and that does not allow it is refused with
/// a message naming the remedy; no request reaches the server.
pub async fn refused_private_endpoint(h: &Harness, n: &Names, bucket: &str) {
    h.write("f.txt", "x");
    let (code, message) = h
        .error(
            n.upload,
            n.upload_args(&h.p("f.txt"), bucket, "f.txt", "closed"),
        )
        .await;
    assert_eq!(code, "bad_argument", "{message}");
    assert!(message.contains("allow_private_endpoint"), "{message}");
    let (code, _) = h.error(n.list, n.list_args(bucket, "", "closed")).await;
    assert_eq!(code, "bad_argument");
    assert!(list(h, n, bucket, "f.txt").await.is_empty());
}

/// A download cut halfway (the server unreachable afterwards) fails and leaves no partial
/// file; an upload cut halfway fails and leaves no object.
pub async fn interrupted(h: &Harness, n: &Names, bucket: &str, down: &Cutter, up: &Cutter) {
    let size = 32 << 20;
    big_file(&h.path("mid.bin"), size);
    h.call(
        n.upload,
        n.upload_args(&h.p("mid.bin"), bucket, "mid.bin", "default"),
    )
    .await
    .unwrap();

    let r = h
        .call(
            n.download,
            n.download_args(bucket, "mid.bin", &h.p("cut.bin"), "cut_down"),
        )
        .await;
    assert_eq!(r, Err("tool_failed".into()), "{r:?}");
    assert!(down.cut(), "the relay never cut the download");
    assert!(!h.path("cut.bin").exists(), "a partial target was left");
    assert!(
        !h.path("cut.bin.part").exists(),
        "the partial file was left"
    );

    let r = h
        .call(
            n.upload,
            n.upload_args(&h.p("mid.bin"), bucket, "cut-up.bin", "cut_up"),
        )
        .await;
    assert_eq!(r, Err("tool_failed".into()), "{r:?}");
    assert!(up.cut(), "the relay never cut the upload");
    assert!(
        list(h, n, bucket, "cut-up").await.is_empty(),
        "a half object appeared"
    );
}

/// A network that drops once in the middle of a transfer: the download goes on from the byte it
/// reached (a ranged GET checked against the object's ETag) and the upload sends the cut part
/// again, within the profile's max_retries, so both end with the file's SHA-256.
pub async fn resumed(h: &Harness, n: &Names, bucket: &str, down: &Cutter, up: &Cutter) {
    let size = 32 << 20;
    let sha = big_file(&h.path("resume.bin"), size);
    h.call(
        n.upload,
        n.upload_args(&h.p("resume.bin"), bucket, "resume.bin", "default"),
    )
    .await
    .unwrap();
    let got = h
        .call(
            n.download,
            n.download_args(bucket, "resume.bin", &h.p("resumed.bin"), "resume_down"),
        )
        .await;
    assert!(got.is_ok(), "{got:?}");
    assert!(down.cut(), "the relay never cut the download");
    assert_eq!(
        sha256_of(&h.path("resumed.bin")),
        sha,
        "the resumed download differs"
    );

    let put = h
        .call(
            n.upload,
            n.upload_args(&h.p("resume.bin"), bucket, "resumed-up.bin", "resume_up"),
        )
        .await;
    assert!(put.is_ok(), "{put:?}");
    assert!(up.cut(), "the relay never cut the upload");
    h.call(
        n.download,
        n.download_args(bucket, "resumed-up.bin", &h.p("back-up.bin"), "default"),
    )
    .await
    .unwrap();
    assert_eq!(
        sha256_of(&h.path("back-up.bin")),
        sha,
        "the resumed upload differs"
    );
}

/// The profiles of [`resumed`]: through relays that cut once, with retries.
pub fn resume_profiles(
    table: &str,
    body: &dyn Fn(&str) -> String,
    down: &Cutter,
    up: &Cutter,
) -> String {
    format!(
        "[{table}.resume_down]\n{}allow_private_endpoint = true\nmax_retries = 3\n\
         [{table}.resume_up]\n{}allow_private_endpoint = true\nmax_retries = 3\n",
        body(&down.url()),
        body(&up.url()),
    )
}

pub fn resume_relays(server_port: u16) -> (Cutter, Cutter) {
    (
        Cutter::once(server_port, 12 << 20, Direction::Down),
        Cutter::once(server_port, 12 << 20, Direction::Up),
    )
}

/// Builds the TOML profiles every scenario uses, around `table` (`s3`, `azure_blob` or `gcs`) and a
/// function giving a profile's body for an endpoint.
pub fn profiles(
    table: &str,
    body: &dyn Fn(&str) -> String,
    server: &str,
    down: &Cutter,
    up: &Cutter,
) -> String {
    format!(
        "[{table}.default]\n{}allow_private_endpoint = true\n\
         [{table}.closed]\n{}\n\
         [{table}.cut_down]\n{}allow_private_endpoint = true\nmax_retries = 0\n\
         [{table}.cut_up]\n{}allow_private_endpoint = true\nmax_retries = 0\n",
        body(server),
        body(server),
        body(&down.url()),
        body(&up.url()),
    )
}

pub fn interrupt_relays(server_port: u16) -> (Cutter, Cutter) {
    (
        Cutter::new(server_port, 12 << 20, Direction::Down),
        Cutter::new(server_port, 12 << 20, Direction::Up),
    )
}
