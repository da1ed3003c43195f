//! The tool catalog a model sees, built from the job's server views (each read once per job):
//!
//! - the server's allow-list (`servers.NAME.tools`) and the hidden put_sample* tools are already
//!   applied by the runtime's view; the `capabilities` tool is the manifest, read by the platform;
//! - a tool the manifest marks unavailable is withheld, with its reason;
//! - destructive tools (destructiveHint, or the files server's writing actions) are withheld
//!   unless `servers.NAME.offer_destructive = true`;
//! - open-world tools (openWorldHint: they connect beyond the host, or run what may) and
//!   configuration tools (named `*_later_init`, `*_login`, `*_configure`, ...: they choose
//!   endpoints and credentials) are withheld unless `servers.NAME.offer_network = true`, so a
//!   prompt-injected model cannot choose where data goes; a call to a withheld tool is refused
//!   and ledgered ([`Catalog::withheld_named`]);
//! - on a server that takes the sample by path (`pin_sample`, by default the built-in analysis
//!   server) the sample-path parameter is removed from the schema: the platform fills it in with
//!   the sample's path, which the runtime rewrites to that server's own (staged) path;
//! - a tool is named `<server>__<tool>` only where two servers offer the same name.

use std::{collections::BTreeMap, sync::Arc};

use maljan_client::{ServerConfig, ServerView, manifest::CAPABILITIES_TOOL};
use maljan_triage::report::WithheldTool;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::llm::ToolSpec;

/// The serverInfo names of the built-in servers whose conventions the catalog knows.
pub const BUILTIN_ANALYSIS: &str = "maljan-analysis";
pub const BUILTIN_FILES: &str = "maljan-files";

/// One tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogTool {
    /// The name the model sees.
    pub name: String,
    pub server: String,
    /// The tool's own name on its server.
    pub tool: String,
    pub description: String,
    pub parameters: Value,
    /// The argument the platform fills with the sample's path (removed from `parameters`).
    pub pinned_param: Option<String>,
}

/// What the model gets, and what it does not.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Catalog {
    pub tools: Vec<CatalogTool>,
    pub withheld: Vec<WithheldTool>,
}

/// One server as the catalog reads it.
pub struct Source<'a> {
    pub server: &'a str,
    pub view: Arc<ServerView>,
    pub config: Option<&'a ServerConfig>,
}

impl Catalog {
    pub fn build(sources: &[Source<'_>]) -> Self {
        let mut offered: Vec<CatalogTool> = Vec::new();
        let mut withheld = Vec::new();
        for src in sources {
            let name = src.view.server_name.as_deref().unwrap_or("");
            let pinned = src.config.and_then(|c| c.pin_sample.as_ref());
            let pin = pinned.map_or(name == BUILTIN_ANALYSIS, |p| p.is_on());
            let named = pinned.and_then(|p| p.param());
            let destructive_ok = src.config.is_some_and(|c| c.offer_destructive);
            let network_ok = src.config.is_some_and(|c| c.offer_network);
            for t in &src.view.tools {
                let withhold = |reason: String| WithheldTool {
                    server: src.server.to_string(),
                    tool: t.name.clone(),
                    reason,
                };
                if t.name == CAPABILITIES_TOOL {
                    continue;
                }
                if !t.available {
                    let why = t.reason.clone().unwrap_or_else(|| "unavailable".into());
                    withheld.push(withhold(format!("unavailable on its host: {why}")));
                    continue;
                }
                let writes = name == BUILTIN_FILES && t.read_only == Some(false);
                if (t.destructive == Some(true) || writes) && !destructive_ok {
                    withheld.push(withhold(format!(
                        "{} (set servers.{}.offer_destructive = true to offer it)",
                        if t.destructive == Some(true) {
                            "destructive"
                        } else {
                            "writes files"
                        },
                        src.server
                    )));
                    continue;
                }
                if !network_ok && let Some(why) = reaches_out(t) {
                    withheld.push(withhold(format!(
                        "{why} (set servers.{}.offer_network = true to offer it)",
                        src.server
                    )));
                    continue;
                }
                let mut parameters = t.input_schema.clone();
                let pinned_param = if pin {
                    remove_sample_param(&mut parameters, named)
                } else {
                    None
                };
                offered.push(CatalogTool {
                    name: t.name.clone(),
                    server: src.server.to_string(),
                    tool: t.name.clone(),
                    description: t.description.clone().unwrap_or_default(),
                    parameters,
                    pinned_param,
                });
            }
        }
        let mut count: BTreeMap<String, usize> = BTreeMap::new();
        for t in &offered {
            *count.entry(t.tool.clone()).or_default() += 1;
        }
        for t in &mut offered {
            if count[&t.tool] > 1 {
                t.name = format!("{}__{}", t.server, t.tool);
            }
        }
        Self {
            tools: offered,
            withheld,
        }
    }

    pub fn find(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The withheld tool a model's call names (`tool` or `server__tool`), if it names one: such
    /// a call is refused, and the refusal ledgered, rather than answered as an unknown name.
    pub fn withheld_named(&self, name: &str) -> Option<&WithheldTool> {
        self.withheld.iter().find(|w| {
            w.tool == name
                || name
                    .split_once("__")
                    .is_some_and(|(server, tool)| server == w.server && tool == w.tool)
        })
    }

    /// The tools in the shape the providers send.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            })
            .collect()
    }
}

/// Name parts of the tools that configure how a server reaches out (endpoints, credentials,
/// sign-ins): withheld with the open-world tools, whatever their annotations say, since a
/// configuration tool is often marked read-only (it changes no file).
const CONFIGURATION_NAMES: [&str; 8] = [
    "later_init",
    "_login",
    "_logout",
    "configure",
    "_connect",
    "_credential",
    "_init",
    "set_endpoint",
];

/// Why `t` reaches beyond the host (None: it does not say it does).
fn reaches_out(t: &maljan_client::ToolInfo) -> Option<&'static str> {
    if t.open_world == Some(true) {
        return Some("open-world: it connects beyond this host, or runs what may");
    }
    let name = t.name.to_ascii_lowercase();
    CONFIGURATION_NAMES
        .iter()
        .any(|part| name.contains(part))
        .then_some("a configuration tool: it chooses endpoints or credentials")
}

/// Drops the sample property (`maljan_client::sample_param`: declared by the schema, or
/// `named` by the config) and its `required` entry; returns its name.
fn remove_sample_param(schema: &mut Value, named: Option<&str>) -> Option<String> {
    let name = maljan_client::sample_param(schema, named)?.to_string();
    schema.get_mut("properties")?.as_object_mut()?.remove(&name);
    if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
        req.retain(|r| r.as_str() != Some(name.as_str()));
    }
    Some(name)
}

/// The arguments sent for a call: the model's, plus the sample path on a pinned parameter.
pub fn fill_arguments(tool: &CatalogTool, args: Map<String, Value>, sample: &str) -> Value {
    let mut args = args;
    if let Some(p) = &tool.pinned_param {
        args.insert(p.clone(), json!(sample));
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use maljan_client::{Manifest, ToolInfo};

    fn tool(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: Some(format!("{name} it")),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}),
            available: true,
            reason: None,
            remediation: None,
            without: None,
            timeout_s: None,
            read_only: Some(true),
            destructive: Some(false),
            open_world: None,
        }
    }

    fn view(server: &str, server_name: &str, tools: Vec<ToolInfo>) -> Arc<ServerView> {
        Arc::new(ServerView {
            server: server.into(),
            via: "stdio".into(),
            protocol_version: "2025-06-18".into(),
            server_name: Some(server_name.into()),
            server_version: None,
            tools,
            staging_tools: vec![],
            manifest: Manifest {
                server: server_name.into(),
                version: String::new(),
                tools: vec![],
            },
            manifest_declared: true,
            manifest_error: None,
        })
    }

    #[test]
    fn the_catalog_pins_withholds_and_prefixes_only_on_collision() {
        let mut yara = tool("yara_scan");
        yara.available = false;
        yara.reason = Some("no rules".into());
        let mut rm = tool("FA_remove_file");
        rm.read_only = Some(false);
        rm.destructive = Some(true);
        let mut mkdir = tool("FA_create_dir");
        mkdir.read_only = Some(false);
        mkdir.destructive = Some(false);
        let c = Catalog::build(&[
            Source {
                server: "analysis",
                view: view(
                    "analysis",
                    BUILTIN_ANALYSIS,
                    vec![tool("hashes"), tool("strings"), yara, tool("capabilities")],
                ),
                config: None,
            },
            Source {
                server: "files",
                view: view(
                    "files",
                    BUILTIN_FILES,
                    vec![tool("FA_list_dir"), rm, mkdir, tool("strings")],
                ),
                config: None,
            },
        ]);
        let names: Vec<_> = c.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hashes",
                "analysis__strings",
                "FA_list_dir",
                "files__strings"
            ]
        );
        let hashes = c.find("hashes").unwrap();
        assert_eq!(hashes.pinned_param.as_deref(), Some("path"));
        assert!(hashes.parameters["properties"].get("path").is_none());
        assert_eq!(hashes.parameters["required"], json!([]));
        // Not pinned on the files server: its tools take any path in its roots.
        assert!(c.find("FA_list_dir").unwrap().pinned_param.is_none());
        let withheld: Vec<_> = c.withheld.iter().map(|w| w.tool.as_str()).collect();
        assert_eq!(withheld, ["yara_scan", "FA_remove_file", "FA_create_dir"]);
        assert!(c.withheld[0].reason.contains("no rules"));
        let args = fill_arguments(hashes, Map::new(), "/s/x.exe");
        assert_eq!(args, json!({"path": "/s/x.exe"}));
    }

    #[test]
    fn configuration_can_pin_any_server_and_offer_destructive_tools() {
        let mut rm = tool("FA_remove_file");
        rm.destructive = Some(true);
        let cfg = ServerConfig {
            pin_sample: Some(maljan_client::PinSample::On(true)),
            offer_destructive: true,
            ..Default::default()
        };
        let c = Catalog::build(&[Source {
            server: "remote",
            view: view("remote", "someone-else", vec![rm]),
            config: Some(&cfg),
        }]);
        assert_eq!(c.tools.len(), 1);
        assert_eq!(c.tools[0].pinned_param.as_deref(), Some("path"));
    }

    #[test]
    fn open_world_and_configuration_tools_are_offered_only_with_offer_network() {
        let mut download = tool("FA_download_file");
        download.open_world = Some(true);
        // Marked read-only and not open-world, as the issue found them: withheld by name.
        let later = tool("FA_s3_later_init");
        let login = tool("vendor_login");
        let build = |cfg: Option<&ServerConfig>| {
            Catalog::build(&[Source {
                server: "remote",
                view: view(
                    "remote",
                    "someone-else",
                    vec![download.clone(), later.clone(), login.clone(), tool("scan")],
                ),
                config: cfg,
            }])
        };
        let c = build(None);
        let names: Vec<_> = c.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["scan"]);
        assert_eq!(c.withheld.len(), 3);
        assert!(
            c.withheld
                .iter()
                .all(|w| w.reason.contains("offer_network"))
        );
        assert_eq!(
            c.withheld_named("remote__FA_s3_later_init")
                .map(|w| w.tool.as_str()),
            Some("FA_s3_later_init")
        );
        assert!(c.withheld_named("other__FA_s3_later_init").is_none());
        let cfg = ServerConfig {
            offer_network: true,
            ..Default::default()
        };
        assert_eq!(build(Some(&cfg)).tools.len(), 4);
    }

    #[test]
    fn a_third_party_sample_argument_is_pinned_only_when_the_config_names_it() {
        let mut scan = tool("scan");
        scan.input_schema = json!({"type": "object",
            "properties": {"target_file": {"type": "string"}, "depth": {"type": "integer"}},
            "required": ["target_file"]});
        let build = |pin: Option<maljan_client::PinSample>| {
            let cfg = ServerConfig {
                pin_sample: pin,
                ..Default::default()
            };
            Catalog::build(&[Source {
                server: "third",
                view: view("third", "someone-else", vec![scan.clone()]),
                config: Some(&cfg),
            }])
        };
        // Not a declared name: nothing guessed, the model sees the argument.
        let c = build(Some(maljan_client::PinSample::On(true)));
        assert!(c.tools[0].pinned_param.is_none());
        assert!(c.tools[0].parameters["properties"]["target_file"].is_object());
        // Named in the config: pinned and filled in.
        let c = build(Some(maljan_client::PinSample::Param("target_file".into())));
        assert_eq!(c.tools[0].pinned_param.as_deref(), Some("target_file"));
        assert!(
            c.tools[0].parameters["properties"]
                .get("target_file")
                .is_none()
        );
        assert_eq!(
            fill_arguments(&c.tools[0], Map::new(), "/s/x.exe"),
            json!({"target_file": "/s/x.exe"})
        );
    }
}
