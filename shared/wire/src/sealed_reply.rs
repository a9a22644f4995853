//! Sealed replies: the answer to a request of a session, encrypted and authenticated to that
//! session and bound to the request it answers.
//!
//! A session's requests carry a MAC ([`crate::credential`]), which proves who asked but hides
//! nothing. Without this layer the answer would travel in clear, read by whoever may subscribe
//! to the requester's inbox (a holder of its NATS user's password: the `cli` password reads the
//! human's `l3m log` and `mail ls`), and raced by whoever may publish there (a false
//! `read-grant` answered before hubd's). [`ReplyKey`] is the one type that makes and opens a
//! sealed reply: the server seals with it in [`crate::typed`]'s answer once the request's seal
//! verified, the client opens with it in [`crate::typed::call_sealed`]; no operation seals or
//! opens on its own.
//!
//! # Format
//! A sealed reply is an [envelope](crate::envelope) of kind [`KIND`] (`l3m.sealed-reply`)
//! whose body is a random 12-byte nonce, then the ChaCha20-Poly1305 encryption of the whole
//! plain reply envelope ([`crate::reply`]: the response under its kind, or `l3m.error`), then
//! its 16-byte tag. The key is the session's reply key: BLAKE3 `derive_key` with the context
//! `l3m reply key v1` over the session key, so it never doubles as the key that seals
//! requests. The associated data binds the request answered: `l3m sealed reply v1\0`, the
//! request's number in its session (u64 little-endian), the length of its kind (u64
//! little-endian) and its kind. A reply therefore opens only in its session, only as the
//! answer to the request it was made for; its kind and length (within the tag and nonce) are
//! all a reader of the bus learns.
//!
//! # What stays plain
//! A server can seal only once it found the session and the request's seal verified. So a
//! client reads a plain answer to a sealed request as a refusal only, and only one the server
//! could not have sealed: `session-ended` (hubd does not know the session: it restarted) or
//! `revoked`. Anything else in clear is [`WireError::UnsealedReply`]: whoever answered does
//! not hold the key.
//!
//! Such a refusal makes the client reopen its session and send the request again, so it must
//! come from hubd: one forged by whoever may publish on the client's inbox would have a request
//! hubd already carried out sent twice. hubd signs it with its identity key
//! ([`sign_refusal`]; the key that signs `open-session` answers) over [`refusal_statement`]:
//! `l3m plain refusal v1\0`, then the capability, the request's kind and the code, each
//! preceded by its length (u64 little-endian), then the request's number (u64 little-endian).
//! A client whose credential pins hubd's key reads a plain refusal only when that signature
//! verifies ([`WireError::UnsignedRefusal`] otherwise); one whose credential pins no key (made
//! before hubd had an identity) reads it unsigned, as before. Answers outside a session (open-session, which hubd signs instead; health;
//! the build policy) are plain by design.

use bytes::Bytes;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use l3m_core::credential::PublicKey;

use crate::credential::{HubIdentity, verify};
use crate::envelope::{Envelope, Limits, Message};
use crate::error::WireError;
use crate::reply::{ErrorCode, RemoteError, Reply, encode_reply, reply_of};

/// The envelope kind of a sealed reply.
pub const KIND: &str = "l3m.sealed-reply";

/// The length of the AEAD's tag.
const TAG_LEN: usize = 16;

/// What sealing adds to a plain reply at most: the outer envelope's fields, the nonce and the
/// tag. A plain reply is encoded within the reader's limit less this, so the sealed one stays
/// within the limit.
pub const OVERHEAD: usize = 96;

/// The refusals a client reads in clear: the server did not know the session, so it held no
/// key to seal with.
const PLAIN_REFUSALS: [ErrorCode; 2] = [ErrorCode::SessionEnded, ErrorCode::Revoked];

/// The key one session's replies are sealed with; see the [module](self) for what it binds.
#[derive(Clone)]
pub struct ReplyKey([u8; 32]);

impl std::fmt::Debug for ReplyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplyKey(..)")
    }
}

impl ReplyKey {
    /// The reply key of the session whose (request-sealing) key is `session`.
    pub(crate) fn derive(session: &[u8; 32]) -> ReplyKey {
        ReplyKey(blake3::derive_key("l3m reply key v1", session))
    }

    /// Seals `reply` as the answer to request number `n` of kind `request_kind`, within
    /// `limits` (the plain reply within `limits` less [`OVERHEAD`]).
    pub fn seal<T: Message>(
        &self,
        n: u64,
        request_kind: &str,
        reply: &Reply<T>,
        limits: &Limits,
    ) -> Result<Bytes, WireError> {
        let failed = |reason: String| WireError::Encode { kind: KIND, reason };
        let inner = encode_reply(reply, &within_seal(limits))?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::getrandom(&mut nonce)
            .map_err(|e| failed(format!("the OS random source failed: {e}")))?;
        let mut body = Vec::with_capacity(NONCE_LEN + inner.len() + TAG_LEN);
        body.extend_from_slice(&nonce);
        body.extend_from_slice(&inner);
        let tag = self
            .aead()
            .and_then(|key| {
                key.seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(bound_to(n, request_kind)),
                    &mut body[NONCE_LEN..],
                )
            })
            .map_err(|_| failed("the AEAD refused to seal".into()))?;
        body.extend_from_slice(tag.as_ref());
        Envelope::new(KIND, body).to_bytes(limits)
    }

    /// Opens `bytes` as the answer to request number `n` of kind `request_kind` sent with
    /// `capability`: a sealed reply that opens with this key for that request, or a plain
    /// refusal the server could not have sealed, signed by `hub` when the client pins it.
    /// Anything else is refused, typed, never trusted.
    pub fn open<T: Message>(
        &self,
        (capability, n, request_kind): (&str, u64, &str),
        hub: Option<&PublicKey>,
        bytes: &[u8],
        limits: &Limits,
    ) -> Result<Reply<T>, WireError> {
        let envelope = Envelope::from_bytes(bytes, limits)?;
        if envelope.kind != KIND {
            let error = plain_refusal(envelope)?;
            if let Some(hub) = hub {
                let statement = refusal_statement(capability, n, request_kind, error.code);
                let signed = error
                    .signature
                    .as_deref()
                    .and_then(|s| <[u8; 64]>::try_from(s).ok())
                    .is_some_and(|signature| verify(hub, &statement, &signature));
                if !signed {
                    return Err(WireError::UnsignedRefusal { code: error.code });
                }
            }
            return Ok(Err(error));
        }
        let mut body = envelope.body;
        if body.len() < NONCE_LEN + TAG_LEN {
            return Err(WireError::BadReplySeal);
        }
        let (nonce, sealed) = body.split_at_mut(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| WireError::BadReplySeal)?;
        let inner = self
            .aead()
            .and_then(|key| key.open_in_place(nonce, Aad::from(bound_to(n, request_kind)), sealed))
            .map_err(|_| WireError::BadReplySeal)?;
        reply_of(Envelope::from_bytes(inner, limits)?)
    }

    fn aead(&self) -> Result<LessSafeKey, ring::error::Unspecified> {
        Ok(LessSafeKey::new(UnboundKey::new(
            &CHACHA20_POLY1305,
            &self.0,
        )?))
    }
}

/// The limits a plain reply is encoded within so that, sealed, it fits `limits`.
fn within_seal(limits: &Limits) -> Limits {
    Limits::with_max_bytes(limits.max_bytes.saturating_sub(OVERHEAD))
}

/// The associated data: what a sealed reply answers.
fn bound_to(n: u64, request_kind: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(40 + request_kind.len());
    aad.extend_from_slice(b"l3m sealed reply v1\0");
    aad.extend_from_slice(&n.to_le_bytes());
    aad.extend_from_slice(&(request_kind.len() as u64).to_le_bytes());
    aad.extend_from_slice(request_kind.as_bytes());
    aad
}

/// What hubd signs in a plain refusal: see the [module](self).
pub fn refusal_statement(capability: &str, n: u64, request_kind: &str, code: ErrorCode) -> Vec<u8> {
    let code = code.as_str();
    let mut statement = Vec::with_capacity(64 + capability.len() + request_kind.len());
    statement.extend_from_slice(b"l3m plain refusal v1\0");
    for part in [capability, request_kind, code] {
        statement.extend_from_slice(&(part.len() as u64).to_le_bytes());
        statement.extend_from_slice(part.as_bytes());
    }
    statement.extend_from_slice(&n.to_le_bytes());
    statement
}

/// `error` signed by hubd's `identity` as its plain answer to request number `n` of kind
/// `request_kind` sent with `capability`, when it is a refusal a client reads in clear; any
/// other error is returned as it is (it is sealed, or read as no answer at all).
pub fn sign_refusal(
    identity: &HubIdentity,
    (capability, n, request_kind): (&str, u64, &str),
    mut error: RemoteError,
) -> RemoteError {
    if PLAIN_REFUSALS.contains(&error.code) {
        let statement = refusal_statement(capability, n, request_kind, error.code);
        error.signature = Some(identity.sign(&statement).to_vec());
    }
    error
}

/// A plain envelope answering a sealed request: only a refusal the server could not seal.
fn plain_refusal(envelope: Envelope) -> Result<RemoteError, WireError> {
    if envelope.kind == RemoteError::KIND {
        let error: RemoteError = envelope.open()?;
        if PLAIN_REFUSALS.contains(&error.code) {
            return Ok(error);
        }
        return Err(WireError::UnsealedReply {
            kind: format!("{} [{}]", RemoteError::KIND, error.code),
        });
    }
    Err(WireError::UnsealedReply {
        kind: envelope.kind,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::credential::Ephemeral;
    use crate::envelope::encode;
    use crate::reply::encode_reply;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Letter {
        #[serde(with = "serde_bytes")]
        text: Vec<u8>,
    }
    impl Message for Letter {
        const KIND: &'static str = "test.letter";
    }

    fn session() -> (ReplyKey, ReplyKey) {
        let (client, hub) = (
            Ephemeral::generate().unwrap(),
            Ephemeral::generate().unwrap(),
        );
        (
            client.with_hub(&hub.public).reply().clone(),
            hub.with_client(&client.public).unwrap().reply().clone(),
        )
    }

    fn letter(text: &str) -> Reply<Letter> {
        Ok(Letter {
            text: text.as_bytes().to_vec(),
        })
    }

    const ASKED: &str = "hubd.read-inbox";
    const CAP: &str = "cap-1";

    #[test]
    fn a_pinning_client_reads_a_plain_refusal_only_signed_by_its_hubd_for_its_request() {
        let (client, _) = session();
        let limits = Limits::default();
        let dir = tempfile::tempdir().unwrap();
        let hub = HubIdentity::load_or_create(&dir.path().join("hub.key")).unwrap();
        let other = HubIdentity::load_or_create(&dir.path().join("other.key")).unwrap();
        let pinned = hub.public();
        let plain = |error: RemoteError| encode_reply::<Letter>(&Err(error), &limits).unwrap();
        let ended = RemoteError::new(ErrorCode::SessionEnded, "no session");
        let signed = sign_refusal(&hub, (CAP, 4, ASKED), ended.clone());
        assert_eq!(
            client
                .open::<Letter>(
                    (CAP, 4, ASKED),
                    Some(&pinned),
                    &plain(signed.clone()),
                    &limits
                )
                .unwrap(),
            Err(signed.clone())
        );
        let forged = [
            ended.clone(),
            sign_refusal(&other, (CAP, 4, ASKED), ended.clone()),
            RemoteError {
                signature: Some(vec![1; 3]),
                ..ended.clone()
            },
        ];
        for forged in forged {
            assert!(matches!(
                client.open::<Letter>((CAP, 4, ASKED), Some(&pinned), &plain(forged), &limits),
                Err(WireError::UnsignedRefusal {
                    code: ErrorCode::SessionEnded
                })
            ));
        }
        // Signed for another request, capability or code: not this one's.
        let revoked = RemoteError {
            code: ErrorCode::Revoked,
            ..signed.clone()
        };
        for (at, error) in [
            ((CAP, 5, ASKED), signed.clone()),
            (("cap-2", 4, ASKED), signed.clone()),
            ((CAP, 4, "hubd.read-log"), signed.clone()),
            ((CAP, 4, ASKED), revoked),
        ] {
            assert!(matches!(
                client.open::<Letter>(at, Some(&pinned), &plain(error), &limits),
                Err(WireError::UnsignedRefusal { .. })
            ));
        }
        // Without a pinned key (a credential from before hubd had an identity), as before.
        assert_eq!(
            client
                .open::<Letter>((CAP, 4, ASKED), None, &plain(ended.clone()), &limits)
                .unwrap(),
            Err(ended)
        );
        // Only the refusals read in clear are signed.
        let conflict = RemoteError::new(ErrorCode::Conflict, "moved");
        assert_eq!(
            sign_refusal(&hub, (CAP, 4, ASKED), conflict.clone()),
            conflict
        );
    }

    #[test]
    fn a_sealed_reply_opens_only_for_its_request_in_its_session() {
        let (client, hub) = session();
        let limits = Limits::default();
        let bytes = hub.seal(7, ASKED, &letter("the secret"), &limits).unwrap();
        assert!(
            !bytes.windows(10).any(|w| w == b"the secret"),
            "the text is not on the bus"
        );
        assert_eq!(
            client
                .open::<Letter>((CAP, 7, ASKED), None, &bytes, &limits)
                .unwrap(),
            letter("the secret")
        );
        let refused = [
            client.open::<Letter>((CAP, 8, ASKED), None, &bytes, &limits),
            client.open::<Letter>((CAP, 7, "hubd.read-log"), None, &bytes, &limits),
            session()
                .0
                .open::<Letter>((CAP, 7, ASKED), None, &bytes, &limits),
        ];
        for refused in refused {
            assert!(
                matches!(refused, Err(WireError::BadReplySeal)),
                "{refused:?}"
            );
        }
        let error = RemoteError::new(ErrorCode::Conflict, "moved");
        let sealed = hub
            .seal::<Letter>(1, ASKED, &Err(error.clone()), &limits)
            .unwrap();
        assert_eq!(
            client
                .open::<Letter>((CAP, 1, ASKED), None, &sealed, &limits)
                .unwrap(),
            Err(error)
        );
    }

    #[test]
    fn an_altered_or_cut_sealed_reply_is_refused_not_a_panic() {
        let (client, hub) = session();
        let limits = Limits::default();
        let mut envelope = Envelope::from_bytes(
            &hub.seal(0, ASKED, &letter("text"), &limits).unwrap(),
            &limits,
        )
        .unwrap();
        let whole = envelope.body.clone();
        for cut in [0, NONCE_LEN, NONCE_LEN + TAG_LEN - 1, whole.len() - 1] {
            envelope.body = whole[..cut].to_vec();
            let bytes = envelope.to_bytes(&limits).unwrap();
            assert!(matches!(
                client.open::<Letter>((CAP, 0, ASKED), None, &bytes, &limits),
                Err(WireError::BadReplySeal)
            ));
        }
        for at in [0, NONCE_LEN, whole.len() - 1] {
            let mut flipped = whole.clone();
            flipped[at] ^= 1;
            envelope.body = flipped;
            let bytes = envelope.to_bytes(&limits).unwrap();
            assert!(matches!(
                client.open::<Letter>((CAP, 0, ASKED), None, &bytes, &limits),
                Err(WireError::BadReplySeal)
            ));
        }
    }

    #[test]
    fn only_a_refusal_the_server_could_not_seal_is_read_in_clear() {
        let (client, _) = session();
        let limits = Limits::default();
        let plain = encode(&Letter { text: vec![1] }, &limits).unwrap();
        assert!(matches!(
            client.open::<Letter>((CAP, 0, ASKED), None, &plain, &limits),
            Err(WireError::UnsealedReply { kind }) if kind == Letter::KIND
        ));
        let conflict = Err(RemoteError::new(ErrorCode::Conflict, "the lease moved"));
        let plain = encode_reply::<Letter>(&conflict, &limits).unwrap();
        assert!(matches!(
            client.open::<Letter>((CAP, 0, ASKED), None, &plain, &limits),
            Err(WireError::UnsealedReply { .. })
        ));
        for code in PLAIN_REFUSALS {
            let refusal = Err(RemoteError::new(code, "no session"));
            let plain = encode_reply::<Letter>(&refusal, &limits).unwrap();
            assert_eq!(
                client
                    .open::<Letter>((CAP, 0, ASKED), None, &plain, &limits)
                    .unwrap(),
                refusal
            );
        }
    }

    #[test]
    fn a_sealed_reply_stays_within_its_readers_limit() {
        let (client, hub) = session();
        let limits = Limits::with_max_bytes(4096);
        // The largest text whose plain reply fits the limit less the overhead.
        let fits = (0..4096)
            .rev()
            .find(|len| {
                encode(
                    &Letter {
                        text: vec![7; *len],
                    },
                    &within_seal(&limits),
                )
                .is_ok()
            })
            .unwrap();
        let most = Ok(Letter {
            text: vec![7; fits],
        });
        let bytes = hub.seal(3, ASKED, &most, &limits).unwrap();
        assert!(bytes.len() <= limits.max_bytes, "{} bytes", bytes.len());
        assert_eq!(
            client
                .open::<Letter>((CAP, 3, ASKED), None, &bytes, &limits)
                .unwrap(),
            most
        );
        let over = Ok(Letter {
            text: vec![7; fits + 1],
        });
        assert!(matches!(
            hub.seal(3, ASKED, &over, &limits),
            Err(WireError::Oversized { .. })
        ));
    }
}
