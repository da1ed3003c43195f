//! The triage plan: which tools run, in which order, on which server, with which arguments.
//!
//! The default plan is the one `maljan analyze` runs with no configuration (detect_packer and
//! code_capabilities run on executables only; on anything else they are not applicable). A plan file (TOML)
//! replaces the steps and/or appends extra steps on other servers:
//!
//! ```toml
//! # triage.toml, beside config.toml (or --steps FILE)
//! # steps = [ ... ]            # optional: replaces the default steps entirely
//!
//! [[extra_steps]]              # appended after the steps
//! server = "sandbox"           # a configured server name
//! tool = "detonate"
//! title = "Sandbox run"
//! args = { sample = "{sample}", minutes = 2 }
//! ```
//!
//! A step without `server` runs on the first selected server that offers the tool (so a remote
//! analysis server named anything works). The tool name `@format` is the format's own tool, chosen
//! from identify_file's answer. In string arguments `{sample}` becomes the sample's local path
//! (the runtime rewrites it to the server's own path after an upload), `{sample_name}` its file name
//! and `{sha256}` its SHA-256. A step without `args` gets `{"path": "{sample}"}`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The pseudo tool resolved from identify_file's answer.
pub const FORMAT_TOOL: &str = "@format";
/// The identification tool whose answer picks the format tool.
pub const IDENTIFY_TOOL: &str = "identify_file";

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub tool: String,
    /// A configured server; absent = the first selected server that offers the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Arguments; absent = `{"path": "{sample}"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// A heading for people; absent = derived from the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl Step {
    pub fn tool(tool: &str) -> Self {
        Self {
            tool: tool.into(),
            server: None,
            args: None,
            title: None,
        }
    }

    /// The heading shown in progress lines and reports.
    pub fn heading(&self) -> String {
        if let Some(t) = &self.title {
            return t.clone();
        }
        let base = match self.tool.as_str() {
            IDENTIFY_TOOL => "File type".to_string(),
            "hashes" => "Hashes".into(),
            FORMAT_TOOL => "Format structure".into(),
            "strings" => "Strings".into(),
            "detect_packer" => "Packer, installer, compiler".into(),
            "code_capabilities" => "Capabilities (ATT&CK)".into(),
            "iocs_from_file" => "Indicators of compromise".into(),
            "yara_scan" => "YARA rules".into(),
            other => other.to_string(),
        };
        match &self.server {
            Some(s) => format!("{base} ({s})"),
            None => base,
        }
    }

    /// The arguments with `{sample}`, `{sample_name}` and `{sha256}` filled in.
    pub fn arguments(&self, sample_path: &str, sample_name: &str, sha256: &str) -> Value {
        let args = self.args.clone().unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("path".into(), json!("{sample}"));
            m
        });
        let mut v = Value::Object(args);
        fill(&mut v, sample_path, sample_name, sha256);
        v
    }
}

fn fill(v: &mut Value, path: &str, name: &str, sha256: &str) {
    match v {
        Value::String(s) if s.contains('{') => {
            *s = s
                .replace("{sample}", path)
                .replace("{sample_name}", name)
                .replace("{sha256}", sha256);
        }
        Value::Array(items) => items.iter_mut().for_each(|i| fill(i, path, name, sha256)),
        Value::Object(m) => m.values_mut().for_each(|i| fill(i, path, name, sha256)),
        _ => {}
    }
}

/// The steps of one triage run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub steps: Vec<Step>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            steps: [
                IDENTIFY_TOOL,
                "hashes",
                FORMAT_TOOL,
                "detect_packer",
                "code_capabilities",
                "strings",
                "iocs_from_file",
                "yara_scan",
            ]
            .into_iter()
            .map(Step::tool)
            .collect(),
        }
    }
}

/// A plan file that cannot be used, with the file and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("triage plan {file}: {problem}")]
pub struct PlanError {
    pub file: String,
    pub problem: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    steps: Option<Vec<Step>>,
    #[serde(default)]
    extra_steps: Vec<Step>,
}

impl Plan {
    /// Parses a plan file's text: `steps` replace the default ones, `extra_steps` are appended.
    pub fn from_toml(text: &str, file: &str) -> Result<Self, PlanError> {
        let err = |problem: String| PlanError {
            file: file.to_string(),
            problem,
        };
        let parsed: PlanFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let mut steps = parsed.steps.unwrap_or_else(|| Plan::default().steps);
        steps.extend(parsed.extra_steps);
        for (i, s) in steps.iter().enumerate() {
            if s.tool.trim().is_empty() {
                return Err(err(format!("step {} has an empty tool name", i + 1)));
            }
            if s.tool == FORMAT_TOOL && s.server.is_some() {
                // The format tool follows identify_file's server; pinning it elsewhere is ambiguous.
                return Err(err(format!(
                    "step {}: {FORMAT_TOOL} cannot name a server",
                    i + 1
                )));
            }
        }
        Ok(Self { steps })
    }

    /// Reads a plan file.
    pub fn load(path: &Path) -> Result<Self, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            file: path.display().to_string(),
            problem: format!("cannot read it: {e}"),
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// `explicit` if given, else `triage.toml` beside the runtime's config file when it exists,
    /// else the default plan. Returns the file used, if any.
    pub fn discover(
        explicit: Option<&Path>,
        config_file: &Path,
    ) -> Result<(Self, Option<String>), PlanError> {
        if let Some(p) = explicit {
            return Ok((Self::load(p)?, Some(p.display().to_string())));
        }
        let beside = config_file.parent().map(|d| d.join("triage.toml"));
        match beside {
            Some(p) if p.is_file() => Ok((Self::load(&p)?, Some(p.display().to_string()))),
            _ => Ok((Self::default(), None)),
        }
    }

    /// Servers steps name explicitly.
    pub fn named_servers(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.steps.iter().filter_map(|s| s.server.clone()) {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }
}

/// The format tool for identify_file's answer: its `analysis_tool`, else by `kind`.
pub fn format_tool(identify_answer: &Value) -> Option<String> {
    if let Some(t) = identify_answer
        .get("analysis_tool")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        return Some(t.to_string());
    }
    let kind = identify_answer.get("kind").and_then(Value::as_str)?;
    let tool = match kind {
        "pe" | "dos" => "pe_info",
        "elf" => "elf_info",
        "macho" => "macho_info",
        "ole2" | "ooxml" | "pdf" | "rtf" => "document_info",
        "zip" | "jar" | "7z" | "rar" | "gzip" | "bzip2" | "xz" | "zstd" | "tar" | "cab" => {
            "archive_list"
        }
        _ => return None,
    };
    Some(tool.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_is_the_documented_order() {
        let tools: Vec<_> = Plan::default().steps.into_iter().map(|s| s.tool).collect();
        assert_eq!(
            tools,
            [
                "identify_file",
                "hashes",
                "@format",
                "detect_packer",
                "code_capabilities",
                "strings",
                "iocs_from_file",
                "yara_scan"
            ]
        );
    }

    #[test]
    fn plan_files_append_extra_steps_and_fill_placeholders() {
        let p = Plan::from_toml(
            "[[extra_steps]]\nserver = \"sb\"\ntool = \"run\"\nargs = { sample = \"{sample}\", tags = [\"{sha256}\"] }\n",
            "t",
        )
        .unwrap();
        assert_eq!(p.steps.len(), 9);
        let extra = &p.steps[8];
        assert_eq!(extra.heading(), "run (sb)");
        let args = extra.arguments("/s/a.exe", "a.exe", "abc");
        assert_eq!(args, json!({"sample": "/s/a.exe", "tags": ["abc"]}));
        assert_eq!(p.named_servers(), ["sb"]);
        assert_eq!(
            Step::tool("hashes").arguments("/x", "x", ""),
            json!({"path": "/x"})
        );
        assert!(Plan::from_toml("steps = [{ tool = \"\" }]", "t").is_err());
        assert!(Plan::from_toml("nonsense = 1", "t").is_err());
    }

    #[test]
    fn the_format_tool_follows_identify_file() {
        assert_eq!(
            format_tool(&json!({"kind": "pe", "analysis_tool": "pe_info"})).as_deref(),
            Some("pe_info")
        );
        assert_eq!(
            format_tool(&json!({"kind": "elf"})).as_deref(),
            Some("elf_info")
        );
        assert_eq!(
            format_tool(&json!({"kind": "text", "analysis_tool": null})),
            None
        );
    }
}
