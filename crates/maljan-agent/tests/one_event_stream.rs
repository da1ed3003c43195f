//! Issue 41 item 6: one job, one event stream. A job run through the pipeline tells its whole
//! progress on the one `EventStream` its caller gives: the sample's upload to an HTTP server
//! (the client), the servers reached and each step (the triage), each stage, the model's calls
//! and answers (the agent) and the end (the pipeline), in the order they happened. A subscriber
//! hears exactly what the ledger keeps: the job's numbered events are written from the same
//! events, kind and data alike.

mod common;

use std::{
    process::{Child, Command},
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{endpoint, verdict_text};
use maljan_agent::{
    JobEvents, Models, ProviderKind, Stages,
    pipeline::{Analysis, Request, SampleSource, Scope, Setup, root_builtins},
};
use maljan_client::{
    Config, Event, EventStream, Ledger, Runtime, ServerConfig, TransportKind, job::new_job_id,
};
use maljan_testkit::ScriptedModel;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `maljan serve files --http` on a free port, its root away from the sample: it takes the
/// sample through put_sample.
fn files_over_http(root: &std::path::Path, staging: &std::path::Path) -> (Served, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(maljan_testkit::package_bin("maljan", "maljan"))
        .args(["serve", "files", "--http", &format!("127.0.0.1:{port}")])
        .arg("--root")
        .arg(root)
        .arg("--staging-dir")
        .arg(staging)
        .env("MALJAN_LOG", "warn")
        .spawn()
        .unwrap();
    let served = Served(child);
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (served, format!("http://127.0.0.1:{port}/mcp"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("maljan serve files --http did not start");
}

fn position(events: &[Event], what: impl Fn(&Event) -> bool, name: &str) -> usize {
    events
        .iter()
        .position(what)
        .unwrap_or_else(|| panic!("no {name} event in {:?}", kinds(events)))
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_s_triage_agent_and_upload_progress_are_one_stream_and_the_ledger_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    let elsewhere = dir.path().join("elsewhere");
    for d in [&samples, &elsewhere] {
        std::fs::create_dir_all(d).unwrap();
    }
    let sample = maljan_triage::corpus::write_corpus(&samples)["sample.exe"].clone();
    let (_files, url) = files_over_http(&elsewhere, &dir.path().join("staging"));

    let analysis = ServerConfig {
        command: maljan_testkit::package_bin("maljan", "maljan")
            .to_string_lossy()
            .into_owned(),
        args: vec!["serve".into(), "analysis".into()],
        env: [("MALJAN_LOG".to_string(), "warn".to_string())].into(),
        enabled: true,
        ..Default::default()
    };
    let up = ServerConfig {
        transport: TransportKind::StreamableHttp,
        url,
        enabled: true,
        ..Default::default()
    };
    let mut config = Config {
        servers: [("analysis".to_string(), analysis), ("up".to_string(), up)].into(),
        ..Default::default()
    };
    config.data_dir = dir.path().join("data");
    config.path = dir.path().join("config.toml");
    root_builtins(&mut config, Scope::Shared);
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite3"), 64 * 1024).unwrap();
    let runtime = Runtime::new(config, ledger.clone());

    let model = ScriptedModel::start(&json!({"turns": [
        {"tool_calls": [{"name": "hashes", "arguments": "{}"}]},
        {"text": "write-up: the hashes are in [ev_0001]"},
        {"text": verdict_text("unknown", &["ev_0001"])},
    ]}));
    let pipeline = Analysis {
        runtime: runtime.clone(),
        setup: Arc::new(Setup {
            plan: Default::default(),
            stages: Stages::default(),
            models: Some(Arc::new(Models::new(vec![endpoint(
                &model,
                "m",
                ProviderKind::OpenAi,
            )]))),
        }),
        store: None,
    };

    // The subscriber a front end would be (a terminal, `maljan serve jobs`), and the ledger.
    let events = EventStream::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    events.subscribe(move |e| h.lock().unwrap().push(e.clone()));
    let job_id = new_job_id();
    let kept = JobEvents::record(ledger.clone(), job_id.clone(), &events, |_| {});
    let request = Request {
        job_id: job_id.clone(),
        label: "one stream".into(),
        sample: SampleSource::Local(sample.clone()),
        servers: None,
        agent: true,
        recursion: Default::default(),
        keep_artifacts: None,
        cancel: CancellationToken::new(),
    };
    let outcome = pipeline.run(request, events.clone()).await.unwrap();
    kept.finish().await;
    runtime.shutdown().await;
    let heard = heard.lock().unwrap().clone();

    // Triage, agent and upload progress, in the order they happened, ending with done.
    let triage = position(
        &heard,
        |e| matches!(e, Event::Stage { stage } if stage == "triage"),
        "triage stage",
    );
    let upload = position(&heard, |e| matches!(e, Event::Upload(_)), "upload");
    let connected = position(&heard, |e| matches!(e, Event::Connected(_)), "connected");
    let step = position(
        &heard,
        |e| matches!(e, Event::StepStarted { .. }),
        "step_started",
    );
    let analyst = position(
        &heard,
        |e| matches!(e, Event::Stage { stage } if stage == "analyst"),
        "analyst stage",
    );
    let model_call = position(
        &heard,
        |e| matches!(e, Event::CallFinished(c) if c.stage.as_deref() == Some("analyst")),
        "model's call",
    );
    let answered = position(
        &heard,
        |e| matches!(e, Event::ModelAnswered { .. }),
        "model_answered",
    );
    let judge = position(
        &heard,
        |e| matches!(e, Event::Stage { stage } if stage == "judge"),
        "judge stage",
    );
    let order = [
        triage, upload, connected, step, analyst, model_call, answered, judge,
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {order:?} in {:?}",
        kinds(&heard)
    );
    assert!(heard.last().unwrap().is_done(), "{:?}", kinds(&heard));
    assert_eq!(heard.iter().filter(|e| e.is_done()).count(), 1);
    let uploads: Vec<(u64, u64)> = heard
        .iter()
        .filter_map(|e| match e {
            Event::Upload(p) if p.server == "up" => Some((p.sent, p.total)),
            _ => None,
        })
        .collect();
    let size = std::fs::metadata(&sample).unwrap().len();
    assert_eq!(uploads.last(), Some(&(size, size)), "{uploads:?}");
    let steps_done = heard
        .iter()
        .filter(|e| matches!(e, Event::CallFinished(c) if c.stage.is_none()))
        .count();
    assert_eq!(steps_done, outcome.report.steps.len());
    let Event::Done {
        status, verdict, ..
    } = heard.last().unwrap()
    else {
        unreachable!()
    };
    assert_eq!(status, outcome.report.status.as_str());
    assert!(verdict.is_some());

    // The ledger's rows are those very events, numbered in the order heard.
    let rows = ledger.job_events(&job_id, 0).unwrap();
    let from_rows: Vec<(i64, String, serde_json::Value)> = rows
        .iter()
        .map(|r| {
            (
                r.seq,
                r.kind.clone(),
                serde_json::from_str(&r.data).unwrap(),
            )
        })
        .collect();
    let from_stream: Vec<(i64, String, serde_json::Value)> = heard
        .iter()
        .enumerate()
        .map(|(i, e)| (i as i64 + 1, e.kind().to_string(), e.data()))
        .collect();
    assert_eq!(from_rows, from_stream);
}
