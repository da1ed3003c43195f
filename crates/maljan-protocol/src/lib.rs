//! maljan-protocol: the wire conventions maljan's tool servers write and its client runtime reads
//! (DESIGN.md, "Conventions every maljan tool server keeps").
//!
//! It owns the capability manifest ([`Manifest`], [`ManifestTool`]), the error codes
//! ([`ErrorCode`]) and the remedy each names by default, the tool-error shape
//! `{"error":{"code","message","remediation"},"tool"}` ([`ToolError`], [`ToolErrorReply`]), the
//! names of the tools the conventions fix (`capabilities`, put_sample*), and the filename
//! reduction both sides apply to a sample's name ([`sanitize_filename`]), the one rule for which
//! argument of a tool takes the sample ([`sample_param`]), the JSON Schema keywords that constrain an
//! instance ([`schema::CONSTRAINING_KEYWORDS`]), and, behind the
//! `lines` feature, the bounded newline framing both ends of a stdio connection read with.
//!
//! It must not depend on anything but serde and serde_json (schemars only behind the optional
//! `schemars` feature, for the server's outputSchema; tokio-util's codec behind `lines`): no
//! rmcp, no transport, no runtime, so the client can share these types without pulling in the
//! server framework.

mod errors;
#[cfg(feature = "lines")]
pub mod lines;
mod manifest;
mod names;
mod sample;
pub mod schema;

pub use errors::{ErrorCode, ToolError, ToolErrorReply};
pub use manifest::{Manifest, ManifestTool};
pub use names::{
    CAPABILITIES_TOOL, PUT_SAMPLE, PUT_SAMPLE_BEGIN, PUT_SAMPLE_CHUNK, PUT_SAMPLE_FINISH,
    STAGING_TOOLS, is_staging_tool, sanitize_filename,
};
pub use sample::{SAMPLE_PARAMS, sample_param};
