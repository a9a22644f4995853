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
    airmail_for("far")
}

/// Spawning, and staging airmail for `office`.
fn airmail_for(office: &str) -> Grant {
    let office = OfficeName::parse(office).unwrap();
    Grant {
        airmail: [office.clone()].into(),
        mail: [MailCover::Office(office)].into(),
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
    let out = l3m_git::repo_command(&f.git_dir())
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
                in_reply_to: None,
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

/// A letter as office `north` staged it for this hub's `to`, and its stored line.
fn carried(id: &str, to: &str) -> String {
    let sender = l3m_core::mail::Sender::Agent {
        agent: agent("lead"),
        worktree: None,
        human: None,
    };
    let draft = l3m_core::mail::Draft::new(l3m_core::mail::Address::parse(to).unwrap(), "hi");
    let letter = l3m_core::mail::stamp(
        draft,
        &sender,
        l3m_core::mail::LetterId::parse(id).unwrap(),
        9,
    )
    .unwrap();
    InboxEntry::Letter(Box::new(letter)).to_line().unwrap()
}

/// A hub with bob, and lead who may airmail office `north`, that office pinned in its
/// settings, and a postman session.
async fn receiving() -> (Fixture, l3m_wire::client::HubClient) {
    use l3m_core::duty::Duty;
    use l3m_core::names::ServiceName;
    let f = Fixture::start_granted("", airmail_for("north")).await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "lead", airmail_for("north")).await.unwrap();
    let settings = f
        .client(Duty::Human {
            human: test_support::human(),
        })
        .await;
    let view = settings.read_settings().await.unwrap();
    let pinned = view.text.replace(
        "offices = []",
        &format!(
            "offices = [{{ name = \"north\", addr = \"127.0.0.1:4433\", cert-sha256 = \"{}\" }}]",
            "ab".repeat(32)
        ),
    );
    settings.update_settings(&pinned, &view.tip).await.unwrap();
    let postman = f
        .client(Duty::Postman {
            service: ServiceName::parse("postman").unwrap(),
        })
        .await;
    (f, postman)
}

/// The letters in `agent`'s inbox, read through hubd as the human.
async fn inbox_letters(f: &Fixture, agent_name: &str) -> Vec<l3m_core::mail::Letter> {
    let human = f
        .client(l3m_core::duty::Duty::Human {
            human: test_support::human(),
        })
        .await;
    let read = human.read_inbox(&agent(agent_name), 0).await.unwrap();
    read.entries
        .into_iter()
        .filter_map(|e| match e {
            InboxEntry::Letter(letter) => Some(*letter),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_letters_are_mirrored_then_relayed_once_with_their_true_origin() {
    let (f, postman) = receiving().await;
    let letters = vec![
        carried("n-1", "office:south agent:bob*"),
        carried("n-2", "office:south agent:nobody*"),
    ];
    let first = postman
        .deliver_airmail("north", letters.clone())
        .await
        .unwrap();
    assert_eq!(first.delivered, ["n-1"]);
    assert_eq!(first.bounced.len(), 1);
    assert!(
        first.bounced[0].reason.contains("no agent nobody"),
        "{:?}",
        first.bounced
    );
    let inbox = inbox_letters(&f, "bob").await;
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].from.render(), "office:north agent:lead*");
    assert_eq!(inbox[0].to.office(), None);

    // A retry (a crash or partition after delivery) writes nothing twice.
    let again = postman.deliver_airmail("north", letters).await.unwrap();
    assert_eq!(again.already, ["n-1"]);
    assert!(again.delivered.is_empty());
    assert_eq!(inbox_letters(&f, "bob").await.len(), 1);
    let appends = git_bare(
        &f.git_dir(),
        &["rev-list", "--count", "refs/l3m/mirror/north/inbound"],
    );
    assert_eq!(appends.trim(), "1", "mirrored once");
    // The same letter twice in one batch is delivered once.
    let twice = vec![carried("n-9", "office:south agent:bob*"); 2];
    let both = postman.deliver_airmail("north", twice).await.unwrap();
    assert_eq!(both.delivered, ["n-9"]);
    assert_eq!(both.already, ["n-9"]);
    assert_eq!(inbox_letters(&f, "bob").await.len(), 2);
    // A batch is one commit on the mirror and one on each inbox, not one per letter.
    let commits = |refname: &str| {
        git_bare(&f.git_dir(), &["rev-list", "--count", refname])
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let (mirror, inbox) = ("refs/l3m/mirror/north/inbound", "refs/l3m/a/bob/_/inbox");
    let before = (commits(mirror), commits(inbox));
    let batch = ["n-10", "n-11", "n-12"].map(|id| carried(id, "office:south agent:bob*"));
    let three = postman
        .deliver_airmail("north", batch.to_vec())
        .await
        .unwrap();
    assert_eq!(three.delivered.len(), 3);
    assert_eq!(
        (commits(mirror), commits(inbox)),
        (before.0 + 1, before.1 + 1)
    );
    assert_eq!(inbox_letters(&f, "bob").await.len(), 5);
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_unpinned_malformed_or_unauthorised_deliveries_are_refused() {
    let (f, postman) = receiving().await;
    // A letter whose sender already names an office was not stamped by its origin hub.
    let entry = InboxEntry::from_line(&carried("n-3", "office:south agent:bob*"), 1).unwrap();
    let InboxEntry::Letter(mut forged) = entry else {
        unreachable!()
    };
    forged.from = l3m_core::mail::Address::parse("office:east agent:lead*").unwrap();
    let forged = InboxEntry::Letter(forged).to_line().unwrap();
    let outcome = postman
        .deliver_airmail("north", vec![forged])
        .await
        .unwrap();
    assert!(outcome.bounced[0].reason.contains("forged"), "{outcome:?}");
    assert!(inbox_letters(&f, "bob").await.is_empty());

    let before = f.refs();
    let unpinned = postman
        .deliver_airmail("east", vec![carried("e-1", "office:south agent:bob*")])
        .await
        .unwrap_err();
    assert!(unpinned.to_string().contains("not pinned"), "{unpinned}");
    let malformed = postman
        .deliver_airmail(
            "north",
            vec![carried("n-4", "office:south agent:bob*"), "{}".into()],
        )
        .await
        .unwrap_err();
    assert!(
        malformed.to_string().contains("airmail line 1"),
        "{malformed}"
    );
    let human = f
        .client(l3m_core::duty::Duty::Human {
            human: test_support::human(),
        })
        .await;
    let posing = human
        .deliver_airmail("north", vec![carried("n-5", "office:south agent:bob*")])
        .await
        .unwrap_err();
    assert!(posing.to_string().contains("only the postman"), "{posing}");
    assert_eq!(f.refs(), before, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_office_cursor_moves_forward_by_compare_and_swap_for_the_postman_only() {
    let (f, postman) = receiving().await;
    let at = |n: u64| [("bob".to_owned(), n)].into_iter().collect();
    let empty = postman.read_cursor("north").await.unwrap();
    assert_eq!((empty.positions.len(), empty.tip), (0, None));
    let moved = postman.move_cursor("north", at(3), None).await.unwrap();
    let read = postman.read_cursor("north").await.unwrap();
    assert_eq!(read.positions, at(3));
    assert_eq!(read.tip.as_deref(), Some(moved.tip.as_str()));
    // Never backwards, never from a stale tip.
    let back = postman
        .move_cursor("north", at(1), Some(&moved.tip))
        .await
        .unwrap_err();
    assert!(back.to_string().contains("only moves forward"), "{back}");
    let stale = postman.move_cursor("north", at(5), None).await.unwrap_err();
    assert!(stale.is_conflict(), "{stale}");
    let human = f
        .client(l3m_core::duty::Duty::Human {
            human: test_support::human(),
        })
        .await;
    // A human reads how far the postman got, and moves nothing.
    assert_eq!(human.read_cursor("north").await.unwrap().positions, at(3));
    let posing = human
        .move_cursor("north", at(9), Some(&moved.tip))
        .await
        .unwrap_err();
    assert!(posing.to_string().contains("only the postman"), "{posing}");
    let bob = f
        .client(l3m_core::duty::Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    let agent_reads = bob.read_cursor("north").await.unwrap_err();
    assert!(
        agent_reads.to_string().contains("only the postman"),
        "{agent_reads}"
    );
    assert_eq!(postman.read_cursor("north").await.unwrap().positions, at(3));
}

/// Every entry on `agent`'s inbox (`outbox == false`) or outbox, read as the human.
async fn entries(f: &Fixture, agent_name: &str, outbox: bool) -> Vec<InboxEntry> {
    let human = f
        .client(l3m_core::duty::Duty::Human {
            human: test_support::human(),
        })
        .await;
    let who = agent(agent_name);
    let read = if outbox {
        human.read_outbox(&who, 0).await.unwrap()
    } else {
        human.read_inbox(&who, 0).await.unwrap()
    };
    read.entries
}

fn receipts(entries: &[InboxEntry]) -> Vec<l3m_core::mail::Receipt> {
    entries
        .iter()
        .filter_map(|e| match e {
            InboxEntry::Receipt(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_airmail_stages_a_receipt_for_its_office_and_reading_local_mail_does_not() {
    let (f, postman) = receiving().await;
    postman
        .deliver_airmail("north", vec![carried("n-1", "office:south agent:bob*")])
        .await
        .unwrap();
    let human = f.human().await;
    let local = f
        .call::<_, LetterSent>(
            Op::SendLetter,
            &SendLetter {
                capability: human,
                to: "bob".into(),
                subject: None,
                body: "local".into(),
                in_reply_to: None,
            },
        )
        .await
        .unwrap();
    let bob = f
        .client(l3m_core::duty::Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    bob.mark_read("n-1").await.unwrap();
    bob.mark_read(&local.letter).await.unwrap();
    let staged = receipts(&entries(&f, "bob", true).await);
    assert_eq!(
        staged.len(),
        1,
        "one receipt, for the airmail only: {staged:?}"
    );
    assert_eq!(staged[0].letter.as_str(), "n-1");
    assert_eq!(staged[0].office.as_str(), "north");
    assert_eq!(staged[0].sender.as_str(), "lead");
    assert_eq!(staged[0].by.to_string(), "bob");
    f.fsck();
}

/// The line of a receipt office `north` sends back for `letter`, sent by `sender` here.
fn receipt_line(letter: &str, sender: &str) -> String {
    InboxEntry::Receipt(l3m_core::mail::Receipt {
        letter: l3m_core::mail::LetterId::parse(letter).unwrap(),
        // What the reading hub calls this one; the receiving hub writes the carrier instead.
        office: OfficeName::parse("whatever").unwrap(),
        sender: agent(sender),
        by: l3m_core::names::Entity::parse("zed").unwrap(),
        at_ms: 42,
    })
    .to_line()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_reaches_the_sender_once_and_only_for_a_letter_it_sent_that_office() {
    let (f, postman) = receiving().await;
    let lead = f.sequencer("lead").await;
    let staged = stage(&f, &lead, "office:north agent:zed*").await.unwrap();
    let first = postman
        .deliver_airmail("north", vec![receipt_line(&staged.letter, "lead")])
        .await
        .unwrap();
    assert_eq!(first.receipts, 1, "{first:?}");
    let again = postman
        .deliver_airmail("north", vec![receipt_line(&staged.letter, "lead")])
        .await
        .unwrap();
    assert_eq!(again.receipts, 0, "a retry keeps nothing twice");
    let kept = receipts(&entries(&f, "lead", false).await);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].office.as_str(), "north", "named by its carrier");
    assert_eq!(kept[0].by.to_string(), "zed");

    // Invented receipts: a letter never sent, a sender who did not send it, another office.
    let before = f.refs();
    let invented = postman
        .deliver_airmail(
            "north",
            vec![
                receipt_line("never-sent", "lead"),
                receipt_line(&staged.letter, "bob"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(invented.receipts, 0);
    assert_eq!(invented.refused.len(), 2, "{invented:?}");
    assert!(invented.refused[0].reason.contains("staged no letter"));
    assert_eq!(f.refs(), before, "nothing written for a refused receipt");
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounce_returns_to_its_sender_once_and_only_for_a_letter_it_sent() {
    use l3m_wire::hubd::mail::Returned;
    let (f, postman) = receiving().await;
    let lead = f.sequencer("lead").await;
    let staged = stage(&f, &lead, "office:north agent:zed*").await.unwrap();
    let bounce = |letter: &str, agent: &str| Returned {
        agent: agent.into(),
        letter: letter.into(),
        reason: "no agent zed lives on this hub".into(),
    };
    let first = postman
        .return_bounces("north", vec![bounce(&staged.letter, "lead")])
        .await
        .unwrap();
    assert_eq!(first.written, vec![staged.letter.clone()]);
    let again = postman
        .return_bounces("north", vec![bounce(&staged.letter, "lead")])
        .await
        .unwrap();
    assert_eq!(again.already, vec![staged.letter.clone()]);
    let inbox = inbox_letters(&f, "lead").await;
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].id.to_string(), format!("bounce:{}", staged.letter));
    assert_eq!(inbox[0].from.render(), "office:north agent:zed*");
    assert!(inbox[0].body.contains("no agent zed"), "{}", inbox[0].body);

    let before = f.refs();
    for (letter, agent, office) in [
        ("never-sent", "lead", "north"),
        (staged.letter.as_str(), "bob", "north"),
        (staged.letter.as_str(), "lead", "east"),
    ] {
        let refused = postman
            .return_bounces(office, vec![bounce(letter, agent)])
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("staged no letter"),
            "{refused}"
        );
    }
    let human = f
        .client(l3m_core::duty::Duty::Human {
            human: test_support::human(),
        })
        .await;
    let posing = human
        .return_bounces("north", vec![bounce(&staged.letter, "lead")])
        .await
        .unwrap_err();
    assert!(posing.to_string().contains("only the postman"), "{posing}");
    assert_eq!(f.refs(), before, "nothing written");
    f.fsck();
}
