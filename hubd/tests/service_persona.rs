//! Publishing personas upstream: humans only, and only the three persona files.
#![allow(clippy::unwrap_used)]

mod service_common;

use l3m_core::grant::SpawnRequest;
use l3m_core::names::PersonaName;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::persona::{PersonaPublished, PersonaSource, PublishPersona};
use l3m_wire::hubd::tree::{Spawn, Spawned};
use l3m_wire::reply::ErrorCode;
use service_common::*;

fn git(f: &Fixture, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(f.git_dir())
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
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
    let no_branch = f
        .call::<_, PersonaPublished>(Op::PublishPersona, &from("plain"))
        .await
        .unwrap_err();
    assert_eq!(no_branch.code, ErrorCode::Invalid);
    assert!(
        no_branch.message.contains("plain has no persona branch"),
        "{}",
        no_branch.message
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
