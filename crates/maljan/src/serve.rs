//! `maljan serve` and `maljan tools`.

use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct ServeArgs {}

#[derive(Args)]
pub struct ToolsArgs {}

pub async fn serve(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
pub fn tools(_args: ToolsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
