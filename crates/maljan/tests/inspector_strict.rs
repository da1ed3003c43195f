//! Every tool schema the built-in servers serve passes `mcp-inspector --cli --strict`
//! (Inspector 2.12) with 0 errors and 0 warnings, under every flag set that changes the tool
//! list: `serve files` as it starts, with every tool allowed (FA_run_shell is opt-in), read-only,
//! without the FA_* bridge, without the semantic tools, and over HTTP (where put_sample and its
//! chunked forms are offered); `serve analysis` and `serve jobs` over stdio and HTTP. The schemas are made
//! portable once, by maljan-server's registry (`portable_schema`), not tool by tool.

mod common;

use common::*;
use maljan_testkit::inspector::{StrictReport, strict_tools_list};

fn stdio(server: &str, root: &str, flags: &[&str]) -> StrictReport {
    let mut target = vec![maljan(), "serve", server, "--root", root];
    target.extend_from_slice(flags);
    strict_tools_list(&target)
}

fn http(server: &str, root: &str) -> StrictReport {
    let port = free_port();
    let _server = spawn(std::process::Command::new(maljan()).args([
        "serve",
        server,
        "--root",
        root,
        "--http",
        &format!("127.0.0.1:{port}"),
    ]));
    wait_answering(port);
    strict_tools_list(&[&format!("http://127.0.0.1:{port}/mcp")])
}

fn assert_clean(label: &str, report: &StrictReport) {
    eprintln!("{label}: {}", report.summary());
    assert!(!report.tools.is_empty(), "{label}: no tools listed");
    assert!(
        report.errors.is_empty() && report.warnings.is_empty(),
        "{label}: {}\nerrors:\n{}\nwarnings:\n{}",
        report.summary(),
        report.errors.join("\n"),
        report.warnings.join("\n")
    );
    assert_eq!(report.exit_code, Some(0), "{label}");
}

#[test]
fn every_files_tool_under_every_flag_set_passes_inspector_strict() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let default = stdio("files", root_s, &[]);
    assert_clean("files", &default);
    // Every tool there is: the default list, FA_run_shell (served only when named) and the
    // FA_* actions the bridge offers.
    let mut all: Vec<String> = (default.tools.iter())
        .filter(|t| *t != "capabilities")
        .cloned()
        .collect();
    all.push("FA_run_shell".into());
    let everything = stdio("files", root_s, &["--allowed-actions", &all.join(",")]);
    assert_clean("files --allowed-actions <every tool>", &everything);
    assert!(
        everything.tools.iter().any(|t| t == "FA_run_shell"),
        "FA_run_shell was not served"
    );
    for flags in [&["--read-only"][..], &["--no-bridge"], &["--tools", "none"]] {
        let report = stdio("files", root_s, flags);
        assert_clean(&format!("files {}", flags.join(" ")), &report);
        assert_ne!(
            report.tools.len(),
            default.tools.len(),
            "{flags:?} changed nothing"
        );
    }
    let over_http = http("files", root_s);
    assert_clean("files --http", &over_http);
    assert!(
        over_http.tools.iter().any(|t| t.starts_with("put_sample")),
        "put_sample is not offered over HTTP: {:?}",
        over_http.tools
    );
}

#[test]
fn every_analysis_tool_over_both_transports_passes_inspector_strict() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let over_stdio = stdio("analysis", root_s, &[]);
    assert_clean("analysis", &over_stdio);
    let over_http = http("analysis", root_s);
    assert_clean("analysis --http", &over_http);
    assert!(
        over_http.tools.len() > over_stdio.tools.len(),
        "put_sample over HTTP"
    );
}

#[test]
fn every_jobs_tool_over_both_transports_passes_inspector_strict() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    // Its own data directory: the jobs server opens the runtime (and its database) at start.
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_str().unwrap();
    let over_stdio = strict_tools_list(&[
        "-e",
        &format!("MALJAN_HOME={home_s}"),
        maljan(),
        "serve",
        "jobs",
        "--root",
        root_s,
    ]);
    assert_clean("jobs", &over_stdio);
    for tool in ["analyze_sample", "get_report", "list_jobs", "cancel_job"] {
        assert!(
            over_stdio.tools.iter().any(|t| t == tool),
            "{tool} not listed: {:?}",
            over_stdio.tools
        );
    }
    let port = free_port();
    let _server = spawn(
        std::process::Command::new(maljan())
            .args(["serve", "jobs", "--root", root_s])
            .args(["--http", &format!("127.0.0.1:{port}")])
            .env("MALJAN_HOME", home.path()),
    );
    wait_answering(port);
    let over_http = strict_tools_list(&[&format!("http://127.0.0.1:{port}/mcp")]);
    assert_clean("jobs --http", &over_http);
    assert!(
        over_http.tools.iter().any(|t| t == "put_sample"),
        "put_sample over HTTP: {:?}",
        over_http.tools
    );
}
