//! `maljan analyze SAMPLE`: a thin wrapper over maljan-triage. (Owned by the triage work.)

use std::{path::PathBuf, process::ExitCode};

use clap::Args;

#[derive(Args)]
pub struct AnalyzeArgs {
    /// The sample file to analyse.
    pub sample: PathBuf,
}

pub async fn analyze(_args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
