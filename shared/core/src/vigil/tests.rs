//! The vigil gates and their laws: a pinned vigil outlives its agent's cancel, a vigil fires at
//! most once, and the armed set stays bounded.

use proptest::prelude::*;

use super::*;
use crate::names::HumanName;

fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

fn seq(s: &str) -> Duty {
    Duty::Sequencer { agent: agent(s) }
}

fn human() -> Duty {
    Duty::Human {
        human: HumanName::parse("ada").unwrap(),
    }
}

const NOW: u64 = 1_000_000;

fn deadline(at: u64) -> Watch {
    Watch::Deadline { at_ms: NOW + at }
}

/// Arms `watch` on `on` as `duty`, appending the line; panics if refused.
fn arm(lines: &mut Vec<VigilLine>, duty: &Duty, on: &str, watch: Watch) -> String {
    let line = admit_arm(duty, &agent(on), lines, watch, NOW + 10_000, NOW).unwrap();
    let VigilLine::Armed { vigil } = &line else {
        panic!("{line:?}")
    };
    let id = vigil.id.clone();
    lines.push(line);
    id
}

#[test]
fn a_pinned_vigil_survives_the_childs_attempt_to_cancel_it() {
    let mut lines = Vec::new();
    let id = arm(&mut lines, &seq("p"), "p/c", deadline(5));
    let err = admit_cancel(&seq("p/c"), &agent("p/c"), &lines, &id).unwrap_err();
    assert!(matches!(&err, VigilError::Pinned { .. }), "{err}");
    assert!(err.to_string().contains("pinned by p"), "{err}");
    assert_eq!(armed(&lines).len(), 1);
    // Its pinner and a human may.
    admit_cancel(&seq("p"), &agent("p/c"), &lines, &id).unwrap();
    admit_cancel(&human(), &agent("p/c"), &lines, &id).unwrap();
}

#[test]
fn an_agents_own_vigil_is_not_pinned_and_only_it_or_a_human_cancels_it() {
    let mut lines = Vec::new();
    let id = arm(&mut lines, &seq("p/c"), "p/c", deadline(5));
    assert!(!armed(&lines)[0].pinned);
    admit_cancel(&seq("p/c"), &agent("p/c"), &lines, &id).unwrap();
    let parent = admit_cancel(&seq("p"), &agent("p/c"), &lines, &id).unwrap_err();
    assert!(matches!(parent, VigilError::NotAllowed { .. }), "{parent}");
}

#[test]
fn strangers_siblings_and_children_may_not_arm() {
    for duty in [seq("q"), seq("p/d"), seq("p/c/x")] {
        let err = admit_arm(&duty, &agent("p/c"), &[], deadline(5), NOW + 10, NOW).unwrap_err();
        assert!(
            matches!(err, VigilError::NotAllowed { .. }),
            "{duty}: {err}"
        );
    }
}

#[test]
fn a_watch_outside_the_agents_subtree_or_past_its_bound_is_refused() {
    let try_arm =
        |watch: Watch, until: u64| admit_arm(&seq("p"), &agent("p"), &[], watch, until, NOW);
    let outside = Watch::RefMoved {
        agent: agent("q"),
        which: AgentRef::Log,
        from: None,
    };
    assert!(matches!(
        try_arm(outside, NOW + 10),
        Err(VigilError::BadWatch { .. })
    ));
    let itself = Watch::RefMoved {
        agent: agent("p"),
        which: AgentRef::Vigils,
        from: None,
    };
    assert!(matches!(
        try_arm(itself, NOW + 10),
        Err(VigilError::BadWatch { .. })
    ));
    let not_a_child = Watch::ChildDone { child: agent("p") };
    assert!(matches!(
        try_arm(not_a_child, NOW + 10),
        Err(VigilError::BadWatch { .. })
    ));
    assert!(matches!(
        try_arm(deadline(20), NOW + 10),
        Err(VigilError::BadWatch { .. })
    ));
    assert!(matches!(
        try_arm(deadline(0), NOW + 10),
        Err(VigilError::BadWatch { .. })
    ));
    assert!(matches!(
        try_arm(deadline(5), NOW),
        Err(VigilError::BadBound { .. })
    ));
    let far = NOW + MAX_SPAN_MS + 1;
    assert!(matches!(
        try_arm(deadline(5), far),
        Err(VigilError::BadBound { .. })
    ));
}

#[test]
fn each_watch_fires_on_its_own_fact_and_every_vigil_lapses_at_its_bound() {
    let vigil = |watch| Vigil {
        id: "v1".into(),
        watch,
        armed_by: Entity::Agent(agent("p")),
        pinned: false,
        until_ms: NOW + 100,
    };
    let moved = vigil(Watch::RefMoved {
        agent: agent("p"),
        which: AgentRef::Log,
        from: Some("a".into()),
    });
    assert_eq!(fires(&moved, &Observed::Tip(Some("a".into())), NOW), None);
    assert_eq!(
        fires(&moved, &Observed::Tip(Some("b".into())), NOW),
        Some(Fact::Moved {
            tip: Some("b".into())
        })
    );
    assert_eq!(
        fires(&moved, &Observed::Tip(None), NOW),
        Some(Fact::Moved { tip: None })
    );
    let read = vigil(Watch::LetterRead {
        letter: "L1".into(),
        reader: agent("q"),
    });
    assert_eq!(fires(&read, &Observed::Read(false), NOW), None);
    assert_eq!(fires(&read, &Observed::Read(true), NOW), Some(Fact::Read));
    let done = vigil(Watch::ChildDone {
        child: agent("p/c"),
    });
    assert_eq!(
        fires(&done, &Observed::Retired(true), NOW),
        Some(Fact::Done)
    );
    let at = vigil(Watch::Deadline { at_ms: NOW + 50 });
    assert_eq!(fires(&at, &Observed::Clock, NOW + 49), None);
    assert_eq!(fires(&at, &Observed::Clock, NOW + 50), Some(Fact::Reached));
    assert_eq!(
        fires(&done, &Observed::Retired(false), NOW + 100),
        Some(Fact::Lapsed)
    );
}

#[test]
fn stored_lines_read_back_and_bad_ones_are_named() {
    let mut lines = Vec::new();
    arm(&mut lines, &seq("p"), "p", deadline(5));
    let text = serde_json::to_string(&lines[0]).unwrap();
    assert_eq!(parse_vigil_line(&text).unwrap(), lines[0]);
    assert!(matches!(
        parse_vigil_line("{}"),
        Err(VigilError::Malformed(_))
    ));
    let long = "x".repeat(MAX_VIGIL_LINE + 1);
    assert!(matches!(
        parse_vigil_line(&long),
        Err(VigilError::Malformed(_))
    ));
}

/// One attempt at the chain, as hubd would make it through the gates.
#[derive(Debug, Clone)]
enum Step {
    Arm { by: usize, at: u64 },
    Cancel { by: usize, n: usize },
    Fire { n: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..4usize, 1..100u64).prop_map(|(by, at)| Step::Arm { by, at }),
        (0..4usize, 0..24usize).prop_map(|(by, n)| Step::Cancel { by, n }),
        (0..24usize).prop_map(|n| Step::Fire { n }),
    ]
}

proptest! {
    /// Whatever mix of arms, cancels and firings reaches the gates: no vigil fires twice or
    /// after it was cancelled, a pinned vigil is never cancelled by its own agent, and never
    /// more than MAX_ARMED are armed.
    #[test]
    fn vigil_fires_once_and_pinned_survives(steps in proptest::collection::vec(step(), 0..80)) {
        let duties = [seq("p/c"), seq("p"), human(), seq("q")];
        let on = agent("p/c");
        let mut lines: Vec<VigilLine> = Vec::new();
        for s in steps {
            let line = match s {
                Step::Arm { by, at } => {
                    admit_arm(&duties[by], &on, &lines, deadline(at), NOW + 100, NOW).ok()
                }
                Step::Cancel { by, n } => {
                    let line = admit_cancel(&duties[by], &on, &lines, &format!("v{n}")).ok();
                    if let Some(VigilLine::Cancelled { id, .. }) = &line {
                        let vigil = armed(&lines).into_iter().find(|v| v.id == *id).unwrap();
                        prop_assert!(!(vigil.pinned && by == 0), "the agent shook off a pinned vigil");
                    }
                    line
                }
                Step::Fire { n } => fire(&lines, &format!("v{n}"), Fact::Reached, NOW),
            };
            lines.extend(line);
            prop_assert!(armed(&lines).len() <= MAX_ARMED);
        }
        for l in &lines {
            if let VigilLine::Armed { vigil } = l {
                let ends = lines.iter().filter(|e| matches!(e,
                    VigilLine::Fired { id, .. } | VigilLine::Cancelled { id, .. } if *id == vigil.id)).count();
                prop_assert!(ends <= 1, "{} ended {ends} times", vigil.id);
            }
        }
        prop_assert_eq!(fired(&lines).len(), lines.iter().filter(|l| matches!(l, VigilLine::Fired { .. })).count());
    }
}
