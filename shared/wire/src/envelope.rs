//! The versioned MessagePack envelope around every l3m message, and the typed [`encode`] /
//! [`decode`] over it.
//!
//! Receiving is strictly layered, as in mini-redis's frame check before parse:
//! 1. **size**: the raw bytes are measured against [`Limits::max_bytes`] before anything is
//!    decoded, so an oversized message costs nothing but its length;
//! 2. **version**: only the `v` field is read, so an envelope from a newer protocol is reported
//!    as [`WireError::UnknownVersion`] even if the rest of its shape changed;
//! 3. **envelope**: `v`, `kind` and `body` are decoded, and trailing bytes are refused;
//! 4. **kind**: the envelope's `kind` must be the receiver's [`Message::KIND`];
//! 5. **body**: only then is the body decoded into the typed message.
//!
//! # Format
//! An envelope is a MessagePack map with exactly these keys (extra keys are ignored, so a later
//! version 1 sender may add optional ones):
//!
//! | key | MessagePack type | meaning |
//! |---|---|---|
//! | `v` | uint 16 | protocol version, [`VERSION`] |
//! | `kind` | str | the message kind, e.g. `hubd.append` or `l3m.error` |
//! | `body` | bin | the typed message, itself a MessagePack map (field names as keys) |
//! | `seal` | map `{n: uint 64, mac: bin 32}`, optional | a session request's seal ([`crate::credential`]) |
//! | `cap` | str, optional | the capability of the session that sealed it, beside the seal so that a server finds the session and checks the seal before it decodes the body |
//!
//! Bodies are encoded with field names (`rmp_serde::to_vec_named`) so that adding an optional
//! field with `#[serde(default)]` keeps old and new peers compatible within one version.
//! The size limit applies to the whole envelope, on encode as well as on decode, so a sender
//! learns it would be refused before it sends.

use std::io::Cursor;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::credential::{Seal, SessionKey};
use crate::error::WireError;

/// The envelope version this build writes.
pub const VERSION: u16 = 1;

/// The envelope versions this build can open.
pub const SUPPORTED_VERSIONS: &[u16] = &[VERSION];

/// The default size limit of one message: 1 MiB, which is also nats-server's default
/// `max_payload`. Bulk data never travels in one message: packs go in chunks
/// ([`crate::hubd::pack`]), artifacts over QUIC.
pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;

/// Limits applied to a message before it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest envelope, in bytes, that is encoded or decoded; anything longer is
    /// [`WireError::Oversized`] before a single byte is parsed.
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl Limits {
    /// Limits with the given maximum envelope size in bytes.
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        Limits { max_bytes }
    }

    /// Refuses `len` bytes if they exceed the limit. This is the first layer of decoding.
    pub fn check(&self, len: usize) -> Result<(), WireError> {
        if len > self.max_bytes {
            return Err(WireError::Oversized {
                limit: self.max_bytes,
                actual: len,
            });
        }
        Ok(())
    }
}

/// A typed message that travels in an envelope.
///
/// The kind is what the receiver checks before decoding the body, so two message types with
/// compatible shapes can never be confused for each other.
pub trait Message: Serialize + DeserializeOwned {
    /// The stable kind written into the envelope, e.g. `hubd.append`. Never reuse a kind for a
    /// different shape; add a new kind instead.
    const KIND: &'static str;
}

/// The outer layer of every message: version, kind and the still-encoded body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The protocol version the sender wrote; checked before anything else is decoded.
    pub v: u16,
    /// Which message type the body holds; checked before the body is decoded. Only a
    /// MessagePack string is read as a kind (binary is refused, not guessed at).
    #[serde(deserialize_with = "strict_str")]
    pub kind: String,
    /// The MessagePack encoding of the typed message.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
    /// The session's seal over the body, on every request but the one opening a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
    /// The capability of the session that made [`Envelope::seal`] (it also travels in the
    /// body): the key to check the seal with is found from it, before the body is decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
}

/// Reads a MessagePack string, and only a string: rmp-serde would otherwise read a `bin` of
/// UTF-8 bytes as text too, so one field would have two encodings.
fn strict_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a MessagePack string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
    }
    d.deserialize_str(Text)
}

/// Just the version of an envelope, read before the rest so that a future envelope shape is
/// still reported as an unknown version rather than as malformed.
#[derive(Deserialize)]
struct VersionProbe {
    v: u16,
}

impl Envelope {
    /// An envelope of the current [`VERSION`] around an already-encoded body.
    pub fn new(kind: impl Into<String>, body: Vec<u8>) -> Self {
        Envelope {
            v: VERSION,
            kind: kind.into(),
            body,
            seal: None,
            cap: None,
        }
    }

    /// Encodes the envelope, refusing it if it would exceed `limits`.
    pub fn to_bytes(&self, limits: &Limits) -> Result<Bytes, WireError> {
        let bytes = rmp_serde::to_vec_named(self).map_err(|e| WireError::Encode {
            kind: "envelope",
            reason: e.to_string(),
        })?;
        limits.check(bytes.len())?;
        Ok(Bytes::from(bytes))
    }

    /// Opens received bytes: size check, version check, then the envelope itself.
    pub fn from_bytes(bytes: &[u8], limits: &Limits) -> Result<Self, WireError> {
        limits.check(bytes.len())?;
        let probe: VersionProbe = from_msgpack(bytes, "envelope")?;
        if !SUPPORTED_VERSIONS.contains(&probe.v) {
            return Err(WireError::UnknownVersion {
                found: probe.v,
                supported: SUPPORTED_VERSIONS,
            });
        }
        from_msgpack(bytes, "envelope")
    }

    /// Decodes the body as `M`, after checking that the envelope's kind is `M::KIND`.
    pub fn open<M: Message>(&self) -> Result<M, WireError> {
        self.expect_kind(M::KIND)?;
        self.open_unchecked()
    }

    /// Refuses the envelope unless its kind is `kind`; nothing of the body is read.
    pub fn expect_kind(&self, kind: &str) -> Result<(), WireError> {
        if self.kind != kind {
            return Err(WireError::UnknownKind {
                kind: self.kind.clone(),
                expected: kind.to_owned(),
            });
        }
        Ok(())
    }

    /// Decodes the body as `M` without checking the kind; callers that dispatch on the kind
    /// themselves (the reply decoder) use it once they have matched.
    pub(crate) fn open_unchecked<M: Message>(&self) -> Result<M, WireError> {
        from_msgpack(&self.body, M::KIND)
    }
}

/// Encodes a typed message into an envelope of the current version.
pub fn encode<M: Message>(msg: &M, limits: &Limits) -> Result<Bytes, WireError> {
    Envelope::new(M::KIND, body_of(msg)?).to_bytes(limits)
}

fn body_of<M: Message>(msg: &M) -> Result<Vec<u8>, WireError> {
    rmp_serde::to_vec_named(msg).map_err(|e| WireError::Encode {
        kind: M::KIND,
        reason: e.to_string(),
    })
}

/// Encodes `msg` in an envelope sealed with `key` as request number `n` of the session named
/// by `capability`.
pub fn encode_sealed<M: Message>(
    msg: &M,
    limits: &Limits,
    key: &SessionKey,
    n: u64,
    capability: &str,
) -> Result<Bytes, WireError> {
    let body = body_of(msg)?;
    let seal = key.seal(n, M::KIND, &body);
    let mut envelope = Envelope::new(M::KIND, body);
    envelope.seal = Some(seal);
    envelope.cap = Some(capability.to_owned());
    envelope.to_bytes(limits)
}

/// Opens and decodes a typed message: size → version → envelope → kind → body.
pub fn decode<M: Message>(bytes: &[u8], limits: &Limits) -> Result<M, WireError> {
    Envelope::from_bytes(bytes, limits)?.open()
}

/// Decodes one MessagePack value that must span all of `bytes`; `what` names the part in the
/// error so the reader knows whether the envelope or the body was bad.
fn from_msgpack<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, WireError> {
    let mut de = rmp_serde::Deserializer::new(Cursor::new(bytes));
    let value = T::deserialize(&mut de).map_err(|e| WireError::Malformed {
        reason: format!("{what}: {e}"),
    })?;
    let used = de.position();
    let len = bytes.len() as u64;
    if used != len {
        return Err(WireError::Malformed {
            reason: format!("{what}: {} trailing bytes after the value", len - used),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ping {
        n: u32,
    }
    impl Message for Ping {
        const KIND: &'static str = "test.ping";
    }

    #[test]
    fn trailing_bytes_are_malformed() {
        let mut bytes = encode(&Ping { n: 1 }, &Limits::default()).unwrap().to_vec();
        bytes.push(0xc0);
        let err = decode::<Ping>(&bytes, &Limits::default()).unwrap_err();
        assert!(
            matches!(&err, WireError::Malformed { reason } if reason.contains("1 trailing")),
            "{err}"
        );
    }

    #[test]
    fn encode_refuses_what_the_peer_would_refuse() {
        let err = encode(&Ping { n: 1 }, &Limits::with_max_bytes(4)).unwrap_err();
        assert!(
            matches!(err, WireError::Oversized { limit: 4, .. }),
            "{err}"
        );
    }

    #[test]
    fn body_is_binary_not_an_array_of_integers() {
        let env = Envelope::new("k", vec![0xff; 200]);
        let bytes = env.to_bytes(&Limits::default()).unwrap();
        // A bin encoding costs 2 bytes of header for 200 bytes; an int array would cost ~400.
        assert!(bytes.len() < 230, "{} bytes", bytes.len());
    }
}
