//! The chain of models: the configured one, then each fallback in order. The next one is tried
//! only when a provider fails (unreachable, timeout, 429 or 5xx once more after honouring its
//! Retry-After, unknown model) — never because of what a model answered. Once a fallback has
//! answered, the job keeps talking to it.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use super::{Endpoint, Message, ProviderError, Reply, ToolSpec};

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
        }
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
            loop {
                match ep.complete(&self.http, messages, tools).await {
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
