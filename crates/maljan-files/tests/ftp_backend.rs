//! FA_ftp_* against pyftpdlib started here on 127.0.0.1, in plain FTP and in FTPS (AUTH TLS
//! required, data connections protected, a self-signed certificate trusted through the
//! profile's ca_file): a 100 MiB round trip with its SHA-256 checked, listing, upload_dir,
//! delete, a refused private endpoint, confinement of the local side, transfers interrupted
//! halfway, FA_ftp_later_init, and ftp:// storage URIs.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/tree_scenarios.rs"]
mod scenarios;
#[path = "common/tree_servers.rs"]
mod servers;

use common::Harness;
use maljan_files::StorageConfig;
use serde_json::json;

fn profile(port: u16, tls: Option<&std::path::Path>, private: bool) -> String {
    let mut p = format!(
        "host = \"127.0.0.1\"\nport = {port}\nusername = \"maljan\"\npassword = \"{}\"\ntimeout_s = 20\n",
        servers::USER_PASSWORD
    );
    if let Some(ca) = tls {
        p.push_str(&format!("tls = true\nca_file = \"{}\"\n", ca.display()));
    }
    if private {
        p.push_str("allow_private_endpoint = true\n");
    }
    p
}

async fn against(tls: bool) {
    let server = servers::pyftpdlib(tls);
    let dir = server.dir.path();
    let ca = tls.then(|| dir.join("only-cert.pem"));
    let toml = format!(
        "[ftp.default]\n{}[ftp.closed]\n{}",
        profile(server.port, ca.as_deref(), true),
        profile(server.port, ca.as_deref(), false),
    );
    let config = StorageConfig::parse(&toml, dir, &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let on_disk = dir.join("root");

    // The FTP root is the server's "/": absolute paths, and relative ones under the login dir.
    scenarios::round_trip(&h, "FA_ftp", "/abs", &on_disk.join("abs")).await;
    scenarios::round_trip(&h, "FA_ftp", "rel", &on_disk.join("rel")).await;
    scenarios::confinement(&h, "FA_ftp", "/c", &on_disk.join("c")).await;
    scenarios::refused_private_endpoint(&h, "FA_ftp", "/p", &on_disk.join("p")).await;
    scenarios::interrupted(&h, "FA_ftp", "/i", &on_disk.join("i")).await;

    h.write("u.txt", "through the uri layer");
    let copied = h
        .call(
            "FA_copy_between",
            json!({"source": h.p("u.txt"), "target": format!("ftp://127.0.0.1:{}/uri/u.txt", server.port)}),
        )
        .await
        .unwrap();
    assert_eq!(copied, json!(true));
    assert_eq!(
        std::fs::read_to_string(on_disk.join("uri/u.txt")).unwrap(),
        "through the uri layer"
    );
    let text = h
        .call("FA_storage_read_text", json!({"uri": "ftp:///uri/u.txt"}))
        .await
        .unwrap();
    assert_eq!(text, json!("through the uri layer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftp_against_pyftpdlib() {
    against(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftps_against_pyftpdlib() {
    against(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftps_refuses_an_untrusted_certificate_and_later_init_logs_in() {
    let server = servers::pyftpdlib(true);
    let dir = server.dir.path();
    // "untrusted" does not name the self-signed certificate; "late" allows the private endpoint
    // and trusts it, the call brings the login.
    let toml = format!(
        "[ftp.untrusted]\n{}tls = true\n[ftp.late]\nhost = \"203.0.113.1\"\nca_file = \"only-cert.pem\"\n\
         allow_private_endpoint = true\n",
        profile(server.port, None, true)
    );
    let config = StorageConfig::parse(&toml, dir, &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let (code, message) = h
        .error("FA_ftp_list_dir", json!({"profile": "untrusted"}))
        .await;
    assert_eq!(code, "tool_failed", "{message}");
    assert!(message.contains("TLS"), "{message}");

    let (code, message) = h
        .error(
            "FA_ftp_later_init",
            json!({"host": "127.0.0.1", "port": server.port, "username": "maljan",
                   "password": "wrong", "tls": true, "profile": "late"}),
        )
        .await;
    assert_eq!(code, "not_configured", "{message}");
    assert!(message.contains("refused the login"), "{message}");
    let answer = h
        .call(
            "FA_ftp_later_init",
            json!({"host": "127.0.0.1", "port": server.port, "username": "maljan",
                   "password": servers::USER_PASSWORD, "tls": true, "profile": "late"}),
        )
        .await
        .unwrap();
    assert!(
        !answer.to_string().contains(servers::USER_PASSWORD),
        "{answer}"
    );
    let listed = h
        .call("FA_ftp_list_dir", json!({"profile": "late"}))
        .await
        .unwrap();
    assert_eq!(listed, json!([]));
    let r = h
        .call(
            "FA_ftp_later_init",
            json!({"host": "127.0.0.1", "port": server.port, "passive": false, "profile": "late"}),
        )
        .await;
    assert_eq!(r, Err("bad_argument".into()));
    assert_eq!(
        h.call("FA_ftp_close", json!({"profile": "late"})).await,
        Ok(json!(true))
    );
}
