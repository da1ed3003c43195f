//! `mcp-inspector --cli --strict` (Inspector 2.12) over the conformance fixture server
//! (examples/conformance_server/, built on this framework, its own tools' schemas derived
//! through the registry's portable-schema transform): 0 errors and 0 warnings. The built-in
//! servers are checked, under every flag set that changes their tool list, by
//! crates/maljan/tests/inspector_strict.rs.
//!
//! A server with a deliberately unportable schema (tests/peers/unportable_server.py) shows the
//! findings are read, not missed: it must come out as 1 error and 2 warnings.

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Command, Stdio},
};

use maljan_testkit::{inspector::strict_tools_list, peer_env, wait_answering};

struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cargo test` builds the package's examples next to the test binaries' directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} was not built (cargo test builds examples)",
        path.display()
    );
    path
}

#[test]
fn the_conformance_fixtures_tools_pass_inspector_strict() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let _server = Kill(
        Command::new(example("conformance_server"))
            .arg(&addr)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_answering(&addr, "/mcp");
    let report = strict_tools_list(&[&format!("http://{addr}/mcp")]);
    eprintln!("conformance fixture: {}", report.summary());
    assert!(
        report.tools.iter().any(|t| t == "test_tool_with_progress")
            && report.tools.iter().any(|t| t == "json_schema_2020_12_tool"),
        "the fixture's tools were not listed: {:?}",
        report.tools
    );
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!(report.warnings, Vec::<String>::new());
    assert_eq!(report.exit_code, Some(0));
}

#[test]
fn an_unportable_schema_is_counted_not_missed() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/peers/unportable_server.py"
    );
    let py = peer_env("MALJAN_PY");
    let report = strict_tools_list(&[&py, script]);
    assert_eq!(report.tools, ["unportable"]);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert!(
        report.errors[0].contains("inputSchema.properties.any"),
        "{:?}",
        report.errors
    );
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    assert_eq!(
        report.exit_code,
        Some(6),
        "an error-severity finding exits 6"
    );
}
