//! Mail through hubd: the sender is the session's, the mail axis is checked, marks are own.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_core::mail::{Address, InboxEntry};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::mail::{InboxLines, LetterSent, MarkRead, MarkedRead, ReadInbox, SendLetter};
use l3m_wire::reply::ErrorCode;

fn to(name: &str) -> String {
    Address::for_agent(agent(name)).render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_is_stamped_delivered_read_and_marked_and_the_mail_axis_holds() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let sent: LetterSent = f
        .call(
            Op::SendLetter,
            &SendLetter {
                capability: human.clone(),
                to: to("bob"),
                subject: None,
                body: "hi".into(),
                in_reply_to: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(sent.seq, 0);
    let inbox: InboxLines = f
        .call(
            Op::ReadInbox,
            &ReadInbox {
                capability: bob.clone(),
                agent: "bob".into(),
                from: 0,
            },
        )
        .await
        .unwrap();
    let InboxEntry::Letter(letter) = InboxEntry::from_line(&inbox.entries[0], 1).unwrap() else {
        panic!("a letter first");
    };
    assert_eq!(letter.body, "hi");
    assert!(
        letter.from.render().contains("alice"),
        "{}",
        letter.from.render()
    );
    let marked: MarkedRead = f
        .call(
            Op::MarkRead,
            &MarkRead {
                capability: bob.clone(),
                letter: sent.letter.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(marked.seq, 1);
    // bob's grant has no mail cover for carol; nor may bob read carol's inbox.
    let before = f.refs();
    let refused = f
        .call::<_, LetterSent>(
            Op::SendLetter,
            &SendLetter {
                capability: bob.clone(),
                to: to("carol"),
                subject: None,
                body: "x".into(),
                in_reply_to: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(refused.message.contains("mail"), "{}", refused.message);
    let refused = f
        .call::<_, InboxLines>(
            Op::ReadInbox,
            &ReadInbox {
                capability: bob,
                agent: "carol".into(),
                from: 0,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert_eq!(f.refs(), before);
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agent_may_mail_its_own_subtree_and_its_ancestors_but_not_a_sibling() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    // Neither child's grant names a mail cover: the default reach is all they have.
    for child in ["bob/a", "bob/b"] {
        f.spawn(&bob, child, Default::default()).await.unwrap();
    }
    let send = |from: l3m_wire::hubd::session::Capability, to_agent: &str| SendLetter {
        capability: from,
        to: to(to_agent),
        subject: None,
        body: "hello".into(),
        in_reply_to: None,
    };
    let down: LetterSent = f
        .call(Op::SendLetter, &send(bob.clone(), "bob/a"))
        .await
        .unwrap();
    assert_eq!(down.seq, 0);
    let a = f.sequencer("bob/a").await;
    let up: LetterSent = f
        .call(Op::SendLetter, &send(a.clone(), "bob"))
        .await
        .unwrap();
    assert_eq!(up.seq, 0);
    let sideways = f
        .call::<_, LetterSent>(Op::SendLetter, &send(a, "bob/b"))
        .await
        .unwrap_err();
    assert_eq!(sideways.code, ErrorCode::Refused, "{}", sideways.message);
}

/// A letter whose stored line would pass the limit is refused, naming it; an inbox of many
/// letters near the limit (more than one bus message holds) reads back whole, in pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_of_any_allowed_size_reads_back_in_pages_and_an_oversized_letter_is_refused() {
    use l3m_core::record_format::{MAX_STORED_LINE, PAGE_BYTES};
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let send = |body: String| SendLetter {
        capability: human.clone(),
        to: to("bob"),
        subject: None,
        body,
        in_reply_to: None,
    };
    // One letter of control characters: small as text, six times larger escaped.
    let escaped = "\u{1}".repeat(MAX_STORED_LINE / 6 + 1);
    let err = f
        .call::<_, LetterSent>(Op::SendLetter, &send(escaped))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid, "{}", err.message);
    assert!(
        err.message.contains(&MAX_STORED_LINE.to_string()),
        "{}",
        err.message
    );
    // Eleven letters just under the limit: about 2.8 MB, far past one 1 MiB message.
    let body = "x".repeat(MAX_STORED_LINE - 1024);
    for _ in 0..11 {
        f.call::<_, LetterSent>(Op::SendLetter, &send(body.clone()))
            .await
            .unwrap();
    }
    let bob = f.sequencer("bob").await;
    let page: InboxLines = f
        .call(
            Op::ReadInbox,
            &ReadInbox {
                capability: bob.clone(),
                agent: "bob".into(),
                from: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.len, 11);
    assert!(page.entries.len() < 11, "one page cannot hold them all");
    let bytes: usize = page.entries.iter().map(String::len).sum();
    assert!(bytes <= PAGE_BYTES.max(MAX_STORED_LINE), "{bytes}");
    // The client reads every page.
    let client = f
        .client(l3m_core::duty::Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    let read = client.read_inbox(&agent("bob"), 0).await.unwrap();
    assert_eq!(read.entries.len(), 11);
    assert!(
        read.entries
            .iter()
            .all(|e| matches!(e, InboxEntry::Letter(l) if l.body == body))
    );
}

/// A reply names a letter its sender really received: hubd stamps `in_reply_to` only for a
/// letter in the sender's own inbox, so a hook can trust that a letter marked as a reply is
/// one, and refuses a forged or a human's reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_stamped_only_for_a_letter_the_sender_received() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let send = |capability, to_agent: &str, in_reply_to: Option<String>| SendLetter {
        capability,
        to: to(to_agent),
        subject: None,
        body: "re".into(),
        in_reply_to,
    };
    let first: LetterSent = f
        .call(Op::SendLetter, &send(human.clone(), "bob", None))
        .await
        .unwrap();
    let to_carol: LetterSent = f
        .call(Op::SendLetter, &send(human.clone(), "carol", None))
        .await
        .unwrap();
    // bob answers the letter he got; he writes to himself, the one root his default reach
    // (his subtree and his ancestors) covers here.
    let reply: LetterSent = f
        .call(
            Op::SendLetter,
            &send(bob.clone(), "bob", Some(first.letter.clone())),
        )
        .await
        .unwrap();
    let inbox: InboxLines = f
        .call(
            Op::ReadInbox,
            &ReadInbox {
                capability: bob.clone(),
                agent: "bob".into(),
                from: 0,
            },
        )
        .await
        .unwrap();
    let stamped = inbox
        .entries
        .iter()
        .enumerate()
        .find_map(|(i, l)| match InboxEntry::from_line(l, i + 1).unwrap() {
            InboxEntry::Letter(l) if l.id.as_str() == reply.letter => Some(l),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        stamped.in_reply_to.as_ref().map(|i| i.as_str()),
        Some(first.letter.as_str())
    );
    // A letter bob never received (carol's), a made-up id, or a human's reply is refused.
    for (capability, answered) in [
        (bob.clone(), to_carol.letter.clone()),
        (bob.clone(), "ffffffffffffffff".to_owned()),
        (human.clone(), first.letter.clone()),
    ] {
        let err = f
            .call::<_, LetterSent>(Op::SendLetter, &send(capability, "bob", Some(answered)))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid, "{err:?}");
    }
}
