//! `maljan analyze A B DIR… [--recursive] [--jobs N] [--index FILE]`: many samples in one
//! process. The samples are found (folders walked, only regular files taken) and hashed first;
//! a sha256 seen before is a duplicate, analysed once. The unique ones run `--jobs` at a time
//! through the same [`Jobs`] as a single `maljan analyze` — one runtime, so one set of
//! tool-server processes shared by every job, each job in its own private directory under the
//! shared work root (`maljan_agent::pipeline::Scope::Shared`). Each job's report is rendered and
//! written as soon as it ends and only its index row is kept, so memory grows with `--jobs`, not
//! with the number of samples.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Instant,
};

use anyhow::bail;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use maljan_client::{EventStream, Sample, job::new_job_id};
use maljan_triage::{Format, render, visible};
use tokio_util::sync::CancellationToken;

use crate::{
    analyze::{AnalyzeArgs, Jobs, cancel_on_interrupt, default_report_path, read_sample},
    index::{self, IndexFormat, Row},
    report_file::{check_folder, check_writable, io_reason, shown, write_atomically},
};

/// The index's name when `--index` is not given, beside the reports.
const DEFAULT_INDEX: &str = "maljan-index.md";

/// What became of one path given or found.
enum Planned {
    /// The first sample with its sha256: analysed.
    Unique(Sample),
    /// Same sha256 as the planned entry at this position.
    DuplicateOf(usize),
    /// Not analysed, and why (one line, already made visible).
    Problem(String),
}

pub async fn analyze_many(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let format = args.format.unwrap_or(Format::Markdown);
    let (report_dir, index_path) = places(&args)?;
    let index_format = IndexFormat::of(&index_path).unwrap_or(IndexFormat::Markdown);

    let (given, recursive) = (args.samples.clone(), args.recursive);
    let (paths, plan) = tokio::task::spawn_blocking(move || {
        let found = collect(&given, recursive);
        let plan = plan(&found);
        (found.into_iter().map(|(p, _)| p).collect::<Vec<_>>(), plan)
    })
    .await?;
    let unique = plan
        .iter()
        .filter(|p| matches!(p, Planned::Unique(_)))
        .count();
    if paths.is_empty() {
        bail!("no sample found in {}", visible_list(&args.samples));
    }

    let jobs = Arc::new(Jobs::open(&args, None)?);
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    let bar = progress_bar(unique);
    for p in &plan {
        if let Planned::Problem(why) = p {
            bar.suspend(|| eprintln!("skipped: {why}"));
        }
    }

    let concurrency = args.jobs.map(usize::from).unwrap_or_else(default_jobs);
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut rows: Vec<Option<Row>> = vec![None; plan.len()];
    let mut codes: Vec<u8> = Vec::new();
    let mut kept: HashSet<PathBuf> = HashSet::new();
    let mut running = tokio::task::JoinSet::new();
    let done = |(i, row, code, artifacts): (usize, Row, u8, Vec<PathBuf>),
                rows: &mut Vec<Option<Row>>,
                codes: &mut Vec<u8>,
                kept: &mut HashSet<PathBuf>| {
        bar.inc(1);
        let verdict = row.verdict.as_deref().unwrap_or(&row.status).to_string();
        match &row.error {
            Some(e) => bar.suspend(|| eprintln!("not analysed: {e}")),
            None => {
                let name = Path::new(&row.sample)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                bar.set_message(format!("{} · {verdict}", visible(&name)));
            }
        }
        codes.push(code);
        kept.extend(artifacts);
        rows[i] = Some(row);
    };
    for (i, planned) in plan.iter().enumerate() {
        let Planned::Unique(sample) = planned else {
            continue;
        };
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p?,
            _ = cancel.cancelled() => break,
        };
        while let Some(finished) = running.try_join_next() {
            done(finished?, &mut rows, &mut codes, &mut kept);
        }
        let (jobs, sample, cancel) = (jobs.clone(), sample.clone(), cancel.child_token());
        let given = paths[i].to_string_lossy().into_owned();
        let report = report_dir.join(default_report_path(&sample.name, &sample.sha256, format));
        running.spawn(async move {
            let out = one(&jobs, given, sample, report, format, cancel).await;
            drop(permit);
            (i, out.0, out.1, out.2)
        });
    }
    while let Some(finished) = running.join_next().await {
        done(finished?, &mut rows, &mut codes, &mut kept);
    }
    bar.finish_and_clear();
    jobs.runtime.shutdown().await;

    let rows = fill(rows, &plan, &paths, &mut codes);
    write_atomically(
        &index_path,
        &index::render(&rows, index_format),
        "the index",
    )?;
    summary(&rows, unique, started);
    if let Some(to) = &args.keep_artifacts {
        eprintln!("kept {} artifacts in {}", kept.len(), shown(to));
    }
    println!("{}", shown(&index_path));
    Ok(ExitCode::from(worst(&codes)))
}

/// Where the reports go and the index, both checked before anything runs: `--report` must be an
/// existing folder (never created), the index's folder must exist, and both must take a file.
fn places(args: &AnalyzeArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    let report_dir = match (&args.report, &args.index) {
        (Some(dir), _) => {
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => bail!(
                    "--report {}: with several samples --report names a folder for the reports",
                    shown(dir)
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                    "--report {}: the folder does not exist (maljan does not create it)",
                    shown(dir)
                ),
                Err(e) => bail!("--report {}: {}", shown(dir), io_reason(&e)),
            }
            dir.clone()
        }
        (None, Some(index)) => index
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
        (None, None) => PathBuf::from("."),
    };
    let index = args
        .index
        .clone()
        .unwrap_or_else(|| report_dir.join(DEFAULT_INDEX));
    check_folder(
        &report_dir,
        &format!("the reports into {}", shown(&report_dir)),
    )?;
    check_writable(&index, "the index")?;
    Ok((report_dir, index))
}

/// `min(cores, 4)`: past four the shared servers, not the jobs, are the limit on a small host.
fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

/// Every path given, folders walked (their subfolders with `recursive`), each with the problem
/// that keeps it from being read, if any. Folders are walked in name order; symbolic links to
/// folders are not followed (no loops); devices, FIFOs and sockets inside folders are left out.
fn collect(given: &[PathBuf], recursive: bool) -> Vec<(PathBuf, Option<String>)> {
    let mut found = Vec::new();
    for path in given {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => walk(path, recursive, &mut found),
            _ => found.push((path.clone(), None)),
        }
    }
    found
}

fn walk(top: &Path, recursive: bool, found: &mut Vec<(PathBuf, Option<String>)>) {
    let mut folders = vec![top.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                let why = format!("cannot read the folder {}: {}", shown(&dir), io_reason(&e));
                found.push((dir, Some(why)));
                continue;
            }
        };
        let mut names: Vec<_> = entries.flatten().collect();
        names.sort_by_key(|e| e.file_name());
        let mut subfolders = Vec::new();
        for entry in names {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if recursive {
                    subfolders.push(path);
                }
            } else if kind.is_file()
                || (kind.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_file()))
            {
                found.push((path, None));
            }
        }
        // Popped in name order.
        folders.extend(subfolders.into_iter().rev());
    }
}

/// Reads and hashes each path (the first with a sha256 is analysed; a later one is its
/// duplicate).
fn plan(found: &[(PathBuf, Option<String>)]) -> Vec<Planned> {
    let mut first: HashMap<String, usize> = HashMap::new();
    found
        .iter()
        .enumerate()
        .map(|(i, (path, problem))| {
            if let Some(why) = problem {
                return Planned::Problem(why.clone());
            }
            match read_sample(path) {
                Err(why) => Planned::Problem(why),
                Ok(sample) => match first.get(&sample.sha256) {
                    Some(&j) => Planned::DuplicateOf(j),
                    None => {
                        first.insert(sample.sha256.clone(), i);
                        Planned::Unique(sample)
                    }
                },
            }
        })
        .collect()
}

/// One sample's job, then its report written: its row, its exit status and what it kept.
async fn one(
    jobs: &Jobs,
    given: String,
    sample: Sample,
    report_path: PathBuf,
    format: Format,
    cancel: CancellationToken,
) -> (Row, u8, Vec<PathBuf>) {
    let outcome = match jobs
        .run(new_job_id(), &sample, cancel, EventStream::new())
        .await
    {
        Ok(o) => o,
        Err(e) => {
            let why = format!("{}: {}", visible(&given), visible(&format!("{e:#}")));
            return (Row::not_analysed(given, why), 1, Vec::new());
        }
    };
    let report_path = report_path
        .strip_prefix(".")
        .map(Path::to_path_buf)
        .unwrap_or(report_path);
    let shown_given = visible(&given).into_owned();
    let written = tokio::task::spawn_blocking(move || {
        let report = outcome.report;
        let text = render::render(&report, format);
        let row = Row::from_report(given.clone(), &report, &report_path);
        match write_atomically(&report_path, &text, "the report") {
            Ok(()) => (row, report.status.exit_code()),
            Err(e) => (Row::not_analysed(given, format!("{e:#}")), 1),
        }
    })
    .await;
    match written {
        Ok((row, code)) => (row, code, outcome.kept),
        Err(e) => (
            Row::not_analysed(
                shown_given.clone(),
                format!("{shown_given}: the report was not written: {e}"),
            ),
            1,
            outcome.kept,
        ),
    }
}

/// Every row in the order given: duplicates take their first's row, problems their reason,
/// samples never started (cancelled) say so.
fn fill(
    mut rows: Vec<Option<Row>>,
    plan: &[Planned],
    paths: &[PathBuf],
    codes: &mut Vec<u8>,
) -> Vec<Row> {
    for (i, planned) in plan.iter().enumerate() {
        let given = paths[i].to_string_lossy().into_owned();
        let row = match planned {
            Planned::Unique(_) => match rows[i].take() {
                Some(row) => row,
                None => {
                    codes.push(130);
                    Row::not_analysed(given, "cancelled before it started".into())
                }
            },
            Planned::DuplicateOf(j) => match rows[*j].as_ref() {
                Some(first) if first.error.is_none() => Row::duplicate(given, first),
                Some(first) => Row::not_analysed(
                    given,
                    format!("duplicate of {}, which was not analysed", first.sample),
                ),
                None => Row::not_analysed(given, "cancelled before it started".into()),
            },
            Planned::Problem(why) => {
                codes.push(1);
                Row::not_analysed(given, why.clone())
            }
        };
        rows[i] = Some(row);
    }
    rows.into_iter().flatten().collect()
}

/// The most severe status: 0, then 3 (degraded), 4 (failed), 1 (no report), 130 (cancelled).
fn worst(codes: &[u8]) -> u8 {
    let rank = |c: u8| match c {
        0 => 0,
        3 => 1,
        4 => 2,
        130 => 4,
        _ => 3,
    };
    codes.iter().copied().max_by_key(|&c| rank(c)).unwrap_or(0)
}

/// One bar on stderr, drawn only on a terminal.
fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "[{bar:30.cyan/blue}] {pos}/{len} samples · {rate} · {elapsed} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}/s", state.per_sec());
            },
        )
        .progress_chars("=> "),
    );
    bar
}

fn visible_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| shown(p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run in two lines on stderr: what was done, and the verdicts.
fn summary(rows: &[Row], unique: usize, started: Instant) {
    let count = |status: &str| rows.iter().filter(|r| r.status == status).count();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{} samples, {unique} analysed in {secs:.1} s ({:.1}/s): {} complete, {} degraded, {} failed, {} duplicates, {} not analysed",
        rows.len(),
        unique as f64 / secs.max(1e-3),
        count("complete"),
        count("degraded"),
        count("failed"),
        count("duplicate"),
        count("not analysed"),
    );
    let verdicts: Vec<String> = maljan_triage::VerdictWord::ALL
        .iter()
        .map(|w| {
            let n = rows
                .iter()
                .filter(|r| r.duplicate_of.is_none() && r.verdict.as_deref() == Some(w.as_str()))
                .count();
            format!("{n} {}", w.as_str())
        })
        .collect();
    eprintln!("verdicts: {}", verdicts.join(", "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_status_wins_in_the_documented_order() {
        assert_eq!(worst(&[]), 0);
        assert_eq!(worst(&[0, 3, 0]), 3);
        assert_eq!(worst(&[3, 4, 0]), 4);
        assert_eq!(worst(&[4, 1, 3]), 1);
        assert_eq!(worst(&[1, 130, 4]), 130);
    }

    #[test]
    fn folders_are_walked_in_name_order_and_only_with_recursive_below() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
        for f in ["b", "a", "sub/c", "sub/deeper/d"] {
            std::fs::write(d.join(f), f).unwrap();
        }
        std::os::unix::fs::symlink(d, d.join("sub/loop")).unwrap();
        let names = |found: Vec<(PathBuf, Option<String>)>| -> Vec<String> {
            found
                .into_iter()
                .map(|(p, _)| p.strip_prefix(d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(names(collect(&[d.to_path_buf()], false)), ["a", "b"]);
        assert_eq!(
            names(collect(&[d.to_path_buf()], true)),
            ["a", "b", "sub/c", "sub/deeper/d"]
        );
    }

    #[test]
    fn a_repeated_sha256_is_planned_once_and_an_empty_file_is_a_problem() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a"), b"same").unwrap();
        std::fs::write(d.join("b"), b"same").unwrap();
        std::fs::write(d.join("c"), b"").unwrap();
        let found = collect(&[d.to_path_buf()], false);
        let plan = plan(&found);
        assert!(matches!(plan[0], Planned::Unique(_)));
        assert!(matches!(plan[1], Planned::DuplicateOf(0)));
        assert!(matches!(&plan[2], Planned::Problem(w) if w.contains("empty")));
    }
}
