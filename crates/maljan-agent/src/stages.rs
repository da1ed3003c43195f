//! The stages a job runs and their budgets: a small TOML file (`agent.toml` beside
//! config.toml) with a built-in default (`stages.toml` in this crate, shown below).
//!
//! ```toml
#![doc = include_str!("stages.toml")]
//! ```

use std::{path::Path, time::Duration};

use serde::Deserialize;

const DEFAULT: &str = include_str!("stages.toml");

#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    pub analyst: bool,
    pub judge: bool,
    pub budgets: Budgets,
    pub judge_attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    pub max_steps: usize,
    pub max_seconds: f64,
    pub max_tokens: u64,
    pub max_repeats: usize,
}

impl Budgets {
    pub fn wall(&self) -> Duration {
        Duration::from_secs_f64(self.max_seconds.max(0.0))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    stages: Option<Vec<String>>,
    budgets: Option<PartialBudgets>,
    judge: Option<JudgeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartialBudgets {
    max_steps: Option<usize>,
    max_seconds: Option<f64>,
    max_tokens: Option<u64>,
    max_repeats: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgeFile {
    attempts: Option<u32>,
}

impl Default for Stages {
    fn default() -> Self {
        Self::parse(DEFAULT, "built-in stages.toml").expect("the built-in stages parse")
    }
}

impl Stages {
    /// Parses a stages file; what it leaves out is the built-in default.
    pub fn parse(text: &str, file: &str) -> Result<Self, String> {
        let err = |p: String| format!("{file}: {p}");
        let f: File = toml::from_str(text).map_err(|e| err(e.message().to_string()))?;
        let base = if text == DEFAULT {
            None
        } else {
            Some(Self::default())
        };
        let names = f
            .stages
            .unwrap_or_else(|| vec!["triage".into(), "analyst".into(), "judge".into()]);
        let order = ["triage", "analyst", "judge"];
        let mut last = None;
        for n in &names {
            let pos = order.iter().position(|o| o == n).ok_or_else(|| {
                err(format!(
                    "unknown stage {n:?} (the stages are triage, analyst, judge)"
                ))
            })?;
            if last.is_some_and(|l| pos <= l) {
                return Err(err(
                    "stages must be in the order triage, analyst, judge, each once".into(),
                ));
            }
            last = Some(pos);
        }
        if names.first().map(String::as_str) != Some("triage") {
            return Err(err(
                "the first stage is triage (its evidence is what the others cite)".into(),
            ));
        }
        let b = f.budgets;
        let d = base.as_ref().map(|b| b.budgets.clone());
        let pick = |v: Option<f64>, dv: Option<f64>, name: &str| {
            v.or(dv)
                .ok_or_else(|| err(format!("budgets.{name} is required")))
        };
        let budgets = Budgets {
            max_steps: b
                .as_ref()
                .and_then(|b| b.max_steps)
                .or(d.as_ref().map(|d| d.max_steps))
                .ok_or_else(|| err("budgets.max_steps is required".into()))?,
            max_seconds: pick(
                b.as_ref().and_then(|b| b.max_seconds),
                d.as_ref().map(|d| d.max_seconds),
                "max_seconds",
            )?,
            max_tokens: b
                .as_ref()
                .and_then(|b| b.max_tokens)
                .or(d.as_ref().map(|d| d.max_tokens))
                .ok_or_else(|| err("budgets.max_tokens is required".into()))?,
            max_repeats: b
                .as_ref()
                .and_then(|b| b.max_repeats)
                .or(d.as_ref().map(|d| d.max_repeats))
                .ok_or_else(|| err("budgets.max_repeats is required".into()))?,
        };
        if !budgets.max_seconds.is_finite() || budgets.max_seconds < 0.0 {
            return Err(err(
                "budgets.max_seconds must be a number of seconds ≥ 0".into()
            ));
        }
        let judge_attempts = f
            .judge
            .and_then(|j| j.attempts)
            .or(base.as_ref().map(|b| b.judge_attempts))
            .ok_or_else(|| err("judge.attempts is required".into()))?;
        if judge_attempts == 0 {
            return Err(err("judge.attempts must be at least 1".into()));
        }
        Ok(Self {
            analyst: names.iter().any(|n| n == "analyst"),
            judge: names.iter().any(|n| n == "judge"),
            budgets,
            judge_attempts,
        })
    }

    /// `agent.toml` beside the config file when it exists, else the built-in default.
    pub fn discover(config_file: &Path) -> Result<Self, String> {
        match config_file.parent().map(|d| d.join("agent.toml")) {
            Some(p) if p.is_file() => {
                let text = std::fs::read_to_string(&p)
                    .map_err(|e| format!("{}: cannot read it: {e}", p.display()))?;
                Self::parse(&text, &p.display().to_string())
            }
            _ => Ok(Self::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_runs_every_stage_and_a_file_overrides_what_it_says() {
        let d = Stages::default();
        assert!(d.analyst && d.judge);
        assert_eq!((d.budgets.max_steps, d.judge_attempts), (12, 2));
        let s = Stages::parse(
            "stages = [\"triage\", \"judge\"]\n[budgets]\nmax_steps = 2\n",
            "a.toml",
        )
        .unwrap();
        assert!(!s.analyst && s.judge);
        assert_eq!((s.budgets.max_steps, s.budgets.max_tokens), (2, 200000));
        assert!(
            Stages::parse("stages = [\"judge\", \"triage\"]", "a.toml")
                .unwrap_err()
                .contains("order")
        );
        assert!(
            Stages::parse("stages = [\"analyst\"]", "a.toml")
                .unwrap_err()
                .contains("first stage")
        );
        assert!(
            Stages::parse("[budgets]\nmax_step = 1", "a.toml")
                .unwrap_err()
                .contains("a.toml")
        );
        assert!(Stages::parse("[judge]\nattempts = 0", "a.toml").is_err());
    }
}
