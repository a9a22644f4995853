//! `hubd.publish-persona`: a human publishes a persona upstream, carrying only its three files.
//!
//! The duty table ([`may_write`]) is the gate: only a human's session may write
//! `refs/l3m/personas/<persona>`. The files come from the request or from the tip of a wearer's
//! persona branch; anything else on that branch (hooks, programs) is never carried.

use std::sync::Arc;

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::names::PersonaName;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::persona::{PERSONA_FILES, PersonaPublished, PersonaSource, PublishPersona};

use super::error::ServiceError;
use super::gate::{self, tip_hex};
use super::state::State;
use crate::store::StoreError;

/// The three files' bytes, in [`PERSONA_FILES`] order.
fn files_of(state: &State, source: PersonaSource) -> Result<[Vec<u8>; 3], ServiceError> {
    match source {
        PersonaSource::Files {
            instructions,
            personality,
            memories,
        } => Ok([
            instructions.into_bytes(),
            personality.into_bytes(),
            memories.into_bytes(),
        ]),
        PersonaSource::Agent { agent } => {
            let agent = gate::agent(&agent)?;
            state.require_known(&agent)?;
            let branch = refs::agent_ref(&agent, AgentRef::Persona);
            let read = |path: &str| {
                state.hub().read_file(&branch, path).map_err(|e| match e {
                    StoreError::UnknownRef { .. } => ServiceError::Invalid(format!(
                        "{agent} has no persona branch ({branch}): spawn it with --persona first"
                    )),
                    StoreError::UnknownFile { .. } => ServiceError::Invalid(format!(
                        "{branch} has no {path}: a persona is published from its three files"
                    )),
                    other => ServiceError::from(other),
                })
            };
            Ok([
                read(PERSONA_FILES[0])?,
                read(PERSONA_FILES[1])?,
                read(PERSONA_FILES[2])?,
            ])
        }
    }
}

/// Publishes one persona version.
pub fn publish(state: &State, req: PublishPersona) -> Result<PersonaPublished, ServiceError> {
    let duty = state.duty(&req.capability)?;
    let persona = PersonaName::parse(&req.persona).map_err(|e| ServiceError::BadName {
        what: "persona",
        input: req.persona.clone(),
        error: e,
    })?;
    let refname = refs::persona(&persona);
    may_write(&duty, &refname, RefWrite::Set)?;
    let files = files_of(state, req.source)?;
    let listed: Vec<(&str, &[u8])> = PERSONA_FILES
        .iter()
        .copied()
        .zip(files.iter().map(Vec::as_slice))
        .collect();
    let previous = state.hub().tip(&refname)?;
    let commit = state.hub().commit_files(
        &refname,
        previous,
        &listed,
        &format!("persona {persona} published by {duty}"),
    )?;
    Ok(PersonaPublished {
        persona: persona.to_string(),
        refname,
        commit: commit.to_string(),
        previous: tip_hex(previous),
    })
}

/// `hubd.publish-persona`, on the blocking pool (the store fsyncs).
pub async fn publish_persona(
    state: Arc<State>,
    req: PublishPersona,
) -> Result<PersonaPublished, ServiceError> {
    tokio::task::spawn_blocking(move || publish(&state, req))
        .await
        .map_err(|e| ServiceError::Internal(format!("a blocking step failed: {e}")))?
}
