//! FA_dropbox_* against the drive fixture (maljan-testkit's fixture-drives, itself checked by the
//! official Dropbox SDK in drive_fixture_speaks_the_sdks.rs): a 100 MiB round trip (an upload
//! session) with its SHA-256 checked, a small one-request upload, listings (paged, recursive),
//! upload_dir, delete, a refused private endpoint, confinement of the local side, a download cut
//! and resumed, a download cut for good and an upload cut halfway (no partial file either side),
//! a refused token, and FA_dropbox_later_init with its token marked writeOnly and never echoed.

mod common;
#[path = "common/peers.rs"]
mod peers;

use std::path::Path;

use common::Harness;
use maljan_files::{FilesConfig, StorageConfig};
use maljan_testkit::DriveFixture;
use peers::{Cutter, Direction, big_file, sha256_of};
use serde_json::{Value, json};

const TOKEN: &str = "dbx-secret-token-4242";

fn profile(name: &str, base: &str, extra: &str) -> String {
    format!(
        "[dropbox.{name}]\napi_url = \"{base}/api.dropboxapi.com\"\n\
         upload_url = \"{base}/content.dropboxapi.com\"\n{extra}\n"
    )
}

fn harness(fx: &DriveFixture, relay: &Cutter) -> Harness {
    let toml = [
        profile(
            "default",
            &fx.url,
            &format!("access_token = \"{TOKEN}\"\nallow_private_endpoint = true"),
        ),
        profile("closed", &fx.url, &format!("access_token = \"{TOKEN}\"")),
        profile(
            "cut_up",
            &relay.url(),
            &format!("access_token = \"{TOKEN}\"\nallow_private_endpoint = true\nmax_retries = 0"),
        ),
        profile(
            "wrong",
            &fx.url,
            "access_token = \"not-the-token\"\nallow_private_endpoint = true",
        ),
        profile("late", &fx.url, "allow_private_endpoint = true"),
    ]
    .concat();
    let config = StorageConfig::parse(&toml, Path::new("/"), &|_| None).unwrap();
    Harness::with_storage(config, |_| {})
}

async fn listing(h: &Harness, path: &str, recursive: bool) -> Vec<String> {
    serde_json::from_value(
        h.call(
            "FA_dropbox_list_folder",
            json!({"remote_path": path, "recursive": recursive}),
        )
        .await
        .unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropbox_against_the_fixture() {
    let fx = DriveFixture::start(TOKEN);
    let relay = Cutter::new(fx.port, 12 << 20, Direction::Up);
    let h = harness(&fx, &relay);

    // A 100 MiB round trip, through an upload session.
    let size = 100 << 20;
    let sha = big_file(&h.path("big.bin"), size);
    let up = h
        .call(
            "FA_dropbox_upload_file",
            json!({"file_path": h.p("big.bin"), "remote_path": "/samples/Big.bin"}),
        )
        .await
        .unwrap();
    assert_eq!(up["bytes"], size as u64, "{up}");
    assert_eq!(up["remote_path"], "/samples/Big.bin");
    assert!(up["content_hash"].is_string(), "{up}");
    let sessions = fx
        .log()
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap()
                .contains("upload_session/append_v2")
        })
        .count();
    assert!(
        sessions >= 10,
        "100 MiB went up in pieces: {sessions} appends"
    );
    let back = h
        .call(
            "FA_dropbox_download_file",
            json!({"remote_path": "samples/big.bin", "target_path": h.p("back.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(back["bytes"], size as u64, "{back}");
    assert_eq!(sha256_of(&h.path("back.bin")), sha, "the download differs");
    assert!(!h.path("back.bin.part").exists());

    // A small file goes up in one request.
    h.write("note.txt", "a small note");
    h.call(
        "FA_dropbox_upload_file",
        json!({"file_path": h.p("note.txt"), "remote_path": "/samples/note.txt"}),
    )
    .await
    .unwrap();
    assert!(
        fx.log()
            .iter()
            .any(|r| r["path"] == "/content.dropboxapi.com/2/files/upload")
    );

    // upload_dir, and listings (the fixture pages every 3 entries).
    h.write("tree/a.txt", "a");
    h.write("tree/sub/b.txt", "bb");
    for i in 0..4 {
        h.write(&format!("tree/many/{i}.txt"), format!("{i}"));
    }
    let uploaded: Vec<String> = serde_json::from_value(
        h.call(
            "FA_dropbox_upload_dir",
            json!({"dir_path": h.p("tree"), "remote_prefix": "/up"}),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        uploaded,
        [
            "/up/a.txt",
            "/up/many/0.txt",
            "/up/many/1.txt",
            "/up/many/2.txt",
            "/up/many/3.txt",
            "/up/sub/b.txt"
        ]
    );
    assert_eq!(listing(&h, "", false).await, ["/samples", "/up"]);
    assert_eq!(
        listing(&h, "/up/many", false).await,
        [
            "/up/many/0.txt",
            "/up/many/1.txt",
            "/up/many/2.txt",
            "/up/many/3.txt"
        ]
    );
    assert_eq!(
        listing(&h, "/up", true).await.len(),
        8,
        "6 files, 2 folders"
    );
    assert_eq!(
        h.call("FA_dropbox_list_folder", json!({"remote_path": "/nothing"}))
            .await,
        Err("no_such_file".into())
    );

    // Delete, then the file is gone.
    assert_eq!(
        h.call(
            "FA_dropbox_delete_path",
            json!({"remote_path": "/samples/Big.bin"})
        )
        .await
        .unwrap(),
        json!(true)
    );
    assert_eq!(listing(&h, "/samples", false).await, ["/samples/note.txt"]);
    let gone = h
        .call(
            "FA_dropbox_download_file",
            json!({"remote_path": "/samples/Big.bin", "target_path": h.p("gone.bin")}),
        )
        .await;
    assert_eq!(gone, Err("no_such_file".into()));
    assert!(!h.path("gone.bin").exists() && !h.path("gone.bin.part").exists());
    assert_eq!(
        h.call(
            "FA_dropbox_delete_path",
            json!({"remote_path": "/samples/Big.bin"})
        )
        .await,
        Err("no_such_file".into())
    );
    for bad in [
        json!({"remote_path": "/"}),
        json!({"remote_path": "/a\u{0}b"}),
        json!({"remote_path": 7}),
        json!({"remote_path": "/x", "unknown": 1}),
    ] {
        assert_eq!(
            h.call("FA_dropbox_delete_path", bad).await,
            Err("bad_argument".into())
        );
    }

    interrupted(&h, &fx, &relay).await;
    confinement(&h).await;
    refusals(&h).await;
}

/// A download cut once is resumed with a Range request and comes out whole; one cut every time
/// fails and leaves no partial file; an upload cut halfway fails and leaves no file.
async fn interrupted(h: &Harness, fx: &DriveFixture, relay: &Cutter) {
    let size = 24 << 20;
    let sha = big_file(&h.path("mid.bin"), size);
    h.call(
        "FA_dropbox_upload_file",
        json!({"file_path": h.p("mid.bin"), "remote_path": "/mid.bin"}),
    )
    .await
    .unwrap();

    fx.cut_downloads(10 << 20, 1);
    let resumed = h
        .call(
            "FA_dropbox_download_file",
            json!({"remote_path": "/mid.bin", "target_path": h.p("resumed.bin")}),
        )
        .await
        .unwrap();
    assert_eq!(resumed["bytes"], size as u64);
    assert_eq!(sha256_of(&h.path("resumed.bin")), sha);
    let ranges: Vec<Value> = fx
        .log()
        .into_iter()
        .filter(|r| r["range"].is_string())
        .collect();
    // The resume starts where the received bytes end: at most the 10 MiB the fixture sent before
    // the cut (bytes still in flight when the connection drops are lost), never from zero.
    let range = ranges.last().unwrap()["range"]
        .as_str()
        .unwrap()
        .to_string();
    let start: u64 = range
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an open-ended Range header, got {range}"));
    assert!(start > 0 && start <= 10 << 20, "{range}");

    fx.cut_downloads(4 << 20, 100);
    let cut = h
        .call(
            "FA_dropbox_download_file",
            json!({"remote_path": "/mid.bin", "target_path": h.p("cut.bin")}),
        )
        .await;
    assert_eq!(cut, Err("tool_failed".into()));
    assert!(!h.path("cut.bin").exists() && !h.path("cut.bin.part").exists());
    fx.cut_downloads(0, 0);

    let up = h
        .call(
            "FA_dropbox_upload_file",
            json!({"file_path": h.p("mid.bin"), "remote_path": "/cut-up.bin", "profile": "cut_up"}),
        )
        .await;
    assert_eq!(up, Err("tool_failed".into()), "{up:?}");
    assert!(relay.cut(), "the relay never cut the upload");
    assert!(
        !listing(h, "", false)
            .await
            .contains(&"/cut-up.bin".to_string())
    );
}

/// Local paths outside the roots are refused on both sides before a byte moves.
async fn confinement(h: &Harness) {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "not yours").unwrap();
    let (code, _) = h
        .error(
            "FA_dropbox_upload_file",
            json!({"file_path": secret.to_string_lossy(), "remote_path": "/stolen.txt"}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    let (code, _) = h
        .error(
            "FA_dropbox_upload_file",
            json!({"file_path": h.p("../escape.txt"), "remote_path": "/stolen.txt"}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    let target = outside.path().join("written.txt");
    let (code, _) = h
        .error(
            "FA_dropbox_download_file",
            json!({"remote_path": "/samples/note.txt", "target_path": target.to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(!target.exists());
    let (code, _) = h
        .error(
            "FA_dropbox_upload_dir",
            json!({"dir_path": outside.path().to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(
        !listing(h, "", false)
            .await
            .contains(&"/stolen.txt".to_string())
    );
}

/// A private endpoint the operator did not allow, a refused token, a missing token, and
/// later_init, whose token is writeOnly and never echoed.
async fn refusals(h: &Harness) {
    let (code, message) = h
        .error(
            "FA_dropbox_list_folder",
            json!({"remote_path": "", "profile": "closed"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");

    let (code, message) = h
        .error(
            "FA_dropbox_list_folder",
            json!({"remote_path": "", "profile": "wrong"}),
        )
        .await;
    assert_eq!(code, "not_configured");
    assert!(
        message.contains("401") && !message.contains("not-the-token"),
        "{message}"
    );

    assert_eq!(
        h.call("FA_dropbox_list_folder", json!({"profile": "late"}))
            .await,
        Err("not_configured".into())
    );
    assert_eq!(
        h.call("FA_dropbox_list_folder", json!({"profile": "nobody"}))
            .await,
        Err("not_configured".into())
    );
    let answer = h
        .call(
            "FA_dropbox_later_init",
            json!({"oauth2_access_token": TOKEN, "profile": "late"}),
        )
        .await
        .unwrap();
    assert!(!answer.to_string().contains(TOKEN), "{answer}");
    assert_eq!(answer["set"], json!(["oauth2_access_token"]));
    assert_eq!(listing_as(h, "late").await, ["/mid.bin", "/samples", "/up"]);
    assert_eq!(
        h.call("FA_dropbox_later_init", json!({"oauth2_access_token": " "}))
            .await,
        Err("bad_argument".into())
    );

    let reg = maljan_files::registry(FilesConfig::rooted(
        maljan_server::Roots::new([h.root()]).unwrap(),
    ));
    let schema = &reg.get("FA_dropbox_later_init").unwrap().input_schema;
    assert_eq!(
        schema["properties"]["oauth2_access_token"]["writeOnly"], true,
        "{schema:?}"
    );
}

async fn listing_as(h: &Harness, profile: &str) -> Vec<String> {
    serde_json::from_value(
        h.call(
            "FA_dropbox_list_folder",
            json!({"remote_path": "", "profile": profile}),
        )
        .await
        .unwrap(),
    )
    .unwrap()
}
