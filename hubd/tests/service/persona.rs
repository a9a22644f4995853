//! Publishing personas upstream: humans only, and only the three persona files.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_core::grant::SpawnRequest;
use l3m_core::names::PersonaName;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::persona::{PersonaPublished, PersonaSource, PublishPersona};
use l3m_wire::hubd::tree::{Spawn, Spawned};
use l3m_wire::reply::ErrorCode;

/// git on the fixture's `hub.git` with `stdin` fed, its output trimmed.
fn git(f: &Fixture, args: &[&str], stdin: Option<&str>) -> String {
    let dir = f.git_dir().display().to_string();
    let all = [&["--git-dir", dir.as_str()][..], args].concat();
    git_with_input(&f.git_dir(), &all, stdin.unwrap_or(""))
        .trim()
        .to_owned()
}

fn files(n: &str) -> PersonaSource {
    PersonaSource::Files {
        instructions: format!("instructions {n}"),
        personality: format!("personality {n}"),
        memories: format!("memories {n}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_human_publishes_and_only_the_three_files_travel() {
    let f = Fixture::start().await;
    let human = f.human().await;
    let publish = |cap, source| PublishPersona {
        capability: cap,
        persona: "coder".into(),
        source,
    };
    let first: PersonaPublished = f
        .call(Op::PublishPersona, &publish(human.clone(), files("v1")))
        .await
        .unwrap();
    assert_eq!(first.refname, "refs/l3m/personas/coder");
    assert_eq!(first.previous, None);
    assert_eq!(
        git(
            &f,
            &["show", "refs/l3m/personas/coder:instructions.md"],
            None
        ),
        "instructions v1"
    );

    // A wearer forks it, then improves its copy and adds a hook of its own.
    let spawned: Spawned = f
        .call(
            Op::Spawn,
            &Spawn {
                capability: human.clone(),
                request: SpawnRequest {
                    child: agent("bob"),
                    grant: root_grant(),
                    loan: Default::default(),
                    driven: false,
                    persona: Some(PersonaName::parse("coder").unwrap()),
                    fork: None,
                },
            },
        )
        .await
        .unwrap();
    assert_eq!(spawned.child, "bob");
    let blob = |text: &str| git(&f, &["hash-object", "-w", "--stdin"], Some(text));
    let tree_text = [
        ("instructions.md", blob("instructions v2")),
        ("personality.md", blob("personality v2")),
        ("memories.md", blob("memories v2")),
        ("hooks.star", blob("def on_event(e): return 'show'")),
    ]
    .iter()
    .map(|(name, id)| format!("100644 blob {id}\t{name}\n"))
    .collect::<String>();
    let tree = git(&f, &["mktree"], Some(&tree_text));
    let parent = f.tip("refs/l3m/a/bob/_/persona").unwrap();
    let edit = git(
        &f,
        &["commit-tree", &tree, "-p", &parent, "-m", "bob edits"],
        None,
    );
    git(&f, &["update-ref", "refs/l3m/a/bob/_/persona", &edit], None);

    // The wearer's own sequencer may not publish upstream; nothing is written.
    let bob = f.sequencer("bob").await;
    let before = f.refs();
    let refused = f
        .call::<_, PersonaPublished>(
            Op::PublishPersona,
            &publish(
                bob,
                PersonaSource::Agent {
                    agent: "bob".into(),
                },
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(
        refused.message.contains("humans only"),
        "{}",
        refused.message
    );
    assert_eq!(f.refs(), before);

    // The human publishes bob's improvements: the three files, never the hook.
    let second: PersonaPublished = f
        .call(
            Op::PublishPersona,
            &publish(
                human.clone(),
                PersonaSource::Agent {
                    agent: "bob".into(),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(second.previous.as_deref(), Some(first.commit.as_str()));
    let listed = git(
        &f,
        &["ls-tree", "--name-only", "refs/l3m/personas/coder"],
        None,
    );
    assert_eq!(listed, "instructions.md\nmemories.md\npersonality.md");
    assert_eq!(
        git(&f, &["show", "refs/l3m/personas/coder:memories.md"], None),
        "memories v2"
    );
    assert_eq!(
        git(&f, &["rev-parse", "refs/l3m/personas/coder~1"], None),
        first.commit
    );
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_from_an_agent_without_a_persona_or_an_unknown_one_is_refused_by_name() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "plain", root_grant()).await.unwrap();
    let from = |agent: &str| PublishPersona {
        capability: human.clone(),
        persona: "coder".into(),
        source: PersonaSource::Agent {
            agent: agent.into(),
        },
    };
    let before = f.refs();
    let no_files = f
        .call::<_, PersonaPublished>(Op::PublishPersona, &from("plain"))
        .await
        .unwrap_err();
    assert_eq!(no_files.code, ErrorCode::Invalid);
    assert!(
        // Every agent has a persona branch (an empty first commit when it wears none), so
        // what is missing is the files a persona is made of.
        no_files.message.contains("has no instructions.md"),
        "{}",
        no_files.message
    );
    let unknown = f
        .call::<_, PersonaPublished>(Op::PublishPersona, &from("ghost"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
    let bad = f
        .call::<_, PersonaPublished>(
            Op::PublishPersona,
            &PublishPersona {
                capability: human.clone(),
                persona: "Not A Name".into(),
                source: files("x"),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::Invalid);
    assert_eq!(f.refs(), before, "nothing written");
}

/// Commits `files` on top of `refname` with the git CLI, as a wearer's edit.
fn edit_branch(f: &Fixture, refname: &str, files: &[(&str, &str)]) -> String {
    let blob = |text: &str| git(f, &["hash-object", "-w", "--stdin"], Some(text));
    let tree_text = files
        .iter()
        .map(|(name, text)| format!("100644 blob {}\t{name}\n", blob(text)))
        .collect::<String>();
    let tree = git(f, &["mktree"], Some(&tree_text));
    let parent = f.tip(refname).unwrap();
    let edit = git(
        f,
        &["commit-tree", &tree, "-p", &parent, "-m", "edit"],
        None,
    );
    git(f, &["update-ref", refname, &edit], None);
    edit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_merges_upstream_changes_keeps_the_wearers_and_refuses_a_conflict() {
    use l3m_wire::hubd::persona::{PersonaPulled, PullPersona};
    let f = Fixture::start().await;
    let human = f.human().await;
    let publish = |source| PublishPersona {
        capability: human.clone(),
        persona: "coder".into(),
        source,
    };
    let v1: PersonaPublished = f
        .call(Op::PublishPersona, &publish(files("v1")))
        .await
        .unwrap();
    let spawn = Spawn {
        capability: human.clone(),
        request: SpawnRequest {
            child: agent("bob"),
            grant: root_grant(),
            loan: Default::default(),
            driven: false,
            persona: Some(PersonaName::parse("coder").unwrap()),
            fork: None,
        },
    };
    f.call::<_, Spawned>(Op::Spawn, &spawn).await.unwrap();
    let branch = "refs/l3m/a/bob/_/persona";
    let pull = |cap| PullPersona {
        capability: cap,
        agent: "bob".into(),
    };

    // Nothing new upstream: nothing written.
    let same: PersonaPulled = f.call(Op::PullPersona, &pull(human.clone())).await.unwrap();
    assert_eq!(
        (same.commit.as_str(), same.updated.len()),
        (v1.commit.as_str(), 0)
    );

    // The wearer edits its memories and adds a hook; upstream changes the instructions.
    edit_branch(
        &f,
        branch,
        &[
            ("instructions.md", "instructions v1"),
            ("personality.md", "personality v1"),
            ("memories.md", "bob remembers"),
            ("hooks.star", "def on_event(e): return 'show'"),
        ],
    );
    let upstream_v2 = PersonaSource::Files {
        instructions: "instructions v2".into(),
        personality: "personality v1".into(),
        memories: "memories v1".into(),
    };
    let v2: PersonaPublished = f
        .call(Op::PublishPersona, &publish(upstream_v2))
        .await
        .unwrap();
    let bob = f.sequencer("bob").await;
    let merged: PersonaPulled = f.call(Op::PullPersona, &pull(bob)).await.unwrap();
    assert_eq!(merged.updated, ["instructions.md"]);
    assert_eq!(merged.upstream, v2.commit);
    let show = |path: &str| git(&f, &["show", &format!("{branch}:{path}")], None);
    assert_eq!(show("instructions.md"), "instructions v2");
    assert_eq!(show("memories.md"), "bob remembers");
    assert_eq!(show("hooks.star"), "def on_event(e): return 'show'");
    assert_eq!(
        git(&f, &["rev-parse", &format!("{branch}^2")], None),
        v2.commit
    );

    // Upstream now changes the memories too: both sides changed them, so the pull refuses.
    let upstream_v3 = PersonaSource::Files {
        instructions: "instructions v2".into(),
        personality: "personality v1".into(),
        memories: "memories v3".into(),
    };
    f.call::<_, PersonaPublished>(Op::PublishPersona, &publish(upstream_v3))
        .await
        .unwrap();
    let before = f.refs();
    let conflict = f
        .call::<_, PersonaPulled>(Op::PullPersona, &pull(human.clone()))
        .await
        .unwrap_err();
    assert_eq!(conflict.code, ErrorCode::Conflict);
    assert!(
        conflict.message.contains("memories.md"),
        "{}",
        conflict.message
    );
    assert_eq!(f.refs(), before, "nothing written");

    // Another agent may not pull into bob's branch; an agent without a persona has none.
    f.spawn(&human, "plain", root_grant()).await.unwrap();
    let plain = f.sequencer("plain").await;
    let refused = f
        .call::<_, PersonaPulled>(Op::PullPersona, &pull(plain))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    let none = f
        .call::<_, PersonaPulled>(
            Op::PullPersona,
            &PullPersona {
                capability: human.clone(),
                agent: "plain".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(none.code, ErrorCode::Invalid);
    assert!(
        none.message.contains("wears no persona"),
        "{}",
        none.message
    );
    f.fsck();
}
