//! "Another host" for real: the server runs in its own network namespace, reached over a veth
//! pair, so the client's bytes cross a network interface, not loopback. Needs root and
//! `ip netns` (iproute2, which scripts/peers.sh installs where it is missing); where the machine
//! refuses, the test fails and says why: a test that cannot run proves nothing.

mod common;

use std::process::{Command, Stdio};

use common::{staging::*, *};
use maljan_client::{Handover, JobSpec, JobStatus};
use serde_json::json;

/// The namespace and its link, removed when the test ends, pass or fail.
struct Netns {
    name: String,
    host_if: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.host_if]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Sets up `mjs<id>` with a veth pair: host side .1, namespace side .2 of a /30.
fn make_netns() -> Result<(Netns, String, String), String> {
    let id = std::process::id() % 100_000;
    let name = format!("mjs{id}");
    ip(&["netns", "add", &name])?;
    let ns = Netns {
        name: name.clone(),
        host_if: format!("mjs{id}h"),
    };
    let inner_if = format!("mjs{id}n");
    let (a, b) = (id % 250, (id / 250) % 250);
    let (host_ip, ns_ip) = (
        format!("10.{}.{a}.1", 200 + b % 50),
        format!("10.{}.{a}.2", 200 + b % 50),
    );
    ip(&[
        "link",
        "add",
        &ns.host_if,
        "type",
        "veth",
        "peer",
        "name",
        &inner_if,
    ])?;
    ip(&["link", "set", &inner_if, "netns", &name])?;
    ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &ns.host_if])?;
    ip(&["link", "set", &ns.host_if, "up"])?;
    ip(&[
        "netns",
        "exec",
        &name,
        "ip",
        "addr",
        "add",
        &format!("{ns_ip}/30"),
        "dev",
        &inner_if,
    ])?;
    ip(&["netns", "exec", &name, "ip", "link", "set", &inner_if, "up"])?;
    ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"])?;
    Ok((ns, host_ip, ns_ip))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_another_network_namespace_gets_the_sample_uploaded() {
    let (ns, _host_ip, ns_ip) = make_netns().unwrap_or_else(|why| {
        panic!("network namespaces are not available here, so the cross-host upload cannot be tested: {why}")
    });
    let scratch = tempfile::tempdir().unwrap();
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let sample = scratch.path().join("remote.bin");
    let sha = write_sample(&sample, 10 * 1024 * 1024, 21);
    let staging = scratch.path().join("staging");
    let addr = format!("{ns_ip}:8765");
    let _server = spawn(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                maljan(),
                "serve",
                "files",
                "--http",
                &addr,
            ])
            .args(["--allowed-host", &ns_ip, "--root"])
            .arg(&elsewhere)
            .arg("--staging-dir")
            .arg(&staging),
    );
    maljan_testkit::wait_answering(&addr, "/mcp");

    let rt = runtime(
        scratch.path(),
        vec![("remote", http_server(&format!("http://{addr}/mcp")))],
    );
    let job = rt.new_job(JobSpec::for_sample(&sample)).unwrap();
    let local = sample
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let server = job.server("remote").unwrap();
    let rec = server
        .call("FA_file_checksum", json!({"path": local}))
        .await;
    assert!(rec.ok, "{:?}", rec.error);
    assert_eq!(digest_of(&rec), sha);
    match server.handover().await.unwrap() {
        Handover::Uploaded { path, cached } => {
            assert!(!cached);
            assert!(std::path::Path::new(&path).starts_with(staging.canonicalize().unwrap()));
        }
        other => panic!("expected an upload, got {other:?}"),
    }
    let chunks = rt
        .ledger()
        .calls(Some(job.id()), 100)
        .unwrap()
        .into_iter()
        .filter(|c| c.tool == "put_sample_chunk" && c.ok)
        .count();
    assert_eq!(chunks, 3, "10 MiB in 4 MiB chunks");
    assert_eq!(job.finish(), JobStatus::Complete);
}
