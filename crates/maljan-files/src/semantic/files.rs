//! file_read, file_write, file_copy, file_move, file_checksum and file_verify.

use std::sync::Arc;

use base64::Engine;
use futures::StreamExt;
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest;

use super::{add, refused};
use crate::{
    Config,
    hashing::{Algorithm, digests_match},
    storage::{
        storage_actions::digest,
        transfer::{self, Source},
        uri::Location,
    },
};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The file to read (a storage URI inside a location this server allows).
    uri: String,
    /// Byte to start at. Default 0.
    offset: Option<u64>,
    /// Return at most this many bytes. The server caps it.
    max_bytes: Option<u64>,
    /// A text encoding (utf-8, utf-16, big5, latin-1, ...) or base64 for content that is not text.
    encoding: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The file to create (a storage URI inside a location this server allows).
    uri: String,
    /// The whole content of the file. The server caps its size.
    content: String,
    /// A text encoding (utf-8, utf-16, big5, latin-1, ...) or base64 for content that is not text.
    encoding: Option<String>,
    /// Replace a file that already exists at the target. Off by default; the server must allow
    /// overwriting as well.
    overwrite: Option<bool>,
    /// When true, change nothing and report what the call would do.
    dry_run: Option<bool>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TransferArgs {
    /// The file to read (a storage URI inside a location this server allows).
    pub(super) source: String,
    /// The file to create (a storage URI inside a location this server allows).
    pub(super) target: String,
    /// Replace a file that already exists at the target. Off by default; the server must allow
    /// overwriting as well.
    pub(super) overwrite: Option<bool>,
    /// Compare the SHA-256 of the source and of the target after the copy and fail on a
    /// mismatch. A move then deletes the source only once the digests match.
    pub(super) verify: Option<bool>,
    /// When true, change nothing and report what the call would do.
    pub(super) dry_run: Option<bool>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChecksumArgs {
    /// The file to hash (a storage URI inside a location this server allows).
    uri: String,
    /// The hash: sha256 (default), sha512, sha1, md5 or another fixed-length name.
    algorithm: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyArgs {
    /// The file to check (a storage URI inside a location this server allows).
    uri: String,
    /// The digest to expect: hex, or '<algorithm>:<hex>' such as 'sha256:9f86...'.
    expected: String,
    /// The hash: sha256 (default), sha512, sha1, md5 or another fixed-length name.
    algorithm: Option<String>,
}

const BASE64: &str = "base64";

/// The size of an existing file; a directory is refused.
pub(super) async fn existing_file(c: &Config, at: &Location) -> Result<Option<u64>, ToolError> {
    let info = transfer::stat(c, at).await?;
    if info.is_dir {
        return Err(ToolError::bad_argument(format!(
            "{} is a directory, not a file",
            at.shown()
        )));
    }
    Ok(info.size)
}

/// At most `limit` bytes of a source (opened at the window's offset).
async fn read_window(mut source: Source, limit: u64) -> Result<Vec<u8>, ToolError> {
    let mut out = Vec::new();
    while let Some(chunk) = source.chunks.next().await {
        let chunk = chunk?;
        let room = (limit - out.len() as u64) as usize;
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() as u64 == limit {
            break;
        }
    }
    Ok(out)
}

/// `data` as text and how many of its bytes that text stands for: when more of the file
/// follows, a character cut at the end is left for the next read.
fn decoded(data: &[u8], encoding: &str, complete: bool) -> Result<(String, usize), ToolError> {
    crate::encoding::codec(encoding)?;
    let not_text = || {
        ToolError::bad_argument(format!(
            "the content is not {encoding} text from this offset"
        ))
        .with_remediation("ask for encoding base64")
    };
    // A multi-byte character is at most 4 bytes: try the window, then up to 3 bytes shorter.
    let tries = if complete { 0 } else { 3.min(data.len()) };
    for cut in 0..=tries {
        let part = &data[..data.len() - cut];
        if let Ok(text) = crate::encoding::decode_text(part, encoding, "strict") {
            return Ok((text, part.len()));
        }
    }
    Err(not_text())
}

async fn file_read(c: Arc<Config>, a: ReadArgs) -> Result<Value, ToolError> {
    let at = c.guarded(&a.uri)?;
    let size = existing_file(&c, &at).await?;
    let cap = c.semantic.policy.max_read_bytes;
    if a.max_bytes == Some(0) {
        return Err(ToolError::bad_argument("max_bytes must be 1 or more"));
    }
    let limit = a.max_bytes.unwrap_or(cap).min(cap);
    let offset = a.offset.unwrap_or(0);
    let encoding = a.encoding.unwrap_or_else(|| "utf-8".into());
    // A window past the end is empty: nothing to open (a ranged GET there is an error).
    let data = if size.is_some_and(|size| offset >= size) {
        Vec::new()
    } else {
        read_window(transfer::open_from(&c, &at, offset).await?, limit).await?
    };
    let complete = match size {
        Some(size) => offset + data.len() as u64 >= size,
        None => (data.len() as u64) < limit,
    };
    let (content, used) = if encoding == BASE64 {
        (
            base64::engine::general_purpose::STANDARD.encode(&data),
            data.len(),
        )
    } else {
        decoded(&data, &encoding, complete)?
    };
    Ok(json!({
        "uri": at.shown(),
        "size": size,
        "offset": offset,
        "bytes": used,
        "truncated": !complete,
        "next_offset": if complete { None } else { Some(offset + used as u64) },
        "encoding": encoding,
        "content": content,
    }))
}

fn encoded(content: &str, encoding: &str) -> Result<Vec<u8>, ToolError> {
    if encoding == BASE64 {
        return base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|_| ToolError::bad_argument("content is not valid base64"));
    }
    crate::encoding::encode_text(content, encoding, "strict")
}

async fn file_write(c: Arc<Config>, ctx: ToolContext, a: WriteArgs) -> Result<Value, ToolError> {
    c.require_write("file_write")?;
    let payload = encoded(&a.content, a.encoding.as_deref().unwrap_or("utf-8"))?;
    let max = c.semantic.policy.max_write_bytes;
    if payload.len() as u64 > max {
        return Err(refused(
            "limit_exceeded",
            format!(
                "the content is {} bytes and this server writes at most {max} per call",
                payload.len()
            ),
            "write a smaller file, or start the server with a larger --max-write-bytes",
        ));
    }
    let target = c.guarded(&a.uri)?;
    let replaced = c.replaceable(&target, a.overwrite.unwrap_or(false)).await?;
    let dry_run = a.dry_run.unwrap_or(false);
    let mut body = json!({
        "uri": target.shown(),
        "size": payload.len(),
        "sha256": hex::encode(sha2::Sha256::digest(&payload)),
        "overwrites": replaced.is_some(),
        "replaced_size": replaced.flatten(),
        "dry_run": dry_run,
        "written": false,
    });
    if !dry_run {
        transfer::write(
            &c,
            &ctx,
            &target,
            Source::bytes(payload),
            replaced.is_some(),
        )
        .await?;
        body["written"] = json!(true);
    }
    Ok(body)
}

/// Copies (or moves) one file after every check; shared with storage_copy's file case.
pub(super) async fn transfer_file(
    c: &Config,
    ctx: &ToolContext,
    a: &TransferArgs,
    tool: &str,
    is_move: bool,
) -> Result<Value, ToolError> {
    if is_move {
        c.require_delete(tool)?;
    } else {
        c.require_write(tool)?;
    }
    let (source, target) = (c.guarded(&a.source)?, c.guarded(&a.target)?);
    let size = existing_file(c, &source).await?;
    if source.shown() == target.shown() {
        return Err(ToolError::bad_argument(format!(
            "{tool}: source and target are the same file"
        )));
    }
    let replaced = c.replaceable(&target, a.overwrite.unwrap_or(false)).await?;
    let dry_run = a.dry_run.unwrap_or(false);
    let mut body = json!({
        "source": source.shown(),
        "target": target.shown(),
        "size": size,
        "overwrites": replaced.is_some(),
        "replaced_size": replaced.flatten(),
        "deletes_source": is_move,
        "dry_run": dry_run,
        "done": false,
    });
    if dry_run {
        return Ok(body);
    }
    let overwrite = replaced.is_some();
    if a.verify.unwrap_or(false) {
        let sha = Algorithm::parse("sha256")?;
        let expected = digest(c, &source, sha).await?;
        transfer::copy(c, ctx, &source, &target, overwrite).await?;
        let actual = digest(c, &target, sha).await?;
        if !digests_match(&actual, &expected) {
            return Err(ToolError::tool_failed(format!(
                "{} does not have the SHA-256 of {} after the copy; the source was left in place",
                target.shown(),
                source.shown()
            )));
        }
        body["sha256"] = json!(actual);
        body["verified"] = json!(true);
    } else {
        transfer::copy(c, ctx, &source, &target, overwrite).await?;
    }
    if is_move {
        transfer::delete(c, &source, false, false).await?;
    }
    body["done"] = json!(true);
    Ok(body)
}

async fn file_checksum(c: Arc<Config>, a: ChecksumArgs) -> Result<Value, ToolError> {
    let at = c.guarded(&a.uri)?;
    let size = existing_file(&c, &at).await?;
    let algorithm = Algorithm::parse(a.algorithm.as_deref().unwrap_or("sha256"))?;
    let value = digest(&c, &at, algorithm).await?;
    Ok(json!({"uri": at.shown(), "size": size, "algorithm": algorithm.name(), "value": value}))
}

async fn file_verify(c: Arc<Config>, a: VerifyArgs) -> Result<Value, ToolError> {
    let at = c.guarded(&a.uri)?;
    existing_file(&c, &at).await?;
    let given = a.expected.trim();
    let (algorithm, expected) = match given.split_once(':') {
        Some((name, hex)) => (Algorithm::parse(name)?, hex.trim()),
        None => (
            Algorithm::parse(a.algorithm.as_deref().unwrap_or("sha256"))?,
            given,
        ),
    };
    if expected.is_empty() || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ToolError::bad_argument(
            "expected must be a hex digest, or '<algorithm>:<hex>'",
        ));
    }
    let actual = digest(&c, &at, algorithm).await?;
    Ok(json!({
        "uri": at.shown(),
        "algorithm": algorithm.name(),
        "expected": expected.to_ascii_lowercase(),
        "match": digests_match(&actual, expected),
        "actual": actual,
    }))
}

pub(super) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_read",
            "Read a file from any storage backend. Returns the content as text, or as base64 for a file that is not text, with its size. The server caps the bytes returned: when 'truncated' is true, call again with offset set to 'next_offset'.",
        ),
        |c, _ctx, a: ReadArgs| file_read(c, a),
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_write",
            "Create a file from the given content. Needs a server that allows writing. Refuses to replace an existing file unless overwrite is true and the server allows overwriting. Returns the size and SHA-256 of what was written.",
        )
        .writes(),
        file_write,
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_copy",
            "Copy one file to another location, in the same storage backend or across two (for example S3 to SFTP). The source stays. Needs a server that allows writing. Use storage_copy for a directory.",
        )
        .writes(),
        |c, ctx, a: TransferArgs| async move { transfer_file(&c, &ctx, &a, "file_copy", false).await },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_move",
            "Move one file to another location, in the same storage backend or across two. The source is deleted, so the server must allow writing and deleting. Pass verify=true to delete the source only after the SHA-256 of the copy matches.",
        )
        .destructive(),
        |c, ctx, a: TransferArgs| async move { transfer_file(&c, &ctx, &a, "file_move", true).await },
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_checksum",
            "Compute the digest of a file (SHA-256 by default). Returns algorithm, value and size.",
        ),
        |c, _ctx, a: ChecksumArgs| file_checksum(c, a),
    );
    add(
        reg,
        cfg,
        ToolMeta::new(
            "file_verify",
            "Check that a file has an expected digest. Returns match (true or false) with the expected and the actual digest; a mismatch is a result, not an error.",
        ),
        |c, _ctx, a: VerifyArgs| file_verify(c, a),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_at_the_window_end_is_left_for_the_next_read() {
        let text = "aé".as_bytes(); // 'é' is 2 bytes
        let (s, used) = decoded(&text[..2], "utf-8", false).unwrap();
        assert_eq!((s.as_str(), used), ("a", 1));
        assert!(decoded(&text[..2], "utf-8", true).is_err());
        assert_eq!(decoded(text, "utf-8", true).unwrap().1, 3);
    }

    #[test]
    fn base64_content_must_be_valid() {
        assert_eq!(encoded("aGk=", BASE64).unwrap(), b"hi");
        assert!(encoded("***", BASE64).is_err());
    }
}
