//! The console in a real browser (Debian's headless Chromium over WebDriver): add a server
//! through the form, test it and see its unavailable tool, submit a sample, watch it finish live,
//! open the report and follow an evidence link to its ledger row. A screenshot of each page is
//! kept under `<target dir>/console-screenshots/` (the test prints the folder).
//!
//! Needs `chromium` and `chromedriver` (scripts/peers.sh installs them and sets MALJAN_CHROMIUM
//! and MALJAN_CHROMEDRIVER); without them the test fails and says so.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn screenshots_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/browser-<hash>
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(client: &Client, dir: &Path, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// A copy of a built binary in the test's own folder: the shared target directory's copy can be
/// replaced by another checkout's build while this test runs.
fn own_copy(built: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join(built.file_name().unwrap());
    std::fs::copy(built, &copy).unwrap();
    copy
}

fn wait(c: &Client) -> fantoccini::wait::Wait<'_> {
    c.wait().at_most(Duration::from_secs(90))
}

/// Clicks what `locator` finds and waits until the browser has left the page: a form's submit
/// button or a link reloads the page, and until the old document is gone a lookup can still find
/// the old page's elements (or find them going stale under it).
async fn click_and_wait_for_new_page(client: &Client, on: &fantoccini::elements::Element) {
    let old_page = client.find(Locator::Css("html")).await.unwrap();
    on.click().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while old_page.tag_name().await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the page did not change after the click"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn tool(var: &str, fallback: &str) -> String {
    let path = std::env::var(var).unwrap_or_else(|_| fallback.to_string());
    assert!(
        Path::new(&path).exists(),
        "{path} is missing: run `eval \"$(scripts/peers.sh)\"` (it installs Debian's chromium and chromium-driver) and set {var}"
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_test_submit_watch_report_and_follow_evidence_in_chromium() {
    let chromium = tool("MALJAN_CHROMIUM", "/usr/bin/chromium");
    let chromedriver = tool("MALJAN_CHROMEDRIVER", "/usr/bin/chromedriver");
    let dir = tempfile::tempdir().unwrap();
    let maljan = own_copy(&maljan_testkit::package_bin("maljan", "maljan"), dir.path());
    let echo = own_copy(&maljan_testkit::bin_path("fixture-echo"), dir.path());
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\"]\nlabel = \"maljan analysis (built-in)\"\n", maljan.to_string_lossy()),
    )
    .unwrap();
    let port = maljan_testkit::free_port();
    let addr = format!("127.0.0.1:{port}");
    let _console = Killed(
        Command::new(&maljan)
            .args(["console", "--listen", &addr, "--config"])
            .arg(&config)
            .env("MALJAN_HOME", dir.path().join("data"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start maljan console"),
    );
    let help = Command::new(&maljan)
        .args(["console", "--help"])
        .output()
        .unwrap();
    assert!(
        help.status.success(),
        "{} has no `console` command (a build of another checkout?)",
        maljan.display()
    );
    maljan_testkit::wait_answering(&addr, "/");
    let wd_port = maljan_testkit::free_port();
    let _driver = Killed(
        Command::new(&chromedriver)
            .arg(format!("--port={wd_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
    );
    maljan_testkit::wait_answering(&format!("127.0.0.1:{wd_port}"), "/status");
    let profile = dir.path().join("chromium-profile");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--window-size=1280,1000",
            format!("--user-data-dir={}", profile.display())]}),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{wd_port}"))
        .await
        .expect("a WebDriver session in headless Chromium");
    let shots = screenshots_dir();
    let base = format!("http://{addr}");

    // 0. Log in as the owner: the login URL the console wrote (0600) beside its data. The
    // address loses the token once the session cookie is set.
    let login_url = std::fs::read_to_string(dir.path().join("data/console-login.url"))
        .expect("the console keeps its login URL in its data directory");
    client.goto(login_url.trim()).await.unwrap();
    let landed = client.current_url().await.unwrap();
    assert!(
        landed.query().is_none() && landed.path() == "/",
        "the login URL lands on the dashboard without its token: {landed}"
    );

    // 1. Add a server through the form and test it before saving.
    client.goto(&format!("{base}/servers/new")).await.unwrap();
    client
        .find(Locator::Id("name"))
        .await
        .unwrap()
        .send_keys("echo")
        .await
        .unwrap();
    client
        .find(Locator::Id("command"))
        .await
        .unwrap()
        .send_keys(&echo.to_string_lossy())
        .await
        .unwrap();
    shot(&client, &shots, "01-server-form").await;
    let button = client.find(Locator::Id("test-button")).await.unwrap();
    click_and_wait_for_new_page(&client, &button).await;
    let ok = match wait(&client).for_element(Locator::Id("test-ok")).await {
        Ok(ok) => ok,
        Err(e) => {
            shot(&client, &shots, "01-server-test-failed").await;
            let page = client.source().await.unwrap_or_default();
            std::fs::write(shots.join("01-server-test-failed.html"), &page).unwrap();
            panic!("the test answered: {e}; the page is in {}", shots.display());
        }
    };
    assert!(ok.text().await.unwrap().contains("connected over stdio"));
    let unavailable = client
        .find(Locator::Css("tr.unavailable"))
        .await
        .expect("an unavailable tool row");
    let text = unavailable.text().await.unwrap();
    assert!(
        text.contains("missing")
            && text.contains("frobnicator not found on PATH")
            && text.contains("install frobnicator"),
        "{text}"
    );
    shot(&client, &shots, "02-server-tested").await;
    // Changing a connection field marks the test stale (the script, under the page's CSP).
    client
        .find(Locator::Id("command"))
        .await
        .unwrap()
        .send_keys(" ")
        .await
        .unwrap();
    let note = client.find(Locator::Id("stale-note")).await.unwrap();
    assert!(note.is_displayed().await.unwrap(), "the stale note shows");
    client
        .find(Locator::Id("command"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    client
        .find(Locator::Id("command"))
        .await
        .unwrap()
        .send_keys(&echo.to_string_lossy())
        .await
        .unwrap();
    let button = client.find(Locator::Id("test-button")).await.unwrap();
    click_and_wait_for_new_page(&client, &button).await;
    wait(&client)
        .for_element(Locator::Id("test-ok"))
        .await
        .unwrap();
    // Every tool starts ticked, as `maljan servers add` without --tool; untick the unavailable one.
    for t in ["echo", "stats"] {
        let tick = client
            .find(Locator::Css(&format!("input[name=tools][value={t}]")))
            .await
            .unwrap();
        assert!(tick.is_selected().await.unwrap(), "{t} starts ticked");
    }
    client
        .find(Locator::Css("input[name=tools][value=missing]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let button = client.find(Locator::Id("save-button")).await.unwrap();
    click_and_wait_for_new_page(&client, &button).await;
    let card = wait(&client)
        .for_element(Locator::Id("server-echo"))
        .await
        .expect("the server's card");
    // The saved server is tested in the background; the card's Test shows it now.
    let test = card.find(Locator::Css("footer button")).await.unwrap();
    click_and_wait_for_new_page(&client, &test).await;
    let card = wait(&client)
        .for_element(Locator::Css("#server-echo tr.unavailable"))
        .await
        .expect("the card lists the unavailable tool");
    assert!(
        card.text()
            .await
            .unwrap()
            .contains("frobnicator not found on PATH")
    );
    shot(&client, &shots, "03-servers").await;

    // 2. Submit a sample and watch it finish live.
    let sample = dir.path().join("dropper.bin");
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(64, 0);
    bytes.extend_from_slice(b"GET http://evil.example.com/stage2 from 10.9.8.7\0");
    std::fs::write(&sample, bytes).unwrap();
    client.goto(&format!("{base}/jobs/new")).await.unwrap();
    client
        .find(Locator::Id("sample"))
        .await
        .unwrap()
        .send_keys(&sample.to_string_lossy())
        .await
        .unwrap();
    client
        .find(Locator::Css("input[name=servers][value=analysis]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shot(&client, &shots, "04-submit").await;
    let button = client.find(Locator::Id("submit-button")).await.unwrap();
    click_and_wait_for_new_page(&client, &button).await;
    let url = client.current_url().await.unwrap();
    assert!(url.path().starts_with("/jobs/"), "{url}");
    // The live view fills from the event stream (a job this small may end first: the page then
    // shows the report, and the stream's past events were replayed into it on the way).
    let live_or_done = wait(&client)
        .for_element(Locator::Css("#live-steps li.done, #verdict"))
        .await
        .expect("live progress");
    if live_or_done.attr("id").await.unwrap().as_deref() != Some("verdict") {
        shot(&client, &shots, "05-job-live").await;
    }
    let verdict = wait(&client)
        .for_element(Locator::Id("verdict"))
        .await
        .expect("the report after the job ended");
    let word = verdict
        .find(Locator::Css(".word"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        ["MALICIOUS", "SUSPICIOUS", "BENIGN", "UNKNOWN"].contains(&word.to_uppercase().as_str()),
        "{word}"
    );
    shot(&client, &shots, "06-report").await;

    // 3. Follow an evidence link to its ledger row.
    let link = client
        .find(Locator::Css("#steps-table a.ev"))
        .await
        .expect("an evidence link");
    let ev = link.text().await.unwrap();
    click_and_wait_for_new_page(&client, &link).await;
    let row = wait(&client)
        .for_element(Locator::Css("tr.target"))
        .await
        .expect("the ledger row");
    assert_eq!(row.attr("id").await.unwrap().as_deref(), Some(ev.as_str()));
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/ledger")
    );
    shot(&client, &shots, "07-ledger-row").await;
    client.goto(&format!("{base}/jobs")).await.unwrap();
    shot(&client, &shots, "08-jobs").await;
    client.goto(&format!("{base}/")).await.unwrap();
    shot(&client, &shots, "09-dashboard").await;
    client.close().await.unwrap();
    eprintln!("screenshots: {}", shots.display());
    for name in [
        "01-server-form",
        "02-server-tested",
        "03-servers",
        "04-submit",
        "06-report",
        "07-ledger-row",
    ] {
        assert!(
            shots.join(format!("{name}.png")).metadata().unwrap().len() > 1000,
            "{name}"
        );
    }
}
