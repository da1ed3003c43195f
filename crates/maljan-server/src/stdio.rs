//! Newline-delimited JSON-RPC on a byte stream (this process's stdin and stdout, or any pair),
//! served by rmcp's service exactly as streamable HTTP is (`http`): every message goes to it.
//!
//! This module is only the transport rmcp is handed: lines are framed and read by
//! `stdio_framing` (an answer for what rmcp's own stdio transport would drop without a word),
//! and written by one task in the order rmcp and the framing sent them.

use std::{borrow::Cow, sync::Arc};

use futures::StreamExt;
use rmcp::{
    RoleServer,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde::Serialize;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::mpsc,
};
use tokio_util::{codec::FramedRead, sync::CancellationToken};

use crate::{
    protocol::McpHandler,
    server::ToolServer,
    stdio_framing::{Decoded, decode, too_long},
};
use maljan_protocol::lines::{Frame, LineCodec, write_lines};

/// How long calls still running when the input ends may go on before they are cancelled.
pub const INPUT_END_GRACE: std::time::Duration = std::time::Duration::from_millis(700);

/// Options for serving on stdio.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The longest message accepted, in bytes (one line). Longer lines are answered with an error
    /// and skipped.
    pub max_line_bytes: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Serves `server` on this process's stdin/stdout until stdin closes.
pub async fn serve_stdio(server: Arc<ToolServer>, options: StdioOptions) -> anyhow::Result<()> {
    // rmcp's pipes go through the reactor when stdin and stdout are pipes (as a host starts a
    // server), and fall back to tokio's blocking stdio otherwise (a file, a terminal).
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io(server, stdin, stdout, options).await
}

/// Serves `server` on any byte stream pair (a pipe, a socket; tests use duplex streams), the
/// same way as [`serve_stdio`], until the reader ends. Answers still being written are written.
///
/// Calls still running when the input ends get [`INPUT_END_GRACE`] to finish (a `printf … |
/// server` pipe ends its input before the answers are out), then are cancelled: rmcp would
/// otherwise wait up to 5 s for each on its own, and a server must stop soon after its client
/// is gone. A tool's blocking work sees the same token, so it stops too.
pub async fn serve_io<R, W>(
    server: Arc<ToolServer>,
    reader: R,
    writer: W,
    options: StdioOptions,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    tracing::info!(
        server = server.name(),
        tools = server.listed_tools().count(),
        "serving on stdio"
    );
    server.start();
    let (out, lines_out) = mpsc::unbounded_channel();
    let written = tokio::spawn(write_lines(lines_out, writer));
    let input_ended = CancellationToken::new();
    let transport = LineTransport {
        lines: FramedRead::new(reader, LineCodec::new(options.max_line_bytes)),
        max_line_bytes: options.max_line_bytes,
        out,
        request_seen: false,
        input_ended: input_ended.clone(),
    };
    let serving =
        rmcp::service::serve_server_with_ct(McpHandler::new(server), transport, input_ended);
    match serving.await {
        Ok(running) => {
            running.waiting().await?;
        }
        // The client went away before finishing the handshake: a normal end, not a failure.
        Err(e) => tracing::info!("session ended before initialization: {e}"),
    }
    // rmcp has dropped the transport, the writer's only sender: it drains and stops.
    let _ = written.await;
    Ok(())
}

/// rmcp's transport: messages from framed lines in, whole lines out.
struct LineTransport<R> {
    lines: FramedRead<R, LineCodec>,
    max_line_bytes: usize,
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// rmcp ends a session whose first message is not a request; until a request has been
    /// passed on, stray notifications and responses are dropped here (they need no answer).
    request_seen: bool,
    /// Cancelled soon after the input ends: rmcp's service token, the parent of every call's.
    input_ended: CancellationToken,
}

impl<R> LineTransport<R> {
    fn cancel_after_grace(&self) {
        let input_ended = self.input_ended.clone();
        tokio::spawn(async move {
            tokio::time::sleep(INPUT_END_GRACE).await;
            input_ended.cancel();
        });
    }

    /// Queues one message as a line. Never waits, so nothing is lost when rmcp drops a pending
    /// `receive` (which writes the framing's own answers) to attend to something else.
    fn write(&self, message: &impl Serialize) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.out
            .send(line)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "maljan-stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.write(&item))
    }

    /// Cancel-safe: a line read in part stays in the framed reader, and answers are queued
    /// without waiting.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(frame) = self.lines.next().await else {
                self.cancel_after_grace();
                return None;
            };
            let line = match frame {
                Ok(Frame::Line(line)) => line,
                Ok(Frame::TooLong { len, head }) => {
                    tracing::warn!(bytes = len, "refused a message over the size limit");
                    let _ = self.write(&too_long(len, self.max_line_bytes, &head));
                    continue;
                }
                Err(e) => {
                    tracing::warn!("input failed: {e}");
                    self.cancel_after_grace();
                    return None;
                }
            };
            match decode(&line) {
                Decoded::Message(message) => {
                    let is_request = matches!(*message, RxJsonRpcMessage::<RoleServer>::Request(_));
                    if is_request || self.request_seen {
                        self.request_seen = true;
                        return Some(*message);
                    }
                }
                Decoded::Reply(reply) => {
                    let _ = self.write(&reply);
                }
                Decoded::Ignore => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}
