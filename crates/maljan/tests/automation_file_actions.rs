//! The files server serves every FA_* action automation-file registers: `maljan tools files`
//! (with the opt-in FA_run_shell named, as an operator would) is compared with the executor
//! registry of the automation-file package installed in the peers venv, and the test prints
//! which actions are missing before it fails.

mod common;

use std::{collections::BTreeSet, process::Command, time::Duration};

use common::{maljan, peer, run, text};

/// The FA_* names automation-file's own executor registers.
fn automation_file_actions() -> BTreeSet<String> {
    let out = run(
        Command::new(peer("MALJAN_PY")).args([
            "-c",
            "from automation_file import executor\n\
             print('\\n'.join(n for n in executor.registry.event_dict if n.startswith('FA_')))",
        ]),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "automation-file is not importable: {}",
        text(&out)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn served() -> BTreeSet<String> {
    let all = run(
        Command::new(maljan()).args(["tools", "files"]),
        Duration::from_secs(60),
    );
    assert!(all.status.success(), "{}", text(&all));
    let tools: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let mut names: BTreeSet<String> = (tools.as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    // FA_run_shell is opt-in: listed only when the operator names it.
    let shell = run(
        Command::new(maljan()).args(["tools", "files", "--allowed-actions", "FA_run_shell"]),
        Duration::from_secs(60),
    );
    if shell.status.success() {
        names.insert("FA_run_shell".into());
    }
    names
}

#[test]
fn every_automation_file_action_is_served() {
    let wanted = automation_file_actions();
    assert_eq!(
        wanted.len(),
        179,
        "automation-file 0.0.55 registers 179 FA_* actions"
    );
    let served = served();
    let missing: Vec<&String> = wanted.difference(&served).collect();
    println!(
        "{} of {} automation-file actions served",
        wanted.len() - missing.len(),
        wanted.len()
    );
    for name in &missing {
        println!("missing: {name}");
    }
    assert!(missing.is_empty(), "{} missing: {missing:?}", missing.len());
}
