//! maljan-triage: the triage job behind `maljan analyze SAMPLE`, and its report.
//!
//! It owns the triage plan (`plan`: the steps, in order — identify_file, hashes, the format's own
//! tool chosen from identify_file's answer, strings, iocs_from_file, yara_scan, plus extra steps on
//! other servers from a `triage.toml`), running it inside a client-runtime job (`run`: each
//! manifest read once, the sample handed over, an unavailable tool skipped with its reason instead
//! of being called, every call an evidence entry `ev_0001`… in the ledger), the report model
//! (`report`, whose JSON form is the stable schema in docs/report-schema.md) and its renderers
//! (`render`: Markdown, JSON, a self-contained HTML page, a STIX 2.1 bundle, IOCs as CSV), and the
//! recursive analysis of what the sample carries (`recurse`, the tree in `tree`).
//!
//! It talks to tool servers only through `maljan-client` (MCP), so a remote analysis server works
//! exactly like the built-in one. It must not depend on any concrete server crate (analysis, files),
//! on rmcp or on a transport. It prints nothing itself: its progress goes to the job's event stream
//! (`maljan_client::job::events`), which `term` (behind the default `terminal` feature) draws on a
//! terminal with indicatif.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use maljan_client::{Config, JobSpec, Runtime};
//! use maljan_triage::{TriageOptions, render, run_triage};
//! let rt = Runtime::open(Config::load(None)?)?;
//! let job = rt.new_job(JobSpec::for_sample("./sample.exe"))?;
//! let report = run_triage(&job, &TriageOptions::default()).await;
//! std::fs::write("report.md", render::markdown(&report))?;
//! std::process::exit(report.status.exit_code() as i32);
//! # }
//! ```

pub mod corpus;
pub mod plan;
mod recurse;
pub mod render;
pub mod report;
pub mod run;
pub mod tree;
pub mod verdict;
pub mod visible;

pub use plan::{Plan, PlanError, Step};
pub use render::Format;
pub use report::{Report, Status, StepReport, StepStatus};
pub use run::{TriageOptions, run_triage};
pub use tree::{ChildReport, Recursion, RecursionLimits};
pub use verdict::{Verdict, VerdictSource, VerdictWord};
pub use visible::{visible, visible_multiline};
#[cfg(feature = "terminal")]
pub mod term;
