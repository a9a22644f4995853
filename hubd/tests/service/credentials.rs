//! Credentials and sessions tried from outside, against a real hubd over a real nats-server:
//! what a party holding a capability, a captured request or the wrong credential cannot do.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::*;
use l3m_core::credential::Scope;
use l3m_core::duty::Duty;
use l3m_core::mail::Address;
use l3m_core::names::HumanName;
use l3m_wire::credential::{Ephemeral, KeyFile, SessionKey};
use l3m_wire::envelope::{Limits, Message, encode, encode_sealed};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{Regrant, Regranted};
use l3m_wire::hubd::credential::{
    CredentialIssued, CredentialRevoked, Credentials, IssueCredential, ListCredentials,
    RevokeCredential,
};
use l3m_wire::hubd::log::{AppendLog, LogAppended};
use l3m_wire::hubd::mail::{InboxLines, LetterSent, ReadInbox, SendLetter};
use l3m_wire::hubd::session::{Capability, Vouch, Vouched};
use l3m_wire::reply::{ErrorCode, RemoteError, Reply, decode_reply};

use l3m_core::clock::now_ms;

fn seq(name: &str) -> Duty {
    Duty::Sequencer { agent: agent(name) }
}

fn append(by: &Capability, agent: &str) -> AppendLog {
    AppendLog {
        capability: by.clone(),
        agent: agent.into(),
        expected_tip: None,
        records: vec![record(0)],
    }
}

async fn setup() -> (Fixture, Capability) {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    (f, human)
}

/// Sends raw bytes as an `append-log` and returns hubd's answer as it came.
async fn request_raw(f: &Fixture, bytes: bytes::Bytes) -> bytes::Bytes {
    let subject = Op::AppendLog.subject(&f.subjects);
    f.bus
        .request(&subject, bytes, Duration::from_secs(10))
        .await
        .unwrap()
}

/// Sends raw bytes as an `append-log` and opens the reply, which comes in clear.
async fn send_raw(f: &Fixture, bytes: bytes::Bytes) -> Reply<LogAppended> {
    decode_reply(&request_raw(f, bytes).await, &Limits::default()).unwrap()
}

/// Sends raw bytes sealed as request `n` of `key`'s session and opens the reply sealed to it.
async fn send_sealed_raw(
    f: &Fixture,
    bytes: bytes::Bytes,
    key: &SessionKey,
    n: u64,
) -> Reply<LogAppended> {
    let answer = request_raw(f, bytes).await;
    key.reply()
        .open(("", n, AppendLog::KIND), None, &answer, &Limits::default())
        .unwrap()
}

fn refused(reply: Reply<impl std::fmt::Debug>, code: ErrorCode, says: &str) -> RemoteError {
    let error = reply.unwrap_err();
    assert_eq!(error.code, code, "{}", error.message);
    assert!(error.message.contains(says), "{}", error.message);
    error
}

/// A capability seen on the bus, without its session's key, writes nothing: unsealed, sealed
/// with another session's key, or sealed by its holder for a different body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_capability_is_useless_without_its_session_key() {
    let (f, _) = setup().await;
    let bob = f.session(seq("bob")).await;
    let before = f.refs();
    let unsealed = encode(&append(&bob, "bob"), &Limits::default()).unwrap();
    refused(send_raw(&f, unsealed).await, ErrorCode::Refused, "no seal");
    // The attacker's own session key (a host credential of its own) does not seal for bob.
    let (mine, _) = f.open_request(&f.host_key, seq("bob"));
    let opened = f.open(&mine).await.unwrap();
    let stranger = Ephemeral::generate().unwrap();
    let wrong = stranger.with_hub(&opened.hub_key);
    let forged =
        encode_sealed(&append(&bob, "bob"), &Limits::default(), &wrong, 0, &bob.0).unwrap();
    refused(send_raw(&f, forged).await, ErrorCode::Refused, "seal");
    assert_eq!(f.refs(), before, "nothing was written");
    // Its holder still writes.
    let _: LogAppended = f.call(Op::AppendLog, &append(&bob, "bob")).await.unwrap();
}

/// A sealed request captured on the bus and sent again is refused: its number was used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_request_cannot_be_replayed() {
    let (f, _) = setup().await;
    let (open, ephemeral) = f.open_request(&f.host_key, seq("bob"));
    let opened = f.open(&open).await.unwrap();
    let key = ephemeral.with_hub(&opened.hub_key);
    let bytes = encode_sealed(
        &append(&opened.capability, "bob"),
        &Limits::default(),
        &key,
        7,
        &opened.capability.0,
    )
    .unwrap();
    send_sealed_raw(&f, bytes.clone(), &key, 7).await.unwrap();
    let after_first = f.refs();
    refused(
        send_sealed_raw(&f, bytes, &key, 7).await,
        ErrorCode::Refused,
        "used before",
    );
    assert_eq!(f.refs(), after_first);
    // Replaying the open request opens a session whose key only the first opener can derive.
    let replayed = f.open(&open).await.unwrap();
    let guess = encode_sealed(
        &append(&replayed.capability, "bob"),
        &Limits::default(),
        &key,
        0,
        &replayed.capability.0,
    )
    .unwrap();
    refused(send_raw(&f, guess).await, ErrorCode::Refused, "seal");
    assert_eq!(f.refs(), after_first);
}

/// A host credential opens sequencer sessions in its subtree and a waker's session for it,
/// and nothing else: no agent outside, no human, no whole-hub waker; a signature for one duty
/// does not open another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_opens_only_its_scope() {
    let (f, human) = setup().await;
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f.session(seq("bob")).await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    let scope = Scope::Host {
        subtree: Some(agent("bob")),
    };
    let host_b = issue(&f, &human, scope, 60_000).await;
    let before = f.refs();
    f.session_with(&host_b, seq("bob/kid")).await.unwrap();
    f.session_with(
        &host_b,
        Duty::Host {
            subtree: Some(agent("bob")),
        },
    )
    .await
    .unwrap();
    let alice = Duty::Human {
        human: HumanName::parse("alice").unwrap(),
    };
    for duty in [seq("carol"), alice, Duty::Host { subtree: None }] {
        let reply = f.session_with(&host_b, duty).await;
        refused(reply, ErrorCode::Refused, "cannot open a session for");
    }
    let (mut open, _) = f.open_request(&host_b, seq("bob"));
    open.duty = seq("bob/kid");
    let reply = f.open(&open).await;
    refused(reply, ErrorCode::Refused, "does not prove possession");
    assert_eq!(f.refs(), before, "opening writes nothing");
}

/// Revoking a credential ends its sessions at once and it opens no new one; other
/// credentials' sessions go on. The revoke is a row of refs/l3m/credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_credential_and_its_sessions_are_refused() {
    let (f, human) = setup().await;
    let host = issue(&f, &human, Scope::Host { subtree: None }, 60_000).await;
    let doomed = f.session_with(&host, seq("bob")).await.unwrap();
    let other = f.session(seq("bob")).await;
    let revoked: CredentialRevoked = f
        .call(
            Op::RevokeCredential,
            &RevokeCredential {
                capability: human.clone(),
                id: host.id.to_string(),
            },
        )
        .await
        .unwrap();
    assert_eq!(revoked.sessions, 1);
    let before = f.refs();
    let reply = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&doomed, "bob"))
        .await;
    refused(reply, ErrorCode::Revoked, "revoked");
    let reply = f.session_with(&host, seq("bob")).await;
    refused(reply, ErrorCode::Revoked, "was revoked");
    assert_eq!(f.refs(), before);
    let _: LogAppended = f.call(Op::AppendLog, &append(&other, "bob")).await.unwrap();
    let listed: Credentials = f
        .call(
            Op::ListCredentials,
            &ListCredentials {
                capability: human.clone(),
                after: None,
                all: true,
            },
        )
        .await
        .unwrap();
    let entry = listed.credentials.iter().find(|c| c.id == host.id).unwrap();
    assert!(entry.revoked_ms.is_some());
    let log = l3m_git::repo_command(&f.git_dir())
        .args(["log", "--format=%s", "refs/l3m/credentials"])
        .output()
        .unwrap();
    let subjects = String::from_utf8(log.stdout).unwrap();
    assert!(
        subjects.starts_with(&format!("revoke {}", host.id)),
        "{subjects}"
    );
    f.fsck();
}

/// An expired credential opens nothing, and the sessions it opened end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_credential_and_its_sessions_are_refused() {
    let (f, human) = setup().await;
    let brief = issue(&f, &human, Scope::Host { subtree: None }, 1_500).await;
    let session = f.session_with(&brief, seq("bob")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let reply = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&session, "bob"))
        .await;
    refused(reply, ErrorCode::Refused, "expired");
    let reply = f.session_with(&brief, seq("bob")).await;
    refused(reply, ErrorCode::Revoked, "expired");
}

/// Only a human issues, lists or revokes credentials; a human credential names a registered
/// human; an expiry in the past is refused. Each refusal writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_humans_manage_credentials_and_only_sensibly() {
    let (f, human) = setup().await;
    let bob = f.session(seq("bob")).await;
    let before = f.refs();
    let key =
        KeyFile::generate(KeyFile::random_id().unwrap(), Scope::Host { subtree: None }).unwrap();
    let request = |by: &Capability, scope: Scope, expires_ms: u64| IssueCredential {
        capability: by.clone(),
        id: key.id.to_string(),
        scope,
        key: key.public_key().to_string(),
        expires_ms,
        label: String::new(),
    };
    let whole = Scope::Host { subtree: None };
    let later = now_ms() + 60_000;
    let reply = f
        .call::<_, CredentialIssued>(Op::IssueCredential, &request(&bob, whole.clone(), later))
        .await;
    refused(reply, ErrorCode::Refused, "humans only");
    let reply = f
        .call::<_, Credentials>(
            Op::ListCredentials,
            &ListCredentials {
                capability: bob,
                after: None,
                all: false,
            },
        )
        .await;
    refused(reply, ErrorCode::Refused, "humans only");
    let mallory = Scope::Human {
        human: HumanName::parse("mallory").unwrap(),
    };
    let reply = f
        .call::<_, CredentialIssued>(Op::IssueCredential, &request(&human, mallory, later))
        .await;
    refused(reply, ErrorCode::NotFound, "registered human");
    let reply = f
        .call::<_, CredentialIssued>(Op::IssueCredential, &request(&human, whole, 5))
        .await;
    refused(reply, ErrorCode::Invalid, "has passed");
    assert_eq!(f.refs(), before);
}

/// A host's waker session reads what its subtree holds and writes nothing: no Log append, no
/// spawn, no letter, no regrant, no voucher; and it reads nothing outside its subtree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_session_reads_its_subtree_and_writes_nothing() {
    let (f, human) = setup().await;
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let host_b = issue(
        &f,
        &human,
        Scope::Host {
            subtree: Some(agent("bob")),
        },
        60_000,
    )
    .await;
    let waker = f
        .session_with(
            &host_b,
            Duty::Host {
                subtree: Some(agent("bob")),
            },
        )
        .await
        .unwrap();
    let read = |whose: &str| ReadInbox {
        capability: waker.clone(),
        agent: whose.into(),
        from: 0,
    };
    let _: InboxLines = f.call(Op::ReadInbox, &read("bob")).await.unwrap();
    let reply = f.call::<_, InboxLines>(Op::ReadInbox, &read("carol")).await;
    refused(reply, ErrorCode::Refused, "its host");
    let before = f.refs();
    let reply = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&waker, "bob"))
        .await;
    refused(reply, ErrorCode::Refused, "host of bob and below");
    let reply = f.spawn(&waker, "bob/kid", root_grant()).await;
    refused(reply, ErrorCode::Refused, "spawn");
    let letter = SendLetter {
        capability: waker.clone(),
        to: Address::for_agent(agent("bob")).render(),
        subject: None,
        body: "wake up".into(),
        in_reply_to: None,
    };
    let reply = f.call::<_, LetterSent>(Op::SendLetter, &letter).await;
    refused(reply, ErrorCode::Refused, "letter");
    let regrant = Regrant {
        capability: waker.clone(),
        agent: "bob".into(),
        grant: root_grant(),
    };
    let reply = f.call::<_, Regranted>(Op::Regrant, &regrant).await;
    refused(reply, ErrorCode::Refused, "regrant");
    let vouch = Vouch {
        capability: waker.clone(),
        agent: "bob".into(),
        action: "interrupt".into(),
        digest: [0; 32],
    };
    let reply = f.call::<_, Vouched>(Op::Vouch, &vouch).await;
    refused(reply, ErrorCode::Refused, "send `interrupt` to bob");
    assert_eq!(f.refs(), before, "nothing was written");
}

/// A stolen postman credential opens the postman's session and nothing else: no agent's
/// sequencer, no human, no host; and with that session no Log append, no letter from an agent,
/// no spawn and no regrant. Carrying airmail is all it may do (`airmail::*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_postman_credential_appends_to_no_log_and_opens_no_other_duty() {
    let (f, human) = setup().await;
    let service = l3m_core::names::ServiceName::parse("postman").unwrap();
    let stolen = issue(
        &f,
        &human,
        Scope::Postman {
            service: service.clone(),
        },
        60_000,
    )
    .await;
    let before = f.refs();
    let alice = Duty::Human {
        human: HumanName::parse("alice").unwrap(),
    };
    for duty in [seq("bob"), alice, Duty::Host { subtree: None }] {
        let reply = f.session_with(&stolen, duty).await;
        refused(reply, ErrorCode::Refused, "cannot open a session for");
    }
    let postman = f
        .session_with(&stolen, Duty::Postman { service })
        .await
        .unwrap();
    let reply = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&postman, "bob"))
        .await;
    refused(
        reply,
        ErrorCode::Refused,
        "a Log is appended only by its own agent's sequencer",
    );
    let letter = SendLetter {
        capability: postman.clone(),
        to: Address::for_agent(agent("bob")).render(),
        subject: None,
        body: "forged".into(),
        in_reply_to: None,
    };
    let reply = f.call::<_, LetterSent>(Op::SendLetter, &letter).await;
    refused(reply, ErrorCode::Refused, "neither writes letters");
    let reply = f.spawn(&postman, "bob/kid", root_grant()).await;
    refused(reply, ErrorCode::Refused, "only a human spawns roots");
    let regrant = Regrant {
        capability: postman.clone(),
        agent: "bob".into(),
        grant: root_grant(),
    };
    let reply = f.call::<_, Regranted>(Op::Regrant, &regrant).await;
    refused(
        reply,
        ErrorCode::Refused,
        "a grant is changed only by its issuer",
    );
    assert_eq!(f.refs(), before, "nothing was written");
}
