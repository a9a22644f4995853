//! Record framing for the journal file: pure, so the torn-tail rules are tested exhaustively.
//!
//! # Format
//! A journal is a sequence of records, each
//! `magic "L3MU" | len: u32 LE | payload_crc: u32 LE | header_crc: u32 LE | payload (len bytes)`,
//! where `payload_crc` is the CRC-32 of the payload and `header_crc` the CRC-32 of the twelve
//! bytes before it. The header's own checksum is what lets a reader trust `len` before reading
//! the payload, and so tell a torn tail from damage:
//! - **torn** (a crash during the last append; cut and ignored): fewer than 16 bytes left; a
//!   sound header whose payload runs past the end; a sound header whose payload fails its
//!   checksum and ends exactly at the end; or a tail of zero bytes (a filesystem that extended
//!   the file before the data landed);
//! - **corrupt** (refused): any other failed check — a record that fails but is followed by more
//!   bytes was complete once, so something damaged it.

use super::JournalError;

const MAGIC: [u8; 4] = *b"L3MU";
/// Bytes before each payload.
pub(super) const HEADER_LEN: usize = 16;
/// The largest payload a record frames (a prior file's content, base64, in a JSON line).
pub(super) const MAX_PAYLOAD: usize = 1 << 30;

/// The framed payloads of a journal and where its sound part ends.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Frames<'a> {
    /// Each payload with the byte offset of its record.
    pub payloads: Vec<(u64, &'a [u8])>,
    /// Length of the sound prefix; anything after it is a torn tail.
    pub good_len: u64,
}

/// Frames one payload as a record.
pub(super) fn encode(payload: &[u8]) -> Result<Vec<u8>, JournalError> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|_| payload.len() <= MAX_PAYLOAD)
        .ok_or(JournalError::TooLarge {
            len: payload.len(),
            max: MAX_PAYLOAD,
        })?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let header_crc = crc32fast::hash(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Reads every sound record, stopping at a torn tail and refusing damage.
pub(super) fn decode(bytes: &[u8]) -> Result<Frames<'_>, JournalError> {
    let mut payloads = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let offset = at as u64;
        let corrupt = |reason| JournalError::Corrupt { offset, reason };
        if rest.len() < HEADER_LEN || rest.iter().all(|b| *b == 0) {
            break;
        }
        let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        if rest[..4] != MAGIC {
            return Err(corrupt("record does not start with the journal's magic"));
        }
        if crc32fast::hash(&rest[..12]) != word(12) {
            return Err(corrupt("record header fails its checksum"));
        }
        let len = word(4) as usize;
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            break;
        };
        if crc32fast::hash(payload) != word(8) {
            if HEADER_LEN + len == rest.len() {
                break;
            }
            return Err(corrupt("record payload fails its checksum"));
        }
        payloads.push((offset, payload));
        at += HEADER_LEN + len;
    }
    Ok(Frames {
        payloads,
        good_len: at as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn journal(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for p in payloads {
            out.extend(encode(p).unwrap());
            ends.push(out.len());
        }
        (out, ends)
    }

    fn payloads() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6)
    }

    #[test]
    fn empty_journal_has_no_records() {
        assert_eq!(
            decode(&[]).unwrap(),
            Frames {
                payloads: vec![],
                good_len: 0
            }
        );
    }

    #[test]
    fn zero_filled_tail_is_torn() {
        let (mut bytes, ends) = journal(&[b"a".to_vec()]);
        bytes.extend([0u8; 40]);
        let f = decode(&bytes).unwrap();
        assert_eq!((f.payloads.len(), f.good_len), (1, ends[0] as u64));
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(ps in payloads()) {
            let (bytes, _) = journal(&ps);
            let f = decode(&bytes).unwrap();
            let got: Vec<Vec<u8>> = f.payloads.iter().map(|(_, p)| p.to_vec()).collect();
            prop_assert_eq!(got, ps);
            prop_assert_eq!(f.good_len, bytes.len() as u64);
        }

        #[test]
        fn every_truncation_decodes_to_the_records_wholly_before_it(ps in payloads(), cut in any::<prop::sample::Index>()) {
            let (bytes, ends) = journal(&ps);
            let cut = cut.index(bytes.len() + 1);
            let f = decode(&bytes[..cut]).unwrap();
            let whole = ends.iter().filter(|e| **e <= cut).count();
            prop_assert_eq!(f.payloads.len(), whole);
            prop_assert_eq!(f.good_len, if whole == 0 { 0 } else { ends[whole - 1] as u64 });
        }

        #[test]
        fn a_flipped_bit_is_refused_or_drops_only_the_last_record(ps in payloads(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let (mut bytes, ends) = journal(&ps);
            let at = at.index(bytes.len());
            bytes[at] ^= 1 << bit;
            let last_start = if ends.len() > 1 { ends[ends.len() - 2] } else { 0 };
            match decode(&bytes) {
                Err(JournalError::Corrupt { .. }) => {}
                Ok(f) => {
                    // Only damage inside the last record's payload can pass as a torn tail, and
                    // then exactly the records before it are returned, unchanged.
                    prop_assert!(at >= last_start + HEADER_LEN);
                    let got: Vec<Vec<u8>> = f.payloads.iter().map(|(_, p)| p.to_vec()).collect();
                    prop_assert_eq!(&got[..], &ps[..ps.len() - 1]);
                }
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }
    }
}
