//! One analysis job, from sample to report, wherever it starts: `maljan analyze`, the console's
//! embedded workers (and so its pages and API) and `maljan worker` all call [`Analysis::run`];
//! none of them repeats a step of it.
//!
//! The steps, in order: the job's private directory (`<data dir>/work/<job id>`, 0700) gets the
//! sample (copied from the caller's path, or fetched from the sample store), so whatever a
//! built-in server carves or extracts beside it lands there and never in the evidence folder;
//! the job is made on the runtime; triage → analyst → judge run ([`crate::run::run_stages`]);
//! the report is kept in the ledger; the job ends with the report's status; the children are
//! copied out when the caller asked to keep them (`--keep-artifacts DIR`, named by sha256); the
//! directory is removed. Its progress goes to the job's event stream (an [`EventStream`] the caller
//! gives and subscribes to: the terminal, the job's events in the ledger), ending with `done`.
//!
//! What is resolved once per process (the plan, the stages, the model) is a [`Setup`]; how the
//! built-in servers reach the jobs' directories is [`root_builtins`].

use std::{
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use maljan_client::{Config, EventStream, JobSpec, KeySource, Runtime, SampleStore, paths};
use maljan_triage::{Plan, RecursionLimits, Report, TriageOptions, render};
use tokio_util::sync::CancellationToken;

use crate::{
    AgentOptions, RunFigures,
    llm::{self, Models},
    stages::Stages,
};

/// What every job of one process shares: the triage plan, the agent stages and the model.
#[derive(Clone)]
pub struct Setup {
    pub plan: Plan,
    pub stages: Stages,
    /// None: no model configured (or `--no-agent`): the heuristic verdict stands.
    pub models: Option<Arc<Models>>,
}

/// Which model a process uses.
#[derive(Debug, Clone, Copy)]
pub enum ModelChoice<'a> {
    /// None at all (`--no-agent`).
    Off,
    /// The configured one (`[llm]`, MALJAN_LLM_*), optionally another model of it (`--model`).
    Configured(Option<&'a str>),
}

impl Setup {
    /// The plan (`steps`, else triage.toml beside the config file), the stages (agent.toml
    /// beside it) and the model.
    pub fn discover(
        config: &Config,
        steps: Option<&Path>,
        model: ModelChoice<'_>,
    ) -> Result<Self, String> {
        let (plan, plan_file) =
            Plan::discover(steps, &config.path).map_err(|e| format!("triage plan: {e}"))?;
        if let Some(f) = plan_file {
            tracing::debug!("triage plan from {f}");
        }
        let stages = Stages::discover(&config.path)?;
        let models = match model {
            ModelChoice::Off => None,
            ModelChoice::Configured(name) => {
                let keys = KeySource::in_dir(&config.data_dir);
                llm::resolve(config, &keys, &llm::Overrides::from_env(), name)
                    .map_err(|e| format!("the model: {e}"))?
                    .map(|eps| Arc::new(Models::new(eps)))
            }
        };
        Ok(Self {
            plan,
            stages,
            models,
        })
    }
}

/// Where a job's sample comes from.
#[derive(Debug, Clone)]
pub enum SampleSource {
    /// A file on this host (`maljan analyze`): copied into the job's directory, never written to.
    Local(PathBuf),
    /// The sample store, by sha256 (submitted jobs); `name` is the submitter's file name.
    Stored { sha256: String, name: String },
}

/// One job to run.
pub struct Request {
    pub job_id: String,
    pub label: String,
    pub sample: SampleSource,
    /// Servers to use, in order of preference; None = every enabled server.
    pub servers: Option<Vec<String>>,
    /// Run the model stages (when a model is configured).
    pub agent: bool,
    pub recursion: RecursionLimits,
    /// Copy each extracted or carved child here (named by its sha256) before the job's
    /// directory is removed.
    pub keep_artifacts: Option<PathBuf>,
    pub cancel: CancellationToken,
}

/// Why a job could not start (it has no report).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The sample store is away or refused: worth trying again later.
    #[error("fetching the sample: {0}")]
    SampleUnavailable(String),
    #[error("{0}")]
    Other(String),
}

/// What a finished job gives its caller.
pub struct Outcome {
    pub report: Report,
    pub figures: RunFigures,
    /// Where the kept children were copied (`keep_artifacts`).
    pub kept: Vec<PathBuf>,
}

/// The pipeline over one runtime.
pub struct Analysis {
    pub runtime: Arc<Runtime>,
    pub setup: Arc<Setup>,
    /// Where [`SampleSource::Stored`] samples are fetched from.
    pub store: Option<SampleStore>,
}

/// The private directory of job `job_id`: `<data dir>/work/<job id>`.
pub fn job_dir(data_dir: &Path, job_id: &str) -> PathBuf {
    paths::work_dir(data_dir).join(job_id)
}

impl Analysis {
    /// Runs the job to its report; the job's events go to `events`, the last being `done` once
    /// the report is kept. Err only when the job could not start (no sample): everything else is
    /// in the report, and the caller says why in the stream (a worker's `retry` or `done`).
    pub async fn run(&self, req: Request, events: EventStream) -> Result<Outcome, StartError> {
        let data_dir = &self.runtime.config().data_dir;
        let dir = job_dir(data_dir, &req.job_id);
        let _ = std::fs::remove_dir_all(&dir);
        paths::ensure_private_dir(&dir)
            .map_err(|e| StartError::Other(format!("cannot create {}: {e}", dir.display())))?;
        // Removed on every way out, the early ones included.
        let cleanup = RemoveOnDrop(dir.clone());
        let (sample, original) = self.place_sample(&req.sample, &dir).await?;

        let job = self
            .runtime
            .new_job(JobSpec {
                label: req.label.clone(),
                sample: Some(sample.clone()),
                id: Some(req.job_id.clone()),
                events: events.clone(),
            })
            .map_err(|e| StartError::Other(e.to_string()))?;
        // What a shared analysis server carves for this sample (see `root_builtins`).
        let carved = job
            .sample()
            .map(|smp| SharedCarved::hold(&paths::work_dir(data_dir), &smp.sha256));
        let opts = AgentOptions {
            triage: TriageOptions {
                plan: self.setup.plan.clone(),
                servers: req.servers.clone(),
                recursion: req.recursion,
                ..Default::default()
            },
            models: if req.agent {
                self.setup.models.clone()
            } else {
                None
            },
            stages: self.setup.stages.clone(),
            cancel: req.cancel.clone(),
        };
        let (mut report, figures) = crate::run::run_stages(&job, opts).await;
        if let Some(original) = original {
            // The report names the evidence where the analyst keeps it, not the job's copy.
            report.sample.path = original.to_string_lossy().into_owned();
        }
        let ledger = self.runtime.ledger().clone();
        let (id, json) = (report.job_id.clone(), render::json(&report));
        match tokio::task::spawn_blocking(move || ledger.save_report(&id, &json)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("job {}: the report was not kept: {e}", req.job_id),
            Err(e) => tracing::warn!("job {}: the report was not kept: {e}", req.job_id),
        }
        job.finish_as(crate::run::job_status_of(&report));
        drop(job);
        events.emit(report.done_event());
        let kept = match &req.keep_artifacts {
            Some(to) => {
                let mut from = vec![dir.clone()];
                from.extend(carved.as_ref().map(|c| c.dir.clone()));
                keep_artifacts(&from, &sample, to)
            }
            None => Vec::new(),
        };
        drop(carved);
        drop(cleanup);
        Ok(Outcome {
            report,
            figures,
            kept,
        })
    }

    /// Puts the sample in the job's directory; for a local file, also its canonical path.
    async fn place_sample(
        &self,
        source: &SampleSource,
        dir: &Path,
    ) -> Result<(PathBuf, Option<PathBuf>), StartError> {
        match source {
            SampleSource::Local(path) => {
                let original = std::fs::canonicalize(path)
                    .map_err(|e| StartError::Other(format!("{}: {e}", path.display())))?;
                let copy = dir.join(safe_file_name(&original.to_string_lossy()));
                let (from, to) = (original.clone(), copy.clone());
                tokio::task::spawn_blocking(move || private_copy(&from, &to))
                    .await
                    .map_err(|e| StartError::Other(e.to_string()))?
                    .map_err(|e| {
                        StartError::Other(format!(
                            "cannot copy the sample {} into the job's directory: {e}",
                            original.display()
                        ))
                    })?;
                Ok((copy, Some(original)))
            }
            SampleSource::Stored { sha256, name } => {
                let store = self.store.as_ref().ok_or_else(|| {
                    StartError::Other("no sample store is configured for stored samples".into())
                })?;
                let to = dir.join(safe_file_name(name));
                store
                    .retrieve(sha256, &to)
                    .await
                    .map_err(|e| StartError::SampleUnavailable(format!("{e:#}")))?;
                Ok((to, None))
            }
        }
    }
}

/// The last part of a name, never one that climbs: names come from submitters.
fn safe_file_name(name: &str) -> String {
    Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n != ".." && n != "." && !n.is_empty())
        .unwrap_or_else(|| "sample".into())
}

/// Copies `from` to `to` as a 0600 file.
fn private_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut src = std::fs::File::open(from)?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    std::io::copy(&mut src, &mut dst)?;
    Ok(())
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove the job directory {}: {e}", self.0.display());
        }
    }
}

/// What a built-in analysis server shared by many jobs (`--work-dir <data dir>/work`) carves for
/// one sample: `carved/<sha256>/`, removed when the last job of this process on that sample ends.
struct SharedCarved {
    sha256: String,
    dir: PathBuf,
}

fn carved_in_use() -> &'static std::sync::Mutex<std::collections::HashMap<String, usize>> {
    static IN_USE: OnceLock<std::sync::Mutex<std::collections::HashMap<String, usize>>> =
        OnceLock::new();
    IN_USE.get_or_init(Default::default)
}

impl SharedCarved {
    fn hold(work: &Path, sha256: &str) -> Self {
        *carved_in_use()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(sha256.to_string())
            .or_default() += 1;
        Self {
            sha256: sha256.to_string(),
            dir: work.join("carved").join(sha256),
        }
    }
}

impl Drop for SharedCarved {
    fn drop(&mut self) {
        let mut in_use = carved_in_use().lock().unwrap_or_else(|e| e.into_inner());
        let last = match in_use.get_mut(&self.sha256) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                in_use.remove(&self.sha256);
                true
            }
        };
        if last {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Copies every file the job's servers wrote for it (the children: members, attachments,
/// carved payloads) under `dirs`, except the sample itself, to `to`, each named by its sha256
/// (so a child found twice is kept once). Returns the copies.
fn keep_artifacts(dirs: &[PathBuf], sample: &Path, to: &Path) -> Vec<PathBuf> {
    if let Err(e) = std::fs::create_dir_all(to) {
        tracing::warn!("--keep-artifacts {}: {e}", to.display());
        return Vec::new();
    }
    let mut kept = Vec::new();
    let mut stack = dirs.to_vec();
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && path != sample {
                match maljan_client::Sample::read(&path) {
                    Ok(child) => {
                        let dest = to.join(&child.sha256);
                        if dest.exists() || private_copy(&path, &dest).is_ok() {
                            if !kept.contains(&dest) {
                                kept.push(dest);
                            }
                        } else {
                            tracing::warn!("cannot keep {}", path.display());
                        }
                    }
                    Err(e) => tracing::warn!("cannot read {}: {e}", path.display()),
                }
            }
        }
    }
    kept.sort();
    kept
}

/// How a runtime serves jobs: one job only (`maljan analyze` on its own runtime), or many.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every job of the process, each in its directory under `<data dir>/work`.
    Shared,
    /// One job, whose private directory this is.
    Dedicated(&'a Path),
}

/// Gives the built-in servers — this binary's `serve analysis` and `serve files`, whether from
/// the built-in defaults or a user's entry in config.toml — the jobs' directories: the analysis
/// server reads samples there (`--root`) and writes what it carves under `--work-dir` (when that
/// server takes it): the job's directory for a dedicated runtime, the work directory for a
/// shared one (`carved/<sha256>/`, removed when the last job on that sample ends); the files
/// server works in the job's directory (dedicated) or the work directory (shared). In the
/// runtime's config only: the file is never changed. A user's own roots are kept beside these.
pub fn root_builtins(config: &mut Config, scope: Scope<'_>) {
    let work = paths::work_dir(&config.data_dir);
    if let Err(e) = paths::ensure_private_dir(&work) {
        tracing::warn!("cannot create {}: {e}", work.display());
    }
    let root = match scope {
        Scope::Shared => work.clone(),
        Scope::Dedicated(dir) => dir.to_path_buf(),
    };
    let root_s = root.to_string_lossy().into_owned();
    for server in config.servers.values_mut() {
        match builtin_kind(&server.command, &server.args) {
            Some("analysis") => {
                if !has_pair(&server.args, "--root", &root_s) {
                    server.args.extend(["--root".into(), root_s.clone()]);
                }
                if !server.args.iter().any(|a| a == "--work-dir") && takes_work_dir(&server.command)
                {
                    server.args.extend(["--work-dir".into(), root_s.clone()]);
                }
            }
            Some("files") => match server.args.iter().position(|a| a == "--root") {
                // The default root (the whole work directory) narrows to the job's own.
                Some(i)
                    if server
                        .args
                        .get(i + 1)
                        .is_some_and(|r| Path::new(r) == work.as_path()) =>
                {
                    server.args[i + 1] = root_s.clone();
                }
                Some(_) => {
                    if !has_pair(&server.args, "--root", &root_s) {
                        server.args.extend(["--root".into(), root_s.clone()]);
                    }
                }
                None => server.args.extend(["--root".into(), root_s.clone()]),
            },
            _ => {}
        }
    }
}

fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
    args.windows(2).any(|w| w[0] == flag && w[1] == value)
}

/// `analysis` or `files` when `command args` starts one of this binary's built-in servers.
pub fn builtin_kind<'a>(command: &str, args: &'a [String]) -> Option<&'a str> {
    let exe = Path::new(command).file_name()?.to_string_lossy();
    if !exe.starts_with("maljan") || args.first().is_none_or(|a| a != "serve") {
        return None;
    }
    args.get(1)
        .map(String::as_str)
        .filter(|k| matches!(*k, "analysis" | "files"))
}

/// Whether `command serve analysis` takes `--work-dir` (asked once per process: the option is
/// new, and an older binary named in a config would refuse it).
fn takes_work_dir(command: &str) -> bool {
    static ANSWER: OnceLock<std::sync::Mutex<std::collections::HashMap<String, bool>>> =
        OnceLock::new();
    let cache = ANSWER.get_or_init(Default::default);
    if let Some(known) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(command) {
        return *known;
    }
    let yes = std::process::Command::new(command)
        .args(["serve", "analysis", "--help"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--work-dir"));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(command.to_string(), yes);
    yes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(data: &Path) -> Config {
        let mut c = Config::builtin();
        c.data_dir = data.to_path_buf();
        let work = paths::work_dir(data).to_string_lossy().into_owned();
        c.servers.get_mut("files").unwrap().args[3] = work;
        for s in c.servers.values_mut() {
            s.command = "/opt/maljan/bin/maljan".into();
        }
        c
    }

    #[test]
    fn shared_builtins_reach_every_job_directory_and_keep_a_user_s_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = config_in(tmp.path());
        c.servers
            .get_mut("analysis")
            .unwrap()
            .args
            .extend(["--root".into(), "/srv/evidence".into()]);
        root_builtins(&mut c, Scope::Shared);
        let work = paths::work_dir(tmp.path()).to_string_lossy().into_owned();
        let a = &c.servers["analysis"].args;
        assert!(has_pair(a, "--root", "/srv/evidence"), "{a:?}");
        assert!(has_pair(a, "--root", &work), "{a:?}");
        assert!(
            !a.iter().any(|x| x == "--work-dir"),
            "shared: no --work-dir"
        );
        assert!(has_pair(&c.servers["files"].args, "--root", &work));
        // Twice is the same as once.
        let before = c.clone();
        root_builtins(&mut c, Scope::Shared);
        assert_eq!(c, before);
    }

    #[test]
    fn a_dedicated_runtime_narrows_the_files_root_to_the_job() {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = config_in(tmp.path());
        let dir = job_dir(tmp.path(), "job_x");
        root_builtins(&mut c, Scope::Dedicated(&dir));
        let d = dir.to_string_lossy().into_owned();
        assert_eq!(
            c.servers["files"].args[2..],
            ["--root".to_string(), d.clone()]
        );
        assert!(has_pair(&c.servers["analysis"].args, "--root", &d));
    }

    #[test]
    fn only_this_binary_s_serve_commands_are_builtins() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            builtin_kind("/usr/bin/maljan", &args(&["serve", "analysis"])),
            Some("analysis")
        );
        assert_eq!(
            builtin_kind("maljan", &args(&["serve", "files", "--root", "/x"])),
            Some("files")
        );
        assert_eq!(builtin_kind("python3", &args(&["serve", "analysis"])), None);
        assert_eq!(
            builtin_kind("/usr/bin/maljan", &args(&["serve", "jobs"])),
            None
        );
    }

    #[test]
    fn artifacts_are_kept_by_sha256_once_and_never_the_sample() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("job");
        std::fs::create_dir_all(dir.join("carved/abc/members")).unwrap();
        std::fs::write(dir.join("s.bin"), b"sample").unwrap();
        std::fs::write(dir.join("carved/abc/members/a.exe"), b"child").unwrap();
        std::fs::write(dir.join("carved/abc/members/b.exe"), b"child").unwrap();
        std::fs::write(dir.join("carved/abc/x.dll"), b"other").unwrap();
        let out = tmp.path().join("kept");
        let kept = keep_artifacts(std::slice::from_ref(&dir), &dir.join("s.bin"), &out);
        assert_eq!(kept.len(), 2, "{kept:?}");
        let sample_sha = maljan_client::Sample::read(&dir.join("s.bin"))
            .unwrap()
            .sha256;
        assert!(!out.join(sample_sha).exists());
        for k in &kept {
            let sha = k.file_name().unwrap().to_str().unwrap();
            assert_eq!(maljan_client::Sample::read(k).unwrap().sha256, sha);
        }
    }

    #[test]
    fn names_from_submitters_never_climb() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name(".."), "sample");
        assert_eq!(safe_file_name(""), "sample");
        assert_eq!(safe_file_name("a b.exe"), "a b.exe");
    }
}
