//! Which models a job talks to: `[llm]` in config.toml, overridden for one run by
//! `MALJAN_LLM_PROVIDER`, `MALJAN_LLM_BASE_URL`, `MALJAN_LLM_MODEL`, `MALJAN_LLM_API_KEY` and by
//! `--model`. No `[llm]` and no `MALJAN_LLM_MODEL`: no model (triage only).

use std::time::Duration;

use maljan_client::{Config, KeySource, LlmConfig, Secret};

use super::{Endpoint, ProviderKind};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{0}")]
    Invalid(String),
    #[error("the stored API key cannot be opened: {0}")]
    Key(String),
}

/// The environment variables, read by the caller (so tests pass their own).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<Secret>,
}

impl Overrides {
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Self {
            provider: var("MALJAN_LLM_PROVIDER"),
            base_url: var("MALJAN_LLM_BASE_URL"),
            model: var("MALJAN_LLM_MODEL"),
            api_key: var("MALJAN_LLM_API_KEY").map(Secret::new),
        }
    }
}

/// The `[llm]` section with the overrides applied, or None when no model is configured.
pub fn effective(config: &Config, ov: &Overrides, model: Option<&str>) -> Option<LlmConfig> {
    let mut llm = match (&config.llm, &ov.model, model) {
        (Some(l), _, _) => l.clone(),
        (None, Some(_), _) | (None, _, Some(_)) => LlmConfig::new("openai", "", ""),
        (None, None, None) => return None,
    };
    if let Some(p) = &ov.provider {
        llm.provider = p.clone();
    }
    if let Some(u) = &ov.base_url {
        llm.base_url = u.clone();
    }
    if let Some(m) = &ov.model {
        llm.model = m.clone();
    }
    if let Some(m) = model {
        llm.model = m.to_string();
    }
    Some(llm)
}

/// The chain's endpoints: the model, then its fallbacks. Ok(None): no model configured.
pub fn resolve(
    config: &Config,
    keys: &KeySource,
    ov: &Overrides,
    model: Option<&str>,
) -> Result<Option<Vec<Endpoint>>, SettingsError> {
    let Some(llm) = effective(config, ov, model) else {
        return Ok(None);
    };
    llm.validate()
        .map_err(|(k, p)| SettingsError::Invalid(format!("{k}: {p}")))?;
    let open = |stored: &str| -> Result<Option<Secret>, SettingsError> {
        if stored.is_empty() {
            return Ok(None);
        }
        if !maljan_client::secrets::is_sealed(stored) {
            // Written by hand: used, and `maljan llm set-key` says how to seal it.
            return Ok(Some(Secret::new(stored)));
        }
        keys.open(stored)
            .map(Some)
            .map_err(|e| SettingsError::Key(e.to_string()))
    };
    let kind = |p: &str| {
        ProviderKind::parse(p).ok_or_else(|| SettingsError::Invalid(format!("provider {p:?}")))
    };
    let primary_kind = kind(&llm.provider)?;
    let primary_key = match &ov.api_key {
        Some(k) => Some(k.clone()),
        None => open(&llm.api_key)?,
    };
    let base = |url: &str, k: ProviderKind| {
        if url.is_empty() {
            k.default_base_url().to_string()
        } else {
            url.trim_end_matches('/').to_string()
        }
    };
    let timeout = Duration::from_secs_f64(llm.timeout_seconds);
    let mut out = vec![Endpoint {
        provider: primary_kind,
        base_url: base(&llm.base_url, primary_kind),
        model: llm.model.clone(),
        key: primary_key.clone(),
        context_window: llm.context_window,
        max_output_tokens: llm.max_output_tokens,
        timeout,
    }];
    for f in &llm.fallbacks {
        let k = kind(&f.provider)?;
        let same = k == primary_kind;
        let key = match open(&f.api_key)? {
            Some(key) => Some(key),
            None if same => primary_key.clone(),
            None => None,
        };
        let url = if f.base_url.is_empty() && same {
            out[0].base_url.clone()
        } else {
            base(&f.base_url, k)
        };
        out.push(Endpoint {
            provider: k,
            base_url: url,
            model: f.model.clone(),
            key,
            context_window: f.context_window.unwrap_or(llm.context_window),
            max_output_tokens: llm.max_output_tokens,
            timeout,
        });
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn overrides_win_and_fallbacks_inherit_what_they_do_not_say() {
        let c = Config::parse(
            "[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1/\"\nmodel = \"a\"\napi_key = \"plain\"\nfallbacks = [{ provider = \"openai\", model = \"b\" }, { provider = \"anthropic\", model = \"c\" }]\n",
            Path::new("/c.toml"),
        )
        .unwrap();
        let keys = KeySource::in_dir(Path::new("/nonexistent"));
        let eps = resolve(&c, &keys, &Overrides::default(), None)
            .unwrap()
            .unwrap();
        assert_eq!(eps[0].base_url, "http://127.0.0.1:9/v1");
        assert_eq!(eps[1].base_url, eps[0].base_url);
        assert_eq!(eps[1].key.as_ref().map(Secret::expose), Some("plain"));
        assert_eq!(eps[2].base_url, "https://api.anthropic.com/v1");
        assert!(eps[2].key.is_none());
        let ov = Overrides {
            model: Some("env-model".into()),
            api_key: Some(Secret::new("k2")),
            ..Default::default()
        };
        let eps = resolve(&c, &keys, &ov, Some("flag-model"))
            .unwrap()
            .unwrap();
        assert_eq!(eps[0].model, "flag-model");
        assert_eq!(eps[0].key.as_ref().map(Secret::expose), Some("k2"));
        let none = Config::parse("", Path::new("/c.toml")).unwrap();
        assert!(
            resolve(&none, &keys, &Overrides::default(), None)
                .unwrap()
                .is_none()
        );
        let bad = Overrides {
            provider: Some("gopher".into()),
            ..Default::default()
        };
        assert!(resolve(&c, &keys, &bad, None).is_err());
    }
}
