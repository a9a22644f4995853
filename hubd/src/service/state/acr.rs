//! An agent's branches and its ACR: forking the work and persona branches at spawn, and
//! removing the ACR the hub's host kept at retire. The ACR itself is a clone its sequencer
//! makes by fetching these branches through hubd (`sequencer::acr`), on whichever host runs it.

use l3m_core::names::{AgentName, Entity};
use l3m_core::refs::{self, AgentRef};

use crate::service::error::ServiceError;

use super::State;

impl State {
    /// The child's work branch starts at its parent's, or empty for a root.
    pub(in crate::service) fn fork_work_branch(
        &self,
        child: &AgentName,
        parent: &Entity,
    ) -> Result<String, ServiceError> {
        let branch = refs::work_branch(child);
        let current = self.hub.tip(&branch)?;
        let from = match parent {
            Entity::Agent(parent) => self.hub.tip(&refs::work_branch(parent))?.id(),
            _ => None,
        };
        match from {
            Some(commit) => self.hub.set_ref(&branch, current, commit)?,
            None => {
                self.hub
                    .commit_files(&branch, current, &[], &format!("work of {child} begins"))?;
            }
        }
        Ok(branch)
    }

    /// The child's persona branch: a fork of the persona it wears, or, wearing none, a first
    /// commit with an empty tree, so that its `agent/` checkout always has something to check
    /// out and the agent can write its own persona files there.
    pub(in crate::service) fn fork_persona(
        &self,
        child: &AgentName,
        worn: Option<gix::ObjectId>,
    ) -> Result<(), ServiceError> {
        let refname = refs::agent_ref(child, AgentRef::Persona);
        let current = self.hub.tip(&refname)?;
        match worn {
            Some(commit) => self.hub.set_ref(&refname, current, commit)?,
            None => {
                self.hub.commit_files(
                    &refname,
                    current,
                    &[],
                    &format!("persona of {child} begins, wearing none"),
                )?;
            }
        }
        Ok(())
    }

    /// Removes a retired agent's ACR and its repository from the forest on the hub's own host,
    /// if a sequencer there kept them (a sequencer host elsewhere sweeps its own forest).
    pub(in crate::service) fn remove_acr(&self, agent: &AgentName) -> Result<(), ServiceError> {
        let forest = self.hub.root().join(refs::paths::FOREST_DIR);
        for dir in [
            refs::paths::acr_in_forest(agent),
            refs::paths::repository_in_forest(agent),
        ] {
            let dir = forest.join(dir);
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ServiceError::Io {
                        action: "removing",
                        path: dir.display().to_string(),
                        source: e,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}
