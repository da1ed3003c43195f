//! The capability manifest (DESIGN.md, "Capability manifest"): the `capabilities` tool's answer,
//! `{"server","version","tools":[{"name","optional_dependency","available","reason","timeout_s",
//! "remediation","without"}]}`. A server computes it once at start-up by probing; the client
//! reads it once per job.

use serde::{Deserialize, Serialize};

/// What a server can do on the host it runs on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Manifest {
    pub server: String,
    pub version: String,
    pub tools: Vec<ManifestTool>,
}

/// One tool of a [`Manifest`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct ManifestTool {
    pub name: String,
    /// The optional dependency this tool needs, if any.
    #[serde(default)]
    pub optional_dependency: Option<String>,
    pub available: bool,
    /// Why the tool is unavailable (null when available).
    #[serde(default)]
    pub reason: Option<String>,
    /// The tool's real timeout in seconds; null means the platform default.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    #[serde(default)]
    pub remediation: Option<String>,
    /// What the tool still answers without its dependency.
    #[serde(default)]
    pub without: Option<String>,
}

impl Manifest {
    pub fn tool(&self, name: &str) -> Option<&ManifestTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Manifest {
        Manifest {
            server: "analysis".into(),
            version: "1.2.3".into(),
            tools: vec![
                ManifestTool {
                    name: "hashes".into(),
                    optional_dependency: None,
                    available: true,
                    reason: None,
                    timeout_s: Some(30.0),
                    remediation: None,
                    without: None,
                },
                ManifestTool {
                    name: "yara_scan".into(),
                    optional_dependency: Some("yara rules".into()),
                    available: false,
                    reason: Some("no rule directory".into()),
                    timeout_s: None,
                    remediation: Some("set MALJAN_YARA_RULES".into()),
                    without: Some("nothing".into()),
                },
            ],
        }
    }

    /// What the server writes, the client reads, with every field named as DESIGN.md says.
    #[test]
    fn a_manifest_round_trips_with_the_documented_fields() {
        let m = sample();
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["tools"][1],
            json!({"name": "yara_scan", "optional_dependency": "yara rules", "available": false,
                   "reason": "no rule directory", "timeout_s": null,
                   "remediation": "set MALJAN_YARA_RULES", "without": "nothing"})
        );
        assert_eq!(m.tool("yara_scan").map(|t| t.available), Some(false));
        assert!(m.tool("nope").is_none());
    }

    /// Another implementation may leave out the optional fields; they read as null.
    #[test]
    fn optional_fields_may_be_missing() {
        let m: Manifest = serde_json::from_value(
            json!({"server": "s", "version": "1", "tools": [{"name": "a", "available": true}]}),
        )
        .unwrap();
        assert_eq!(m.tools[0].timeout_s, None);
        assert_eq!(m.tools[0].reason, None);
    }
}
