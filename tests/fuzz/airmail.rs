//! Airmail between postmen (`postman::frame`): the length-prefixed frame and its body (hellos,
//! welcomes, refusals, letters, deliveries), the letter lines a `letters` frame carries
//! (`InboxEntry::from_line`, as the receiving hubd reads them), and a pinned fingerprint.

use futures_util::FutureExt as _;
use l3m_core::mail::InboxEntry;
use postman::frame::{self, Frame, FrameError, MAX_FRAME};
use postman::identity::Fingerprint;

use crate::harness::{self, Mp, Src};

/// The frames' own words: the tag, each kind, and each field.
const KEYS: &[&str] = &[
    "v",
    "frame",
    "kind",
    "hello",
    "welcome",
    "refused",
    "letters",
    "delivered",
    "office",
    "reason",
    "already",
    "bounced",
    "refused",
];

/// A valid letter line, the seed the mutations start from.
const LETTER: &str = r#"{"v":1,"kind":"letter","id":"l-1","at_ms":5,"from":"agent:alice/main/worker*","to":"branch:fix human:bob*","summary":"sum","body":"line one\nline two"}"#;

/// A frame body from `src`: a map `{v, frame: {kind, ...}}` with the frames' own keys and,
/// for `letters`, mutated letter lines.
fn body_of(src: &mut Src<'_>) -> Vec<u8> {
    let kind = *src.pick(&["hello", "welcome", "refused", "letters", "delivered", "x"]);
    let mut fields = vec![(Mp::Str("kind".into()), Mp::Str(kind.into()))];
    for _ in 0..src.below(4) {
        let key = Mp::Str((*src.pick(KEYS)).into());
        let value = if src.below(2) == 0 {
            let lines = (0..src.below(4))
                .map(|_| Mp::Str(letter_line(src)))
                .collect();
            Mp::Arr(lines)
        } else {
            harness::value(src, KEYS, 2)
        };
        fields.push((key, value));
    }
    let v = match src.below(8) {
        0 => harness::value(src, KEYS, 0),
        _ => Mp::Uint(u64::from(frame::VERSION)),
    };
    let mut bytes = Mp::Map(vec![
        (Mp::Str("v".into()), v),
        (Mp::Str("frame".into()), Mp::Map(fields)),
    ])
    .encode();
    if src.below(6) == 0 {
        bytes = harness::mutate(&bytes, src, KEYS);
    }
    bytes
}

/// A letter line: the valid one mutated, with the line's own words as tokens.
fn letter_line(src: &mut Src<'_>) -> String {
    let tokens = &[
        "\"kind\":\"receipt\"",
        "\"kind\":\"read-mark\"",
        "\\n",
        "\\u0000",
        "\\ud800",
        "*",
        "office:",
        "agent:",
        "human:",
        "\"v\":2",
        "99999999999999999999",
    ];
    String::from_utf8_lossy(&harness::mutate(LETTER.as_bytes(), src, tokens)).into_owned()
}

/// `fuzz_airmail_frames_and_hellos`: any bytes on a postmen's stream read as one frame or a
/// typed refusal, never reading past the announced length or over `MAX_FRAME`; every letter
/// line of a frame parses or is a typed refusal.
#[test]
fn fuzz_airmail_frames_and_hellos() {
    harness::run("airmail", 20_000, 2048, |input| {
        let mut src = Src::new(input);
        let body = match src.below(4) {
            0 => input.to_vec(),
            _ => body_of(&mut src),
        };
        let decoded = frame::decode(&body);
        match &decoded {
            Ok(Frame::Letters { letters }) => {
                for (i, line) in letters.iter().enumerate() {
                    if let Err(e) = InboxEntry::from_line(line, i + 1) {
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
            Ok(Frame::Hello { office } | Frame::Welcome { office }) => {
                assert!(office.len() <= body.len());
            }
            Ok(_) => {}
            Err(e) => assert!(
                matches!(
                    e,
                    FrameError::Malformed(_) | FrameError::UnknownVersion { .. }
                ),
                "decode answered {e:?}"
            ),
        }
        // The same body behind a length prefix, announced right, short, long or huge.
        let announced = match src.below(4) {
            0 => u32::MAX,
            1 => body.len().saturating_sub(1) as u32,
            2 => body.len() as u32 + 1,
            _ => body.len() as u32,
        };
        let mut stream = announced.to_be_bytes().to_vec();
        stream.extend_from_slice(&body);
        let mut reader: &[u8] = &stream;
        let read = frame::read(&mut reader)
            .now_or_never()
            .expect("reading from memory never waits");
        match read {
            Ok(frame) => {
                assert_eq!(announced as usize, body.len());
                assert_eq!(Ok(&frame), decoded.as_ref().map_err(|_| ()));
            }
            Err(FrameError::Oversized { len, .. }) => {
                assert!(len > MAX_FRAME as u64);
                assert_eq!(
                    reader.len(),
                    body.len(),
                    "nothing of an oversized frame is read"
                );
            }
            Err(FrameError::Truncated) => assert!(announced as usize > body.len()),
            Err(e) => assert!(
                matches!(
                    e,
                    FrameError::Malformed(_) | FrameError::UnknownVersion { .. }
                ),
                "read answered {e:?}"
            ),
        }
        let line = letter_line(&mut src);
        if let Ok(entry) = InboxEntry::from_line(&line, 1) {
            let again = entry.to_line().expect("a parsed entry renders");
            assert!(again.len() <= 8 * line.len() + 64, "{line:?} -> {again:?}");
        }
        let text = String::from_utf8_lossy(input);
        if let Ok(fp) = Fingerprint::parse(&text) {
            assert_eq!(Fingerprint::parse(&fp.to_string()).ok(), Some(fp));
        }
    });
}
