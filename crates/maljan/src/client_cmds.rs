//! `maljan servers|call|ledger`: thin wrappers over maljan-client. (Owned by the client-runtime work.)

use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum ServersCommand {
    /// List the configured servers.
    List,
}

#[derive(Args)]
pub struct CallArgs {
    pub server: String,
    pub tool: String,
}

#[derive(Args)]
pub struct LedgerArgs {}

pub async fn servers(_cmd: ServersCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
pub async fn call(_args: CallArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
pub async fn ledger(_args: LedgerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
