//! An agent's branches and its ACR: forking the work and persona branches at spawn, the
//! worktrees made at spawn and removed at retire.

use l3m_core::names::{AgentName, Entity};
use l3m_core::refs::{self, AgentRef};

use crate::service::error::ServiceError;
use crate::store::Checkout;

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
    /// commit with an empty tree, so that its `agent/` worktree always has something to check
    /// out and the agent can write its own persona files there.
    pub(in crate::service) fn fork_persona(
        &self,
        child: &AgentName,
        worn: Option<gix::ObjectId>,
    ) -> Result<gix::ObjectId, ServiceError> {
        let refname = refs::agent_ref(child, AgentRef::Persona);
        let current = self.hub.tip(&refname)?;
        Ok(match worn {
            Some(commit) => {
                self.hub.set_ref(&refname, current, commit)?;
                commit
            }
            None => self.hub.commit_files(
                &refname,
                current,
                &[],
                &format!("persona of {child} begins, wearing none"),
            )?,
        })
    }

    /// The ACR: `workspace/`, a worktree on the work branch; `agent/`, a worktree detached at
    /// the persona branch's tip (git cannot keep a worktree on a ref outside `refs/heads/`, see
    /// [`crate::store::Checkout`]); `.l3m/`, a plain directory for the harness.
    pub(in crate::service) fn make_acr(
        &self,
        agent: &AgentName,
        work_branch: &str,
        persona: gix::ObjectId,
    ) -> Result<(), ServiceError> {
        let root = self.hub.root();
        let harness = root.join(refs::paths::harness_dir(agent));
        std::fs::create_dir_all(&harness).map_err(|source| ServiceError::Io {
            action: "creating",
            path: harness.display().to_string(),
            source,
        })?;
        self.hub.add_worktree(
            &root.join(refs::paths::workspace(agent)),
            Checkout::Branch(work_branch),
        )?;
        self.hub.add_worktree(
            &root.join(refs::paths::persona_worktree(agent)),
            Checkout::Detached(persona),
        )?;
        Ok(())
    }

    /// Removes an ACR: its worktrees, then the rest of the directory.
    pub(in crate::service) fn remove_acr(&self, agent: &AgentName) -> Result<(), ServiceError> {
        let root = self.hub.root();
        for dir in [
            refs::paths::persona_worktree(agent),
            refs::paths::workspace(agent),
        ] {
            self.hub.remove_worktree(&root.join(dir))?;
        }
        let acr = root.join(refs::paths::acr(agent));
        match std::fs::remove_dir_all(&acr) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ServiceError::Io {
                action: "removing",
                path: acr.display().to_string(),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}
