//! The tool table: a tool whose footprint the grant does not cover, invoked by name anyway.

use l3m_tools::Dispatch;
use serde_json::json;

use crate::git_hub::GitHub;
use crate::session::{GitWorld, Session};

#[test]
fn tool_table_boundary_answers_uncovered_tools_as_absent_and_changes_nothing() {
    let hub = GitHub::new();
    // Git read only: no write, no push, no net, no spawn, no wild.
    let session = Session::new(
        &hub,
        json!({"files": ["workspace"], "git-read": ["refs/heads/l3m/alice/"]}),
    );
    let offered = session.offered();
    assert!(offered.contains(&"git_status".to_owned()), "{offered:?}");
    std::fs::write(hub.ws.join("README.md"), "# changed\n").unwrap();
    let before = GitWorld::of(&hub);
    let calls = [
        ("git_commit", json!({"message": "sneak"})),
        (
            "git_push",
            json!({"remote": "origin", "branch": "l3m/alice/_/work"}),
        ),
        ("fetch_url", json!({"url": "http://127.0.0.1:1/"})),
        (
            "spawn_agent",
            json!({"name": "alice/kid", "task": "t", "grant": {}}),
        ),
        (
            "shell",
            json!({"program": "sh", "args": ["-c", "echo x > README.md"]}),
        ),
        ("no_such_tool", json!({})),
    ];
    for (name, input) in calls {
        assert!(!offered.contains(&name.to_owned()), "{name} offered");
        let out = session.table.dispatch(name, input, &session.effects);
        assert!(
            matches!(&out, Dispatch::Absent { name: n } if n == name),
            "{name}: {out:?}"
        );
    }
    assert_eq!(GitWorld::of(&hub), before);
    assert!(session.outlet.calls().is_empty());
}

#[test]
fn effects_boundary_refuses_a_class_the_grant_lacks_even_to_a_caller_skipping_the_table() {
    use l3m_core::axis::Axis;
    use l3m_core::effects::{EffectClass, Footprint};
    use l3m_ring::effects::EffectsError;
    let hub = GitHub::new();
    let session = Session::new(
        &hub,
        json!({"files": ["workspace"], "git-read": ["refs/heads/l3m/alice/"]}),
    );
    // A git token exists (for reads), but it confers neither git-write nor git-push.
    for (class, axis) in [
        (EffectClass::GitWrite, Axis::GitWrite),
        (EffectClass::GitPush, Axis::GitPush),
        (EffectClass::Net, Axis::Net),
        (EffectClass::Shell, Axis::Wild),
        (EffectClass::Spawn, Axis::Spawn),
    ] {
        let err = session
            .effects
            .for_footprint(&Footprint::of([EffectClass::GitRead, class.clone()]))
            .unwrap_err();
        assert_eq!(err, EffectsError::MissingAxis { class, axis });
    }
}
