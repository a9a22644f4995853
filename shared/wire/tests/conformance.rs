//! One conformance suite, run against both buses: `local::*` over [`LocalBus`], `nats::*` over
//! [`NatsBus`] and a real nats-server started by each test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns are test code too

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::{Echo, Echoed, Harness, PATIENCE, echo, until_fences};
use futures_util::{FutureExt, StreamExt, stream};
use l3m_core::names::AgentName;
use l3m_core::refs::AgentRef;
use l3m_wire::WireError;
use l3m_wire::bus::Bus;
use l3m_wire::envelope::{Envelope, Limits, Message, encode};
use l3m_wire::reply::{ErrorCode, RemoteError, Reply, decode_reply};
use l3m_wire::subjects::{HubId, Operation, Service, Subjects};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer, call};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn subjects() -> Subjects {
    Subjects::new(HubId::parse("t").unwrap())
}

fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

fn echo_subject() -> String {
    subjects().request(Service::Hubd, &Operation::parse("echo").unwrap())
}

/// The echo handler of server `by`: repeats the text, refuses "refuse", panics on "panic".
fn echo_handler(
    by: usize,
) -> impl Fn(TypedRequest<Echo>) -> futures_util::future::Ready<Reply<Echoed>> + Send + Sync + 'static
{
    move |req| {
        let Echo { text, times } = req.body;
        futures_util::future::ready(match text.as_str() {
            "refuse" => Err(RemoteError::new(
                ErrorCode::Refused,
                "axis `mail` not granted",
            )),
            "panic" => panic!("the handler was asked to panic"),
            _ => Ok(Echoed {
                text: text.repeat(times),
                by,
            }),
        })
    }
}

/// Binds an echo server and runs it in a task; the server is live when this returns.
async fn spawn_echo(
    bus: &Arc<dyn Bus>,
    options: ServeOptions,
    by: usize,
    shutdown: &CancellationToken,
) -> JoinHandle<()> {
    let server = TypedServer::<Echo, Echoed>::bind(bus.as_ref(), &echo_subject(), options)
        .await
        .unwrap();
    tokio::spawn(server.run(echo_handler(by), shutdown.clone()))
}

async fn call_echo(bus: &Arc<dyn Bus>, request: &Echo) -> Reply<Echoed> {
    call(
        bus.as_ref(),
        &echo_subject(),
        request,
        PATIENCE,
        &Limits::default(),
    )
    .await
    .unwrap()
}

async fn typed_request_round_trips(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let server = spawn_echo(&server_bus, ServeOptions::default(), 7, &shutdown).await;
    let reply = call_echo(
        &client,
        &Echo {
            text: "ab".into(),
            times: 3,
        },
    )
    .await;
    assert_eq!(
        reply,
        Ok(Echoed {
            text: "ababab".into(),
            by: 7
        })
    );
    shutdown.cancel();
    server.await.unwrap();
}

async fn handler_refusal_reaches_the_caller_typed(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let _server = spawn_echo(&server_bus, ServeOptions::default(), 0, &shutdown).await;
    let refused = call_echo(&client, &echo("refuse")).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert_eq!(refused.message, "axis `mail` not granted");
}

async fn panicking_handler_is_answered_internal_and_server_survives(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let _server = spawn_echo(&server_bus, ServeOptions::default(), 0, &shutdown).await;
    let failed = call_echo(&client, &echo("panic")).await.unwrap_err();
    assert_eq!(failed.code, ErrorCode::Internal);
    assert!(failed.message.contains("test.echo"), "{failed}");
    assert_eq!(call_echo(&client, &echo("ok")).await.unwrap().text, "ok");
}

async fn star_wildcard_matches_exactly_one_token(h: Harness) {
    let (sub_bus, pub_bus) = (h.connect().await, h.connect().await);
    let mut stream = sub_bus.subscribe("l3m.t.ref.*.alice").await.unwrap();
    for subject in [
        "l3m.t.ref.log.alice",
        "l3m.t.ref.log.alice.main", // one token too many
        "l3m.t.ref.alice",          // one token too few
        "l3m.t.ref.log.bob",
        "l3m.t.ref.inbox.alice",
        "l3m.t.ref.fence.alice",
    ] {
        pub_bus.publish(subject, Bytes::new()).await.unwrap();
    }
    let seen = until_fences(&mut stream, &["l3m.t.ref.fence.alice"]).await;
    assert_eq!(seen, ["l3m.t.ref.log.alice", "l3m.t.ref.inbox.alice"]);
}

async fn full_wildcard_matches_one_or_more_trailing_tokens(h: Harness) {
    let (sub_bus, pub_bus) = (h.connect().await, h.connect().await);
    let mut stream = sub_bus.subscribe("l3m.t.hubd.>").await.unwrap();
    for subject in [
        "l3m.t.hubd",
        "l3m.t.hubd.append",
        "l3m.t.hubd.append.alice.main",
        "l3m.t.hubdx.append",
        "l3m.t.hubd.fence",
    ] {
        pub_bus.publish(subject, Bytes::new()).await.unwrap();
    }
    let seen = until_fences(&mut stream, &["l3m.t.hubd.fence"]).await;
    assert_eq!(seen, ["l3m.t.hubd.append", "l3m.t.hubd.append.alice.main"]);
}

async fn subtree_subscription_sees_agent_and_descendants_but_not_sibling(h: Harness) {
    let (sub_bus, pub_bus) = (h.connect().await, h.connect().await);
    let s = subjects();
    let [own, below] = s.ref_changes_within(&agent("alice"));
    let mut streams = stream::select(
        sub_bus.subscribe(&own).await.unwrap(),
        sub_bus.subscribe(&below).await.unwrap(),
    )
    .boxed();
    let wanted = [
        s.ref_changed(AgentRef::Log, &agent("alice")),
        s.ref_changed(AgentRef::Inbox, &agent("alice/main")),
        s.ref_changed(AgentRef::Grants, &agent("alice/main/worker")),
    ];
    let unwanted = [
        s.ref_changed(AgentRef::Log, &agent("alicex")),
        s.ref_changed(AgentRef::Log, &agent("alicex/main")),
        s.ref_changed(AgentRef::Log, &agent("bob/alice")),
        s.ref_changed(AgentRef::Log, &agent("bob")),
    ];
    let fence_own = s.ref_changed(AgentRef::Cards, &agent("alice"));
    let fence_below = s.ref_changed(AgentRef::Cards, &agent("alice/fence"));
    for subject in wanted
        .iter()
        .chain(&unwanted)
        .chain([&fence_own, &fence_below])
    {
        pub_bus.publish(subject, Bytes::new()).await.unwrap();
    }
    let seen = until_fences(&mut streams, &[&fence_own, &fence_below]).await;
    // Each notification arrives once (the two filters never overlap) and no sibling leaks in.
    assert_eq!(seen.len(), wanted.len(), "{seen:?}");
    assert_eq!(
        seen.into_iter().collect::<BTreeSet<_>>(),
        wanted.into_iter().collect::<BTreeSet<_>>()
    );
}

async fn queue_group_delivers_each_request_to_exactly_one_member(h: Harness) {
    const MEMBERS: usize = 3;
    const REQUESTS: usize = 30;
    let subject = echo_subject();
    let fence = "l3m.t.test.fence";
    let mut members = Vec::new();
    for by in 0..MEMBERS {
        let bus = h.connect().await;
        let mut requests = bus.serve(&subject, Some("hubd")).await.unwrap();
        let mut fences = bus.subscribe(fence).await.unwrap();
        members.push(tokio::spawn(async move {
            let _bus = bus; // this member's connection lives as long as it serves
            let mut handled = 0;
            loop {
                tokio::select! {
                    biased;
                    Some(request) = requests.next() => {
                        handled += 1;
                        request.respond(Bytes::from(by.to_string())).await.unwrap();
                    }
                    Some(_) = fences.next() => {
                        // Anything delivered before the fence is already queued: count it too.
                        while let Some(Some(_)) = requests.next().now_or_never() {
                            handled += 1;
                        }
                        return handled;
                    }
                }
            }
        }));
    }
    let client = h.connect().await;
    let mut answered_by = BTreeSet::new();
    for _ in 0..REQUESTS {
        let reply = client
            .request(&subject, Bytes::from_static(b"x"), PATIENCE)
            .await
            .unwrap();
        answered_by.insert(String::from_utf8(reply.to_vec()).unwrap());
    }
    client.publish(fence, Bytes::new()).await.unwrap();
    let mut total = 0;
    for member in members {
        total += member.await.unwrap();
    }
    assert_eq!(total, REQUESTS, "every request reached exactly one member");
    assert!(
        answered_by.len() > 1,
        "the group shared the work: {answered_by:?}"
    );
}

async fn request_without_responder_is_no_responders(h: Harness) {
    let client = h.connect().await;
    let err = client
        .request("l3m.t.hubd.nobody", Bytes::new(), PATIENCE)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WireError::NoResponders { subject } if subject == "l3m.t.hubd.nobody"),
        "{err}"
    );
}

async fn unanswered_request_times_out(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let mut requests = server_bus.serve("l3m.t.hubd.silent", None).await.unwrap();
    let timeout = Duration::from_millis(200);
    let (answer, received) = tokio::join!(
        client.request("l3m.t.hubd.silent", Bytes::new(), timeout),
        requests.next()
    );
    assert!(received.is_some(), "the request was delivered");
    let err = answer.unwrap_err();
    assert!(
        matches!(&err, WireError::Timeout { subject, after }
            if subject == "l3m.t.hubd.silent" && *after == timeout),
        "{err}"
    );
}

async fn published_request_cannot_be_answered(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let mut requests = server_bus.serve("l3m.t.hubd.note", None).await.unwrap();
    client
        .publish("l3m.t.hubd.note", Bytes::new())
        .await
        .unwrap();
    let request = requests.next().await.unwrap();
    let err = request.respond(Bytes::new()).await.unwrap_err();
    assert!(matches!(err, WireError::NoReplySubject { .. }), "{err}");
}

async fn invalid_subjects_are_refused_before_sending(h: Harness) {
    let bus = h.connect().await;
    let bad = |r: Result<(), WireError>| {
        let err = r.unwrap_err();
        assert!(matches!(err, WireError::Subject(_)), "{err}");
    };
    bad(bus.publish("l3m..t", Bytes::new()).await);
    bad(bus.publish("l3m.t.*", Bytes::new()).await);
    bad(bus.publish("l3m t", Bytes::new()).await);
    bad(bus.request("l3m.>", Bytes::new(), PATIENCE).await.map(drop));
    bad(bus.subscribe("l3m.>.t").await.map(drop));
    bad(bus.serve("l3m.t", Some("a group")).await.map(drop));
}

/// Sends raw bytes to the echo server and opens the reply.
async fn raw_echo(bus: &Arc<dyn Bus>, payload: Bytes) -> Reply<Echoed> {
    let reply = bus
        .request(&echo_subject(), payload, PATIENCE)
        .await
        .unwrap();
    decode_reply(&reply, &Limits::default()).unwrap()
}

async fn bad_input_gets_typed_errors_and_the_server_keeps_serving(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let options = ServeOptions {
        limits: Limits::with_max_bytes(1024),
        ..ServeOptions::default()
    };
    let _server = spawn_echo(&server_bus, options, 0, &shutdown).await;
    let body = rmp_serde::to_vec_named(&echo("hi")).unwrap();
    let big = Limits::default();
    let cases: [(&str, Bytes, ErrorCode); 6] = [
        (
            "not msgpack",
            Bytes::from_static(b"\xc1\x00nope"),
            ErrorCode::Malformed,
        ),
        (
            "future version",
            Envelope {
                v: 9,
                kind: Echo::KIND.into(),
                body: body.clone(),
                seal: None,
                cap: None,
            }
            .to_bytes(&big)
            .unwrap(),
            ErrorCode::UnknownVersion,
        ),
        (
            "oversized",
            encode(
                &Echo {
                    text: "x".repeat(2000),
                    times: 1,
                },
                &big,
            )
            .unwrap(),
            ErrorCode::Oversized,
        ),
        (
            "unknown kind",
            Envelope::new("test.other", body.clone())
                .to_bytes(&big)
                .unwrap(),
            ErrorCode::UnknownKind,
        ),
        (
            "wrong body shape",
            Envelope::new(Echo::KIND, rmp_serde::to_vec(&"just a string").unwrap())
                .to_bytes(&big)
                .unwrap(),
            ErrorCode::Malformed,
        ),
        (
            "response too large to send",
            encode(
                &Echo {
                    text: "y".repeat(600),
                    times: 2,
                },
                &big,
            )
            .unwrap(),
            ErrorCode::Oversized,
        ),
    ];
    for (what, payload, code) in cases {
        let err = raw_echo(&client, payload).await.unwrap_err();
        assert_eq!(err.code, code, "{what}: {err}");
        let good = call_echo(&client, &echo(what)).await;
        assert_eq!(
            good.unwrap().text,
            what,
            "the server still serves after {what}"
        );
    }
}

async fn in_flight_handlers_are_bounded(h: Harness) {
    const BOUND: usize = 2;
    const REQUESTS: usize = 5;
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let gate = Arc::new(Semaphore::new(0));
    let active = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let handler = {
        let (gate, active, most) = (gate.clone(), active.clone(), most.clone());
        move |req: TypedRequest<Echo>| {
            let (gate, active, most, started_tx) = (
                gate.clone(),
                active.clone(),
                most.clone(),
                started_tx.clone(),
            );
            async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                started_tx.send(()).unwrap();
                gate.acquire().await.unwrap().forget();
                active.fetch_sub(1, Ordering::SeqCst);
                Ok(Echoed {
                    text: req.body.text,
                    by: 0,
                })
            }
        }
    };
    let options = ServeOptions {
        max_in_flight: BOUND,
        ..ServeOptions::default()
    };
    let server = TypedServer::<Echo, Echoed>::bind(server_bus.as_ref(), &echo_subject(), options)
        .await
        .unwrap();
    tokio::spawn(server.run(handler, shutdown.clone()));
    let calls: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { call_echo(&client, &echo(&i.to_string())).await })
        })
        .collect();
    for _ in 0..BOUND {
        started.recv().await.unwrap();
    }
    gate.add_permits(REQUESTS);
    for c in calls {
        c.await.unwrap().unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), BOUND);
}

async fn shutdown_answers_in_flight_requests_then_stops(h: Harness) {
    let (server_bus, client) = (h.connect().await, h.connect().await);
    let shutdown = CancellationToken::new();
    let gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let handler = {
        let gate = gate.clone();
        move |req: TypedRequest<Echo>| {
            let (gate, started_tx) = (gate.clone(), started_tx.clone());
            async move {
                started_tx.send(()).unwrap();
                gate.acquire().await.unwrap().forget();
                Ok(Echoed {
                    text: req.body.text,
                    by: 0,
                })
            }
        }
    };
    let server = TypedServer::<Echo, Echoed>::bind(
        server_bus.as_ref(),
        &echo_subject(),
        ServeOptions::default(),
    )
    .await
    .unwrap();
    let running = tokio::spawn(server.run(handler, shutdown.clone()));
    let pending = tokio::spawn(async move { call_echo(&client, &echo("last")).await });
    started.recv().await.unwrap();
    shutdown.cancel();
    gate.add_permits(1);
    assert_eq!(pending.await.unwrap().unwrap().text, "last");
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the server stops once cancelled and drained")
        .unwrap();
}

/// Runs each named suite function once per bus.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Harness::local()).await;
                }
            )*
        }
        mod nats {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Harness::nats()).await;
                }
            )*
        }
    };
}

conformance!(
    typed_request_round_trips,
    handler_refusal_reaches_the_caller_typed,
    panicking_handler_is_answered_internal_and_server_survives,
    star_wildcard_matches_exactly_one_token,
    full_wildcard_matches_one_or_more_trailing_tokens,
    subtree_subscription_sees_agent_and_descendants_but_not_sibling,
    queue_group_delivers_each_request_to_exactly_one_member,
    request_without_responder_is_no_responders,
    unanswered_request_times_out,
    published_request_cannot_be_answered,
    invalid_subjects_are_refused_before_sending,
    bad_input_gets_typed_errors_and_the_server_keeps_serving,
    in_flight_handlers_are_bounded,
    shutdown_answers_in_flight_requests_then_stops,
);
