//! One WAL frame: a [`Change`] encoded with its sequence number and a CRC. Pure.
//!
//! A frame is `l3mj`, the payload's length (u32), the sequence number (u64), a CRC-32 of those
//! two and the payload, then the payload: a kind byte and length-prefixed fields, little-endian.

use gix::ObjectId;

use crate::store::Tip;
use crate::store::object::{LooseObject, NewCommit};

/// Marks the start of a frame.
const MAGIC: [u8; 4] = *b"l3mj";
/// Magic, payload length, sequence number, CRC.
pub(crate) const HEADER_BYTES: usize = 4 + 4 + 8 + 4;

/// A ref move to WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    /// `refname` moves from `expected` to `new.commit`, `new.objects` being written first.
    Publish {
        /// The ref.
        refname: &'a str,
        /// Its value before.
        expected: Tip,
        /// The new value and the objects it needs.
        new: &'a NewCommit,
    },
    /// `refname`, at `expected`, is deleted.
    Delete {
        /// The ref.
        refname: &'a str,
        /// Its value before.
        expected: ObjectId,
    },
}

/// A [`Change`] read back from the WAL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// See [`Change::Publish`].
    Publish {
        /// The ref.
        refname: String,
        /// Its value before.
        expected: Tip,
        /// The new value and the objects it needs.
        new: NewCommit,
    },
    /// See [`Change::Delete`].
    Delete {
        /// The ref.
        refname: String,
        /// Its value before.
        expected: ObjectId,
    },
}

impl Recorded {
    #[cfg(test)]
    pub(crate) fn as_change(&self) -> Change<'_> {
        match self {
            Recorded::Publish {
                refname,
                expected,
                new,
            } => Change::Publish {
                refname,
                expected: *expected,
                new,
            },
            Recorded::Delete { refname, expected } => Change::Delete {
                refname,
                expected: *expected,
            },
        }
    }
}

/// The whole frames of one segment, in order.
pub(crate) struct Frames<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
}

impl Iterator for Frames<'_> {
    type Item = (u64, Recorded);

    fn next(&mut self) -> Option<(u64, Recorded)> {
        let rest = self.bytes.get(self.at..)?;
        let header = rest.get(..HEADER_BYTES)?;
        if header[..4] != MAGIC {
            return None;
        }
        let len = u32::from_le_bytes(header[4..8].try_into().ok()?) as usize;
        let seq = u64::from_le_bytes(header[8..16].try_into().ok()?);
        let crc = u32::from_le_bytes(header[16..20].try_into().ok()?);
        let payload = rest.get(HEADER_BYTES..HEADER_BYTES + len)?;
        if checksum(&header[4..16], payload) != crc {
            return None;
        }
        let change = decode(payload)?;
        self.at += HEADER_BYTES + len;
        Some((seq, change))
    }
}

pub(crate) fn frame(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(HEADER_BYTES + payload.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&seq.to_le_bytes());
    let crc = checksum(&frame[4..16], payload);
    frame.extend_from_slice(&crc.to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header);
    hasher.update(payload);
    hasher.finalize()
}

const PUBLISH: u8 = 1;
const DELETE: u8 = 2;

/// The payload of a frame: a kind byte, then length-prefixed fields, little-endian.
pub(crate) fn encode(change: &Change<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    match change {
        Change::Publish {
            refname,
            expected,
            new,
        } => {
            out.push(PUBLISH);
            put_bytes(&mut out, refname.as_bytes());
            match *expected {
                Tip::Absent => out.push(0),
                Tip::At(id) => {
                    out.push(1);
                    put_bytes(&mut out, id.as_bytes());
                }
            }
            put_bytes(&mut out, new.commit.as_bytes());
            out.extend_from_slice(&(new.objects.len() as u32).to_le_bytes());
            for object in &new.objects {
                put_bytes(&mut out, object.id.as_bytes());
                put_bytes(&mut out, &object.compressed);
            }
        }
        Change::Delete { refname, expected } => {
            out.push(DELETE);
            put_bytes(&mut out, refname.as_bytes());
            put_bytes(&mut out, expected.as_bytes());
        }
    }
    out
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes a payload; `None` for anything that is not exactly one well-formed change.
fn decode(payload: &[u8]) -> Option<Recorded> {
    let mut reader = Reader { rest: payload };
    let change = match reader.byte()? {
        PUBLISH => {
            let refname = reader.string()?;
            let expected = match reader.byte()? {
                0 => Tip::Absent,
                1 => Tip::At(reader.id()?),
                _ => return None,
            };
            let commit = reader.id()?;
            let count = reader.u32()?;
            let mut objects = Vec::new();
            for _ in 0..count {
                let id = reader.id()?;
                let compressed = reader.bytes()?.to_vec();
                objects.push(LooseObject { id, compressed });
            }
            Recorded::Publish {
                refname,
                expected,
                new: NewCommit { commit, objects },
            }
        }
        DELETE => Recorded::Delete {
            refname: reader.string()?,
            expected: reader.id()?,
        },
        _ => return None,
    };
    reader.rest.is_empty().then_some(change)
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn id(&mut self) -> Option<ObjectId> {
        ObjectId::try_from(self.bytes()?).ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    fn change() -> impl Strategy<Value = Recorded> {
        let refname = "[a-z/]{1,40}";
        let object = (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300)).prop_map(
            |(b, compressed)| LooseObject {
                id: id(b),
                compressed,
            },
        );
        prop_oneof![
            (
                refname,
                proptest::option::of(any::<u8>()),
                any::<u8>(),
                proptest::collection::vec(object, 0..4)
            )
                .prop_map(|(refname, expected, commit, objects)| Recorded::Publish {
                    refname,
                    expected: expected.map_or(Tip::Absent, |b| Tip::At(id(b))),
                    new: NewCommit {
                        commit: id(commit),
                        objects,
                    },
                }),
            (refname, any::<u8>()).prop_map(|(refname, b)| Recorded::Delete {
                refname,
                expected: id(b)
            }),
        ]
    }

    pub(crate) fn segment_of(changes: &[Recorded], first_seq: u64) -> Vec<u8> {
        let mut bytes: Vec<u8> = changes
            .iter()
            .enumerate()
            .flat_map(|(i, c)| frame(first_seq + i as u64, &encode(&c.as_change())))
            .collect();
        bytes.resize(bytes.len() + 64, 0);
        bytes
    }

    proptest! {
        #[test]
        fn frames_read_back_as_written(changes in proptest::collection::vec(change(), 0..8)) {
            let bytes = segment_of(&changes, 7);
            let read: Vec<(u64, Recorded)> = Frames { bytes: &bytes, at: 0 }.collect();
            let expected: Vec<(u64, Recorded)> =
                changes.iter().cloned().enumerate().map(|(i, c)| (7 + i as u64, c)).collect();
            prop_assert_eq!(read, expected);
        }

        #[test]
        fn a_torn_or_flipped_frame_ends_the_wal_there(
            changes in proptest::collection::vec(change(), 1..6),
            cut in any::<prop::sample::Index>(),
            flip in any::<u8>(),
        ) {
            let bytes = segment_of(&changes, 0);
            let ends: Vec<usize> = Frames { bytes: &bytes, at: 0 }
                .scan(0, |at, (_, c)| { *at += HEADER_BYTES + encode(&c.as_change()).len(); Some(*at) })
                .collect();
            let total = *ends.last().unwrap();
            let at = cut.index(total);
            let mut damaged = bytes.clone();
            damaged[at] ^= flip.max(1);
            let whole_before = ends.iter().filter(|end| **end <= at).count();
            let read: Vec<(u64, Recorded)> = Frames { bytes: &damaged, at: 0 }.collect();
            prop_assert_eq!(read.len(), whole_before, "frames before the damage, none after");
            for (i, (seq, change)) in read.into_iter().enumerate() {
                prop_assert_eq!(seq, i as u64);
                prop_assert_eq!(&change, &changes[i]);
            }
        }
    }
}
