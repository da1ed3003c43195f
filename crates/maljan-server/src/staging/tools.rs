//! The four put_sample tools: their arguments, their answers, and how they reach the store.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use maljan_protocol::{PUT_SAMPLE, PUT_SAMPLE_BEGIN, PUT_SAMPLE_CHUNK, PUT_SAMPLE_FINISH};

use super::StagingStore;
use crate::{
    context::blocking,
    errors::ToolError,
    registry::{Registry, ToolMeta},
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PutArgs {
    /// The sample's file name (reduced to a safe base name).
    filename: String,
    /// The whole sample, base64.
    content_b64: String,
    /// The sample's sha256, hex; "" to skip the check.
    #[serde(default)]
    sha256: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BeginArgs {
    filename: String,
    sha256: String,
    /// The sample's size in bytes.
    size: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChunkArgs {
    upload_id: String,
    /// The chunk's number, from 0, in order.
    seq: u64,
    content_b64: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FinishArgs {
    upload_id: String,
}

#[derive(Serialize, JsonSchema)]
struct StagedPath {
    /// Where the sample now is; pass it to this server's other tools.
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct UploadId {
    upload_id: String,
}

#[derive(Serialize, JsonSchema)]
struct ChunkAck {
    seq: u64,
}

/// Adds the four put_sample tools: listed in tools/list (that is how a client learns this server
/// receives samples), kept out of the manifest; the client runtime hides them from models.
pub fn register(registry: &mut Registry, store: Arc<StagingStore>) {
    // The description says who it is for: a generic MCP host that does not hide these shows it.
    let meta = |name: &str, what: &str| {
        ToolMeta::new(
            name,
            format!("Staging primitive for the client runtime, not a model: {what}"),
        )
        .writes()
        .not_idempotent()
        .timeout_s(600)
        .staging_primitive()
    };
    let s = store.clone();
    registry.add(
        meta(PUT_SAMPLE, "Receive a whole sample (base64) and stage it."),
        move |_ctx, a: PutArgs| {
            let s = s.clone();
            async move {
                let path = blocking(move || s.put(&a.filename, a.content_b64, &a.sha256)).await?;
                Ok::<_, ToolError>(StagedPath {
                    path: path.to_string_lossy().into_owned(),
                })
            }
        },
    );
    let s = store.clone();
    registry.add(
        meta(PUT_SAMPLE_BEGIN, "Start a chunked upload of a sample."),
        move |_ctx, a: BeginArgs| {
            let s = s.clone();
            async move {
                let upload_id = blocking(move || s.begin(&a.filename, &a.sha256, a.size)).await?;
                Ok::<_, ToolError>(UploadId { upload_id })
            }
        },
    );
    let s = store.clone();
    registry.add(
        meta(
            PUT_SAMPLE_CHUNK,
            "Receive one chunk of an upload, in order from seq 0. A chunk that arrives ahead of \
             its predecessor waits a few seconds for it (so several may be in flight); a gap \
             that stays open is an error.",
        ),
        move |_ctx, a: ChunkArgs| {
            let s = s.clone();
            async move {
                let seq = blocking(move || s.chunk(&a.upload_id, a.seq, a.content_b64)).await?;
                Ok::<_, ToolError>(ChunkAck { seq })
            }
        },
    );
    let s = store;
    registry.add(
        meta(PUT_SAMPLE_FINISH, "Verify and stage a chunked upload."),
        move |_ctx, a: FinishArgs| {
            let s = s.clone();
            async move {
                let path = blocking(move || s.finish(&a.upload_id)).await?;
                Ok::<_, ToolError>(StagedPath {
                    path: path.to_string_lossy().into_owned(),
                })
            }
        },
    );
}
