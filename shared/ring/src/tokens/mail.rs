//! The mail token: whom an agent may write letters to.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;
use l3m_core::grant::{MailCover, Within, default_mail};
use l3m_core::mail::Address;
use l3m_core::names::AgentName;

use super::{MailInput, TokenError, narrow_set};

/// The right to mail the recipients the grant's mail axis covers: always the sender's own
/// subtree and each of its ancestors (DESIGN §4's default), plus what the grant lists — another
/// agent or subtree, a human, a service, an office. Siblings cannot mail each other unless a
/// grant says so.
#[derive(Debug)]
pub struct MailToken {
    /// The sending agent; the host stamps it as the letter's sender.
    agent: AgentName,
    /// Every cover held, the default reach included.
    covers: BTreeSet<MailCover>,
}

impl MailToken {
    /// Made only by [`super::mint`] and [`MailToken::narrow`]. The default reach is always added.
    pub(crate) fn new(agent: AgentName, covers: impl IntoIterator<Item = MailCover>) -> Self {
        let mut all = default_mail(&agent);
        all.extend(covers);
        Self { agent, covers: all }
    }

    pub(super) fn from_input(input: &MailInput) -> Self {
        Self::new(input.agent.clone(), input.covers.iter().cloned())
    }

    /// The sending agent.
    pub fn agent(&self) -> &AgentName {
        &self.agent
    }

    /// Every cover held, the default reach included.
    pub fn covers(&self) -> &BTreeSet<MailCover> {
        &self.covers
    }

    /// Whether a letter to `address` is covered: its starred reader by a cover on this hub, or,
    /// for an address at another office, that office by an `office:` cover.
    pub fn covers_address(&self, address: &Address) -> bool {
        match address.recipient() {
            (_, Some(office)) => self.covers.iter().any(|c| c.covers_office(office)),
            (entity, None) => self.covers.iter().any(|c| c.covers(&entity)),
        }
    }

    /// A token keeping the default reach plus only `covers`, each within a held cover.
    pub fn narrow(&self, covers: &[MailCover]) -> Result<MailToken, TokenError> {
        let asked = covers.iter().cloned().collect();
        narrow_set(Axis::Mail, &self.covers, asked, |h, a| a.within(h))
            .map(|covers| Self::new(self.agent.clone(), covers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn to(s: &str) -> Address {
        Address::parse(s).unwrap()
    }

    fn cover(s: &str) -> MailCover {
        MailCover::parse(s).unwrap()
    }

    #[test]
    fn covers_subtree_ancestors_and_listed_only() {
        let t = MailToken::new(
            name("alice/main"),
            [
                cover("agent:alice/other"),
                cover("human:bob"),
                cover("office:far"),
            ],
        );
        for ok in [
            "alice/main",
            "alice/main/worker",
            "alice",
            "alice/other",
            "human:bob*",
        ] {
            assert!(t.covers_address(&to(ok)), "{ok}");
        }
        assert!(t.covers_address(&to("office:far agent:zed*")));
        for no in [
            "alice/third",
            "bob",
            "human:carol*",
            "office:near agent:zed*",
            "office:near agent:alice*",
        ] {
            assert!(!t.covers_address(&to(no)), "{no}");
        }
    }

    #[test]
    fn narrowing_drops_listed_covers_and_never_adds() {
        let t = MailToken::new(name("alice/main"), [cover("subtree:alice/other")]);
        let n = t.narrow(&[cover("agent:alice/other/x")]).unwrap();
        assert!(n.covers_address(&to("alice/other/x")) && !n.covers_address(&to("alice/other")));
        assert!(n.covers_address(&to("alice")));
        assert!(matches!(
            n.narrow(&[cover("agent:alice/other")]),
            Err(TokenError::Widening {
                axis: Axis::Mail,
                ..
            })
        ));
    }
}
