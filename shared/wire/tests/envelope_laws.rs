//! Laws of the envelope layer, checked on arbitrary input.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns are test code too

use l3m_wire::WireError;
use l3m_wire::envelope::{Envelope, Limits, Message, VERSION, decode, encode};
use l3m_wire::reply::{ErrorCode, RemoteError, Reply, decode_reply, encode_reply};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    who: String,
    seq: u64,
    tags: Vec<String>,
    data: Vec<u8>,
    when: Option<i64>,
}

impl Message for Note {
    const KIND: &'static str = "test.note";
}

fn note() -> impl Strategy<Value = Note> {
    (
        ".{0,20}",
        any::<u64>(),
        proptest::collection::vec(".{0,8}", 0..4),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<Option<i64>>(),
    )
        .prop_map(|(who, seq, tags, data, when)| Note {
            who,
            seq,
            tags,
            data,
            when,
        })
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    // `Unrecognized` is what an unknown code decodes to, so it does not round-trip as itself.
    let known: Vec<ErrorCode> = ErrorCode::ALL
        .into_iter()
        .filter(|c| *c != ErrorCode::Unrecognized)
        .collect();
    proptest::sample::select(known)
}

proptest! {
    #[test]
    fn envelope_decode_inverts_encode_for_any_kind_and_body(
        kind in ".{0,40}",
        body in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let envelope = Envelope::new(kind, body);
        let bytes = envelope.to_bytes(&Limits::default()).unwrap();
        prop_assert_eq!(Envelope::from_bytes(&bytes, &Limits::default()).unwrap(), envelope);
    }

    #[test]
    fn typed_decode_inverts_typed_encode(n in note()) {
        let bytes = encode(&n, &Limits::default()).unwrap();
        prop_assert_eq!(decode::<Note>(&bytes, &Limits::default()).unwrap(), n);
    }

    #[test]
    fn decode_reply_inverts_encode_reply(
        n in note(),
        code in error_code(),
        message in ".{0,64}",
        ok in any::<bool>(),
    ) {
        let reply: Reply<Note> = if ok { Ok(n) } else { Err(RemoteError::new(code, message)) };
        let bytes = encode_reply(&reply, &Limits::default()).unwrap();
        prop_assert_eq!(decode_reply::<Note>(&bytes, &Limits::default()).unwrap(), reply);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let limits = Limits::default();
        let _ = Envelope::from_bytes(&bytes, &limits);
        let _ = decode::<Note>(&bytes, &limits);
        let _ = decode_reply::<Note>(&bytes, &limits);
    }

    #[test]
    fn decoding_a_corrupted_envelope_never_panics(
        n in note(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode(&n, &Limits::default()).unwrap().to_vec();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        let _ = decode::<Note>(&bytes, &Limits::default());
        let _ = decode_reply::<Note>(&bytes, &Limits::default());
    }

    #[test]
    fn anything_over_the_limit_is_oversized_before_decoding(
        n in note(),
        limit in 0usize..64,
    ) {
        // Valid bytes, too many of them: refused by size alone, naming both numbers.
        let bytes = encode(&n, &Limits::default()).unwrap();
        prop_assume!(bytes.len() > limit);
        let err = decode::<Note>(&bytes, &Limits::with_max_bytes(limit)).unwrap_err();
        let is_oversized =
            matches!(err, WireError::Oversized { limit: l, actual } if l == limit && actual == bytes.len());
        prop_assert!(is_oversized);
    }

    #[test]
    fn a_version_other_than_ours_is_unknown_version_whatever_follows(
        v in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        prop_assume!(v != VERSION);
        let bytes = Envelope { v, kind: Note::KIND.into(), body, seal: None, cap: None }
            .to_bytes(&Limits::default())
            .unwrap();
        let err = decode::<Note>(&bytes, &Limits::default()).unwrap_err();
        let is_unknown = matches!(err, WireError::UnknownVersion { found, .. } if found == v);
        prop_assert!(is_unknown);
    }

    #[test]
    fn another_kind_is_never_decoded_as_ours(kind in "[a-z.]{1,20}", n in note()) {
        prop_assume!(kind != Note::KIND);
        let body = rmp_serde::to_vec_named(&n).unwrap();
        let bytes = Envelope::new(kind.clone(), body).to_bytes(&Limits::default()).unwrap();
        let err = decode::<Note>(&bytes, &Limits::default()).unwrap_err();
        let is_unknown = matches!(&err, WireError::UnknownKind { kind: k, .. } if *k == kind);
        prop_assert!(is_unknown);
    }
}
