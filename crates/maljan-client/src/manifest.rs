//! What a server offers, read once per job: its tools (`tools/list`) and its capability manifest
//! (the `capabilities` tool). A server without a manifest counts as "all listed tools available,
//! default timeouts". The put_sample tools are staging primitives: kept apart, never shown as
//! tools to a user or a model.

use std::time::Duration;

pub use maljan_protocol::{CAPABILITIES_TOOL, STAGING_TOOLS, is_staging_tool};
use maljan_protocol::{Manifest, ManifestTool};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    config::BreakerConfig,
    transport::{ListedTool, PeerInfo},
};

/// One tool as the runtime presents it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub available: bool,
    pub reason: Option<String>,
    pub remediation: Option<String>,
    pub without: Option<String>,
    /// The tool's own timeout from the manifest (None: the platform default).
    pub timeout_s: Option<f64>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    /// openWorldHint: the tool reaches beyond the host (the network).
    #[serde(default)]
    pub open_world: Option<bool>,
}

/// A server as one job sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    pub server: String,
    /// stdio | streamable-http | sse
    pub via: String,
    pub protocol_version: String,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// Tools shown to users and models (staging primitives excluded; `servers.NAME.tools` applied).
    pub tools: Vec<ToolInfo>,
    /// put_sample tools the server advertises.
    pub staging_tools: Vec<String>,
    /// The manifest: as declared, or synthesised when the server has none.
    pub manifest: Manifest,
    pub manifest_declared: bool,
    /// Why the declared manifest could not be read, if it could not.
    pub manifest_error: Option<String>,
}

impl ServerView {
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn unavailable(&self) -> impl Iterator<Item = &ToolInfo> {
        self.tools.iter().filter(|t| !t.available)
    }

    pub fn advertises(&self, staging_tool: &str) -> bool {
        self.staging_tools.iter().any(|t| t == staging_tool)
    }

    /// The deadline for `tool`: its manifest timeout_s plus the margin, else the default.
    pub fn timeout_for(&self, tool: &str, cfg: &BreakerConfig) -> Duration {
        deadline(self.manifest.tool(tool).and_then(|t| t.timeout_s), cfg)
    }
}

/// `timeout_s + margin`, else the configured default.
pub fn deadline(timeout_s: Option<f64>, cfg: &BreakerConfig) -> Duration {
    match timeout_s {
        Some(t) if t.is_finite() && t > 0.0 => Duration::from_secs_f64(t) + cfg.margin(),
        _ => cfg.call_timeout(),
    }
}

/// Reads a manifest out of the `capabilities` tool's result.
pub fn parse_manifest(result: &Value) -> Result<Manifest, String> {
    if let Some(s) = result.get("structuredContent")
        && let Ok(m) = serde_json::from_value::<Manifest>(s.clone())
    {
        return Ok(m);
    }
    let mut last = "no JSON text in the answer".to_string();
    for c in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = c.get("text").and_then(Value::as_str) {
            match serde_json::from_str::<Manifest>(t) {
                Ok(m) => return Ok(m),
                Err(e) => last = format!("not a manifest: {e}"),
            }
        }
    }
    Err(last)
}

/// Builds the view from tools/list and the manifest (if any).
pub fn build_view(
    server: &str,
    info: &PeerInfo,
    via: &str,
    tools: &[ListedTool],
    manifest: Result<Manifest, Option<String>>,
    allowed: Option<&[String]>,
) -> ServerView {
    let (manifest, declared, manifest_error) = match manifest {
        Ok(m) => (m, true, None),
        Err(why) => {
            let m = Manifest {
                server: info.name.clone().unwrap_or_else(|| server.to_string()),
                version: info.version.clone().unwrap_or_default(),
                tools: tools
                    .iter()
                    .filter(|t| !is_staging_tool(&t.name))
                    .map(|t| ManifestTool {
                        name: t.name.clone(),
                        optional_dependency: None,
                        available: true,
                        reason: None,
                        timeout_s: None,
                        remediation: None,
                        without: None,
                    })
                    .collect(),
            };
            (m, false, why)
        }
    };
    let mut shown = Vec::new();
    let mut staging = Vec::new();
    for t in tools {
        let name = t.name.clone();
        if is_staging_tool(&name) {
            staging.push(name);
            continue;
        }
        if let Some(allowed) = allowed
            && !allowed.iter().any(|a| a == &name)
        {
            continue;
        }
        let m = manifest.tool(&name);
        shown.push(ToolInfo {
            description: t.description.clone(),
            input_schema: Value::Object(t.input_schema.clone()),
            available: m.map(|m| m.available).unwrap_or(true),
            reason: m.and_then(|m| m.reason.clone()),
            remediation: m.and_then(|m| m.remediation.clone()),
            without: m.and_then(|m| m.without.clone()),
            timeout_s: m.and_then(|m| m.timeout_s),
            read_only: t.read_only,
            destructive: t.destructive,
            open_world: t.open_world,
            name,
        });
    }
    ServerView {
        server: server.to_string(),
        via: via.to_string(),
        protocol_version: info.protocol_version.clone(),
        server_name: info.name.clone(),
        server_version: info.version.clone(),
        tools: shown,
        staging_tools: staging,
        manifest,
        manifest_declared: declared,
        manifest_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deadlines_follow_the_manifest() {
        let cfg = BreakerConfig {
            call_timeout_seconds: 7.0,
            timeout_margin_seconds: 2.0,
            ..Default::default()
        };
        assert_eq!(deadline(Some(3.0), &cfg), Duration::from_secs(5));
        assert_eq!(deadline(None, &cfg), Duration::from_secs(7));
    }

    #[test]
    fn manifests_are_read_from_text_or_structured_content() {
        let m = json!({"server":"s","version":"1","tools":[{"name":"a","available":false,"reason":"r","timeout_s":2.0}]});
        let r1 = json!({"content":[{"type":"text","text":m.to_string()}]});
        let r2 = json!({"content":[],"structuredContent":m});
        assert_eq!(parse_manifest(&r1).unwrap().tools[0].timeout_s, Some(2.0));
        assert!(!parse_manifest(&r2).unwrap().tools[0].available);
        let refused =
            parse_manifest(&json!({"content":[{"type":"text","text":"nope"}]})).unwrap_err();
        assert!(refused.starts_with("not a manifest:"), "{refused}");
    }
}
