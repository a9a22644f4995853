//! Every bad request gets a typed error, writes nothing, and hubd serves the next good one.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::*;
use l3m_core::duty::Duty;
use l3m_wire::envelope::{Limits, VERSION};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{GrantView, ReadGrant};
use l3m_wire::hubd::log::{AppendLog, LogAppended};
use l3m_wire::hubd::session::Capability;
use l3m_wire::reply::{ErrorCode, RemoteError, decode_reply};

/// Sends raw bytes to an operation and opens the typed error it must get back.
async fn raw(f: &Fixture, op: Op, bytes: Vec<u8>) -> RemoteError {
    let reply = f
        .bus
        .request(
            &op.subject(&f.subjects),
            bytes.into(),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    decode_reply::<LogAppended>(&reply, &Limits::default())
        .unwrap()
        .unwrap_err()
}

/// A good request afterwards still works.
async fn still_serving(f: &Fixture, cap: &Capability) {
    let view: GrantView = f
        .call(
            Op::ReadGrant,
            &ReadGrant {
                capability: cap.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(view.agent, "bob");
}

fn envelope(v: u16, kind: &str, body: Vec<u8>) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Env<'a> {
        v: u16,
        kind: &'a str,
        #[serde(with = "serde_bytes_compat")]
        body: Vec<u8>,
    }
    mod serde_bytes_compat {
        pub fn serialize<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(b)
        }
    }
    rmp_serde::to_vec_named(&Env { v, kind, body }).unwrap()
}

async fn setup() -> (Fixture, Capability) {
    setup_with("").await
}

async fn setup_with(config: &str) -> (Fixture, Capability) {
    let f = Fixture::start_with(config).await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    (f, bob)
}

fn append(cap: &Capability, agent: &str, tip: Option<String>, seq: u64) -> AppendLog {
    AppendLog {
        capability: cap.clone(),
        agent: agent.into(),
        expected_tip: tip,
        records: vec![record(seq)],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messagepack_is_malformed() {
    let (f, bob) = setup().await;
    let before = f.refs();
    let e = raw(&f, Op::AppendLog, vec![0xc1, 0xff, 0x00]).await;
    assert_eq!(e.code, ErrorCode::Malformed);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_version_is_refused_as_such() {
    let (f, bob) = setup().await;
    let before = f.refs();
    let e = raw(
        &f,
        Op::AppendLog,
        envelope(VERSION + 1, "hubd.append-log", vec![0x80]),
    )
    .await;
    assert_eq!(e.code, ErrorCode::UnknownVersion);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_payload_is_oversized() {
    // nats-server takes more than hubd does, so the envelope reaches hubd's size check.
    let (f, bob) = setup_with("max_payload: 4194304").await;
    let before = f.refs();
    let body = vec![0u8; Limits::default().max_bytes];
    let e = raw(
        &f,
        Op::AppendLog,
        envelope(VERSION, "hubd.append-log", body),
    )
    .await;
    assert_eq!(e.code, ErrorCode::Oversized);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_agent_name_is_invalid() {
    let (f, bob) = setup().await;
    let before = f.refs();
    let e = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&bob, "Bob//x", None, 0))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.contains("Bob//x"), "{}", e.message);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_agent_is_not_found() {
    let (f, bob) = setup().await;
    let before = f.refs();
    let e = f
        .call::<_, GrantView>(
            Op::ReadGrant,
            &ReadGrant {
                capability: bob.clone(),
                agent: "zed".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let zed = Duty::Sequencer {
        agent: agent("zed"),
    };
    let (open, _) = f.open_request(&f.host_key, zed);
    let e = f.open(&open).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_tip_is_a_conflict_naming_the_actual_tip() {
    let (f, bob) = setup().await;
    let won: LogAppended = f
        .call(Op::AppendLog, &append(&bob, "bob", None, 0))
        .await
        .unwrap();
    let before = f.refs();
    let e = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&bob, "bob", None, 1))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert!(e.message.contains(&won.tip), "{}", e.message);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_capability_is_refused() {
    let (f, bob) = setup().await;
    let before = f.refs();
    let forged = Capability("ab".repeat(32));
    let e = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&forged, "bob", None, 0))
        .await
        .unwrap_err();
    // Unsealed, it is refused on its envelope before its body (and so its capability) is read.
    assert_eq!(e.code, ErrorCode::Refused);
    assert!(e.message.contains("no seal"), "{}", e.message);
    // Sealed, hubd cannot tell a forged capability from one of a session that ended with a
    // restart: it never minted either, and nothing is done for the request.
    let key = l3m_wire::credential::Ephemeral::generate()
        .unwrap()
        .with_hub(&[9; 32]);
    let sealed = l3m_wire::typed::call_sealed::<_, LogAppended>(
        f.bus.as_ref(),
        &Op::AppendLog.subject(&f.subjects),
        &append(&forged, "bob", None, 0),
        std::time::Duration::from_secs(20),
        &l3m_wire::envelope::Limits::default(),
        (&key, 0, &forged.0),
        None,
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(sealed.code, ErrorCode::SessionEnded);
    let (mut open, _) = f.open_request(
        &f.host_key,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    );
    open.signature[0] ^= 1;
    let e = f.open(&open).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Refused);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agents_capability_is_refused_by_the_duty_table() {
    let (f, bob) = setup().await;
    let human = f.human().await;
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let carol = f.sequencer("carol").await;
    let before = f.refs();
    let e = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&carol, "bob", None, 0))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Refused);
    assert!(e.message.contains("sequencer of carol"), "{}", e.message);
    assert_eq!(f.refs(), before);
    still_serving(&f, &bob).await;
}

/// Strict decoding: a kind sent as MessagePack `bin`, a duty with a key it does not have, and a
/// record with a line break are each refused with the right code, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_kind_an_unknown_duty_key_and_a_broken_line_are_refused() {
    let (f, bob) = setup().await;
    let refs = f.refs();
    // The kind as `bin`, the rest a good append.
    fn bin<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }
    #[derive(serde::Serialize)]
    struct BinKind {
        v: u16,
        #[serde(serialize_with = "bin")]
        kind: Vec<u8>,
        #[serde(serialize_with = "bin")]
        body: Vec<u8>,
    }
    let body = rmp_serde::to_vec_named(&append(&bob, "bob", None, 0)).unwrap();
    let bytes = rmp_serde::to_vec_named(&BinKind {
        v: 1,
        kind: b"hubd.append-log".to_vec(),
        body,
    })
    .unwrap();
    let e = raw(&f, Op::AppendLog, bytes).await;
    assert_eq!(e.code, ErrorCode::Malformed, "{}", e.message);
    // A duty with a key it does not have.
    let duty: Result<l3m_core::duty::Duty, _> =
        serde_json::from_str(r#"{"duty":"human","human":"alice","agent":"bob"}"#);
    assert!(duty.is_err(), "unknown keys inside a duty are refused");
    // A record whose JSON holds a raw line break is invalid, not a storage failure.
    let broken = record(0).replacen(',', ",\n", 1);
    let e = f
        .call::<_, LogAppended>(
            Op::AppendLog,
            &AppendLog {
                capability: bob.clone(),
                agent: "bob".into(),
                expected_tip: None,
                records: vec![broken],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid, "{}", e.message);
    assert_eq!(f.refs(), refs);
    still_serving(&f, &bob).await;
}
