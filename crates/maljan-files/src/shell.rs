//! FA_run_shell: run one program from an argv list — never a shell string — with a hard timeout,
//! in a working directory inside the roots, with an environment of PATH plus only the variables
//! the operator allowed (`maljan serve files --shell-env NAME`), each taken from the server's
//! own environment unless the call's `env` sets it. Output is kept up to `MAX_OUTPUT` bytes per
//! stream (the rest is read and dropped, so the program never blocks on a full pipe). The
//! program runs in a process group of its own, killed whole on timeout or cancellation.
//!
//! The tool is opt-in (served only when named in `--allowed-actions`) and destructive (never
//! under `--read-only`).

use std::{process::Stdio, sync::Arc, time::Duration};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::Config;

/// Bytes of stdout and of stderr kept.
const MAX_OUTPUT: usize = 1 << 20;
/// The longest timeout a call may ask for.
const MAX_TIMEOUT_S: f64 = 3600.0;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    /// The program and its arguments, e.g. ["git", "status"]. Never run through a shell.
    argv: Vec<String>,
    /// Seconds before the program (and its process group) is killed (at most 3600).
    #[serde(default = "default_timeout")]
    #[schemars(default = "default_timeout")]
    timeout: f64,
    /// The working directory (inside the roots); default: the first root.
    cwd: Option<String>,
    /// Values for variables the operator allowed (--shell-env); any other name is refused.
    env: Option<std::collections::BTreeMap<String, String>>,
    /// Fail when the program exits non-zero.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    check: bool,
    /// Return stdout and stderr (else they are discarded).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    capture_output: bool,
}

fn default_timeout() -> f64 {
    60.0
}
fn yes() -> bool {
    true
}

#[derive(Serialize, JsonSchema)]
struct ShellOut {
    returncode: i32,
    stdout: String,
    stderr: String,
    /// Whether stdout or stderr was longer than the 1 MiB kept.
    truncated: bool,
}

/// Kills the program's process group unless it was reaped: the call's future may be dropped
/// (cancelled, or its caller's timeout) at any await.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals the group the child leads.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}

async fn read_bounded(mut r: impl AsyncRead + Unpin) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut truncated = false;
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = MAX_OUTPUT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        truncated |= n > room;
    }
    (kept, truncated)
}

async fn read_optional(stream: Option<impl AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    match stream {
        Some(s) => read_bounded(s).await,
        None => (Vec::new(), false),
    }
}

async fn run_shell(cfg: &Config, ctx: &ToolContext, a: ShellArgs) -> Result<ShellOut, ToolError> {
    let Some(program) = a.argv.first().filter(|p| !p.is_empty()) else {
        return Err(ToolError::bad_argument(
            "argv must be a non-empty list of strings",
        ));
    };
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= MAX_TIMEOUT_S) {
        return Err(ToolError::bad_argument(format!(
            "timeout must be more than 0 and at most {MAX_TIMEOUT_S} seconds"
        )));
    }
    let cwd = match &a.cwd {
        Some(dir) => cfg.roots.existing(dir)?,
        None => cfg.roots.dirs()[0].clone(),
    };
    if !cwd.is_dir() {
        return Err(ToolError::bad_argument(format!(
            "cwd {} is not a directory",
            cwd.display()
        )));
    }
    let allowed = &cfg.shell_env;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&a.argv[1..])
        .current_dir(&cwd)
        .env_clear()
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for name in allowed {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in a.env.iter().flatten() {
        if !allowed.contains(name) {
            return Err(ToolError::bad_argument(format!(
                "env {name} is not one the operator allows"
            ))
            .with_remediation(if allowed.is_empty() {
                "the operator allows none (maljan serve files --shell-env NAME)".to_string()
            } else {
                format!("allowed: {}", allowed.join(", "))
            }));
        }
        cmd.env(name, value);
    }
    let (out, err) = if a.capture_output {
        (Stdio::piped(), Stdio::piped())
    } else {
        (Stdio::null(), Stdio::null())
    };
    cmd.stdout(out).stderr(err);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            ToolError::no_such_file(format!("executable not found: {program}"))
        }
        _ => ToolError::tool_failed(format!("cannot run {program}: {e}")),
    })?;
    let mut group = Group(child.id().map(|id| id as i32));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let outputs = async { tokio::join!(read_optional(stdout), read_optional(stderr)) };
    let run = async { tokio::join!(child.wait(), outputs) };
    let (status, ((stdout, cut_out), (stderr, cut_err))) = tokio::select! {
        done = run => done,
        _ = tokio::time::sleep(Duration::from_secs_f64(a.timeout)) => {
            return Err(ToolError::timeout(format!("timeout after {:.1} s: {program}", a.timeout)));
        }
        _ = ctx.cancellation().cancelled() => {
            return Err(ToolError::tool_failed("the call was cancelled; the program was killed"));
        }
    };
    let status =
        status.map_err(|e| ToolError::tool_failed(format!("waiting for {program}: {e}")))?;
    // Reaped: its process group is not signalled any more (the id may be reused once empty).
    group.0 = None;
    let returncode = status.code().unwrap_or(-1);
    if a.check && returncode != 0 {
        return Err(ToolError::tool_failed(format!(
            "exit {returncode}: {program}"
        )));
    }
    Ok(ShellOut {
        returncode,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        truncated: cut_out || cut_err,
    })
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_run_shell",
            "Run a program from argv (a list, never a shell string) with a timeout, in cwd \
             (inside the roots), with PATH and the variables the operator allows. Returns \
             returncode, stdout and stderr (1 MiB each at most); check=true fails on a non-zero exit.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .title("Run a program")
        .destructive()
        .not_idempotent()
        .opt_in()
        // Its own timeout argument ends the program first; this one ends the call.
        .timeout_s(MAX_TIMEOUT_S as u64 + 10),
        move |ctx, a: ShellArgs| {
            let c = c.clone();
            async move { run_shell(&c, &ctx, a).await }
        },
    );
}
