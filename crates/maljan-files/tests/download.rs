//! FA_download_file against a local HTTP server, reached only through the documented loopback
//! opt-in (`FilesConfig::allow_loopback_downloads`), and the SSRF refusals without it. Refused
//! addresses are refused before any connection, so these tests send nothing off the machine.

mod common;

use std::net::SocketAddr;

use axum::{
    Router,
    body::Body,
    extract::Path,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use common::Harness;
use serde_json::json;

const CONTENT: &str = "hello world, this is the file";

fn redirect(to: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

async fn serve() -> SocketAddr {
    let app = Router::new()
        .route("/file", get(|| async { CONTENT }))
        .route(
            "/redir/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    redirect("/file".into())
                } else {
                    redirect(format!("/redir/{}", n - 1))
                }
            }),
        )
        .route(
            "/to-private",
            get(|| async { redirect("http://10.0.0.1/secret".into()) }),
        )
        .route(
            "/to-metadata",
            get(|| async { redirect("http://169.254.169.254/latest/meta-data/".into()) }),
        )
        .route(
            "/to-file-scheme",
            get(|| async { redirect("file:///etc/passwd".into()) }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .route("/sized", get(|| async { vec![b'x'; 1000] }))
        .route(
            "/stream",
            get(|| async {
                let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 16 * 1024]));
                Body::from_stream(futures::stream::iter(chunks))
            }),
        )
        .route(
            "/range",
            get(|headers: HeaderMap| async move {
                let start = headers
                    .get(header::RANGE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("bytes="))
                    .and_then(|v| v.trim_end_matches('-').parse::<usize>().ok());
                match start {
                    Some(s) if s <= CONTENT.len() => (
                        StatusCode::PARTIAL_CONTENT,
                        [(
                            header::CONTENT_RANGE,
                            format!("bytes {s}-{}/{}", CONTENT.len() - 1, CONTENT.len()),
                        )],
                        CONTENT[s..].to_string(),
                    )
                        .into_response(),
                    _ => CONTENT.into_response(),
                }
            }),
        )
        .route("/norange", get(|| async { CONTENT }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn downloads_through_the_opt_in() {
    let addr = serve().await;
    let h = Harness::with(|_| {}, true);
    let url = format!("http://{addr}/file");
    let out = h
        .call(
            "FA_download_file",
            json!({"file_url": url, "file_name": "got.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(h.path("got.txt")).unwrap(), CONTENT);
    assert_eq!(out["bytes"], CONTENT.len());
    assert_eq!(out["redirects"], 0);
    let sha = out["sha256"].as_str().unwrap().to_string();
    let check = h
        .call("FA_file_checksum", json!({"path": "got.txt"}))
        .await
        .unwrap();
    assert_eq!(check["digest"], sha);

    // A name that resolves to loopback, and the numeric spellings of 127.0.0.1 the OS accepts.
    let port = addr.port();
    for host in [
        "localhost",
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "127.1",
        "0x7f000001",
    ] {
        let url = format!("http://{host}:{port}/file");
        let out = h
            .call(
                "FA_download_file",
                json!({"file_url": url, "file_name": "n.txt"}),
            )
            .await;
        assert!(out.is_ok(), "{host}: {out:?}");
    }

    // Redirects are followed by hand, up to 5.
    let out = h
        .call(
            "FA_download_file",
            json!({"file_url": format!("http://{addr}/redir/4"), "file_name": "r.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(out["redirects"], 5);
    let err = h
        .call(
            "FA_download_file",
            json!({"file_url": format!("http://{addr}/redir/5"), "file_name": "r.txt"}),
        )
        .await;
    assert_eq!(err.unwrap_err(), "tool_failed");
}

#[tokio::test]
async fn redirect_hops_are_checked_like_the_first_url() {
    let addr = serve().await;
    let h = Harness::with(|_| {}, true);
    for path in ["to-private", "to-metadata", "to-file-scheme"] {
        let (code, msg) = h
            .error(
                "FA_download_file",
                json!({"file_url": format!("http://{addr}/{path}"), "file_name": "x"}),
            )
            .await;
        assert_eq!(code, "bad_argument", "{path}: {msg}");
        assert!(!h.path("x").exists());
    }
}

#[tokio::test]
async fn size_caps_checksums_and_resume() {
    let addr = serve().await;
    let h = Harness::with(|_| {}, true);
    let sized =
        json!({"file_url": format!("http://{addr}/sized"), "file_name": "s.bin", "max_bytes": 10});
    assert_eq!(
        h.call("FA_download_file", sized).await.unwrap_err(),
        "bad_argument"
    );
    assert!(!h.path("s.bin").exists());
    let streamed = json!({"file_url": format!("http://{addr}/stream"), "file_name": "st.bin", "max_bytes": 100_000});
    let (code, msg) = h.error("FA_download_file", streamed).await;
    assert_eq!(code, "bad_argument", "{msg}");
    assert!(!h.path("st.bin").exists(), "the partial file is removed");
    let whole = json!({"file_url": format!("http://{addr}/stream"), "file_name": "st.bin", "max_bytes": 2_000_000, "chunk_size": 1});
    assert_eq!(
        h.call("FA_download_file", whole).await.unwrap()["bytes"],
        64 * 16 * 1024
    );

    let first = h
        .call(
            "FA_download_file",
            json!({"file_url": format!("http://{addr}/file"), "file_name": "a"}),
        )
        .await
        .unwrap();
    let sha = first["sha256"].as_str().unwrap();
    let good = json!({"file_url": format!("http://{addr}/file"), "file_name": "v.txt", "expected_sha256": sha});
    h.call("FA_download_file", good).await.unwrap();
    let bad = json!({"file_url": format!("http://{addr}/file"), "file_name": "v2.txt", "expected_sha256": "0".repeat(64)});
    assert_eq!(
        h.call("FA_download_file", bad).await.unwrap_err(),
        "tool_failed"
    );
    assert!(
        !h.path("v2.txt").exists(),
        "a mismatching download is removed"
    );
    let malformed = json!({"file_url": format!("http://{addr}/file"), "file_name": "v3.txt", "expected_sha256": "abc"});
    assert_eq!(
        h.call("FA_download_file", malformed).await.unwrap_err(),
        "bad_argument"
    );

    h.write("res.txt.part", &CONTENT.as_bytes()[..5]);
    let resumed =
        json!({"file_url": format!("http://{addr}/range"), "file_name": "res.txt", "resume": true});
    let out = h.call("FA_download_file", resumed).await.unwrap();
    assert_eq!(out["resumed_from"], 5);
    assert_eq!(std::fs::read_to_string(h.path("res.txt")).unwrap(), CONTENT);
    assert!(!h.path("res.txt.part").exists());
    h.write("nr.txt.part", &CONTENT.as_bytes()[..5]);
    let ignored = json!({"file_url": format!("http://{addr}/norange"), "file_name": "nr.txt", "resume": true});
    let out = h.call("FA_download_file", ignored).await.unwrap();
    assert_eq!(
        out["resumed_from"], 0,
        "a server that ignores Range is downloaded from the start"
    );
    assert_eq!(std::fs::read_to_string(h.path("nr.txt")).unwrap(), CONTENT);

    let missing = json!({"file_url": format!("http://{addr}/missing"), "file_name": "m"});
    assert_eq!(
        h.call("FA_download_file", missing).await.unwrap_err(),
        "tool_failed"
    );
}

#[tokio::test]
async fn without_the_opt_in_loopback_is_refused_in_every_spelling() {
    let addr = serve().await;
    let h = Harness::new();
    let port = addr.port();
    for host in [
        "127.0.0.1",
        "localhost",
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "127.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[2002:7f00:1::]",
        "[64:ff9b::7f00:1]",
        "0",
    ] {
        let url = format!("http://{host}:{port}/file");
        let (code, msg) = h
            .error(
                "FA_download_file",
                json!({"file_url": url, "file_name": "x"}),
            )
            .await;
        assert_eq!(code, "bad_argument", "{host}: {msg}");
        assert!(msg.contains("refusing"), "{host}: {msg}");
    }
    assert!(!h.path("x").exists());
}

#[tokio::test]
async fn private_reserved_and_odd_urls_are_refused_before_connecting() {
    let h = Harness::with(|_| {}, true);
    for url in [
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "http://198.18.0.1/",
        "http://[fc00::1]/",
        "http://[fe80::1]/",
        "http://[ff02::1]/",
        "http://[::]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:c0a8:101::]/",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        "http://[2001:db8::1]/",
        "http://012.0.0.1/",
        "http://0xa.0.0.1/",
        "http://167772161/",
    ] {
        let (code, msg) = h
            .error(
                "FA_download_file",
                json!({"file_url": url, "file_name": "x"}),
            )
            .await;
        assert_eq!(code, "bad_argument", "{url}: {msg}");
    }
    for url in [
        "ftp://example.com/x",
        "file:///etc/passwd",
        "gopher://x/",
        "not a url",
        "http://",
    ] {
        let (code, msg) = h
            .error(
                "FA_download_file",
                json!({"file_url": url, "file_name": "x"}),
            )
            .await;
        assert_eq!(code, "bad_argument", "{url}: {msg}");
    }
    let args = json!({"file_url": "http://10.0.0.1/", "file_name": "x", "chunk_size": 0});
    assert_eq!(
        h.call("FA_download_file", args).await.unwrap_err(),
        "bad_argument"
    );
    let args = json!({"file_url": "http://example.com/", "file_name": "../../x"});
    assert_eq!(
        h.call("FA_download_file", args).await.unwrap_err(),
        "path_outside_roots"
    );
}

#[test]
fn the_download_is_flagged_open_world_and_destructive() {
    let h = Harness::new();
    let meta = &h.server.registry().get("FA_download_file").unwrap().meta;
    assert!(meta.open_world && meta.destructive);
}
