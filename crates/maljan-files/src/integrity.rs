//! Checksums and tree digests: FA_file_checksum, FA_verify_checksum, the manifest pair and
//! FA_find_duplicates.

use std::{
    collections::{BTreeMap, HashMap},
    fs::{self},
    io::Read,
    path::PathBuf,
    sync::Arc,
};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::data::non_negative;
use crate::{
    Config,
    hashing::{Algorithm, Watch, chunk_size, digests_match, hash_bytes, hash_file},
    paths::{FileInput, io_err, join_inside, show, walk_files},
};

pub(crate) fn default_algorithm() -> String {
    "sha256".into()
}
fn default_chunk() -> i64 {
    1024 * 1024
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChecksumArgs {
    /// The file to hash.
    path: String,
    /// A hashlib name: md5, sha1, sha224, sha256, sha384, sha512, sha3_224, sha3_256, sha3_384, sha3_512, blake2b, blake2s.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
    /// Bytes per read (1 to 268435456).
    #[serde(default = "default_chunk")]
    #[schemars(default = "default_chunk")]
    chunk_size: i64,
}

#[derive(Serialize, JsonSchema)]
struct ChecksumOut {
    path: String,
    algorithm: &'static str,
    /// Lower-case hex digest.
    digest: String,
    /// Bytes hashed.
    size: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyArgs {
    /// The file to hash.
    path: String,
    /// The expected hex digest (case-insensitive).
    expected: String,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
    /// Bytes per read (1 to 268435456).
    #[serde(default = "default_chunk")]
    #[schemars(default = "default_chunk")]
    chunk_size: i64,
}

#[derive(Serialize, JsonSchema)]
struct VerifyOut {
    path: String,
    algorithm: &'static str,
    /// Whether the file's digest equals `expected`.
    matched: bool,
    /// The digest the file has.
    actual: String,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_file_checksum",
            "Hex digest of a file (sha256 by default), streamed in chunk_size reads.",
        )
        .timeout_s(600),
        move |ctx: ToolContext, a: ChecksumArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                let chunk = chunk_size(a.chunk_size)?;
                let ((digest, size), path) = match c.small_file(&a.path)? {
                    FileInput::Read { path, bytes } => (hash_bytes(&bytes, algorithm), path),
                    FileInput::Later(opened) => {
                        blocking(move || {
                            Ok((
                                hash_file(
                                    opened.file,
                                    &a.path,
                                    algorithm,
                                    chunk,
                                    Watch::Call(&ctx),
                                )?,
                                opened.path,
                            ))
                        })
                        .await?
                    }
                };
                Ok(ChecksumOut {
                    path: show(&path),
                    algorithm: algorithm.name(),
                    digest,
                    size,
                })
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_verify_checksum",
            "Check a file against an expected hex digest (constant-time compare); answers matched and the actual digest.",
        )
        .timeout_s(600),
        move |ctx: ToolContext, a: VerifyArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                let chunk = chunk_size(a.chunk_size)?;
                if a.expected.trim().is_empty() || !a.expected.trim().bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ToolError::bad_argument("expected must be a hex digest"));
                }
                let ((actual, _), path) = match c.small_file(&a.path)? {
                    FileInput::Read { path, bytes } => (hash_bytes(&bytes, algorithm), path),
                    FileInput::Later(opened) => blocking(move || {
                        Ok((hash_file(opened.file, &a.path, algorithm, chunk, Watch::Call(&ctx))?, opened.path))
                    })
                    .await?,
                };
                Ok(VerifyOut {
                    path: show(&path),
                    algorithm: algorithm.name(),
                    matched: digests_match(&actual, &a.expected),
                    actual,
                })
            }
        },
    );
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteManifestArgs {
    /// The directory described.
    root: String,
    /// The JSON manifest written.
    manifest_path: String,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
}

#[derive(Serialize, JsonSchema)]
struct ManifestEntry {
    size: u64,
    checksum: String,
}

#[derive(Serialize, JsonSchema)]
struct WriteManifestOut {
    manifest_path: String,
    version: u32,
    algorithm: &'static str,
    root: String,
    created_at: String,
    /// Relative POSIX path → size and checksum.
    files: BTreeMap<String, ManifestEntry>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyManifestArgs {
    /// The directory checked.
    root: String,
    /// The manifest written by FA_write_manifest (here or by automation-file).
    manifest_path: String,
}

#[derive(Serialize, JsonSchema)]
struct VerifyManifestOut {
    matched: Vec<String>,
    missing: Vec<String>,
    modified: Vec<String>,
    /// Files under root the manifest does not list (reported, not a failure).
    extra: Vec<String>,
    /// True when nothing is missing or modified.
    ok: bool,
}

fn default_min_size() -> i64 {
    1
}
fn default_sample() -> i64 {
    65536
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DuplicatesArgs {
    /// The directory searched.
    root: String,
    /// Ignore files smaller than this many bytes (1 skips empty files).
    #[serde(default = "default_min_size")]
    #[schemars(default = "default_min_size")]
    min_size: i64,
    /// Bytes hashed from the start of same-size files before hashing them whole.
    #[serde(default = "default_sample")]
    #[schemars(default = "default_sample")]
    sample_bytes: i64,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
}

#[derive(Serialize, JsonSchema)]
struct DuplicatesOut {
    /// Groups of paths with identical content, largest files first.
    groups: Vec<Vec<String>>,
    count: usize,
}

pub(crate) fn register_trees(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_write_manifest",
            "Write a JSON manifest of every file under a directory: relative path, size and checksum.",
        )
        .destructive()
        .timeout_s(3600),
        move |ctx: ToolContext, a: WriteManifestArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                let root = c.existing_dir(&a.root)?;
                let manifest = c.target(&a.manifest_path)?;
                blocking(move || {
                    let stop = || ctx.is_cancelled();
                    let found = walk_files(&root, &stop)?;
                    let total = found.len();
                    let mut files = BTreeMap::new();
                    for (i, f) in found.into_iter().enumerate() {
                        if f.is_symlink || f.abs == manifest {
                            continue;
                        }
                        let opened = c.open_resolved(&f.abs)?;
                        let (checksum, size) = hash_file(opened.file, &f.rel, algorithm, 1 << 20, Watch::Call(&ctx))?;
                        files.insert(f.rel, ManifestEntry { size, checksum });
                        if i % 256 == 0 {
                            ctx.progress(i as f64, Some(total as f64), None);
                        }
                    }
                    let out = WriteManifestOut {
                        manifest_path: show(&manifest),
                        version: 1,
                        algorithm: algorithm.name(),
                        root: show(&root),
                        created_at: chrono::Utc::now().to_rfc3339(),
                        files,
                    };
                    let doc = json!({
                        "version": out.version,
                        "algorithm": out.algorithm,
                        "root": out.root,
                        "created_at": out.created_at,
                        "files": out.files,
                    });
                    if let Some(parent) = manifest.parent() {
                        c.roots.create_dir_all(parent, &a.manifest_path)?;
                    }
                    let text = serde_json::to_string_pretty(&doc).map_err(|e| ToolError::tool_failed(e.to_string()))?;
                    c.write_atomic(&manifest, &a.manifest_path, text.as_bytes())?;
                    Ok(out)
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_verify_manifest",
            "Check a directory against a manifest: files matched, missing, modified, and extra.",
        )
        .timeout_s(3600),
        move |ctx: ToolContext, a: VerifyManifestArgs| {
            let c = c.clone();
            async move {
                let root = c.existing_dir(&a.root)?;
                let manifest = c.existing_file(&a.manifest_path)?;
                blocking(move || {
                    let text = manifest.text()?;
                    let doc: Value = serde_json::from_str(&text).map_err(|e| {
                        ToolError::unsupported_format(format!(
                            "{} is not a JSON manifest: {e}",
                            a.manifest_path
                        ))
                    })?;
                    let algorithm =
                        Algorithm::parse(doc["algorithm"].as_str().unwrap_or("sha256"))?;
                    let Some(files) = doc["files"].as_object() else {
                        return Err(ToolError::unsupported_format(format!(
                            "{} has no 'files' object",
                            a.manifest_path
                        )));
                    };
                    let mut out = VerifyManifestOut {
                        matched: vec![],
                        missing: vec![],
                        modified: vec![],
                        extra: vec![],
                        ok: true,
                    };
                    for (rel, entry) in files {
                        let Some(path) = join_inside(&root, rel) else {
                            return Err(ToolError::bad_argument(format!(
                                "manifest entry '{rel}' points outside the root"
                            )));
                        };
                        // Entries are data from a file: each is confined like any path argument.
                        let Ok(opened) = c.existing_file(&show(&path)) else {
                            out.missing.push(rel.clone());
                            continue;
                        };
                        let expected = entry["checksum"].as_str().unwrap_or("");
                        let size = opened.size()?;
                        let size_ok = entry["size"].as_u64().is_none_or(|s| size == s);
                        let same = size_ok
                            && digests_match(
                                &hash_file(
                                    opened.file,
                                    rel,
                                    algorithm,
                                    1 << 20,
                                    Watch::Call(&ctx),
                                )?
                                .0,
                                expected,
                            );
                        if same {
                            out.matched.push(rel.clone())
                        } else {
                            out.modified.push(rel.clone())
                        }
                    }
                    let stop = || ctx.is_cancelled();
                    for f in walk_files(&root, &stop)? {
                        if !f.is_symlink && f.abs != manifest.path && !files.contains_key(&f.rel) {
                            out.extra.push(f.rel);
                        }
                    }
                    out.ok = out.missing.is_empty() && out.modified.is_empty();
                    Ok(out)
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_find_duplicates",
            "Find files with identical content under a directory (size, then a sample hash, then a full hash).",
        )
        .timeout_s(3600),
        move |ctx: ToolContext, a: DuplicatesArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::parse(&a.algorithm)?;
                non_negative("min_size", a.min_size)?;
                if a.sample_bytes <= 0 {
                    return Err(ToolError::bad_argument("sample_bytes must be positive"));
                }
                let root = c.existing_dir(&a.root)?;
                blocking(move || {
                    let stop = || ctx.is_cancelled();
                    let mut by_size: HashMap<u64, Vec<PathBuf>> = HashMap::new();
                    for f in walk_files(&root, &stop)? {
                        if f.is_symlink {
                            continue;
                        }
                        let Ok(meta) = fs::metadata(&f.abs) else { continue };
                        if meta.len() >= a.min_size as u64 {
                            by_size.entry(meta.len()).or_default().push(f.abs);
                        }
                    }
                    let sample = a.sample_bytes as u64;
                    let mut groups: Vec<(u64, Vec<String>)> = Vec::new();
                    for (size, paths) in by_size.into_iter().filter(|(_, p)| p.len() > 1) {
                        let mut by_head: HashMap<String, Vec<PathBuf>> = HashMap::new();
                        for p in paths {
                            if let Ok(h) = head_hash(&c, &p, algorithm, sample) {
                                by_head.entry(h).or_default().push(p);
                            }
                        }
                        for (_, same_head) in by_head.into_iter().filter(|(_, p)| p.len() > 1) {
                            if size <= sample {
                                // The sample covered the whole file.
                                groups.push((size, same_head.iter().map(|p| show(p)).collect()));
                                continue;
                            }
                            let mut by_full: HashMap<String, Vec<String>> = HashMap::new();
                            for p in same_head {
                                let hashed = c
                                    .open_resolved(&p)
                                    .and_then(|o| hash_file(o.file, &o.given, algorithm, 1 << 20, Watch::Call(&ctx)));
                                if let Ok((h, _)) = hashed {
                                    by_full.entry(h).or_default().push(show(&p));
                                }
                            }
                            groups.extend(by_full.into_values().filter(|g| g.len() > 1).map(|g| (size, g)));
                        }
                    }
                    for (_, g) in groups.iter_mut() {
                        g.sort();
                    }
                    groups.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1[0].cmp(&y.1[0])));
                    let groups: Vec<Vec<String>> = groups.into_iter().map(|(_, g)| g).collect();
                    Ok(DuplicatesOut { count: groups.len(), groups })
                })
                .await
            }
        },
    );
}

fn head_hash(
    c: &Config,
    path: &std::path::Path,
    algorithm: Algorithm,
    sample: u64,
) -> Result<String, ToolError> {
    let mut h = algorithm.hasher();
    let mut buf = Vec::new();
    let opened = c.open_resolved(path)?;
    (&opened.file)
        .take(sample)
        .read_to_end(&mut buf)
        .map_err(io_err(&opened.given))?;
    h.update(&buf);
    Ok(hex::encode(h.finalize()))
}
