//! The model-provider face the sequencer calls: `l3m-models`' types, re-exported so the rest of
//! the crate names them in one place.
//!
//! The sequencer journals every attempt itself (`call-started` before the request leaves), so
//! providers are built with their own retries as the human's configuration sets them; a reply
//! or a failure comes back as a signal.

pub use l3m_models::scripted::{Script, Scripted};
pub use l3m_models::{
    ModelConfig, ModelError, ModelReply, ModelRequest, Provider, ToolSpec, build,
};

use std::path::PathBuf;
use std::sync::Arc;

use crate::{Config, ProviderFactory};

/// Looks up an environment variable; the binary passes `std::env::var`, tests a map, so the
/// library never reads the environment itself.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What a session's economy needs to know of its model: the window its requests must fit and
/// the cap on one tool result, from the model's table (defaults by family where it names none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Economy {
    /// The context window, in tokens.
    pub context_window: u32,
    /// The most bytes one tool result shows the model.
    pub tool_output_cap: usize,
}

impl Economy {
    /// The economy of the model labelled `label` in `config`; a table that is not a model
    /// configuration (the provider factory refuses it, naming why) gets the defaults of an
    /// unknown model.
    pub fn of(config: &Config, label: &str) -> Economy {
        let table = config.models.get(label).cloned().unwrap_or_default();
        let model = toml::Value::Table(table).try_into::<ModelConfig>().ok();
        let unknown = || l3m_models::default_context_window(l3m_models::Dialect::Openai, label);
        match model {
            Some(m) => Economy {
                context_window: m.context_window_or_default(),
                tool_output_cap: m.tool_output_cap_or_default(),
            },
            None => Economy {
                context_window: unknown(),
                tool_output_cap: usize::try_from(unknown().saturating_mul(4) / 10)
                    .unwrap_or(usize::MAX),
            },
        }
    }
}

/// Providers by label: each `[models.<label>]` table of `config` is an `l3m-models`
/// configuration, its script paths relative to `base` (the configuration file's folder), its
/// API key read through `env` from the variable the table names.
pub fn provider_factory(config: Config, base: PathBuf, env: EnvLookup) -> ProviderFactory {
    Arc::new(move |label: &str| {
        let table = config.models.get(label).ok_or_else(|| ModelError::Config {
            what: format!("no [models.{label}] table in the configuration"),
        })?;
        let mut model: ModelConfig =
            toml::Value::Table(table.clone())
                .try_into()
                .map_err(|e: toml::de::Error| ModelError::Config {
                    what: format!("[models.{label}]: {e}"),
                })?;
        model.resolve_paths(&base);
        build(&model, &|name| env(name))
    })
}
