//! zlib streams of stored (uncompressed) blocks, for objects too small to be worth compressing.
//! Pure.
//!
//! A loose object must be a zlib stream, but nothing says it must be deflated. For the small
//! objects of an append (a tree, a commit, a few records) setting up a deflate compressor costs
//! far more than compressing saves: profiling a Log append found zlib's state initialization at
//! two thirds of hubd's instructions per turn. A stored stream is the bytes themselves between
//! a two-byte header, five bytes per 64 KiB block and an Adler-32 trailer; `git gc` compresses
//! them when it packs.

/// The largest payload of one stored block.
const BLOCK: usize = 0xFFFF;
/// Adler-32's modulus.
const MOD_ADLER: u32 = 65_521;
/// The most bytes Adler-32's sums can take before they must be reduced (zlib's `NMAX`).
const NMAX: usize = 5552;

/// `parts`, concatenated, as a zlib stream of stored blocks.
pub(crate) fn stored(parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(len + 2 + 5 * (len / BLOCK + 1) + 4);
    // CMF: deflate with a 32 KiB window; FLG: no dictionary, level "fastest", and a check value
    // making the pair a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let data: Vec<u8>;
    let all: &[u8] = match parts {
        [one] => one,
        _ => {
            data = parts.concat();
            &data
        }
    };
    let mut blocks = all.chunks(BLOCK).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        // Fits: a block holds at most BLOCK bytes.
        let n = block.len() as u16;
        out.push(last);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(all).to_be_bytes());
    out
}

/// The Adler-32 checksum zlib ends a stream with.
fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(NMAX) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD_ADLER;
        b %= MOD_ADLER;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn inflate(stream: &[u8], expected_len: usize) -> Vec<u8> {
        let mut out = vec![0u8; expected_len + 16];
        let mut inflate = gix::zlib::Inflate::default();
        let (status, read, written) = inflate.once(stream, &mut out).unwrap();
        assert_eq!(status, gix::zlib::Status::StreamEnd);
        assert_eq!(read, stream.len(), "the whole stream is one zlib stream");
        out.truncate(written);
        out
    }

    #[test]
    fn adler32_matches_the_reference_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
    }

    #[test]
    fn an_empty_payload_is_one_empty_final_block() {
        assert_eq!(inflate(&stored(&[]), 0), b"");
    }

    proptest! {
        #[test]
        fn a_stored_stream_inflates_to_its_parts(
            head in proptest::collection::vec(any::<u8>(), 0..64),
            body in proptest::collection::vec(any::<u8>(), 0..200_000),
        ) {
            let stream = stored(&[&head, &body]);
            let mut both = head.clone();
            both.extend_from_slice(&body);
            prop_assert_eq!(inflate(&stream, both.len()), both);
        }
    }
}
