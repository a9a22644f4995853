//! Staging airmail through hubd over a real nats-server: only with the airmail axis for the
//! office, stamped with the true sender, on the sender's own outbox.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_core::grant::{Grant, MailCover};
use l3m_core::mail::InboxEntry;
use l3m_core::names::OfficeName;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::mail::{AirmailStaged, LetterSent, SendLetter, StageAirmail};
use l3m_wire::hubd::session::Capability;
use l3m_wire::reply::{ErrorCode, Reply};

const TO: &str = "office:far agent:zed*";

fn far() -> OfficeName {
    OfficeName::parse("far").unwrap()
}

/// Spawning, and staging airmail for office `far`.
fn airmail() -> Grant {
    Grant {
        airmail: [far()].into(),
        mail: [MailCover::Office(far())].into(),
        ..root_grant()
    }
}

async fn stage(f: &Fixture, by: &Capability, to: &str) -> Reply<AirmailStaged> {
    f.call(
        Op::StageAirmail,
        &StageAirmail {
            capability: by.clone(),
            to: to.into(),
            subject: Some("hello".into()),
            body: "from the near hub".into(),
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn airmail_is_stamped_onto_the_senders_own_outbox() {
    let f = Fixture::start_granted("", airmail()).await;
    let human = f.human().await;
    f.spawn(&human, "bob", airmail()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let staged = stage(&f, &bob, TO).await.unwrap();
    assert_eq!(staged.outbox, "refs/l3m/a/bob/_/outbox");
    assert_eq!(staged.seq, 0);
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(f.git_dir())
        .args(["show", "refs/l3m/a/bob/_/outbox:records.jsonl"])
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    let InboxEntry::Letter(letter) = InboxEntry::from_line(line.trim(), 1).unwrap() else {
        panic!("a letter: {line}");
    };
    assert_eq!(letter.id.as_str(), staged.letter);
    assert!(
        letter.from.render().contains("bob"),
        "{}",
        letter.from.render()
    );
    assert_eq!(letter.to.office(), Some(&far()));
    assert_eq!(letter.body, "from the near hub");
    // A second letter continues the outbox.
    assert_eq!(stage(&f, &bob, TO).await.unwrap().seq, 1);
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn airmail_is_refused_without_the_axis_for_the_office_or_to_a_local_address() {
    let f = Fixture::start_granted("", airmail()).await;
    let human = f.human().await;
    // carol may mail office far but holds no airmail axis; dave holds airmail but no mail cover.
    let no_airmail = Grant {
        airmail: Default::default(),
        ..airmail()
    };
    let no_mail = Grant {
        mail: Default::default(),
        ..airmail()
    };
    f.spawn(&human, "bob", airmail()).await.unwrap();
    f.spawn(&human, "carol", no_airmail).await.unwrap();
    f.spawn(&human, "dave", no_mail).await.unwrap();
    let (bob, carol, dave) = (
        f.sequencer("bob").await,
        f.sequencer("carol").await,
        f.sequencer("dave").await,
    );
    let before = f.refs();
    let refused = stage(&f, &carol, TO).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(
        refused.message.contains("`airmail` axis"),
        "{}",
        refused.message
    );
    let refused = stage(&f, &dave, TO).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(
        refused.message.contains("`mail` axis"),
        "{}",
        refused.message
    );
    let refused = stage(&f, &bob, "office:elsewhere agent:zed*")
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(
        refused.message.contains("office elsewhere"),
        "{}",
        refused.message
    );
    let refused = stage(&f, &human, TO).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    let local = stage(&f, &bob, "bob").await.unwrap_err();
    assert_eq!(local.code, ErrorCode::Invalid);
    assert!(local.message.contains("send-letter"), "{}", local.message);
    // And send-letter will not deliver an office's letter locally.
    let misrouted = f
        .call::<_, LetterSent>(
            Op::SendLetter,
            &SendLetter {
                capability: bob,
                to: TO.into(),
                subject: None,
                body: "x".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(misrouted.code, ErrorCode::Invalid);
    assert!(
        misrouted.message.contains("stage-airmail"),
        "{}",
        misrouted.message
    );
    assert_eq!(f.refs(), before, "a refused airmail writes nothing");
}
