//! FA_sftp_* against OpenSSH's sshd started here on 127.0.0.1 (its own host key, key login):
//! a 100 MiB round trip with its SHA-256 checked, listing, upload_dir, delete, a refused private
//! endpoint, confinement of the local side, transfers interrupted halfway (cancelled, cut by a
//! relay for good, and cut once and resumed), an unknown or changed host key refused, and sftp://
//! storage URIs.

mod common;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/tree_scenarios.rs"]
mod scenarios;
#[path = "common/tree_servers.rs"]
mod servers;

use std::path::Path;

use common::Harness;
use maljan_files::StorageConfig;
use peers::{Cutter, Direction, big_file};
use serde_json::json;

fn profile(sshd: &servers::Sshd, port: u16, known_hosts: &str, private: bool) -> String {
    format!(
        "host = \"127.0.0.1\"\nport = {port}\nusername = \"{}\"\nprivate_key_file = \"user_key\"\n\
         known_hosts = \"{known_hosts}\"\n{}",
        sshd.user,
        if private {
            "allow_private_endpoint = true\nmax_retries = 0\ntimeout_s = 10\n"
        } else {
            ""
        }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sftp_against_openssh() {
    let sshd = servers::sshd();
    let dir = sshd.server.dir.path();
    let port = sshd.server.port;
    let (down, up) = (
        Cutter::new(port, 12 << 20, Direction::Down),
        Cutter::new(port, 12 << 20, Direction::Up),
    );
    // A network that drops once, halfway through a download, and comes back.
    let flaky = Cutter::once(port, 12 << 20, Direction::Down);
    std::fs::write(
        dir.join("known_hosts"),
        [port, down.port, up.port, flaky.port]
            .iter()
            .map(|p| sshd.known_hosts_line(*p))
            .collect::<String>(),
    )
    .unwrap();
    // Another host's key recorded for this server: a changed key.
    std::fs::write(
        dir.join("changed_known_hosts"),
        format!(
            "[127.0.0.1]:{port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("empty_known_hosts"), "").unwrap();
    // An RSA key: refused with the reason and the remedy, never half-used.
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f"])
        .arg(dir.join("rsa_key"))
        .status()
        .expect("run ssh-keygen");
    assert!(made.success(), "ssh-keygen -t rsa failed");
    let toml = format!(
        "[sftp.default]\n{}[sftp.closed]\n{}[sftp.stranger]\n{}[sftp.changed]\n{}\
         [sftp.cut_down]\n{}[sftp.cut_up]\n{}[sftp.flaky]\n{}[sftp.rsa]\n{}",
        profile(&sshd, port, "known_hosts", true),
        profile(&sshd, port, "known_hosts", false),
        profile(&sshd, port, "empty_known_hosts", true),
        profile(&sshd, port, "changed_known_hosts", true),
        profile(&sshd, down.port, "known_hosts", true),
        profile(&sshd, up.port, "known_hosts", true),
        profile(&sshd, flaky.port, "known_hosts", true)
            .replace("max_retries = 0", "max_retries = 3"),
        profile(&sshd, port, "known_hosts", true).replace("user_key", "rsa_key"),
    );
    let config = StorageConfig::parse(&toml, dir, &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    let data = sshd.data();
    let on_disk = Path::new(&data);

    scenarios::round_trip(&h, "FA_sftp", &data, on_disk).await;
    scenarios::confinement(&h, "FA_sftp", &data, on_disk).await;
    scenarios::refused_private_endpoint(&h, "FA_sftp", &data, on_disk).await;
    scenarios::interrupted(&h, "FA_sftp", &data, on_disk).await;

    // Host keys: unknown or changed ones are refused before any login, never recorded.
    for (profile, says) in [("stranger", "is not in"), ("changed", "differs from")] {
        let (code, message) = h
            .error(
                "FA_sftp_list_dir",
                json!({"remote_path": data, "profile": profile}),
            )
            .await;
        assert_eq!(code, "not_configured", "{message}");
        assert!(
            message.contains(says) && message.contains("SHA256:"),
            "{message}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("empty_known_hosts")).unwrap(),
        ""
    );
    let (code, message) = h
        .error(
            "FA_sftp_list_dir",
            json!({"remote_path": data, "profile": "rsa"}),
        )
        .await;
    assert_eq!(code, "not_configured", "{message}");
    assert!(
        message.contains("RSA key") && message.contains("Ed25519"),
        "{message}"
    );

    // A connection cut halfway through a transfer (the relay passes 12 MiB, then refuses).
    big_file(&h.path("cut-me.bin"), 32 << 20);
    h.call(
        "FA_sftp_upload_file",
        json!({"file_path": h.p("cut-me.bin"), "remote_path": format!("{data}/cut-me.bin")}),
    )
    .await
    .unwrap();
    let r = h
        .call(
            "FA_sftp_download_file",
            json!({"remote_path": format!("{data}/cut-me.bin"), "target_path": h.p("cut.bin"), "profile": "cut_down"}),
        )
        .await;
    assert_eq!(r, Err("tool_failed".into()));
    assert!(down.cut(), "the relay never cut the download");
    assert!(!h.path("cut.bin").exists() && !h.path("cut.bin.part").exists());
    // Cut once: the download is opened again at the byte it reached and ends whole.
    let r = h
        .call(
            "FA_sftp_download_file",
            json!({"remote_path": format!("{data}/cut-me.bin"), "target_path": h.p("resumed.bin"), "profile": "flaky"}),
        )
        .await;
    assert!(r.is_ok(), "{r:?}");
    assert!(flaky.cut(), "the relay never cut the download");
    assert_eq!(
        peers::sha256_of(&h.path("resumed.bin")),
        peers::sha256_of(&h.path("cut-me.bin")),
        "the resumed download differs"
    );
    let r = h
        .call(
            "FA_sftp_upload_file",
            json!({"file_path": h.p("cut-me.bin"), "remote_path": format!("{data}/cut-up.bin"), "profile": "cut_up"}),
        )
        .await;
    assert_eq!(r, Err("tool_failed".into()));
    assert!(up.cut(), "the relay never cut the upload");
    assert!(!on_disk.join("cut-up.bin").exists(), "a half file appeared");

    // Storage URIs: sftp:///abs/path on the profile's server, copied both ways and listed.
    h.write("u.txt", "through the uri layer");
    let copied = h
        .call(
            "FA_copy_between",
            json!({"source": h.p("u.txt"), "target": format!("sftp://127.0.0.1:{port}{data}/uri/u.txt")}),
        )
        .await
        .unwrap();
    assert_eq!(copied, json!(true), "{copied}");
    assert_eq!(
        std::fs::read_to_string(on_disk.join("uri/u.txt")).unwrap(),
        "through the uri layer"
    );
    let listed = h
        .call(
            "FA_storage_list",
            json!({"uri": format!("sftp://{data}/uri")}),
        )
        .await
        .unwrap();
    assert_eq!(listed[0]["name"], "u.txt", "{listed}");
    assert_eq!(listed[0]["size"], 21);
    let r = h
        .call(
            "FA_storage_download",
            json!({"uri": format!("sftp://{data}/uri/u.txt"), "local_path": h.p("u-back.txt")}),
        )
        .await
        .unwrap();
    assert!(r.is_string(), "{r}");
    assert_eq!(
        std::fs::read_to_string(h.path("u-back.txt")).unwrap(),
        "through the uri layer"
    );
    let other_host = h
        .call(
            "FA_storage_list",
            json!({"uri": format!("sftp://example.org{data}")}),
        )
        .await;
    assert_eq!(other_host, Err("bad_argument".into()));

    let closed = h.call("FA_sftp_close", json!({})).await.unwrap();
    assert_eq!(closed, json!(true));
    // The next call opens a new connection.
    let names = h
        .call(
            "FA_sftp_list_dir",
            json!({"remote_path": format!("{data}/uri")}),
        )
        .await
        .unwrap();
    assert_eq!(names, json!(["u.txt"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_init_connects_with_the_operators_host_keys() {
    let sshd = servers::sshd();
    let dir = sshd.server.dir.path();
    let port = sshd.server.port;
    std::fs::write(dir.join("known_hosts"), sshd.known_hosts_line(port)).unwrap();
    // The operator's profile "late" allows the private endpoint and names the known_hosts;
    // the call brings the host, the user and the key.
    let toml = "[sftp.late]\nhost = \"203.0.113.1\"\nusername = \"nobody\"\npassword = \"unused\"\n\
         known_hosts = \"known_hosts\"\nallow_private_endpoint = true\n";
    let config = StorageConfig::parse(toml, dir, &|_| None).unwrap();
    let h = Harness::with_storage(config, |_| {});
    std::fs::write(h.path("id_key"), &sshd.user_key).unwrap();
    let answer = h
        .call(
            "FA_sftp_later_init",
            json!({"host": "127.0.0.1", "port": port, "username": sshd.user,
                   "key_filename": h.p("id_key"), "profile": "late"}),
        )
        .await
        .unwrap();
    assert_eq!(answer["host"], "127.0.0.1", "{answer}");
    let names = h
        .call(
            "FA_sftp_list_dir",
            json!({"remote_path": sshd.data(), "profile": "late"}),
        )
        .await
        .unwrap();
    assert_eq!(names, json!([]));

    // Another known_hosts from a call is refused; a key file outside the roots too; a profile
    // the operator did not open gets no private endpoint.
    let r = h
        .call(
            "FA_sftp_later_init",
            json!({"host": "127.0.0.1", "port": port, "username": sshd.user,
                   "key_filename": h.p("id_key"), "known_hosts": h.p("mine"), "profile": "late"}),
        )
        .await;
    assert_eq!(r, Err("bad_argument".into()));
    let r = h
        .call(
            "FA_sftp_later_init",
            json!({"host": "127.0.0.1", "port": port, "username": sshd.user,
                   "key_filename": dir.join("user_key"), "profile": "late"}),
        )
        .await;
    assert_eq!(r, Err("path_outside_roots".into()));
    let (code, message) = h
        .error(
            "FA_sftp_later_init",
            json!({"host": "127.0.0.1", "port": port, "username": sshd.user,
                   "key_filename": h.p("id_key"), "profile": "mine"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("allow_private_endpoint"), "{message}");
    let r = h
        .call(
            "FA_sftp_later_init",
            json!({"host": "127.0.0.1", "username": "u", "profile": "late"}),
        )
        .await;
    assert_eq!(r, Err("bad_argument".into()));
}
