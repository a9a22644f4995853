//! The mail token: whose inboxes an agent may append letters to.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;
use l3m_core::names::AgentName;

use super::{MailInput, TokenError, narrow_set};

/// The right to mail the sender's own subtree, each of its ancestors, and the further agents its
/// grant lists (DESIGN §4: siblings cannot mail each other unless a grant says so).
#[derive(Debug)]
pub struct MailToken {
    /// The sending agent; the host stamps it as the letter's sender.
    agent: AgentName,
    /// Agents beyond the default reach whose inboxes the grant opens.
    also: BTreeSet<AgentName>,
}

impl MailToken {
    /// Made only by [`super::mint`] and [`MailToken::narrow`].
    pub(crate) fn new(agent: AgentName, also: BTreeSet<AgentName>) -> Self {
        Self { agent, also }
    }

    pub(super) fn from_input(input: &MailInput) -> Self {
        Self::new(input.agent.clone(), input.also.iter().cloned().collect())
    }

    /// The sending agent.
    pub fn agent(&self) -> &AgentName {
        &self.agent
    }

    /// The agents listed beyond the default reach.
    pub fn also(&self) -> &BTreeSet<AgentName> {
        &self.also
    }

    /// Whether a letter to `recipient`'s inbox is covered.
    pub fn covers(&self, recipient: &AgentName) -> bool {
        recipient.is_within(&self.agent)
            || self.agent.is_descendant_of(recipient)
            || self.also.contains(recipient)
    }

    /// A token keeping the default reach but listing only `also`, each already listed.
    pub fn narrow(&self, also: &[AgentName]) -> Result<MailToken, TokenError> {
        let asked = also.iter().cloned().collect();
        narrow_set(Axis::Mail, &self.also, asked, |h, a| h == a)
            .map(|also| Self::new(self.agent.clone(), also))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn covers_subtree_ancestors_and_listed_only() {
        let t = MailToken::new(name("alice/main"), [name("alice/other")].into());
        assert!(t.covers(&name("alice/main")));
        assert!(t.covers(&name("alice/main/worker")));
        assert!(t.covers(&name("alice")));
        assert!(t.covers(&name("alice/other")));
        assert!(!t.covers(&name("alice/third")));
        assert!(!t.covers(&name("bob")));
    }

    #[test]
    fn narrowing_drops_listed_agents_and_never_adds() {
        let t = MailToken::new(name("alice/main"), [name("alice/other")].into());
        let n = t.narrow(&[]).unwrap();
        assert!(!n.covers(&name("alice/other")) && n.covers(&name("alice")));
        assert!(matches!(
            n.narrow(&[name("alice/other")]),
            Err(TokenError::Widening {
                axis: Axis::Mail,
                ..
            })
        ));
    }
}
