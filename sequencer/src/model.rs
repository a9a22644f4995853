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
