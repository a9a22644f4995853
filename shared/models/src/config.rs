//! One `[models.<label>]` table of the human's `l3m.toml` (or the sequencer's config), and the
//! provider it builds.
//!
//! ```toml
//! [models.main]
//! dialect = "anthropic"
//! model = "claude-sonnet-4-5"
//! notes = "Prefer small edits."
//! fallback = "local"
//!
//! [models.local]
//! dialect = "openai"
//! model = "qwen2.5:7b"
//! base_url = "http://127.0.0.1:11434"
//! ```
//! Keys: the Anthropic dialect reads its key from `api_key_env` (default `ANTHROPIC_API_KEY`);
//! the OpenAI dialect from `api_key_env`, else `OPENAI_API_KEY` when it talks to OpenAI itself
//! (no `base_url`). A local server named by `base_url` alone gets no key, so a real key never
//! leaks to it. The lookup is the caller's ([`build`] takes it), so this crate never reads the
//! environment.
//!
//! # Layout
//! - [`Dialect`], [`ModelConfig`]: the table.
//! - [`build`], [`build_tuned`]: the provider for a table.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::anthropic::{self, Anthropic};
use crate::http::HttpTuning;
use crate::openai::{self, OpenAi};
use crate::scripted::Scripted;
use crate::{ModelError, Provider};

/// The reply budget when a table names none.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Which wire a model speaks.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible Chat Completions (OpenAI, vLLM, llama.cpp server, Ollama).
    Openai,
    /// Answers read from a script file; no network.
    Scripted,
}

/// One `[models.<label>]` table of the human's l3m.toml / the sequencer's config.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The wire it speaks.
    pub dialect: Dialect,
    /// The model id at the endpoint; for `scripted`, a free label the Log records.
    pub model: String,
    /// The endpoint, without the `/v1/...` path (a trailing `/v1` is accepted); defaults to the
    /// dialect's public API.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// This model's own notes, appended to the system prompt of every request to it.
    #[serde(default)]
    pub notes: Option<String>,
    /// The deadline of one try, in seconds (default 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// The longest silence of a streaming reply, in seconds (default 90).
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// How many times a retryable failure is tried again (default 3).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// For `scripted`: the script file.
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// The reply budget in tokens (default [`DEFAULT_MAX_TOKENS`]).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// The label of the table to fall back to when this model keeps failing.
    #[serde(default)]
    pub fallback: Option<String>,
    /// The model's context window in tokens; default by family ([`default_context_window`]).
    /// The sequencer compacts before a request would outgrow it.
    #[serde(default)]
    pub context_window: Option<u32>,
    /// The most bytes one tool result may show this model before it is cut with a note on how
    /// to get the rest; default a tenth of the window ([`ModelConfig::tool_output_cap_or_default`]).
    #[serde(default)]
    pub tool_output_cap: Option<u32>,
}

/// The context window of a model known by its family, from its id; 32k tokens for a model this
/// table does not know (small local models rarely have less, and a window too small only
/// compacts early).
pub fn default_context_window(dialect: Dialect, model: &str) -> u32 {
    let model = model.to_ascii_lowercase();
    let known: &[(&str, u32)] = &[
        ("claude", 200_000),
        ("gpt-4.1", 1_000_000),
        ("gpt-4o", 128_000),
        ("gpt-5", 400_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("qwen2.5", 32_768),
        ("qwen3", 40_960),
        ("llama3", 131_072),
        ("llama-3", 131_072),
        ("mistral", 32_768),
        ("gemma", 8_192),
    ];
    match known.iter().find(|(family, _)| model.contains(family)) {
        Some((_, window)) => *window,
        None if dialect == Dialect::Anthropic => 200_000,
        None => 32_768,
    }
}

impl ModelConfig {
    /// The reply budget requests to this model carry.
    pub fn max_tokens_or_default(&self) -> u32 {
        self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)
    }

    /// The context window requests to this model must fit, in tokens.
    pub fn context_window_or_default(&self) -> u32 {
        self.context_window
            .unwrap_or_else(|| default_context_window(self.dialect, &self.model))
    }

    /// The most bytes one tool result may show this model: the table's `tool_output_cap`, or
    /// a tenth of the window at about four bytes a token.
    pub fn tool_output_cap_or_default(&self) -> usize {
        let cap = self
            .tool_output_cap
            .unwrap_or_else(|| self.context_window_or_default().saturating_mul(4) / 10);
        usize::try_from(cap).unwrap_or(usize::MAX)
    }

    /// Resolves a relative `script` path against `dir` (the directory of the file the table
    /// came from), so the script is found whatever the working directory.
    pub fn resolve_paths(&mut self, dir: &Path) {
        if let Some(script) = &self.script
            && script.is_relative()
        {
            self.script = Some(dir.join(script));
        }
    }

    /// `base`, with this table's deadlines and retry budget where it gives them.
    pub fn tuning(&self, base: HttpTuning) -> Result<HttpTuning, ModelError> {
        let secs = |field: &str, value: Option<u64>, default: Duration| match value {
            Some(0) => Err(ModelError::config(format!(
                "{field} is 0; give a positive number of seconds"
            ))),
            Some(s) => Ok(Duration::from_secs(s)),
            None => Ok(default),
        };
        Ok(HttpTuning {
            timeout: secs("timeout_secs", self.timeout_secs, base.timeout)?,
            idle_timeout: secs(
                "idle_timeout_secs",
                self.idle_timeout_secs,
                base.idle_timeout,
            )?,
            max_retries: self.max_retries.unwrap_or(base.max_retries),
            ..base
        })
    }
}

/// Builds the provider; `env` looks up environment variables (the binary passes std::env::var;
/// tests pass a map) so the library never reads the environment itself.
pub fn build(
    config: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ModelError> {
    build_tuned(config, env, HttpTuning::default())
}

/// [`build`] over `base` tuning instead of the defaults (tests shorten the backoff and record
/// the waits); the table's own fields still win.
pub fn build_tuned(
    config: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
    base: HttpTuning,
) -> Result<Arc<dyn Provider>, ModelError> {
    if config.model.trim().is_empty() {
        return Err(ModelError::config("model is empty; name the model id"));
    }
    let key = |name: &str| {
        env(name).filter(|k| !k.is_empty()).ok_or_else(|| {
            ModelError::config(format!(
                "environment variable {name} holds no API key for the {:?} dialect; set it or name another with api_key_env",
                config.dialect
            ))
        })
    };
    match config.dialect {
        Dialect::Scripted => {
            if config.base_url.is_some() || config.api_key_env.is_some() {
                return Err(ModelError::config(
                    "base_url and api_key_env mean nothing to the scripted dialect; remove them",
                ));
            }
            let script = config.script.as_deref().ok_or_else(|| {
                ModelError::config("the scripted dialect needs script = \"path/to/script.toml\"")
            })?;
            Ok(Arc::new(Scripted::load(script)?))
        }
        Dialect::Anthropic | Dialect::Openai if config.script.is_some() => Err(ModelError::config(
            "script is only for the scripted dialect; remove it",
        )),
        Dialect::Anthropic => {
            let api_key = key(config
                .api_key_env
                .as_deref()
                .unwrap_or(anthropic::DEFAULT_KEY_ENV))?;
            let base_url = config
                .base_url
                .as_deref()
                .unwrap_or(anthropic::DEFAULT_BASE_URL);
            Ok(Arc::new(Anthropic::new(
                base_url,
                &api_key,
                config.tuning(base)?,
            )?))
        }
        Dialect::Openai => {
            let api_key = match (&config.api_key_env, &config.base_url) {
                (Some(name), _) => Some(key(name)?),
                (None, None) => Some(key(openai::DEFAULT_KEY_ENV)?),
                (None, Some(_)) => None,
            };
            let base_url = config
                .base_url
                .as_deref()
                .unwrap_or(openai::DEFAULT_BASE_URL);
            Ok(Arc::new(OpenAi::new(
                base_url,
                api_key.as_deref(),
                config.tuning(base)?,
            )?))
        }
    }
}
