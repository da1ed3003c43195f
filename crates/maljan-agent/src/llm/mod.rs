//! Model providers: the conversation as the agent keeps it, the two wire formats it is sent in
//! (OpenAI Chat Completions, which OpenAI, vLLM, llama.cpp's server, Ollama's `/v1`, LM Studio
//! and Gemini's OpenAI-compatible endpoint all speak; Anthropic Messages), the schema dialect
//! each provider takes its tools in (`dialect`), and the chain of fallbacks.
//!
//! A request goes to the configured base_url and nowhere else (no redirect is followed); the API
//! key is a [`Secret`] and never reaches a log or an error message.

mod anthropic;
mod chain;
pub mod dialect;
mod openai;
mod settings;

use std::time::Duration;

use maljan_client::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use chain::{Attempt, ChainError, Models};
pub use dialect::{Declared, Dialect};
pub use settings::{Overrides, SettingsError, effective, resolve};

/// One message of the conversation, independent of the wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The answer to one tool call.
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

/// A tool call as the model wrote it: `arguments` is its raw text (possibly cut short).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    pub model: String,
    pub provider: &'static str,
    /// Time from sending the request to the whole answer.
    pub latency: Duration,
    /// Bytes of the request body (what the model was sent).
    pub request_bytes: usize,
}

/// The wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
}

impl ProviderKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "openai" => Some(Self::OpenAi),
            "anthropic" => Some(Self::Anthropic),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
    fn wire(self) -> &'static Wire {
        match self {
            Self::OpenAi => &openai::WIRE,
            Self::Anthropic => &anthropic::WIRE,
        }
    }
    /// The provider's public API, when the config names no base_url.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com/v1",
        }
    }
}

/// One model at one provider.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub provider: ProviderKind,
    /// Without a trailing slash.
    pub base_url: String,
    pub model: String,
    pub key: Option<Secret>,
    pub context_window: u32,
    pub max_output_tokens: u32,
    pub timeout: Duration,
}

impl Endpoint {
    /// `provider/model`, for people.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider.as_str(), self.model)
    }

    /// The schema dialect this endpoint takes tools in.
    pub fn dialect(&self) -> Dialect {
        Dialect::of(self)
    }

    /// One request, one answer (no retry here: the chain decides). The tools are converted to
    /// the endpoint's dialect for this request; [`Models`] converts a job's tools once.
    pub async fn complete(
        &self,
        http: &reqwest::Client,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Reply, ProviderError> {
        self.complete_declared(http, messages, &self.dialect().declare(tools))
            .await
    }

    /// One request with tools already in this endpoint's dialect; the calls in the answer are
    /// read back to each tool's own schema.
    pub async fn complete_declared(
        &self,
        http: &reqwest::Client,
        messages: &[Message],
        tools: &Declared,
    ) -> Result<Reply, ProviderError> {
        let wire = self.provider.wire();
        let url = format!("{}{}", self.base_url, wire.path);
        let body = serde_json::to_vec(&(wire.request)(self, messages, &tools.entries))
            .map_err(|e| ProviderError::BadAnswer(e.to_string()))?;
        let request_bytes = body.len();
        let req = http
            .post(&url)
            .timeout(self.timeout)
            .header("content-type", "application/json");
        let req = (wire.headers)(req, self.key.as_ref().map(Secret::expose));
        let started = std::time::Instant::now();
        let resp = req.body(body).send().await.map_err(|e| self.transport(e))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let bytes = resp.bytes().await.map_err(|e| self.transport(e))?;
        let latency = started.elapsed();
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            return Err(classify(status.as_u16(), retry_after, json.as_ref()));
        }
        let json = json.ok_or_else(|| {
            ProviderError::BadAnswer(format!("the answer is not JSON ({} bytes)", bytes.len()))
        })?;
        let mut parsed = (wire.parse)(&json).map_err(ProviderError::BadAnswer)?;
        for call in &mut parsed.tool_calls {
            tools.restore(call);
        }
        Ok(Reply {
            text: parsed.text,
            tool_calls: parsed.tool_calls,
            usage: parsed.usage,
            model: parsed.model.unwrap_or_else(|| self.model.clone()),
            provider: self.provider.as_str(),
            latency,
            request_bytes,
        })
    }

    fn transport(&self, e: reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout(self.timeout)
        } else {
            // Without the URL: reqwest's message names it, query string and all.
            ProviderError::Unreachable(e.without_url().to_string())
        }
    }
}

/// What differs between the two wire formats. Everything else — sending to the base_url,
/// timing, reading Retry-After, classifying failures, the chain of fallbacks — is shared.
pub(crate) struct Wire {
    /// Appended to the base_url.
    pub path: &'static str,
    /// The request body, with the tools as the dialect declared them.
    pub request: fn(&Endpoint, &[Message], &[Value]) -> Value,
    /// The key (when there is one) and any header the format requires.
    pub headers: fn(reqwest::RequestBuilder, Option<&str>) -> reqwest::RequestBuilder,
    pub parse: fn(&Value) -> Result<Parsed, String>,
}

/// An answer read out of a wire format.
pub(crate) struct Parsed {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub model: Option<String>,
}

impl Parsed {
    /// The answer's `model`, and its `usage` under the format's names for the two counts
    /// (either may be absent: local servers often send none).
    fn common(v: &Value, input: &str, output: &str) -> (Option<String>, Usage) {
        let usage = v.get("usage");
        let n = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        (
            v.get("model").and_then(Value::as_str).map(str::to_string),
            Usage {
                input_tokens: n(input),
                output_tokens: n(output),
            },
        )
    }
}

/// Why a provider gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("rate limited (429): {message}")]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("server error ({status}): {message}")]
    Server {
        status: u16,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("unknown model: {0}")]
    UnknownModel(String),
    #[error("refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("unreadable answer: {0}")]
    BadAnswer(String),
}

impl ProviderError {
    /// Whether the next model in the chain should be tried: the provider failed, as opposed to
    /// refusing this request (a bad key, a bad request), which the next one would refuse too.
    pub fn fails_over(&self) -> bool {
        matches!(
            self,
            Self::Unreachable(_)
                | Self::Timeout(_)
                | Self::RateLimited { .. }
                | Self::Server { .. }
                | Self::UnknownModel(_)
        )
    }

    /// Whether the same provider is worth asking once more (after its Retry-After).
    pub fn retry_after(&self) -> Option<Option<Duration>> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Server { retry_after, .. } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }
}

fn classify(status: u16, retry_after: Option<Duration>, body: Option<&Value>) -> ProviderError {
    // Both formats put the message at error.message; keep it short, it is the provider's text.
    let message: String = body
        .and_then(|b| b.get("error"))
        .and_then(|e| e.get("message").or(Some(e)))
        .map(|m| {
            m.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| m.to_string())
        })
        .unwrap_or_else(|| "no message".into())
        .chars()
        .take(300)
        .collect();
    let code = body
        .and_then(|b| b.get("error"))
        .and_then(|e| e.get("code").or_else(|| e.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("");
    match status {
        429 => ProviderError::RateLimited {
            retry_after,
            message,
        },
        s if s >= 500 => ProviderError::Server {
            status: s,
            retry_after,
            message,
        },
        404 => ProviderError::UnknownModel(message),
        _ if code == "model_not_found" || message.to_lowercase().contains("model not found") => {
            ProviderError::UnknownModel(message)
        }
        s => ProviderError::Refused { status: s, message },
    }
}

/// The client the agent sends model requests with: no redirects (a request goes to the base_url
/// it was configured with, and a key never follows a redirect elsewhere).
pub fn http_client() -> reqwest::Client {
    // The runtime's client installs the TLS crypto provider once per process.
    let _ = maljan_client::transport::http_client();
    reqwest::Client::builder()
        .user_agent(concat!("maljan-agent/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failures_are_classified_by_whether_a_fallback_helps() {
        let e = classify(429, Some(Duration::from_secs(2)), None);
        assert!(e.fails_over());
        assert_eq!(e.retry_after(), Some(Some(Duration::from_secs(2))));
        assert!(classify(503, None, None).fails_over());
        let e = classify(
            400,
            None,
            Some(&json!({"error": {"message": "x", "code": "model_not_found"}})),
        );
        assert_eq!(e, ProviderError::UnknownModel("x".into()));
        let e = classify(401, None, Some(&json!({"error": {"message": "bad key"}})));
        assert!(!e.fails_over(), "a refused key is not a provider failure");
        assert!(e.to_string().contains("bad key"));
    }
}
