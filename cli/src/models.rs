//! What the human's document says about which model runs an agent: the sequencer's sections
//! (`[models.*]`, `[[agents]]`, `default_model`), read with the sequencer's own library, so the
//! CLI warns exactly when a sequencer would find no model. That library comes with the
//! `embedded` feature; a CLI built without it does not read these sections, and `l3m doctor`
//! says the check was not made.

use std::path::Path;

use l3m_core::names::AgentName;

/// The model setup in a document: `default_model` and the number of `[[agents]]` rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The model every agent no rule matches runs on.
    pub default_model: Option<String>,
    /// How many `[[agents]]` rules there are.
    pub rules: usize,
}

/// Why `agent` has no model to run on (no rule or default matches it, or the document does not
/// parse); `None` when it has one, or when this build does not read the sections.
pub fn gap(document: &Path, agent: &AgentName) -> Option<String> {
    #[cfg(feature = "embedded")]
    {
        match crate::embedded::sequencer_config(document) {
            Ok(config) => config.models_for(agent).err().map(|e| e.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }
    #[cfg(not(feature = "embedded"))]
    {
        let _ = (document, agent);
        None
    }
}

/// The document's model setup; `Err` says why it could not be read (or that this build does
/// not read it).
pub fn setup(document: &Path) -> Result<Setup, String> {
    #[cfg(feature = "embedded")]
    {
        let config = crate::embedded::sequencer_config(document).map_err(|e| e.to_string())?;
        Ok(Setup {
            default_model: config.default_model.clone(),
            rules: config.agents.len(),
        })
    }
    #[cfg(not(feature = "embedded"))]
    {
        let _ = document;
        Err(
            "not checked: this l3m was built without the `embedded` feature, which reads the \
             sequencer's sections"
                .to_owned(),
        )
    }
}
