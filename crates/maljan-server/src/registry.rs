//! The registry of typed tools: a Rust function plus a serde + schemars argument struct.
//!
//! `tools/list` derives each tool's JSON Schema from its argument type, so the schema and the
//! validation that runs before the tool (deserialising into that same type) can never disagree.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc, time::Duration};

use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::{
    context::{ServerHandle, ToolContext},
    errors::ToolError,
    manifest::Probe,
    observe::{CallObserver, Observers},
    portable_schema::PortableSchema,
    tasks::{LONG_TOOL, TaskSupport},
};

pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;
type Handler = Arc<dyn Fn(ToolContext, Map<String, Value>) -> ToolFuture + Send + Sync>;
/// Called once when a server built from the registry starts serving (see `on_start`).
pub(crate) type StartHook = Arc<dyn Fn(ServerHandle) + Send + Sync>;

/// What a tool is, apart from its code: name, description, hints, timeout, optional dependency.
#[derive(Clone)]
pub struct ToolMeta {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
    /// The tool's real timeout. The server enforces it and the manifest publishes it.
    pub timeout: Option<Duration>,
    /// The optional dependency the tool needs, probed once at start-up.
    pub probe: Option<Probe>,
    /// A staging primitive (put_sample and friends): listed in tools/list, because that is how a
    /// client learns the server can receive a sample (DESIGN.md, "put_sample"), but kept out of the
    /// capability manifest; the client runtime hides these from users and models.
    pub staging_primitive: bool,
    /// Served only when the operator names it in `--allowed-actions` (FA_run_shell): left out of
    /// a server built without an allow-list.
    pub opt_in: bool,
    /// Left out of tools/list and the manifest and refused to a client's tools/call, yet callable
    /// by the server's own work (an action list, a pipeline task): the FA_* bridge under
    /// `--no-bridge`, which the semantic tools' pipelines still run.
    pub unlisted: bool,
    /// Whether a call may run as a task (MCP tasks extension); None: decided by the timeout
    /// (see [`ToolMeta::tasks`]).
    pub task_support: Option<TaskSupport>,
}

impl ToolMeta {
    /// A tool that changes nothing; call `.destructive()` or `.writes()` for one that does.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
            timeout: None,
            probe: None,
            staging_primitive: false,
            opt_in: false,
            unlisted: false,
            task_support: None,
        }
    }
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// Writes without destroying anything that was there (creating a directory, a new file);
    /// hidden and refused under `--read-only` like a destructive tool.
    pub fn writes(mut self) -> Self {
        self.read_only = false;
        self
    }
    /// May overwrite or delete: hidden and refused under `--read-only`.
    pub fn destructive(mut self) -> Self {
        self.read_only = false;
        self.destructive = true;
        self
    }
    pub fn not_idempotent(mut self) -> Self {
        self.idempotent = false;
        self
    }
    /// Reaches beyond the host (the network).
    pub fn open_world(mut self) -> Self {
        self.open_world = true;
        self
    }
    pub fn timeout_s(mut self, seconds: u64) -> Self {
        self.timeout = Some(Duration::from_secs(seconds));
        self
    }
    pub fn probe(mut self, probe: Probe) -> Self {
        self.probe = Some(probe);
        self
    }
    pub fn staging_primitive(mut self) -> Self {
        self.staging_primitive = true;
        self
    }
    /// Served only when named in the operator's allow-list (see [`ToolMeta::opt_in`]).
    pub fn opt_in(mut self) -> Self {
        self.opt_in = true;
        self
    }
    /// Sets whether a call may run as a task, whatever the timeout.
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = Some(support);
        self
    }
    /// Whether a call may run as a task: as set, else optional for a long tool (a timeout of at
    /// least [`LONG_TOOL`]) and forbidden for the rest. A staging primitive is never a task: an
    /// upload's chunks are answered in order, one by one.
    pub fn tasks(&self) -> TaskSupport {
        if self.staging_primitive {
            return TaskSupport::Forbidden;
        }
        self.task_support.unwrap_or(match self.timeout {
            Some(t) if t >= LONG_TOOL => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        })
    }
}

/// One registered tool: its meta, schemas and type-erased handler.
#[derive(Clone)]
pub struct RegisteredTool {
    pub meta: ToolMeta,
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    pub(crate) handler: Handler,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.meta.name)
            .finish()
    }
}

/// A set of tools. Build one, then serve all of it or a subset (`retain`).
#[derive(Clone, Default, Debug)]
pub struct Registry {
    tools: Vec<RegisteredTool>,
    /// Position of each tool by name: a call looks its tool up several times, among ~100.
    by_name: HashMap<String, usize>,
    start_hooks: StartHooks,
    /// Hear every call of the server built from this registry.
    pub(crate) observers: Observers,
}

#[derive(Clone, Default)]
struct StartHooks(Vec<StartHook>);

impl std::fmt::Debug for StartHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} start hooks", self.0.len())
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool. `A` is its argument struct (serde + schemars); `O` is what it returns.
    /// When `O`'s schema is an object it becomes the tool's outputSchema and the result is sent as
    /// structuredContent too.
    ///
    /// Panics if a tool of that name is already registered: two tools with one name is a
    /// programming error, found by the first test that builds the registry.
    pub fn add<A, O, F, Fut>(&mut self, meta: ToolMeta, handler: F) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        assert!(
            self.get(&meta.name).is_none(),
            "tool {} registered twice",
            meta.name
        );
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |ctx, args| {
            let handler = handler.clone();
            Box::pin(async move {
                let args: A = parse_arguments(args)?;
                let out = handler(ctx, args).await?;
                serde_json::to_value(out).map_err(|e| {
                    ToolError::tool_failed(format!("the result could not be encoded: {e}"))
                })
            })
        });
        self.push(RegisteredTool {
            meta,
            input_schema: input_schema_for::<A>(),
            output_schema: output_schema_for::<O>(),
            handler: erased,
        });
        self
    }

    fn push(&mut self, tool: RegisteredTool) {
        self.by_name
            .insert(tool.meta.name.clone(), self.tools.len());
        self.tools.push(tool);
    }

    /// Registers an observer of every call (top-level and nested) of the server built from
    /// this registry.
    pub fn observe(&mut self, observer: Arc<dyn CallObserver>) -> &mut Self {
        self.observers.0.push(observer);
        self
    }

    /// Runs `hook` when a server built from this registry starts serving
    /// ([`ToolServer::start`](crate::ToolServer::start)), inside the Tokio runtime: state the
    /// registry's tools share can start background work there (schedules, watches) that calls
    /// the server's tools through the handle, and ends it when `handle.stopped()` fires.
    pub fn on_start(&mut self, hook: impl Fn(ServerHandle) + Send + Sync + 'static) -> &mut Self {
        self.start_hooks.0.push(Arc::new(hook));
        self
    }

    pub(crate) fn start_hooks(&self) -> &[StartHook] {
        &self.start_hooks.0
    }

    /// Adds every tool (start hook and observer) of another registry.
    pub fn extend(&mut self, other: Registry) -> &mut Self {
        self.start_hooks.0.extend(other.start_hooks.0);
        self.observers.0.extend(other.observers.0);
        for tool in other.tools {
            assert!(
                self.get(&tool.meta.name).is_none(),
                "tool {} registered twice",
                tool.meta.name
            );
            self.push(tool);
        }
        self
    }

    /// Keeps only the tools for which `keep` is true.
    /// Marks the tools `which` picks [`ToolMeta::unlisted`]: still there for the server's own
    /// calls, gone for a client.
    pub fn unlist(&mut self, which: impl Fn(&ToolMeta) -> bool) -> &mut Self {
        for t in &mut self.tools {
            if which(&t.meta) {
                t.meta.unlisted = true;
            }
        }
        self
    }

    pub fn retain(&mut self, keep: impl Fn(&ToolMeta) -> bool) -> &mut Self {
        self.tools.retain(|t| keep(&t.meta));
        self.by_name = (self.tools.iter().enumerate())
            .map(|(i, t)| (t.meta.name.clone(), i))
            .collect();
        self
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    pub fn tools(&self) -> &[RegisteredTool] {
        &self.tools
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.meta.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Deserialises arguments into the tool's type; any mismatch is `bad_argument` naming the field.
pub fn parse_arguments<A: DeserializeOwned>(args: Map<String, Value>) -> Result<A, ToolError> {
    let value = Value::Object(args);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ToolError::bad_argument(format!("invalid arguments: {inner}"))
        } else {
            ToolError::bad_argument(format!("invalid argument `{path}`: {inner}"))
        }
    })
}

fn generator() -> schemars::SchemaGenerator {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    // Inline every sub-schema: several MCP clients do not follow $ref.
    settings.inline_subschemas = true;
    // Every tool's input and output schema in the spelling every host takes.
    settings.with_transform(PortableSchema).into_generator()
}

fn schema_value<T: JsonSchema>() -> Value {
    generator().into_root_schema_for::<T>().to_value()
}

fn input_schema_for<A: JsonSchema>() -> Map<String, Value> {
    let mut map = match schema_value::<A>() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.remove("$schema");
    map.remove("title");
    // MCP requires an object schema even for a tool without arguments.
    map.entry("type")
        .or_insert_with(|| Value::String("object".into()));
    if !map.contains_key("properties") {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    map
}

fn output_schema_for<O: JsonSchema>() -> Option<Map<String, Value>> {
    match schema_value::<O>() {
        Value::Object(mut map) if map.get("type") == Some(&Value::String("object".into())) => {
            map.remove("$schema");
            map.remove("title");
            Some(map)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// The file to read.
        path: String,
        /// How many bytes per read.
        #[serde(default = "default_chunk")]
        #[schemars(default = "default_chunk")]
        chunk_size: u64,
        mode: Option<Mode>,
    }
    fn default_chunk() -> u64 {
        1024
    }
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
        Slow,
    }
    #[derive(Serialize, JsonSchema)]
    struct Out {
        ok: bool,
    }

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.add(ToolMeta::new("t", "test"), |_ctx, a: Args| async move {
            Ok::<_, ToolError>(Out {
                ok: !a.path.is_empty() && a.chunk_size > 0 && a.mode.is_none(),
            })
        });
        r
    }

    #[test]
    fn schema_has_real_types_required_defaults_and_descriptions() {
        let r = registry();
        let s = &r.get("t").unwrap().input_schema;
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["path"]["type"], "string");
        assert_eq!(s["properties"]["path"]["description"], "The file to read.");
        assert_eq!(s["properties"]["chunk_size"]["type"], "integer");
        assert_eq!(s["properties"]["chunk_size"]["default"], 1024);
        assert!(
            s["properties"]["chunk_size"].get("format").is_none(),
            "numeric formats are stripped"
        );
        assert_eq!(s["required"], serde_json::json!(["path"]));
        let mode = serde_json::to_string(&s["properties"]["mode"]).unwrap();
        assert!(mode.contains("fast") && mode.contains("slow"), "{mode}");
        assert_eq!(s["additionalProperties"], false);
        let out = r.get("t").unwrap().output_schema.as_ref().unwrap();
        assert_eq!(out["properties"]["ok"]["type"], "boolean");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let mut args = Map::new();
        args.insert("path".into(), Value::String("x".into()));
        args.insert("chunk_size".into(), Value::String("big".into()));
        let err = parse_arguments::<Args>(args).err().unwrap();
        assert_eq!(err.code, crate::errors::ErrorCode::BadArgument);
        assert!(err.message.contains("chunk_size"), "{}", err.message);
        let err = parse_arguments::<Args>(Map::new()).err().unwrap();
        assert!(err.message.contains("path"), "{}", err.message);
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_names_are_refused() {
        let mut r = registry();
        r.extend(registry());
    }
}
