//! A bare files server on stdio, for benchmarks and debugging without the `maljan` binary:
//! `cargo run --release -p maljan-files --example files_stdio -- --root DIR [--root DIR2]`.
//! The binary (`maljan serve files`) is the real entry point; this one has no other flags.

use maljan_files::{FilesConfig, registry};
use maljan_server::{Roots, StdioOptions, ToolServer, serve_stdio};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut dirs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" => dirs.push(
                args.next()
                    .ok_or_else(|| anyhow::anyhow!("--root needs a directory"))?,
            ),
            other => anyhow::bail!("unknown argument {other}; usage: files_stdio --root DIR"),
        }
    }
    let roots = Roots::new(&dirs)?;
    let registry = registry(FilesConfig::rooted(roots));
    let server = ToolServer::new("maljan-files", env!("CARGO_PKG_VERSION"), registry);
    serve_stdio(server, StdioOptions::default()).await
}
