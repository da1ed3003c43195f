//! The chain of models: the configured one, then each fallback in order. The next one is tried
//! only when a provider fails (unreachable, timeout, 429 or 5xx once more after honouring its
//! Retry-After, unknown model) — never because of what a model answered. Once a fallback has
//! answered, the job keeps talking to it. A job's tools are converted to each endpoint's schema
//! dialect once, not per request.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use super::{Declared, Dialect, Endpoint, Message, ProviderError, Reply, ToolSpec};

/// A model that failed, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub model: String,
    pub error: ProviderError,
}

impl Attempt {
    pub fn describe(&self) -> String {
        format!("{}: {}", self.model, self.error)
    }
}

/// Every model failed (or one refused the request outright: `attempts`' last).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no model answered: {}", .attempts.iter().map(Attempt::describe).collect::<Vec<_>>().join("; "))]
pub struct ChainError {
    pub attempts: Vec<Attempt>,
}

/// The models of one job.
#[derive(Debug)]
pub struct Models {
    endpoints: Vec<Endpoint>,
    http: reqwest::Client,
    current: AtomicUsize,
    /// The longest Retry-After honoured; a longer one moves on to the next model at once.
    pub max_retry_wait: Duration,
    declared: Mutex<DeclaredTools>,
}

/// The tool set last sent, in each dialect it has been converted to.
#[derive(Debug, Default)]
struct DeclaredTools {
    tools: Vec<ToolSpec>,
    by_dialect: HashMap<Dialect, Arc<Declared>>,
}

impl Models {
    /// `endpoints[0]` is the configured model; the rest are its fallbacks. Never empty.
    pub fn new(endpoints: Vec<Endpoint>) -> Self {
        assert!(!endpoints.is_empty(), "a chain needs a model");
        Self {
            endpoints,
            http: super::http_client(),
            current: AtomicUsize::new(0),
            max_retry_wait: Duration::from_secs(60),
            declared: Mutex::default(),
        }
    }

    /// `tools` in `dialect`, converted the first time this tool set meets that dialect.
    fn declared(&self, dialect: Dialect, tools: &[ToolSpec]) -> Arc<Declared> {
        let mut cache = self.declared.lock().unwrap_or_else(|e| e.into_inner());
        if cache.tools != tools {
            cache.tools = tools.to_vec();
            cache.by_dialect.clear();
        }
        cache
            .by_dialect
            .entry(dialect)
            .or_insert_with(|| Arc::new(dialect.declare(tools)))
            .clone()
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The model the next request goes to first.
    pub fn current(&self) -> &Endpoint {
        &self.endpoints[self
            .current
            .load(Ordering::Relaxed)
            .min(self.endpoints.len() - 1)]
    }

    /// Sends the conversation; returns the answer and the failures before it (for the report).
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<(Reply, Vec<Attempt>), ChainError> {
        let mut attempts = Vec::new();
        let start = self.current.load(Ordering::Relaxed);
        for (i, ep) in self.endpoints.iter().enumerate().skip(start) {
            let mut retried = false;
            let declared = self.declared(ep.dialect(), tools);
            loop {
                match ep.complete_declared(&self.http, messages, &declared).await {
                    Ok(reply) => {
                        self.current.store(i, Ordering::Relaxed);
                        return Ok((reply, attempts));
                    }
                    Err(e) => {
                        let wait = e.retry_after();
                        let fails_over = e.fails_over();
                        tracing::info!(model = %ep.label(), "model request failed: {e}");
                        attempts.push(Attempt {
                            model: ep.label(),
                            error: e,
                        });
                        if !fails_over {
                            return Err(ChainError { attempts });
                        }
                        match wait {
                            // Once more after what the provider asked for (or a short pause).
                            Some(after) if !retried => {
                                let after = after.unwrap_or(Duration::from_millis(500));
                                if after > self.max_retry_wait {
                                    break;
                                }
                                tokio::time::sleep(after).await;
                                retried = true;
                            }
                            _ => break,
                        }
                    }
                }
            }
        }
        Err(ChainError { attempts })
    }
}
