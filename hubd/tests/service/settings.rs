//! The hub's settings over a real nats-server: humans replace them whole, every session reads
//! them, a bad file is refused naming the problem, and read-grant serves the URLs of exactly
//! the push remotes a grant names.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_core::duty::Duty;
use l3m_core::grant::Grant;
use l3m_wire::client::HubClient;
use l3m_wire::reply::ErrorCode;

const PUSHER: &str = "spawn = \"persist\"\n[git-push]\norigin = [\"refs/heads/l3m/\"]\n";

const WITH_REMOTES: &str = "# ours\nschema = 1\noffices = []\nknown_repos = []\n\
[remotes]\norigin = \"https://git.example/app.git\"\nmirror = \"ssh://git@mirror.example/app.git\"\n";

async fn client(f: &Fixture, duty: Duty) -> HubClient {
    f.client(duty).await
}

fn alice() -> Duty {
    Duty::Human {
        human: l3m_core::names::HumanName::parse("alice").unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn humans_replace_the_settings_and_read_grant_serves_the_granted_push_urls() {
    let grant: Grant = toml::from_str(PUSHER).unwrap();
    let f = Fixture::start_granted("", grant.clone()).await;
    let human = client(&f, alice()).await;
    let first = human.read_settings().await.unwrap();
    assert!(first.text.contains("schema = 1"), "{}", first.text);

    let updated = human
        .update_settings(WITH_REMOTES, &first.tip)
        .await
        .unwrap();
    assert_eq!(updated.previous, first.tip);
    let now = human.read_settings().await.unwrap();
    assert_eq!(now.text, WITH_REMOTES, "kept byte for byte, comments too");
    assert_eq!(now.tip, updated.tip);

    // A second writer from the old tip loses.
    let late = human
        .update_settings(WITH_REMOTES, &first.tip)
        .await
        .unwrap_err();
    assert_eq!(late.code(), Some(ErrorCode::Conflict), "{late}");

    f.spawn(&f.human().await, "bob", grant).await.unwrap();
    let bob = client(
        &f,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    )
    .await;
    let view = bob.read_grant(&agent("bob")).await.unwrap();
    assert_eq!(
        view.push_urls.into_iter().collect::<Vec<_>>(),
        [(
            "origin".to_owned(),
            "https://git.example/app.git".to_owned()
        )],
        "only the remote the grant names"
    );
    f.fsck();
    let log = l3m_git::repo_command(&f.git_dir())
        .args(["log", "--format=%s", "refs/l3m/settings"])
        .output()
        .unwrap();
    let log = String::from_utf8(log.stdout).unwrap();
    assert!(
        log.lines()
            .next()
            .unwrap()
            .contains("settings updated by human:alice"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_humans_write_settings_and_bad_files_are_refused_writing_nothing() {
    let f = Fixture::start().await;
    let human = client(&f, alice()).await;
    f.spawn(&f.human().await, "bob", root_grant())
        .await
        .unwrap();
    let bob = client(
        &f,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    )
    .await;
    let before = bob.read_settings().await.unwrap();

    let refused = bob
        .update_settings(WITH_REMOTES, &before.tip)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::Refused), "{refused}");

    for (text, names) in [
        ("schema = 1\n[remotes\n", "not valid"),
        ("schema = 7\n", "schema"),
        (
            "schema = 1\n[remotes]\norigin = \"ext::sh -c id\"\n",
            "origin",
        ),
        (
            "schema = 1\n[remotes]\norigin = \"--upload-pack=id\"\n",
            "start with `-`",
        ),
    ] {
        let error = human.update_settings(text, &before.tip).await.unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::Invalid), "{error}");
        assert!(error.to_string().contains(names), "{text:?}: {error}");
    }
    assert_eq!(
        bob.read_settings().await.unwrap(),
        before,
        "nothing was written"
    );
}
