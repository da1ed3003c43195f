//! Exports: the report as a STIX 2.1 bundle, and its indicators of compromise as CSV.
//!
//! The bundle holds a `file` object for the sample and one for each child sample (a container's
//! members listed in its `archive-ext.contains_refs`), a `malware-analysis` object (product
//! maljan, the verdict as its `result`, the files as `analysis_sco_refs`) and one `indicator` per
//! network indicator and per file hash of a sample judged malicious or suspicious. File ids are
//! the deterministic UUIDv5 STIX defines for cyber-observables (from the SHA-256), so the same file
//! has the same id in every bundle; the other ids are random (UUIDv4), as STIX asks of SDOs.

use serde_json::{Map, Value, json};

use crate::{
    report::{Report, StepReport, StepStatus, VerdictWord},
    tree::{ChildReport, walk},
};

/// STIX 2.1's namespace for deterministic cyber-observable ids.
const STIX_SCO_NAMESPACE: uuid::Uuid = uuid::uuid!("00abedb4-aa42-466c-9c01-fed23315a9b7");

fn file_id(sha256: &str) -> String {
    let basis = json!({ "hashes": { "SHA-256": sha256 } }).to_string();
    format!(
        "file--{}",
        uuid::Uuid::new_v5(&STIX_SCO_NAMESPACE, basis.as_bytes())
    )
}

fn sdo_id(kind: &str) -> String {
    format!("{kind}--{}", uuid::Uuid::new_v4())
}

/// A STIX timestamp: RFC 3339 UTC; the report's are already so.
fn timestamp(r: &Report) -> String {
    if r.generated_at.ends_with('Z') {
        r.generated_at.clone()
    } else {
        "1970-01-01T00:00:00.000Z".into()
    }
}

/// A string literal inside a STIX pattern.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn hashes(pairs: &[(&str, &str)]) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        if !v.is_empty() {
            m.insert((*k).to_string(), json!(v));
        }
    }
    Value::Object(m)
}

/// The network indicators a step found: (kind, value).
fn network_iocs(step: Option<&StepReport>) -> Vec<(String, String)> {
    let Some(r) = step
        .filter(|s| s.status == StepStatus::Ok)
        .and_then(|s| s.result.as_ref())
    else {
        return vec![];
    };
    r["indicators"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            Some((
                i["kind"].as_str()?.to_string(),
                i["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn pattern(kind: &str, value: &str) -> Option<String> {
    let object = match kind {
        "url" => "url:value",
        "domain" => "domain-name:value",
        "ipv4" => "ipv4-addr:value",
        "ipv6" => "ipv6-addr:value",
        "email" => "email-addr:value",
        _ => return None,
    };
    Some(format!("[{object} = {}]", literal(value)))
}

/// The report as a STIX 2.1 bundle (JSON, pretty-printed).
pub fn stix(r: &Report) -> String {
    let now = timestamp(r);
    let word = r
        .verdict
        .as_ref()
        .map_or(VerdictWord::Unknown, |v| v.verdict);
    let indicator_type = match word {
        VerdictWord::Malicious => "malicious-activity",
        VerdictWord::Suspicious => "anomalous-activity",
        _ => "unknown",
    };
    let mut objects = Vec::new();
    let children = walk(&r.children);

    // Files: the sample, then every child; a container lists its members.
    let contains = |sha: &str, kids: &[ChildReport]| -> Vec<String> {
        let _ = sha;
        kids.iter().map(|k| file_id(&k.sha256)).collect()
    };
    let sample_sha = r.sample.sha256.clone();
    let mut sample = json!({
        "type": "file",
        "spec_version": "2.1",
        "id": file_id(&sample_sha),
        "hashes": hashes(&[
            ("SHA-256", &sample_sha),
            ("MD5", r.sample.hashes.get("md5").map_or("", String::as_str)),
            ("SHA-1", r.sample.hashes.get("sha1").map_or("", String::as_str)),
        ]),
        "size": r.sample.size,
        "name": r.sample.name,
    });
    if let Some(m) = r.sample.mime.as_deref().filter(|m| m.contains('/')) {
        sample["mime_type"] = json!(m);
    }
    if !r.children.is_empty() {
        sample["extensions"] =
            json!({ "archive-ext": { "contains_refs": contains(&sample_sha, &r.children) } });
    }
    objects.push(sample);
    let mut seen = std::collections::BTreeSet::from([sample_sha.clone()]);
    for c in &children {
        if !seen.insert(c.sha256.clone()) {
            continue; // the same bytes twice in the tree: one file object
        }
        let mut f = json!({
            "type": "file",
            "spec_version": "2.1",
            "id": file_id(&c.sha256),
            "hashes": hashes(&[("SHA-256", &c.sha256), ("MD5", &c.md5), ("SHA-1", &c.sha1)]),
            "size": c.size,
            "name": c.name.rsplit(['/', '\\']).next().unwrap_or(&c.name),
        });
        if !c.children.is_empty() {
            f["extensions"] =
                json!({ "archive-ext": { "contains_refs": contains(&c.sha256, &c.children) } });
        }
        objects.push(f);
    }

    let mut analysis = json!({
        "type": "malware-analysis",
        "spec_version": "2.1",
        "id": sdo_id("malware-analysis"),
        "created": now,
        "modified": now,
        "product": "maljan",
        "version": r.maljan_version,
        "result": word.as_str(),
        "sample_ref": file_id(&sample_sha),
        "analysis_ended": now,
    });
    if !children.is_empty() {
        analysis["analysis_sco_refs"] = json!(
            seen.iter()
                .filter(|s| **s != sample_sha)
                .map(|s| file_id(s))
                .collect::<Vec<_>>()
        );
    }
    if let Some(v) = &r.verdict {
        analysis["result_name"] = json!(format!("maljan {} verdict", v.source.as_str()));
    }
    objects.push(analysis);

    // Indicators: network indicators of the sample and its children; file hashes of what was
    // judged malicious or suspicious.
    let mut network = network_iocs(r.step("iocs_from_file"));
    for c in &children {
        network.extend(network_iocs(c.step("iocs_from_file")));
    }
    network.sort();
    network.dedup();
    let mut indicator = |name: String, pattern: String, kind: &str| {
        objects.push(json!({
            "type": "indicator",
            "spec_version": "2.1",
            "id": sdo_id("indicator"),
            "created": now,
            "modified": now,
            "name": name,
            "description": format!("found by maljan {} in job {}", r.maljan_version, r.job_id),
            "indicator_types": [kind],
            "pattern": pattern,
            "pattern_type": "stix",
            "valid_from": now,
        }));
    };
    for (kind, value) in network.iter().take(1000) {
        if let Some(p) = pattern(kind, value) {
            indicator(
                format!("{kind} found in {}", r.sample.name),
                p,
                indicator_type,
            );
        }
    }
    let judged = |w: Option<VerdictWord>| {
        matches!(w, Some(VerdictWord::Malicious | VerdictWord::Suspicious))
    };
    if judged(Some(word)) {
        indicator(
            format!("{} ({})", r.sample.name, word.as_str()),
            format!("[file:hashes.'SHA-256' = {}]", literal(&sample_sha)),
            indicator_type,
        );
    }
    for c in &children {
        let w = c.verdict.as_ref().map(|v| v.verdict);
        if judged(w) {
            let kind = if w == Some(VerdictWord::Malicious) {
                "malicious-activity"
            } else {
                "anomalous-activity"
            };
            indicator(
                format!("{} inside {}", c.name, r.sample.name),
                format!("[file:hashes.'SHA-256' = {}]", literal(&c.sha256)),
                kind,
            );
        }
    }

    let bundle = json!({
        "type": "bundle",
        "id": sdo_id("bundle"),
        "objects": objects,
    });
    let mut s = serde_json::to_string_pretty(&bundle).unwrap_or_default();
    s.push('\n');
    s
}

/// One CSV field: quoted when it must be, and a leading `= + - @` neutralised, so that a value
/// from a sample cannot run as a formula in a spreadsheet.
fn field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The indicators of compromise as CSV: `sample_sha256,sample_path,kind,value,count,evidence`,
/// the file hashes of the sample and of every child first, then what iocs_from_file found in each.
pub fn iocs_csv(r: &Report) -> String {
    let mut o = String::from("sample_sha256,sample_path,kind,value,count,evidence\n");
    let mut row = |sha: &str, path: &str, kind: &str, value: &str, count: u64, ev: &[String]| {
        let line = [
            field(sha),
            field(path),
            field(kind),
            field(value),
            count.to_string(),
            field(&ev.join(" ")),
        ]
        .join(",");
        o.push_str(&line);
        o.push('\n');
    };
    let hash_ev = r
        .step("hashes")
        .map(|s| s.evidence.clone())
        .unwrap_or_default();
    for (k, v) in &r.sample.hashes {
        if matches!(k.as_str(), "md5" | "sha1" | "sha256") {
            row(&r.sample.sha256, &r.sample.name, k, v, 1, &hash_ev);
        }
    }
    let children = walk(&r.children);
    for c in &children {
        let path = format!("{}/{}", r.sample.name, c.name);
        for (k, v) in [("md5", &c.md5), ("sha1", &c.sha1), ("sha256", &c.sha256)] {
            row(&c.sha256, &path, k, v, 1, &c.extracted_by);
        }
    }
    let iocs = |step: Option<&StepReport>| -> Vec<(String, String, u64, Vec<String>)> {
        let Some(s) = step.filter(|s| s.status == StepStatus::Ok) else {
            return vec![];
        };
        s.result
            .as_ref()
            .and_then(|r| r["indicators"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|i| {
                Some((
                    i["kind"].as_str()?.to_string(),
                    i["value"].as_str()?.to_string(),
                    i["count"].as_u64().unwrap_or(1),
                    s.evidence.clone(),
                ))
            })
            .collect()
    };
    for (k, v, n, ev) in iocs(r.step("iocs_from_file")) {
        row(&r.sample.sha256, &r.sample.name, &k, &v, n, &ev);
    }
    for c in &children {
        let path = format!("{}/{}", r.sample.name, c.name);
        for (k, v, n, ev) in iocs(c.step("iocs_from_file")) {
            row(&c.sha256, &path, &k, &v, n, &ev);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ids_are_stix_deterministic_and_csv_fields_are_safe() {
        let a = file_id(&"a".repeat(64));
        assert_eq!(a, file_id(&"a".repeat(64)));
        assert!(a.starts_with("file--"));
        assert_eq!(literal("it's \\"), "'it\\'s \\\\'");
        assert_eq!(field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
