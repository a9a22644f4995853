//! `hubd.publish-persona` and `hubd.pull-persona`: a human publishes a persona upstream,
//! carrying only its three files; a pull brings upstream changes into a wearer's branch.
//!
//! The duty table ([`may_write`]) is the gate: only a human's session may write
//! `refs/l3m/personas/<persona>`. The files come from the request or from the tip of a wearer's
//! persona branch; anything else on that branch (hooks, programs) is never carried. A pull is a
//! per-file three-way merge of the three persona files against the common ancestor
//! ([`merge_persona_files`], pure); it never overwrites a wearer's edit.

use std::collections::BTreeMap;
use std::sync::Arc;

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::names::PersonaName;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::persona::{
    PERSONA_FILES, PersonaPublished, PersonaPulled, PersonaSource, PublishPersona, PullPersona,
};

use super::error::ServiceError;
use super::gate::{self, tip_hex};
use super::handlers::blocking;
use super::state::State;
use crate::store::{StoreError, Tip};

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

/// `hubd.publish-persona` (the store fsyncs).
pub async fn publish_persona(
    state: Arc<State>,
    req: PublishPersona,
) -> Result<PersonaPublished, ServiceError> {
    blocking(&state, move |s| publish(s, req)).await
}

/// A persona branch's files, by path.
pub type Files = BTreeMap<String, Vec<u8>>;

/// What a pull does to one persona file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileMerge {
    /// Upstream's version replaces the wearer's.
    TakeUpstream,
    /// The wearer's version stays.
    Keep,
    /// Both changed it, differently.
    Conflict,
}

/// The three-way decision for one file: `base` is the common ancestor's version (if any),
/// `mine` the wearer's, `theirs` upstream's.
pub fn merge_persona_file(
    base: Option<&[u8]>,
    mine: Option<&[u8]>,
    theirs: Option<&[u8]>,
) -> FileMerge {
    if theirs == base || theirs == mine {
        FileMerge::Keep
    } else if mine == base {
        FileMerge::TakeUpstream
    } else {
        FileMerge::Conflict
    }
}

/// The wearer's files after a pull, and which persona files changed; `Err(file)` names the
/// first file both sides changed.
pub fn merge_persona_files(
    base: &Files,
    mine: &Files,
    theirs: &Files,
) -> Result<(Files, Vec<String>), String> {
    let mut merged = mine.clone();
    let mut updated = Vec::new();
    for file in PERSONA_FILES {
        fn get<'a>(m: &'a Files, file: &str) -> Option<&'a [u8]> {
            m.get(file).map(Vec::as_slice)
        }
        match merge_persona_file(get(base, file), get(mine, file), get(theirs, file)) {
            FileMerge::Keep => {}
            FileMerge::Conflict => return Err(file.to_owned()),
            FileMerge::TakeUpstream => {
                match theirs.get(file) {
                    Some(bytes) => merged.insert(file.to_owned(), bytes.clone()),
                    None => merged.remove(file),
                };
                updated.push(file.to_owned());
            }
        }
    }
    Ok((merged, updated))
}

/// Pulls the upstream version of the persona `req.agent` wears into its persona branch.
pub fn pull(state: &State, req: PullPersona) -> Result<PersonaPulled, ServiceError> {
    let duty = state.duty(&req.capability)?;
    let agent = gate::agent(&req.agent)?;
    let persona = state.worn_persona(&agent)?.ok_or_else(|| {
        ServiceError::Invalid(format!(
            "{agent} wears no persona: only an agent spawned with one can pull it"
        ))
    })?;
    let branch = refs::agent_ref(&agent, AgentRef::Persona);
    may_write(&duty, &branch, RefWrite::Set)?;
    let upstream_ref = refs::persona(&persona);
    let Tip::At(upstream) = state.hub().tip(&upstream_ref)? else {
        return Err(ServiceError::UnknownPersona {
            persona: persona.to_string(),
            refname: upstream_ref,
        });
    };
    let Tip::At(mine) = state.hub().tip(&branch)? else {
        return Err(ServiceError::Invalid(format!(
            "{agent} has no persona branch ({branch})"
        )));
    };
    let base = state.hub().merge_base(mine, upstream)?;
    let pulled = |commit: gix::ObjectId, updated| PersonaPulled {
        agent: agent.to_string(),
        persona: persona.to_string(),
        commit: commit.to_string(),
        upstream: upstream.to_string(),
        updated,
    };
    if base == Some(upstream) {
        return Ok(pulled(mine, Vec::new()));
    }
    let base_files = match base {
        Some(base) => state.hub().files_at(base)?,
        None => BTreeMap::new(),
    };
    let mine_files = state.hub().files_at(mine)?;
    let theirs = state.hub().files_at(upstream)?;
    let (merged, updated) =
        merge_persona_files(&base_files, &mine_files, &theirs).map_err(|file| {
            ServiceError::PersonaConflict {
                agent: agent.to_string(),
                persona: persona.to_string(),
                file,
            }
        })?;
    let listed: Vec<(&str, &[u8])> = merged
        .iter()
        .map(|(path, bytes)| (path.as_str(), bytes.as_slice()))
        .collect();
    let commit = state.hub().merge_files(
        &branch,
        mine,
        upstream,
        &listed,
        &format!("pull persona {persona} at {upstream} by {duty}"),
    )?;
    Ok(pulled(commit, updated))
}

/// `hubd.pull-persona` (it reads and writes `hub.git`).
pub async fn pull_persona(
    state: Arc<State>,
    req: PullPersona,
) -> Result<PersonaPulled, ServiceError> {
    blocking(&state, move |s| pull(s, req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_only_upstream_changed_is_taken_and_one_only_the_wearer_changed_is_kept() {
        let (a, b, c) = (Some(&b"a"[..]), Some(&b"b"[..]), Some(&b"c"[..]));
        assert_eq!(merge_persona_file(a, a, b), FileMerge::TakeUpstream);
        assert_eq!(merge_persona_file(a, b, a), FileMerge::Keep);
        assert_eq!(merge_persona_file(a, b, b), FileMerge::Keep);
        assert_eq!(merge_persona_file(a, b, c), FileMerge::Conflict);
        assert_eq!(merge_persona_file(None, a, b), FileMerge::Conflict);
        assert_eq!(merge_persona_file(None, None, b), FileMerge::TakeUpstream);
    }
}
