//! hubd's replies are sealed to the session that asked (issue 36), tried from outside: a reader
//! of the bus holding the client's NATS password learns nothing of a letter or a Log record,
//! and an impostor answering in hubd's place (unsealed, sealed with a key of its own, or with a
//! real answer replayed from another request or session) is refused by the client, which never
//! returns what the impostor said.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use l3m_core::duty::Duty;
use l3m_core::grant::SpawnRequest;
use l3m_core::log::{Record, RecordBody};
use l3m_core::mail::Address;
use l3m_wire::WireError;
use l3m_wire::bus::{Bus, BusMessage, MessageStream, NatsAuth, NatsBus};
use l3m_wire::client::{ClientError, HubClient};
use l3m_wire::credential::Ephemeral;
use l3m_wire::envelope::{Envelope, Limits, Message, encode};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{GrantView, ReadGrant};
use l3m_wire::reply::{ErrorCode, RemoteError, encode_reply};
use l3m_wire::sealed_reply::sign_refusal;
use l3m_wire::test_support::connect_as;

use crate::common::*;

const SECRET: &str = "the-letter-text-no-reader-of-the-bus-may-see";

fn seq(name: &str) -> Duty {
    Duty::Sequencer { agent: agent(name) }
}

/// Every message `spy` heard until it heard nothing for half a second.
async fn heard(spy: &mut MessageStream) -> Vec<BusMessage> {
    let mut seen = Vec::new();
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_millis(500), spy.next()).await
    {
        seen.push(message);
    }
    seen
}

fn kind_of(message: &BusMessage) -> String {
    Envelope::from_bytes(&message.payload, &Limits::default())
        .map(|envelope| envelope.kind)
        .unwrap_or_default()
}

/// The `cli` user's password reads every reply on the human's inbox (`_INBOX_cli.>`), as the
/// outside attack did; what it reads of the human's `mail ls` and `log` of an agent holds
/// nothing of the letter's text nor of the Log's record, though the human reads both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_the_humans_inbox_learns_nothing_of_a_letter_or_a_log() {
    let hub = TestHub::start_as_users(root_grant()).await;
    let human_duty = Duty::Human {
        human: test_support::human(),
    };
    let cli: Arc<dyn Bus> = Arc::new(connect_as(&hub.nats, "cli").await);
    let human = HubClient::open(
        cli,
        hub.hub_id.clone(),
        &hub.key_for(&human_duty),
        human_duty,
    )
    .await
    .unwrap();
    human
        .spawn(SpawnRequest::new(agent("bob"), root_grant()))
        .await
        .unwrap();
    let bob = hub.client(seq("bob")).await;
    let prompt = Record {
        seq: 0,
        at_ms: 7,
        body: RecordBody::SystemPrompt {
            text: SECRET.to_owned(),
            continues: false,
        },
    };
    bob.append_log(&agent("bob"), None, &[prompt])
        .await
        .unwrap();
    human
        .send_letter(&Address::for_agent(agent("bob")).render(), None, SECRET)
        .await
        .unwrap();

    let reader = connect_as(&hub.nats, "cli").await;
    let mut spy = reader.subscribe("_INBOX_cli.>").await.unwrap();
    reader.flush().await.unwrap();
    let inbox = human.read_inbox(&agent("bob"), 0).await.unwrap();
    let log = human.read_log(&agent("bob"), 0, 10).await.unwrap();
    // The human read the text: it was in both replies.
    assert!(format!("{:?}", inbox.entries).contains(SECRET));
    assert!(format!("{:?}", log.records).contains(SECRET));

    let seen = heard(&mut spy).await;
    assert!(
        seen.len() >= 2,
        "the reader heard both replies: {}",
        seen.len()
    );
    for message in &seen {
        assert_eq!(kind_of(message), l3m_wire::sealed_reply::KIND);
        assert!(
            !message
                .payload
                .windows(SECRET.len())
                .any(|w| w == SECRET.as_bytes()),
            "the text crossed the bus in clear on {}",
            message.subject
        );
    }
}

/// What the impostor answers each `read-grant` with, given the request's number in its
/// session and its capability (both travel in clear on the request's envelope).
type Forge = Box<dyn Fn(u64, &str) -> Bytes + Send + Sync>;

/// hubd stops; an impostor serves `read-grant` in its place with whatever `forge` makes.
async fn impostor(f: &Fixture, forge: Arc<Mutex<Forge>>) -> tokio::task::JoinHandle<()> {
    let subject = Op::ReadGrant.subject(&f.subjects);
    f.hub.shutdown.cancel();
    // hubd no longer answers: whatever answers from now on is the impostor.
    loop {
        match f
            .bus
            .request(&subject, Bytes::new(), Duration::from_millis(300))
            .await
        {
            Err(WireError::NoResponders { .. }) => break,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let own: Arc<dyn Bus> = Arc::new(
        NatsBus::connect(f.nats.url(), NatsAuth::Anonymous)
            .await
            .unwrap(),
    );
    let mut requests = own.serve(&subject, None).await.unwrap();
    own.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            let envelope = Envelope::from_bytes(&request.payload, &Limits::default()).ok();
            let n = envelope
                .as_ref()
                .and_then(|envelope| envelope.seal.as_ref())
                .map_or(0, |seal| seal.n);
            let cap = envelope
                .and_then(|envelope| envelope.cap)
                .unwrap_or_default();
            let answer = (forge.lock().unwrap())(n, &cap);
            request.respond(answer).await.unwrap();
        }
    })
}

/// An impostor that may publish on a client's inbox answers the client's `read-grant` before
/// hubd (here: instead of it) with a well-formed answer in clear, one sealed with a key of its
/// own for the right request, a refusal in clear, or a real sealed answer of hubd's replayed
/// from another request of the same session or from another session. The client refuses each
/// with a typed error and returns nothing of it; once hubd is back it reads the real grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_answering_a_request_in_hubds_place_is_refused_by_the_client() {
    let mut f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.hub.client(seq("bob")).await;
    let host = f.hub.client(Duty::Host { subtree: None }).await;

    // A reader of the bus learns bob's inbox from a request it overhears, then captures hubd's
    // real answer to bob's next read-grant there.
    let reader = NatsBus::connect(f.nats.url(), NatsAuth::Anonymous)
        .await
        .unwrap();
    let mut overheard = reader
        .subscribe(&Op::ReadGrant.subject(&f.subjects))
        .await
        .unwrap();
    let real = bob.read_grant(&agent("bob")).await.unwrap();
    let asked = overheard.next().await.unwrap().reply.unwrap();
    drop(overheard);
    let (inbox, _) = asked.rsplit_once('.').unwrap();
    let mut spy = reader.subscribe(&format!("{inbox}.*")).await.unwrap();
    assert_eq!(bob.read_grant(&agent("bob")).await.unwrap(), real);
    let captured = heard(&mut spy)
        .await
        .into_iter()
        .find(|m| kind_of(m) == l3m_wire::sealed_reply::KIND)
        .expect("hubd's sealed answer was seen on the bus")
        .payload;

    // The impostor's grant: bob may spawn nothing, and pushes go to the impostor's URL.
    let mut forged = real.clone();
    forged.grant = Default::default();
    forged
        .push_urls
        .insert("origin".into(), "https://impostor.invalid/bob.git".into());
    assert_ne!(forged, real);
    let limits = Limits::default();
    let plain = encode(&forged, &limits).unwrap();
    let stranger = Ephemeral::generate()
        .unwrap()
        .with_hub(&Ephemeral::generate().unwrap().public);
    let sealed_by_another = {
        let forged = forged.clone();
        move |n: u64, _: &str| {
            stranger
                .reply()
                .seal(n, ReadGrant::KIND, &Ok(forged.clone()), &Limits::default())
                .unwrap()
        }
    };
    let conflict = encode_reply::<GrantView>(
        &Err(RemoteError::new(ErrorCode::Conflict, "the lease moved")),
        &limits,
    )
    .unwrap();

    let forge: Arc<Mutex<Forge>> = Arc::new(Mutex::new(Box::new(move |_, _| plain.clone())));
    let serving = impostor(&f, Arc::clone(&forge)).await;
    let refused = |what: &str, result: Result<GrantView, ClientError>, unsealed: bool| match result
    {
        Err(ClientError::Wire {
            source: WireError::UnsealedReply { .. },
            ..
        }) if unsealed => {}
        Err(ClientError::Wire {
            source: WireError::BadReplySeal,
            ..
        }) if !unsealed => {}
        other => panic!("{what}: the client took {other:?}"),
    };
    refused("in clear", bob.read_grant(&agent("bob")).await, true);
    *forge.lock().unwrap() = Box::new(move |_, _| conflict.clone());
    refused(
        "a refusal in clear",
        bob.read_grant(&agent("bob")).await,
        true,
    );
    *forge.lock().unwrap() = Box::new(sealed_by_another);
    refused(
        "sealed by another",
        bob.read_grant(&agent("bob")).await,
        false,
    );
    *forge.lock().unwrap() = Box::new(move |_, _| captured.clone());
    refused(
        "replayed onto a later request",
        bob.read_grant(&agent("bob")).await,
        false,
    );
    refused(
        "replayed onto another session",
        host.read_grant(&agent("bob")).await,
        false,
    );

    // The impostor leaves and hubd comes back: the client opens a new session and reads the
    // real grant.
    serving.abort();
    let _ = serving.await;
    f.hub.restart_hubd().await;
    assert_eq!(bob.read_grant(&agent("bob")).await.unwrap(), real);
}

/// A plain `session-ended` makes a client reopen its session and send the request again, so an
/// impostor that may publish on the client's inbox could have a request hubd carried out sent
/// twice. One in clear unsigned, or signed for exactly that request by a key that is not the
/// pinned hubd's, is refused with a typed error and the request is not sent again (the impostor
/// heard it once, and the client opened no new session); hubd's own, after a restart that forgot
/// every session, still makes the client reopen and succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostors_session_ended_does_not_make_the_client_send_twice() {
    let mut f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.hub.client(seq("bob")).await;
    assert!(bob.hub_key().is_some(), "bob's credential pins hubd");
    let real = bob.read_grant(&agent("bob")).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let foreign = Arc::new(
        l3m_wire::credential::HubIdentity::load_or_create(&dir.path().join("foreign.key")).unwrap(),
    );
    let ended = RemoteError::new(ErrorCode::SessionEnded, "no such session");
    let heard_requests = Arc::new(AtomicUsize::new(0));
    let unsigned = {
        let (ended, heard_requests) = (ended.clone(), Arc::clone(&heard_requests));
        move |_: u64, _: &str| {
            heard_requests.fetch_add(1, Ordering::SeqCst);
            encode_reply::<GrantView>(&Err(ended.clone()), &Limits::default()).unwrap()
        }
    };
    let forge: Arc<Mutex<Forge>> = Arc::new(Mutex::new(Box::new(unsigned)));
    let serving = impostor(&f, Arc::clone(&forge)).await;
    let refused = |what: &str, result: Result<GrantView, ClientError>| match result {
        Err(ClientError::Wire {
            source:
                WireError::UnsignedRefusal {
                    code: ErrorCode::SessionEnded,
                },
            ..
        }) => {}
        other => panic!("{what}: the client took {other:?}"),
    };
    refused("unsigned", bob.read_grant(&agent("bob")).await);
    assert_eq!(heard_requests.load(Ordering::SeqCst), 1, "sent once");
    let foreign_signed = {
        let heard_requests = Arc::clone(&heard_requests);
        move |n: u64, cap: &str| {
            heard_requests.fetch_add(1, Ordering::SeqCst);
            let signed = sign_refusal(&foreign, (cap, n, ReadGrant::KIND), ended.clone());
            encode_reply::<GrantView>(&Err(signed), &Limits::default()).unwrap()
        }
    };
    *forge.lock().unwrap() = Box::new(foreign_signed);
    refused("signed by another key", bob.read_grant(&agent("bob")).await);
    assert_eq!(heard_requests.load(Ordering::SeqCst), 2, "sent once more");

    // hubd comes back having forgotten every session: its signed `session-ended` is believed,
    // the client opens a new session and reads the real grant.
    serving.abort();
    let _ = serving.await;
    f.hub.restart_hubd().await;
    assert_eq!(bob.read_grant(&agent("bob")).await.unwrap(), real);
}
