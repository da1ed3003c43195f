//! Integrity baselines (automation-file's FA_integrity_*): snapshot a tree, store it as the
//! approved state, and report drift against it (watches are in `watch`).

use std::{
    collections::{BTreeMap, HashMap},
    io::Read,
    os::unix::fs::PermissionsExt,
    path::Path,
    sync::Arc,
};

use maljan_server::{Registry, Roots, ToolContext, ToolError, ToolMeta, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Config,
    hashing::{Algorithm, Watch, hash_file},
    integrity::default_algorithm,
    paths::{io_err, show, walk_files},
};

/// One file of a snapshot, in automation-file's field names.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    path: String,
    size: Option<u64>,
    modified_at: Option<String>,
    checksum: String,
    algorithm: String,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    backend: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    etag: Option<String>,
    /// Permission bits.
    #[serde(default)]
    mode: Option<u32>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone)]
pub(crate) struct Snapshot {
    created_at: String,
    root: String,
    #[serde(default)]
    backend: String,
    pub(crate) algorithm: String,
    entries: Vec<Entry>,
}

#[derive(Serialize, JsonSchema, Clone)]
pub(crate) struct Change {
    /// created, modified, deleted, renamed, metadata_changed or permission_changed.
    kind: &'static str,
    path: String,
    previous_path: Option<String>,
    fields: Vec<String>,
    note: String,
    before: Option<Entry>,
    after: Option<Entry>,
}

#[derive(Serialize, JsonSchema, Clone)]
pub(crate) struct DriftReport {
    target: String,
    baseline: String,
    backend: String,
    algorithm: String,
    /// True when nothing differs from the baseline.
    pub(crate) ok: bool,
    deep: bool,
    partial: bool,
    checked: usize,
    hashed: usize,
    counts: BTreeMap<String, usize>,
    pub(crate) changes: Vec<Change>,
    notes: Vec<String>,
    verified_at: String,
}

#[derive(Serialize, JsonSchema)]
struct StoredOut {
    target: String,
    baseline: String,
    backend: String,
    algorithm: String,
    created_at: String,
    /// Files recorded.
    entries: usize,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SnapshotArgs {
    /// The directory described.
    target: String,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BaselineArgs {
    /// The directory described.
    target: String,
    /// The JSON file the approved state is stored in.
    baseline: String,
    /// A hashlib name, as for FA_file_checksum.
    #[serde(default = "default_algorithm")]
    #[schemars(default = "default_algorithm")]
    algorithm: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AcceptArgs {
    /// The directory described.
    target: String,
    /// The baseline file replaced with the tree's current state.
    baseline: String,
}

fn default_true() -> bool {
    true
}
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerifyArgs {
    /// The directory checked.
    target: String,
    /// The baseline file.
    baseline: String,
    /// Hash every file; false hashes only files whose size or modification time changed.
    #[serde(default = "default_true")]
    #[schemars(default = "default_true")]
    deep: bool,
}

/// automation-file writes storage URIs; a local one is a path here.
pub(crate) fn local(path: &str) -> &str {
    path.strip_prefix("local://").unwrap_or(path)
}

pub(crate) fn iso(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339()
}

/// A file time as automation-file records it, `datetime.fromtimestamp(st_mtime, utc).isoformat()`:
/// the float seconds Python's stat gives, rounded half-even to the microsecond, the fraction
/// left out when it is zero. Written the same way, either's baseline verifies the other's tree.
pub(crate) fn python_timestamp(t: std::time::SystemTime) -> String {
    let (secs, nanos) = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    };
    // CPython's stat: sec + nsec * 1e-9 as a double; then fromtimestamp's ROUND_HALF_EVEN.
    let float = secs as f64 + f64::from(nanos) * 1e-9;
    let whole = float.floor();
    let mut micros = ((float - whole) * 1e6).round_ties_even() as i64;
    let mut whole = whole as i64;
    if micros >= 1_000_000 {
        whole += 1;
        micros -= 1_000_000;
    }
    let Some(at) = chrono::DateTime::<chrono::Utc>::from_timestamp(whole, micros as u32 * 1000)
    else {
        return iso(t);
    };
    if micros == 0 {
        at.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()
    } else {
        at.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// Snapshots `root`. With `trusted`, files whose size and modification time equal the trusted
/// entry keep its checksum instead of being hashed again.
fn take(
    roots: &Roots,
    root: &Path,
    algorithm: Algorithm,
    trusted: Option<&HashMap<String, Entry>>,
    stop: &dyn Fn() -> bool,
) -> Result<(Snapshot, usize), ToolError> {
    let mut entries = Vec::new();
    let mut hashed = 0;
    for f in walk_files(root, stop)? {
        if f.is_symlink {
            continue;
        }
        // A file that vanished (or turned into something else) mid-walk is simply not in this
        // snapshot; what is recorded is read from the handle that was opened.
        let Ok(file) = roots.open_file(&f.abs, &f.rel) else {
            continue;
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        let modified_at = meta.modified().ok().map(python_timestamp);
        let known = trusted.and_then(|t| t.get(&f.rel)).filter(|e| {
            e.size == Some(meta.len())
                && e.modified_at.is_some()
                && e.modified_at == modified_at
                && e.algorithm == algorithm.name()
        });
        let checksum = match known {
            Some(e) => e.checksum.clone(),
            None => {
                hashed += 1;
                match hash_file(file, &f.rel, algorithm, 1 << 20, Watch::Stop(stop)) {
                    Ok((h, _)) => h,
                    // A file that vanished mid-walk is simply not in this snapshot.
                    Err(_) => continue,
                }
            }
        };
        entries.push(Entry {
            path: f.rel,
            size: Some(meta.len()),
            modified_at,
            checksum,
            algorithm: algorithm.name().into(),
            content_type: None,
            backend: "local".into(),
            version: None,
            etag: None,
            mode: Some(meta.permissions().mode() & 0o7777),
        });
    }
    let snapshot = Snapshot {
        created_at: now(),
        root: show(root),
        backend: "local".into(),
        algorithm: algorithm.name().into(),
        entries,
    };
    Ok((snapshot, hashed))
}

pub(crate) fn load_baseline(
    roots: &Roots,
    path: &Path,
    given: &str,
) -> Result<Snapshot, ToolError> {
    let text = roots
        .open_file(path, given)
        .and_then(|file| {
            let mut text = String::new();
            (&file).read_to_string(&mut text).map_err(io_err(given))?;
            Ok(text)
        })
        .map_err(|e| e.with_remediation("create the baseline first with FA_integrity_baseline"))?;
    let not_a_baseline = |e: String| {
        ToolError::unsupported_format(format!("{given} is not an integrity baseline: {e}"))
    };
    let document: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_a_baseline(e.to_string()))?;
    // automation-file's manifest: schema version 2; a document without one is read as the
    // earlier form, and any other version refused so a newer document is never half-understood.
    match document.get(SCHEMA_KEY) {
        None => {}
        Some(v) if *v == serde_json::json!(MANIFEST_VERSION) => {}
        Some(v) => {
            return Err(not_a_baseline(format!(
                "its manifest schema version is {v}; this release reads version {MANIFEST_VERSION}"
            )));
        }
    }
    serde_json::from_value(document).map_err(|e| not_a_baseline(e.to_string()))
}

/// The key and version of automation-file's baseline manifest.
const SCHEMA_KEY: &str = "schema_version";
const MANIFEST_VERSION: u64 = 2;

fn store(c: &Config, snapshot: &Snapshot, path: &Path, given: &str) -> Result<(), ToolError> {
    if let Some(parent) = path.parent() {
        c.roots.create_dir_all(parent, given)?;
    }
    // Written as automation-file's manifest, so either can verify the other's baseline.
    let mut document =
        serde_json::Map::from_iter([(SCHEMA_KEY.to_string(), MANIFEST_VERSION.into())]);
    match serde_json::to_value(snapshot) {
        Ok(serde_json::Value::Object(fields)) => document.extend(fields),
        other => {
            return Err(ToolError::tool_failed(format!(
                "cannot write the baseline: {other:?}"
            )));
        }
    }
    let text = serde_json::to_string_pretty(&document)
        .map_err(|e| ToolError::tool_failed(e.to_string()))?;
    c.write_atomic(path, given, text.as_bytes())
}

fn stored(s: &Snapshot, baseline: &Path) -> StoredOut {
    StoredOut {
        target: s.root.clone(),
        baseline: show(baseline),
        backend: s.backend.clone(),
        algorithm: s.algorithm.clone(),
        created_at: s.created_at.clone(),
        entries: s.entries.len(),
    }
}

pub(crate) fn verify(
    roots: &Roots,
    root: &Path,
    baseline_path: &Path,
    deep: bool,
    stop: &dyn Fn() -> bool,
) -> Result<DriftReport, ToolError> {
    let base = load_baseline(roots, baseline_path, &show(baseline_path))?;
    let algorithm = Algorithm::parse(&base.algorithm)?;
    let index: HashMap<String, Entry> = base
        .entries
        .iter()
        .map(|e| (e.path.clone(), e.clone()))
        .collect();
    let (now_snap, hashed) = take(roots, root, algorithm, (!deep).then_some(&index), stop)?;
    let current: HashMap<&str, &Entry> = now_snap
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e))
        .collect();
    let mut changes = Vec::new();
    let mut gone = Vec::new();
    for before in &base.entries {
        let Some(after) = current.get(before.path.as_str()) else {
            gone.push(before.clone());
            continue;
        };
        let content_differs = before.checksum != after.checksum
            || matches!((before.size, after.size), (Some(a), Some(b)) if a != b);
        let change = |kind, fields: Vec<String>| Change {
            kind,
            path: after.path.clone(),
            previous_path: None,
            fields,
            note: String::new(),
            before: Some(before.clone()),
            after: Some((*after).clone()),
        };
        if content_differs {
            changes.push(change("modified", vec![]));
        } else if before.modified_at.is_some()
            && after.modified_at.is_some()
            && before.modified_at != after.modified_at
        {
            changes.push(change("metadata_changed", vec!["modified_at".into()]));
        }
        if before.mode.is_some() && after.mode.is_some() && before.mode != after.mode {
            changes.push(change("permission_changed", vec!["mode".into()]));
        }
    }
    let new: Vec<Entry> = now_snap
        .entries
        .iter()
        .filter(|e| !index.contains_key(&e.path))
        .cloned()
        .collect();
    // Pair deletions and creations of the same content into renames when the pairing is unique.
    type Halves = (Vec<Entry>, Vec<Entry>);
    let mut groups: BTreeMap<(String, Option<u64>), Halves> = BTreeMap::new();
    for e in gone {
        groups
            .entry((e.checksum.clone(), e.size))
            .or_default()
            .0
            .push(e);
    }
    for e in new {
        groups
            .entry((e.checksum.clone(), e.size))
            .or_default()
            .1
            .push(e);
    }
    for ((checksum, _), (gone, new)) in groups {
        if gone.len() == 1 && new.len() == 1 {
            changes.push(Change {
                kind: "renamed",
                path: new[0].path.clone(),
                previous_path: Some(gone[0].path.clone()),
                fields: vec![],
                note: String::new(),
                before: Some(gone[0].clone()),
                after: Some(new[0].clone()),
            });
            continue;
        }
        let note = if !gone.is_empty() && !new.is_empty() {
            format!(
                "ambiguous rename: {} deleted and {} created files share the checksum {}...; reported separately",
                gone.len(),
                new.len(),
                &checksum[..checksum.len().min(12)]
            )
        } else {
            String::new()
        };
        for e in gone {
            changes.push(Change {
                kind: "deleted",
                path: e.path.clone(),
                previous_path: None,
                fields: vec![],
                note: note.clone(),
                before: Some(e),
                after: None,
            });
        }
        for e in new {
            changes.push(Change {
                kind: "created",
                path: e.path.clone(),
                previous_path: None,
                fields: vec![],
                note: note.clone(),
                before: None,
                after: Some(e),
            });
        }
    }
    const KINDS: [&str; 6] = [
        "created",
        "modified",
        "deleted",
        "renamed",
        "metadata_changed",
        "permission_changed",
    ];
    changes.sort_by(|a, b| {
        a.path.cmp(&b.path).then_with(|| {
            KINDS
                .iter()
                .position(|k| *k == a.kind)
                .cmp(&KINDS.iter().position(|k| *k == b.kind))
        })
    });
    let mut counts: BTreeMap<String, usize> = KINDS.iter().map(|k| (k.to_string(), 0)).collect();
    for c in &changes {
        *counts.entry(c.kind.to_string()).or_default() += 1;
    }
    let mut notes = Vec::new();
    if !deep {
        notes.push(format!(
            "quick pass: {hashed} of {} files hashed; the others were trusted because their size and modification time are unchanged",
            now_snap.entries.len()
        ));
    }
    Ok(DriftReport {
        target: show(root),
        baseline: show(baseline_path),
        backend: "local".into(),
        algorithm: algorithm.name().into(),
        ok: changes.is_empty(),
        deep,
        partial: false,
        checked: now_snap.entries.len(),
        hashed,
        counts,
        changes,
        notes,
        verified_at: now(),
    })
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_integrity_snapshot",
            "Every file below a directory with size, modification time, mode and checksum. Stores nothing.",
        )
        .timeout_s(3600),
        move |ctx: ToolContext, a: SnapshotArgs| {
            let c = c.clone();
            async move {
                let algorithm = Algorithm::for_integrity(&a.algorithm)?;
                let root = c.existing_dir(local(&a.target))?;
                blocking(move || Ok(take(&c.roots, &root, algorithm, None, &|| ctx.is_cancelled())?.0)).await
            }
        },
    );

    for (name, description) in [
        (
            "FA_integrity_baseline",
            "Snapshot a directory and store it as the approved state (a JSON file).",
        ),
        (
            "FA_integrity_accept",
            "Approve a directory's current state: replace its baseline with a fresh snapshot.",
        ),
    ] {
        let c = cfg.clone();
        let accept = name == "FA_integrity_accept";
        let meta = ToolMeta::new(name, description)
            .destructive()
            .timeout_s(3600);
        let handler = move |ctx: ToolContext, a: BaselineArgs| {
            let c = c.clone();
            async move {
                let root = c.existing_dir(local(&a.target))?;
                let baseline = c.target(local(&a.baseline))?;
                let algorithm = if accept {
                    // Accepting keeps the algorithm the baseline was made with.
                    let base = load_baseline(&c.roots, &baseline, &a.baseline)?;
                    Algorithm::parse(&base.algorithm)?
                } else {
                    Algorithm::for_integrity(&a.algorithm)?
                };
                blocking(move || {
                    let (snap, _) = take(&c.roots, &root, algorithm, None, &|| ctx.is_cancelled())?;
                    store(&c, &snap, &baseline, &a.baseline)?;
                    Ok(stored(&snap, &baseline))
                })
                .await
            }
        };
        if accept {
            reg.add(meta, move |ctx, a: AcceptArgs| {
                handler(
                    ctx,
                    BaselineArgs {
                        target: a.target,
                        baseline: a.baseline,
                        algorithm: default_algorithm(),
                    },
                )
            });
        } else {
            reg.add(meta, handler);
        }
    }

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_integrity_verify",
            "Compare a directory with its baseline: created, modified, deleted, renamed, metadata and permission changes.",
        )
        .timeout_s(3600),
        move |ctx: ToolContext, a: VerifyArgs| {
            let c = c.clone();
            async move {
                let root = c.existing_dir(local(&a.target))?;
                let baseline = c.existing(local(&a.baseline))?;
                blocking(move || verify(&c.roots, &root, &baseline, a.deep, &|| ctx.is_cancelled())).await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::python_timestamp;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn file_times_are_written_as_python_writes_them() {
        let at = |s: u64, n: u32| python_timestamp(UNIX_EPOCH + Duration::new(s, n));
        assert_eq!(at(1_700_000_000, 0), "2023-11-14T22:13:20+00:00");
        assert_eq!(
            at(1_700_000_000, 123_456_000),
            "2023-11-14T22:13:20.123456+00:00"
        );
        // Python rounds the float seconds to the microsecond rather than truncating.
        assert_eq!(
            at(1_700_000_000, 470_979_900),
            "2023-11-14T22:13:20.470980+00:00"
        );
        assert_eq!(at(1_700_000_000, 999_999_900), "2023-11-14T22:13:21+00:00");
    }
}
