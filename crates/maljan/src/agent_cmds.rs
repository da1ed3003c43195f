//! `maljan llm set-key|test` and `maljan agent tools`: the model's key (sealed like server
//! tokens), a one-request check of the configured model, and the tool list a model would get.
//! Nothing here prints or logs the key.

use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use maljan_agent::{
    llm::{self, Message, ToolSpec},
    run::catalog_of,
};
use maljan_client::{Config, JobSpec, KeySource, Runtime, secrets};
use serde_json::json;

use crate::show::{self, visible, visible_multiline};

#[derive(Subcommand)]
pub enum LlmCommand {
    /// Store the model's API key, sealed (enc:v1), read from stdin or a prompt.
    SetKey {
        /// Remove the stored key instead.
        #[arg(long)]
        clear: bool,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Send one tiny request: prints the model, the latency and whether tool calls work (exit
    /// status 3 when the model answers without calling the tool, 1 when it cannot be reached).
    Test {
        /// Test this model instead of the configured one.
        #[arg(long, value_name = "M")]
        model: Option<String>,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum AgentCommand {
    /// Print exactly the tool list the model would get (and what is withheld, and why).
    Tools(ToolsArgs),
}

#[derive(Args)]
pub struct ToolsArgs {
    /// A sample (optional): the job the catalog is built for, as `maljan analyze` would.
    pub sample: Option<PathBuf>,
    /// Servers to use, comma-separated (default: every enabled server).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub servers: Option<Vec<String>>,
    /// Print the tool list as JSON (name, description, parameters), as the model gets it.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn llm_cmd(cmd: LlmCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LlmCommand::SetKey { clear, config } => set_key(config, clear),
        LlmCommand::Test { model, config } => test(config, model).await,
    }
}

fn set_key(config: Option<PathBuf>, clear: bool) -> anyhow::Result<ExitCode> {
    let mut c = Config::load_for_edit(config.as_deref())?;
    let Some(llm) = c.llm.as_mut() else {
        bail!(
            "no [llm] section in {}: add provider, base_url and model first (see `maljan analyze --help`)",
            c.path.display()
        );
    };
    if clear {
        llm.api_key.clear();
        c.save()?;
        println!("removed the model's API key from {}", c.path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let key = secrets::read_secret_line("API key: ")?;
    if key.is_empty() {
        bail!("no key given (it is read from stdin or the prompt)");
    }
    let keys = KeySource::in_dir(&c.data_dir);
    llm.api_key = keys.seal(&key)?;
    c.save()?;
    println!(
        "stored the model's API key sealed (enc:v1) in {}",
        c.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

async fn test(config: Option<PathBuf>, model: Option<String>) -> anyhow::Result<ExitCode> {
    let c = Config::load(config.as_deref())?;
    let keys = KeySource::in_dir(&c.data_dir);
    let Some(eps) = llm::resolve(&c, &keys, &llm::Overrides::from_env(), model.as_deref())? else {
        bail!(
            "no model configured: add [llm] to {} or set MALJAN_LLM_MODEL",
            c.path.display()
        );
    };
    let ep = &eps[0];
    let http = llm::http_client();
    let tool = ToolSpec {
        name: "ping".into(),
        description: "Answers pong. Call it when asked to.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let messages = [Message::User {
        content: "Call the tool `ping` once, with no arguments.".into(),
    }];
    let started = Instant::now();
    match ep.complete(&http, &messages, &[tool]).await {
        Ok(reply) => {
            let calls = reply.tool_calls.iter().any(|c| c.name == "ping");
            // The model's name is the endpoint's answer.
            println!(
                "model: {} ({})",
                visible(&reply.model),
                ep.provider.as_str()
            );
            println!(
                "latency: {:.0} ms",
                started.elapsed().as_secs_f64() * 1000.0
            );
            println!(
                "tool calls: {}",
                if calls {
                    "yes (it called ping)"
                } else {
                    "no (it answered in text: the analyst stage needs a model that calls tools)"
                }
            );
            println!(
                "tokens: {} in, {} out",
                reply.usage.input_tokens, reply.usage.output_tokens
            );
            Ok(if calls {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
        Err(e) => {
            // The error may quote the endpoint's answer.
            eprintln!(
                "{}: {}",
                visible(&ep.label()),
                visible_multiline(&e.to_string())
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

pub async fn agent_cmd(cmd: AgentCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AgentCommand::Tools(a) => tools(a).await,
    }
}

async fn tools(a: ToolsArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(a.config.as_deref())?;
    let sample = match &a.sample {
        Some(p) => Some(
            std::fs::canonicalize(p)
                .with_context(|| format!("cannot read the sample {}", p.display()))?,
        ),
        None => None,
    };
    if !config.from_file
        && let Some(s) = &sample
    {
        crate::analyze::allow_sample_dir(&mut config, s);
    }
    let runtime = Runtime::open(config)?;
    let spec = match &sample {
        Some(s) => JobSpec::for_sample(s),
        None => JobSpec::labelled("agent tools"),
    };
    let job = runtime.new_job(spec)?;
    let (catalog, unreachable) = catalog_of(&job, a.servers.as_deref()).await;
    job.finish();
    runtime.shutdown().await;
    if a.json {
        println!("{}", show::json(&catalog.specs())?);
    } else {
        // Tool names, parameters and reasons are the servers' words.
        for t in &catalog.tools {
            let params: Vec<String> = t
                .parameters
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|p| p.keys().map(|k| visible(k).into_owned()).collect())
                .unwrap_or_default();
            println!(
                "{}  ({} on {}{})  [{}]",
                visible(&t.name),
                visible(&t.tool),
                visible(&t.server),
                t.pinned_param
                    .as_ref()
                    .map(|p| format!("; `{}` filled in with the sample", visible(p)))
                    .unwrap_or_default(),
                params.join(", ")
            );
        }
        for w in &catalog.withheld {
            println!(
                "withheld: {} on {}: {}",
                visible(&w.tool),
                visible(&w.server),
                visible(&w.reason)
            );
        }
    }
    for u in &unreachable {
        eprintln!("not reachable: {}", visible(u));
    }
    Ok(ExitCode::SUCCESS)
}
