//! A stdio server runs in its own process group and the whole group dies with the runtime, and
//! its environment holds only the documented base, env_allow and env.

mod common;

use std::time::{Duration, Instant};

use maljan_client::{JobSpec, ServerConfig, TransportKind};
use serde_json::json;

fn alive(pid: i32) -> bool {
    // Zombies count as dead: look at the state in /proc.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test]
async fn the_servers_children_die_with_it() {
    let s = common::Scratch::new();
    let fixture = maljan_testkit::bin_path("fixture-echo");
    let pidfile = s.dir.path().join("grandchild.pid");
    let script = format!(
        "sleep 300 & echo $! > {}; exec {}",
        pidfile.display(),
        fixture.display()
    );
    let cfg = ServerConfig {
        transport: TransportKind::Stdio,
        command: "/bin/sh".into(),
        args: vec!["-c".into(), script],
        enabled: true,
        ..Default::default()
    };
    let rt = s.runtime(vec![("sh", cfg)], common::quick());
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let rec = job
        .server("sh")
        .unwrap()
        .call("echo", json!({"message":"x"}))
        .await;
    assert!(rec.ok, "{:?}", rec.error);
    let server_pid = rt
        .slot("sh")
        .unwrap()
        .current_connection()
        .await
        .unwrap()
        .pid()
        .unwrap() as i32;
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(server_pid) && alive(grandchild));
    rt.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while (alive(server_pid) || alive(grandchild)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(server_pid), "server still running");
    assert!(
        !alive(grandchild),
        "the server's child outlived the runtime"
    );
}

#[tokio::test]
async fn only_documented_environment_variables_pass() {
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("MALJAN_TEST_SECRET", "no");
        std::env::set_var("MALJAN_TEST_ALLOWED", "yes");
    }
    let s = common::Scratch::new();
    let mut cfg = s.fixture("fixture-echo", &[("EXTRA", "1")]);
    cfg.env_allow = vec!["MALJAN_TEST_ALLOWED".into()];
    let rt = s.runtime(vec![("fx", cfg)], common::quick());
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let rec = job.server("fx").unwrap().call("env", json!({})).await;
    let names: Vec<String> = serde_json::from_str(&rec.text()).unwrap();
    assert!(
        names.contains(&"MALJAN_TEST_ALLOWED".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"EXTRA".to_string()));
    assert!(names.contains(&"PATH".to_string()));
    assert!(
        !names.contains(&"MALJAN_TEST_SECRET".to_string()),
        "{names:?}"
    );
    for n in &names {
        let ok = maljan_client::config::BASE_ENV.contains(&n.as_str())
            || [
                "MALJAN_TEST_ALLOWED",
                "EXTRA",
                "FIXTURE_LOG",
                "PYTHONIOENCODING",
            ]
            .contains(&n.as_str());
        assert!(ok, "unexpected variable {n}");
    }
    rt.shutdown().await;
}
