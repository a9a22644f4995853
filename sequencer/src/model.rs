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
