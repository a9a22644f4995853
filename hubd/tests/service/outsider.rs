//! What the outside attack of issue 36 found, tried again the way an outsider would: a real
//! hubd over a real nats-server, reached by clients of its own and, where the l3m client would
//! not send it, by raw NATS protocol written by hand.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use crate::common::*;
use futures_util::StreamExt;
use l3m_core::duty::Duty;
use l3m_wire::client::HubClient;
use l3m_wire::control::ControlRequest;
use l3m_wire::credential::Ephemeral;
use l3m_wire::envelope::{Envelope, Limits};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::session::{OpenSession, SpendOutcome};
use l3m_wire::reply::ErrorCode;

fn seq(name: &str) -> Duty {
    Duty::Sequencer { agent: agent(name) }
}

fn rewind(to: u64) -> ControlRequest {
    ControlRequest::Rewind {
        to,
        reason: "undo".into(),
    }
}

/// Spends `vouched` through `by`'s session for `request`.
async fn spend(
    by: &HubClient,
    vouched: &l3m_wire::hubd::session::Vouched,
    request: &ControlRequest,
) -> SpendOutcome {
    by.spend_voucher(vouched, request.digest().unwrap())
        .await
        .unwrap()
}

/// A voucher binds its request's arguments and its requester, and hubd spends it once: seen on
/// the bus it is useless to whoever saw it, with other arguments it is refused, presented a
/// second time at another process it is used, after a restart it is unknown, and a session
/// holds a bounded number of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voucher_is_spent_once_by_hubd_for_its_request_by_its_requester_only() {
    let mut f = Fixture::start().await;
    let human_cap = f.human().await;
    f.spawn(&human_cap, "bob", root_grant()).await.unwrap();
    f.spawn(&human_cap, "carol", root_grant()).await.unwrap();
    let human = f.hub.human_client().await;
    let bob = f.hub.client(seq("bob")).await;
    let carol = f.hub.client(seq("carol")).await;
    // The host: another process, with another session, that also takes bob's control requests.
    let host = f.hub.client(Duty::Host { subtree: None }).await;

    let vouched = human.vouch(&agent("bob"), &rewind(3)).await.unwrap();
    // Whoever read the voucher on the human's inbox holds no proof of the human's session.
    let mut seen = vouched.clone();
    seen.proof = None;
    assert_eq!(
        spend(&bob, &seen, &rewind(3)).await,
        SpendOutcome::NotTheRequester
    );
    let stranger = Ephemeral::generate().unwrap();
    let other_key = stranger.with_hub(&Ephemeral::generate().unwrap().public);
    seen.proof = Some(other_key.holder_proof(&vouched.voucher.statement()));
    assert_eq!(
        spend(&bob, &seen, &rewind(3)).await,
        SpendOutcome::NotTheRequester
    );
    // The attacker's own target.
    assert_eq!(
        spend(&bob, &vouched, &rewind(0)).await,
        SpendOutcome::OtherArguments
    );
    // A sibling's sequencer does not run bob.
    assert_eq!(
        spend(&carol, &vouched, &rewind(3)).await,
        SpendOutcome::NotForYou
    );
    // None of that burnt it: the host takes it once, and bob's new sequencer then finds it used.
    assert_eq!(
        spend(&host, &vouched, &rewind(3)).await,
        SpendOutcome::Taken
    );
    assert_eq!(spend(&bob, &vouched, &rewind(3)).await, SpendOutcome::Used);
    assert_eq!(spend(&host, &vouched, &rewind(3)).await, SpendOutcome::Used);

    // After hubd restarts, a voucher it issued before is unknown, whoever presents it.
    let before = human.vouch(&agent("bob"), &rewind(3)).await.unwrap();
    f.hub.restart_hubd().await;
    assert_eq!(
        spend(&bob, &before, &rewind(3)).await,
        SpendOutcome::Unknown
    );

    // One session holds a bounded number of unexpired vouchers.
    let mut refused = None;
    for i in 0..=hubd::vouchers::VOUCHERS_PER_SESSION {
        if let Err(e) = human.vouch(&agent("bob"), &rewind(i as u64)).await {
            refused = Some((i, e));
            break;
        }
    }
    let (at, error) = refused.expect("the bound was reached");
    assert_eq!(at, hubd::vouchers::VOUCHERS_PER_SESSION);
    assert_eq!(error.code(), Some(ErrorCode::Refused));
    assert!(error.to_string().contains("unexpired vouchers"), "{error}");
}

/// The host and port of the test's nats-server.
fn address(f: &Fixture) -> String {
    f.nats
        .url()
        .trim_start_matches("nats://")
        .trim_end_matches('/')
        .to_owned()
}

/// An outsider's NATS connection, speaking the protocol by hand: it publishes what the l3m
/// client never would (a reply subject of its choosing, garbage envelopes).
struct Raw {
    stream: std::net::TcpStream,
}

impl Raw {
    fn connect(address: &str) -> Raw {
        let stream = std::net::TcpStream::connect(address).unwrap();
        let mut info = String::new();
        BufReader::new(stream.try_clone().unwrap())
            .read_line(&mut info)
            .unwrap();
        assert!(info.starts_with("INFO"), "{info}");
        let mut raw = Raw { stream };
        raw.stream
            .write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")
            .unwrap();
        raw
    }

    fn publish(&mut self, subject: &str, reply: &str, payload: &[u8]) {
        let head = format!("PUB {subject} {reply} {}\r\n", payload.len());
        self.stream.write_all(head.as_bytes()).unwrap();
        self.stream.write_all(payload).unwrap();
        self.stream.write_all(b"\r\n").unwrap();
    }
}

/// hubd answers only on an inbox: a request naming an announcement subject, a control subject
/// or a service's subject as its reply is dropped unanswered, while the same request with an
/// inbox is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubd_answers_only_on_an_inbox_never_on_anothers_subject() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let targets = [
        "t.ref.log.bob".to_owned(),
        "l3m.t.ref.log.bob".to_owned(),
        "l3m.t.sequencer.interrupt.bob".to_owned(),
        "l3m.t.host.rewind.bob".to_owned(),
        "_INBOX_".to_owned(),
    ];
    let mut watching = Vec::new();
    for target in &targets {
        watching.push(f.bus.subscribe(target).await.unwrap());
    }
    let mut inbox = f.bus.subscribe("_INBOX.outsider.1").await.unwrap();
    f.bus.flush().await.unwrap();
    let (open, _) = f.open_request(&f.host_key, seq("bob"));
    let open = l3m_wire::envelope::encode(&open, &Limits::default()).unwrap();
    let health = l3m_wire::envelope::encode(
        &l3m_wire::health::HealthRequest::default(),
        &Limits::default(),
    )
    .unwrap();
    let health_subject =
        l3m_wire::health::subject(&f.subjects, l3m_wire::subjects::Service::Hubd).unwrap();
    let mut raw = Raw::connect(&address(&f));
    for target in &targets {
        raw.publish(&Op::OpenSession.subject(&f.subjects), target, &open);
        raw.publish(&health_subject, target, &health);
    }
    raw.publish(
        &Op::OpenSession.subject(&f.subjects),
        "_INBOX.outsider.1",
        &open,
    );
    let answered = tokio::time::timeout(Duration::from_secs(10), inbox.next())
        .await
        .unwrap();
    assert!(answered.is_some(), "an inbox is answered");
    // Everything sent before the inbox's request was handled by now; give stragglers a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (target, stream) in targets.iter().zip(&mut watching) {
        let got = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
        assert!(got.is_err(), "hubd published on {target}");
    }
}

/// hubd checks the session and the seal on the envelope before it decodes the body: a flood of
/// 1 MB envelopes naming no live session, from a connection with no credential, costs no
/// decoding, and lease renewals and listings are still answered promptly meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_large_envelopes_without_a_session_does_not_stop_renewals() {
    let f = Fixture::start().await;
    let human_cap = f.human().await;
    f.spawn(&human_cap, "bob", root_grant()).await.unwrap();
    let human = f.hub.human_client().await;
    let bob = f.hub.client(seq("bob")).await;
    let lease = bob
        .acquire_lease(&agent("bob"), "seq-1", Duration::from_secs(30))
        .await
        .unwrap();
    // An append-log whose body is ~1 MB of a single string: costly to decode, sealed for a
    // capability no session holds.
    let mut envelope = Envelope::new("hubd.append-log", vec![0xd9; 1000 * 1000]);
    envelope.seal = Some(l3m_wire::credential::Seal { n: 0, mac: [7; 32] });
    envelope.cap = Some("0".repeat(64));
    let payload = envelope.to_bytes(&Limits::default()).unwrap().to_vec();
    let address = address(&f);
    let subject = Op::AppendLog.subject(&f.subjects);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut raw = Raw::connect(&address);
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                raw.publish(&subject, "_INBOX.flood.x", &payload);
                sent += 1;
            }
            sent
        })
    };
    let mut slowest = Duration::ZERO;
    let (flood_began, rss_before) = (Instant::now(), rss_kb());
    let mut rounds = 0;
    while rounds < 10 || flood_began.elapsed() < Duration::from_millis(1500) {
        rounds += 1;
        let began = Instant::now();
        bob.renew_lease(&agent("bob"), lease.token).await.unwrap();
        human.list_agents().await.unwrap();
        slowest = slowest.max(began.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flooding.join().unwrap();
    assert!(sent >= 10, "the flood ran ({sent} envelopes)");
    assert!(
        slowest < Duration::from_secs(3),
        "a renewal and a listing took {slowest:?} under a flood of {sent} MB"
    );
    eprintln!(
        "{sent} one-megabyte envelopes in {:?}; {rounds} renewals and listings, the slowest \
         {slowest:?}; this process's RSS {rss_before} kB before, {} kB after",
        flood_began.elapsed(),
        rss_kb()
    );
}

/// This process's resident memory (hubd runs in it), in kB; 0 if unreadable.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// An open-session with an all-zero (low-order) X25519 key is refused: a third party could
/// derive that session's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_session_with_a_low_order_key_is_refused() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let duty = seq("bob");
    let zero = [0u8; 32];
    let request = OpenSession {
        credential: f.host_key.id.to_string(),
        duty: duty.clone(),
        client_key: zero,
        signature: f.host_key.sign_open("t", &duty, &zero),
    };
    let error = f.open(&request).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Refused, "{}", error.message);
    assert!(error.message.contains("low order"), "{}", error.message);
}

/// `l3m credential ls` keeps working with 3,000 credentials: the reply is paged (each page at
/// most `CREDENTIALS_PAGE`), and the default listing drops revoked and expired rows. Issuing
/// 3,000 takes ~30 s (one commit each), so CI issues 450 (three pages) unless
/// `L3M_CREDENTIALS=3000` asks for more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_credentials_are_listed_in_pages_without_the_revoked() {
    let count: usize = l3m_wire::test_support::env_number("L3M_CREDENTIALS", 450);
    use l3m_core::credential::Scope;
    use l3m_wire::credential::KeyFile;
    use l3m_wire::hubd::credential::{CREDENTIALS_PAGE, Credentials, ListCredentials};
    let f = Fixture::start().await;
    let human = f.hub.human_client().await;
    let until = l3m_core::clock::now_ms() + 3_600_000;
    let mut issued = Vec::new();
    for _ in 0..count {
        let key = KeyFile::generate(KeyFile::random_id().unwrap(), Scope::Host { subtree: None })
            .unwrap();
        human.issue_credential(&key, until, "bulk").await.unwrap();
        issued.push(key.id);
    }
    for id in issued.iter().step_by(3) {
        human.revoke_credential(id.as_str()).await.unwrap();
    }
    let live = human.list_credentials(false).await.unwrap();
    // init's two (the human's, the host's) and the postman's stay live.
    let revoked = issued.len().div_ceil(3);
    assert_eq!(live.len(), issued.len() - revoked + 3);
    assert!(live.iter().all(|c| c.revoked_ms.is_none()));
    let all = human.list_credentials(true).await.unwrap();
    assert_eq!(all.len(), issued.len() + 3);
    // One page, as an outsider's client would ask for it, is bounded.
    let cap = f.human().await;
    let page: Credentials = f
        .call(
            Op::ListCredentials,
            &ListCredentials {
                capability: cap,
                after: None,
                all: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.credentials.len(), CREDENTIALS_PAGE);
    assert!(page.next.is_some());
}

/// Clients pin hubd: the credentials init issues carry hubd's identity key, the real hubd
/// signs its open-session answer with it, and an impostor answering open-session in its place
/// (unsigned, or signed by a key of its own) is refused by the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_answering_open_session_is_refused_by_the_client() {
    use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
    use l3m_wire::client::ClientError;
    use l3m_wire::credential::HubIdentity;
    use l3m_wire::hubd::session::{Capability, SessionOpened};
    use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
    use std::sync::Arc;
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    assert!(f.host_key.hub_key.is_some(), "init's credentials pin hubd");
    // The real hubd's answer verifies.
    f.hub.client(seq("bob")).await;

    let dir = tempfile::tempdir().unwrap();
    let own = Arc::new(HubIdentity::load_or_create(&dir.path().join("mine.key")).unwrap());
    for signed in [false, true] {
        let nats = l3m_wire::test_support::NatsServer::start_with("").unwrap();
        let bus: Arc<dyn Bus> = Arc::new(
            NatsBus::connect(nats.url(), NatsAuth::Anonymous)
                .await
                .unwrap(),
        );
        let server = TypedServer::<OpenSession, SessionOpened>::bind(
            bus.as_ref(),
            &Op::OpenSession.subject(&f.subjects),
            ServeOptions::default(),
        )
        .await
        .unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let own = Arc::clone(&own);
        tokio::spawn(server.run(
            move |req: TypedRequest<OpenSession>| {
                let own = Arc::clone(&own);
                async move {
                    let mut opened = SessionOpened {
                        capability: Capability("ab".repeat(32)),
                        duty: req.body.duty,
                        hub_key: Ephemeral::generate().unwrap().public,
                        voucher_key: [1; 32],
                        signature: None,
                    };
                    if signed {
                        let statement = opened.statement("t", &req.body.client_key);
                        opened.signature = Some(own.sign(&statement));
                    }
                    Ok(opened)
                }
            },
            stop.clone(),
        ));
        let refused = HubClient::open(bus, f.hub_id.clone(), &f.host_key, seq("bob"))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ClientError::NotTheHub(_)),
            "signed: {signed}: {refused}"
        );
        stop.cancel();
    }
}
