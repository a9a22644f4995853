//! Mail and spawn: letters and children the grant does not cover, tried through the tool path.
//! The ring refuses before the hub outlet is called, so hubd never sees the request.

use l3m_ring::effects::{MailError, SpawnError};
use l3m_tools::{Dispatch, ToolError};
use serde_json::json;

use crate::git_hub::GitHub;
use crate::session::Session;

#[test]
fn mail_boundary_refuses_letters_to_uncovered_addresses_before_the_outlet() {
    let hub = GitHub::new();
    let session = Session::new(&hub, json!({"mail": ["human:bob"]}));
    for to in [
        "bob",                     // another root
        "carol/main",              // someone else's subtree
        "human:carol*",            // an unlisted human
        "office:far agent:alice*", // alice, but at another hub
        "human:bob* office:far",   // bob, but at another hub
    ] {
        match session.table.dispatch(
            "send_letter",
            json!({"to": to, "body": "hi"}),
            &session.effects,
        ) {
            Dispatch::Ran(Err(ToolError::Mail(MailError::NotCovered { address, .. }))) => {
                assert!(
                    address.contains(to.split_whitespace().next().unwrap().trim_end_matches('*')),
                    "{to}: {address}"
                );
            }
            other => panic!("{to}: expected the mail boundary, got {other:?}"),
        }
    }
    assert_eq!(session.outlet.calls(), Vec::<String>::new());
    // What the grant does cover goes through.
    for to in ["alice/helper", "human:bob*"] {
        assert!(matches!(
            session.table.dispatch(
                "send_letter",
                json!({"to": to, "body": "hi"}),
                &session.effects
            ),
            Dispatch::Ran(Ok(_))
        ));
    }
    assert_eq!(session.outlet.calls().len(), 2);
}

#[test]
fn siblings_cannot_mail_each_other_by_default() {
    let hub = GitHub::new();
    let session = Session::new(&hub, json!({}));
    let out = session.table.dispatch(
        "send_letter",
        json!({"to": "alicex", "body": "hi"}),
        &session.effects,
    );
    assert!(
        matches!(
            out,
            Dispatch::Ran(Err(ToolError::Mail(MailError::NotCovered { .. })))
        ),
        "{out:?}"
    );
    assert!(session.outlet.calls().is_empty());
}

#[test]
fn spawn_boundary_makes_spawn_absent_when_the_level_is_off() {
    let hub = GitHub::new();
    let session = Session::new(&hub, json!({"spawn": "off"}));
    assert!(!session.offered().contains(&"spawn_agent".to_owned()));
    let out = session.table.dispatch(
        "spawn_agent",
        json!({"name": "alice/kid", "task": "t", "grant": {}}),
        &session.effects,
    );
    assert!(matches!(out, Dispatch::Absent { .. }), "{out:?}");
    // Even a caller that skips the table finds no spawn effect to be granted.
    assert!(
        session
            .effects
            .for_footprint(&l3m_core::effects::Footprint::of([
                l3m_core::effects::EffectClass::Spawn
            ]))
            .is_err()
    );
    assert!(session.outlet.calls().is_empty());
}

#[test]
fn spawn_boundary_refuses_a_model_spawn_at_level_drive_before_the_outlet() {
    // A model's spawn is persistent: at level drive only a program's call may spawn (driven).
    let hub = GitHub::new();
    let session = Session::new(&hub, json!({"spawn": "drive"}));
    let out = session.table.dispatch(
        "spawn_agent",
        json!({"name": "alice/kid", "task": "t", "grant": {}}),
        &session.effects,
    );
    assert!(
        matches!(
            out,
            Dispatch::Ran(Err(ToolError::Spawn(SpawnError::NeedsPersist { .. })))
        ),
        "{out:?}"
    );
    assert!(session.outlet.calls().is_empty());
    let persist = Session::new(&hub, json!({"spawn": "persist"}));
    let ok = persist.table.dispatch(
        "spawn_agent",
        json!({"name": "alice/kid", "task": "t", "grant": {"files": ["workspace"]}}),
        &persist.effects,
    );
    assert!(matches!(ok, Dispatch::Ran(Ok(_))), "{ok:?}");
    let calls = persist.outlet.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].starts_with("spawn alice/kid driven=false"),
        "{calls:?}"
    );
}
