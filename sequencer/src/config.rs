//! The sequencer's configuration: which model each agent uses, and the loop's limits.
//!
//! Read from TOML — usually the human's `~/.l3m/l3m.toml`, which holds other sections too, so
//! unknown *top-level* keys are tolerated; inside the tables this module owns, an unknown key is
//! refused, so a misspelt limit is never silently ignored.
//!
//! ```toml
//! default_model = "fast"
//! [models.fast]            # opaque here: handed to the provider factory by label
//! provider = "scripted"
//! script = "demo.toml"
//! [[agents]]
//! match = "demo/*"         # `*` is exactly one name segment
//! model = "fast"
//! fallback = "slow"
//! [sequencer]
//! max_attempts = 3
//! ```
//!
//! # Layout
//! - [`Config`], [`AgentRule`], [`Limits`]: the parsed file; [`Config::models_for`] picks an
//!   agent's model and fallback.

use std::collections::BTreeMap;
use std::time::Duration;

use l3m_core::names::AgentName;
use serde::Deserialize;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The text is not valid TOML for this shape.
    #[error("the sequencer configuration is not valid: {0}")]
    Parse(String),
    /// A rule or default names a model label with no `[models.<label>]` table.
    #[error("the configuration names model `{label}` but has no [models.{label}] table")]
    UnknownModel {
        /// The label.
        label: String,
    },
    /// No rule matches the agent and there is no `default_model`.
    #[error("no [[agents]] rule matches {agent} and there is no default_model")]
    NoModel {
        /// The agent.
        agent: String,
    },
    /// The `[review]` table is out of range.
    #[error("[review]: {0}")]
    Review(#[from] l3m_core::review::ReviewError),
    /// A limit is out of range.
    #[error(
        "[sequencer] {field} is out of range (max_attempts >= 1, lease_ttl_secs 0.5..=600, program_deadline_secs 1..=3600)"
    )]
    Limit {
        /// The field.
        field: &'static str,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Config {
    /// Model tables by label, kept opaque for the provider factory.
    #[serde(default)]
    pub models: BTreeMap<String, toml::Table>,
    /// Which agents use which model; the first matching rule wins.
    #[serde(default)]
    pub agents: Vec<AgentRule>,
    /// The model of an agent no rule matches.
    #[serde(default)]
    pub default_model: Option<String>,
    /// The loop's limits.
    #[serde(default)]
    pub sequencer: Limits,
    /// How wild calls are reviewed; without it a wild call is not run and the model is told
    /// that no reviewer is configured.
    #[serde(default)]
    pub review: Option<l3m_core::review::ReviewConfig>,
}

/// One `[[agents]]` rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRule {
    /// An agent name, or a pattern whose `*` segments each match one segment.
    #[serde(rename = "match")]
    pub pattern: String,
    /// The model label for first attempts.
    pub model: String,
    /// The model label for retries, if any.
    #[serde(default)]
    pub fallback: Option<String>,
}

/// The `[sequencer]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Attempts per owed model call.
    pub max_attempts: u32,
    /// The reply's output limit.
    pub max_tokens: u32,
    /// The session lease's time to live, in seconds (hubd admits 0.5 to 600).
    pub lease_ttl_secs: f64,
    /// Exit (releasing the lease) after this long with nothing to do; `None` runs until stopped.
    pub idle_exit_secs: Option<u64>,
    /// Wait between attempts of one call, in milliseconds (doubled per attempt).
    pub retry_backoff_ms: u64,
    /// The `l3m-program` evaluator that checks and runs the agent's sealed programs. Unset, the
    /// `sequencer` binary uses the one beside itself; with none, programs are not loaded.
    pub program_evaluator: Option<std::path::PathBuf>,
    /// Wall-clock seconds one program call may take (1 to 3600), its effects included: a
    /// program that drives children waits for their answers within it. The evaluator's CPU
    /// limit is its own and does not grow with it.
    pub program_deadline_secs: u64,
    /// Where the evaluator runs: `"bwrap"` (the default) starts it under bubblewrap with no
    /// files, network or other processes, and refuses every program call where bubblewrap
    /// cannot run; `"none"` is the explicit opt-out that runs it under its rlimits only.
    pub program_sandbox: l3m_programs::sandbox::Sandbox,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_attempts: 3,
            max_tokens: 4096,
            lease_ttl_secs: 15.0,
            idle_exit_secs: None,
            retry_backoff_ms: 200,
            program_evaluator: None,
            program_deadline_secs: 10,
            program_sandbox: l3m_programs::sandbox::Sandbox::Bwrap,
        }
    }
}

impl Limits {
    /// The lease's time to live.
    pub fn lease_ttl(&self) -> Duration {
        Duration::try_from_secs_f64(self.lease_ttl_secs).unwrap_or(Duration::from_secs(15))
    }

    /// The evaluator of the agent's programs, with the configured call deadline and sandbox;
    /// `None` when no evaluator is known (then programs are not loaded).
    pub fn evaluator(&self) -> Option<l3m_programs::host::Evaluator> {
        self.program_evaluator.clone().map(|path| {
            let mut evaluator = l3m_programs::host::Evaluator::new(path);
            evaluator.deadline = Duration::from_secs(self.program_deadline_secs);
            evaluator.sandbox = self.program_sandbox;
            evaluator
        })
    }
}

/// The model labels one agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentModels {
    /// For first attempts.
    pub model: String,
    /// For retries, if configured.
    pub fallback: Option<String>,
}

impl Config {
    /// Parses and checks a configuration.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.sequencer.max_attempts == 0 {
            return Err(ConfigError::Limit {
                field: "max_attempts",
            });
        }
        if !(0.5..=600.0).contains(&self.sequencer.lease_ttl_secs) {
            return Err(ConfigError::Limit {
                field: "lease_ttl_secs",
            });
        }
        if !(1..=3600).contains(&self.sequencer.program_deadline_secs) {
            return Err(ConfigError::Limit {
                field: "program_deadline_secs",
            });
        }
        if let Some(review) = &self.review {
            review.check()?;
        }
        let labels = self
            .agents
            .iter()
            .flat_map(|r| std::iter::once(&r.model).chain(r.fallback.as_ref()))
            .chain(self.default_model.as_ref());
        for label in labels {
            if !self.models.contains_key(label) {
                return Err(ConfigError::UnknownModel {
                    label: label.clone(),
                });
            }
        }
        Ok(())
    }

    /// The model (and fallback) of `agent`: the first matching rule, else `default_model`.
    pub fn models_for(&self, agent: &AgentName) -> Result<AgentModels, ConfigError> {
        if let Some(rule) = self.agents.iter().find(|r| matches(&r.pattern, agent)) {
            return Ok(AgentModels {
                model: rule.model.clone(),
                fallback: rule.fallback.clone(),
            });
        }
        match &self.default_model {
            Some(model) => Ok(AgentModels {
                model: model.clone(),
                fallback: None,
            }),
            None => Err(ConfigError::NoModel {
                agent: agent.to_string(),
            }),
        }
    }

    /// The model name a label asks for: its table's `model` key, or the label itself.
    pub fn model_name<'a>(&'a self, label: &'a str) -> &'a str {
        self.models
            .get(label)
            .and_then(|t| t.get("model"))
            .and_then(toml::Value::as_str)
            .unwrap_or(label)
    }

    /// The notes of the model labelled `label`: added to each request to it, never stored.
    pub fn model_notes(&self, label: &str) -> Option<String> {
        self.models
            .get(label)
            .and_then(|t| t.get("notes"))
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    }
}

/// Whether `pattern` (segments, `*` matching any one) matches `agent`.
fn matches(pattern: &str, agent: &AgentName) -> bool {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let name: Vec<&str> = agent.segments().collect();
    pattern.len() == name.len() && pattern.iter().zip(&name).all(|(p, n)| *p == "*" || p == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
        default_model = "b"
        [hosts.x]
        anything = 1
        [models.a]
        provider = "scripted"
        model = "claude-x"
        [models.b]
        provider = "scripted"
        [[agents]]
        match = "demo/*"
        model = "a"
        fallback = "b"
        [sequencer]
        idle_exit_secs = 5
    "#;

    fn name(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn rules_pick_models_and_unknown_top_level_keys_are_tolerated() {
        let c = Config::parse(TEXT).unwrap();
        let m = c.models_for(&name("demo/child")).unwrap();
        assert_eq!((m.model.as_str(), m.fallback.as_deref()), ("a", Some("b")));
        assert_eq!(c.models_for(&name("demo")).unwrap().model, "b");
        assert_eq!(c.models_for(&name("demo/a/b")).unwrap().model, "b");
        assert_eq!(c.model_name("a"), "claude-x");
        assert_eq!(c.model_name("b"), "b");
        assert_eq!(c.sequencer.idle_exit_secs, Some(5));
        assert_eq!(c.sequencer.max_attempts, 3);
    }

    #[test]
    fn misspelt_limits_and_unknown_labels_are_refused() {
        let err = Config::parse("[sequencer]\nmax_atempts = 2").unwrap_err();
        assert!(err.to_string().contains("max_atempts"), "{err}");
        let err = Config::parse("default_model = \"nope\"").unwrap_err();
        assert!(matches!(err, ConfigError::UnknownModel { .. }), "{err}");
        let err = Config::parse("[[agents]]\nmatch = \"a\"\nmodel = \"m\"\nextra = 1").unwrap_err();
        assert!(err.to_string().contains("extra"), "{err}");
        assert!(matches!(
            Config::default().models_for(&name("a")),
            Err(ConfigError::NoModel { .. })
        ));
    }

    #[test]
    fn a_program_deadline_reaches_the_evaluator_and_is_bounded() {
        let c =
            Config::parse("[sequencer]\nprogram_evaluator = \"/e\"\nprogram_deadline_secs = 60")
                .unwrap();
        assert_eq!(
            c.sequencer.evaluator().unwrap().deadline,
            Duration::from_secs(60)
        );
        assert_eq!(
            Config::parse("")
                .unwrap()
                .sequencer
                .evaluator()
                .map(|e| e.deadline),
            None
        );
        for bad in ["0", "3601"] {
            let err =
                Config::parse(&format!("[sequencer]\nprogram_deadline_secs = {bad}")).unwrap_err();
            assert!(
                matches!(err, ConfigError::Limit { field } if field == "program_deadline_secs"),
                "{err}"
            );
        }
    }

    #[test]
    fn programs_are_sandboxed_unless_explicitly_opted_out() {
        use l3m_programs::sandbox::Sandbox;
        let sandbox = |text: &str| {
            Config::parse(&format!("[sequencer]\nprogram_evaluator = \"/e\"\n{text}"))
                .map(|c| c.sequencer.evaluator().unwrap().sandbox)
        };
        assert_eq!(sandbox("").unwrap(), Sandbox::Bwrap);
        assert_eq!(
            sandbox("program_sandbox = \"bwrap\"").unwrap(),
            Sandbox::Bwrap
        );
        assert_eq!(
            sandbox("program_sandbox = \"none\"").unwrap(),
            Sandbox::None
        );
        let err = sandbox("program_sandbox = \"off\"").unwrap_err();
        assert!(err.to_string().contains("program_sandbox"), "{err}");
    }
}
