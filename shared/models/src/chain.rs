//! The primary model and its fallbacks, chosen per attempt of a call.
//!
//! Fallback is not a provider wrapping two others: the Log must record which model answered,
//! so the sequencer asks [`ModelChain::for_attempt`] which provider, model and notes the next
//! attempt uses, journals that in the attempt's `call-started` record, and sends it. Attempt 1
//! uses the primary; attempt `n` the `(n-1)`-th fallback, the last one for every attempt past
//! the end of the chain (with no fallback, the primary again). Each entry carries its own notes:
//! a fallback model gets the notes written for it.
//!
//! # Layout
//! - [`ChainEntry`]: one model of the chain.
//! - [`ModelChain`]: the chain, never empty; built directly or from the `[models]` tables by
//!   following each table's `fallback` label.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::{ModelConfig, ModelError, Provider};

/// One model of a chain.
#[derive(Debug, Clone)]
pub struct ChainEntry {
    /// The `[models.<label>]` table it came from.
    pub label: String,
    /// The provider that sends to it.
    pub provider: Arc<dyn Provider>,
    /// The model id requests carry.
    pub model: String,
    /// Its own notes, appended to the system prompt per request.
    pub notes: Option<String>,
    /// The reply budget requests to it carry.
    pub max_tokens: u32,
}

impl ChainEntry {
    /// The entry for the table `label`, sent through `provider`.
    pub fn from_config(label: &str, config: &ModelConfig, provider: Arc<dyn Provider>) -> Self {
        Self {
            label: label.to_owned(),
            provider,
            model: config.model.clone(),
            notes: config.notes.clone(),
            max_tokens: config.max_tokens_or_default(),
        }
    }
}

/// The primary model and its fallbacks, in order.
#[derive(Debug, Clone)]
pub struct ModelChain {
    /// Never empty: the primary first.
    entries: Vec<ChainEntry>,
}

impl ModelChain {
    /// A chain of `primary` then `fallbacks`, in order.
    pub fn new(primary: ChainEntry, fallbacks: Vec<ChainEntry>) -> Self {
        let mut entries = vec![primary];
        entries.extend(fallbacks);
        Self { entries }
    }

    /// The chain starting at table `primary` of `models`, following each table's `fallback`
    /// label; `build` makes each table's provider (the binary passes
    /// `|_, c| l3m_models::build(c, &env)`). An unknown label or a cycle is an error naming it.
    pub fn from_config(
        models: &BTreeMap<String, ModelConfig>,
        primary: &str,
        build: impl Fn(&str, &ModelConfig) -> Result<Arc<dyn Provider>, ModelError>,
    ) -> Result<Self, ModelError> {
        let mut entries = Vec::new();
        let mut seen = BTreeSet::new();
        let mut next = Some(primary.to_owned());
        while let Some(label) = next {
            let config = models.get(&label).ok_or_else(|| {
                let known: Vec<&str> = models.keys().map(String::as_str).collect();
                ModelError::config(format!(
                    "no [models.{label}] table; the tables are {known:?}"
                ))
            })?;
            if !seen.insert(label.clone()) {
                return Err(ModelError::config(format!(
                    "the fallback chain from {primary:?} returns to {label:?}; a chain must end"
                )));
            }
            let provider = build(&label, config).map_err(|e| match e {
                ModelError::Config { what } => {
                    ModelError::config(format!("[models.{label}]: {what}"))
                }
                other => other,
            })?;
            entries.push(ChainEntry::from_config(&label, config, provider));
            next = config.fallback.clone();
        }
        Ok(Self { entries })
    }

    /// The models, primary first.
    pub fn entries(&self) -> &[ChainEntry] {
        &self.entries
    }

    /// The model attempt `attempt` (from 1) of a call uses.
    pub fn entry_for_attempt(&self, attempt: u32) -> &ChainEntry {
        let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        let last = self.entries.len() - 1;
        &self.entries[index.min(last)]
    }

    /// The provider, model and notes attempt `attempt` (from 1) of a call uses.
    pub fn for_attempt(&self, attempt: u32) -> (&dyn Provider, &str, Option<&str>) {
        let entry = self.entry_for_attempt(attempt);
        (
            entry.provider.as_ref(),
            &entry.model,
            entry.notes.as_deref(),
        )
    }
}
