//! Laws of the subject scheme: the subtree filters select exactly the subtree, and every ref
//! notification reads back to its ref and agent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns are test code too

use l3m_core::names::AgentName;
use l3m_core::refs::AgentRef;
use l3m_wire::subjects::{Filter, HubId, Subjects};
use proptest::prelude::*;

fn agent() -> impl Strategy<Value = AgentName> {
    // Few letters, so that ancestors, siblings and shared prefixes (`a` vs `ab`) are common.
    proptest::collection::vec("[ab][ab]?", 1..4)
        .prop_map(|segments| AgentName::parse(&segments.join("/")).unwrap())
}

fn kind() -> impl Strategy<Value = AgentRef> {
    proptest::sample::select(AgentRef::ALL.to_vec())
}

fn hub() -> impl Strategy<Value = Subjects> {
    "[a-z][a-z0-9-]{0,8}".prop_map(|h| Subjects::new(HubId::parse(&h).unwrap()))
}

fn matches(filter: &str, subject: &str) -> bool {
    Filter::parse(filter).unwrap().matches(subject)
}

proptest! {
    #[test]
    fn subtree_filters_match_a_notification_iff_its_agent_is_within_and_exactly_once(
        s in hub(), a in agent(), b in agent(), which in kind(),
    ) {
        let subject = s.ref_changed(which, &b);
        let hits = s.ref_changes_within(&a).iter().filter(|f| matches(f, &subject)).count();
        prop_assert_eq!(hits, usize::from(b.is_within(&a)));
    }

    #[test]
    fn own_filter_matches_iff_same_agent(s in hub(), a in agent(), b in agent(), which in kind()) {
        prop_assert_eq!(matches(&s.ref_changes_of(&a), &s.ref_changed(which, &b)), a == b);
    }

    #[test]
    fn kind_filter_matches_iff_same_kind(
        s in hub(), a in agent(), k1 in kind(), k2 in kind(),
    ) {
        prop_assert_eq!(matches(&s.ref_changes_of_kind(k1), &s.ref_changed(k2, &a)), k1 == k2);
    }

    #[test]
    fn ref_notifications_parse_back_to_their_ref_and_agent(s in hub(), a in agent(), which in kind()) {
        prop_assert_eq!(s.parse_ref_changed(&s.ref_changed(which, &a)), Some((which, a)));
    }

    #[test]
    fn no_hub_hears_another_hubs_notifications(
        s in hub(), t in hub(), a in agent(), which in kind(),
    ) {
        prop_assume!(s.hub() != t.hub());
        prop_assert!(!matches(&s.everything(), &t.ref_changed(which, &a)));
        prop_assert_eq!(s.parse_ref_changed(&t.ref_changed(which, &a)), None);
    }
}
