//! What every fuzz target shares: the bounded run and its rate, a reader of the fuzzer's bytes,
//! a mutator of valid seeds, and a MessagePack value built from bytes with a type's own field
//! names (so a fuzzed body gets past "not a map" to the checks of each field).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::de::{self, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

/// The variable that sets every target's number of inputs (the long run); unset, each target
/// runs its CI count.
pub const ITERATIONS_VAR: &str = "L3M_FUZZ_ITERATIONS";

/// How many inputs a target gets: `L3M_FUZZ_ITERATIONS` if set, else `ci`.
pub fn iterations(ci: usize) -> usize {
    std::env::var(ITERATIONS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}

/// Runs `check` over `iterations(ci)` inputs of at most `max_len` bytes from bolero's engine
/// (a panic fails the test with the seed that replays it: `BOLERO_RANDOM_SEED`), then prints
/// the target's rate, which `docs/guarantees.md` reports.
pub fn run(
    name: &str,
    ci: usize,
    max_len: usize,
    check: impl Fn(&[u8]) + std::panic::RefUnwindSafe,
) {
    let count = AtomicU64::new(0);
    let start = Instant::now();
    bolero::check!()
        .with_iterations(iterations(ci))
        .with_max_len(max_len)
        .with_test_time(Duration::MAX)
        .for_each(|bytes: &[u8]| {
            count.fetch_add(1, Ordering::Relaxed);
            check(bytes);
        });
    let n = count.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {name}: {n} inputs in {secs:.2} s, {:.0} inputs/s",
        n as f64 / secs.max(1e-9)
    );
    assert!(n > 0, "fuzz {name} ran no input");
}

/// Reads the fuzzer's bytes as choices; past the end every choice is 0, so any input is whole.
#[derive(Debug)]
pub struct Src<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Src<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Src { bytes, at: 0 }
    }

    /// The next byte, or 0 past the end.
    pub fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// Whether the input is used up.
    pub fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// A choice below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        let wide = u16::from_le_bytes([self.byte(), self.byte()]);
        usize::from(wide) % n.max(1)
    }

    /// One of `items`.
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.below(items.len())]
    }

    /// A little-endian u64 from the next eight bytes.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.byte();
        }
        u64::from_le_bytes(b)
    }

    /// Up to `max` raw bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.byte()).collect()
    }
}

/// Bytes that break parsers more often than random ones: MessagePack markers, delimiters,
/// quotes, escapes, lone UTF-8 lead bytes and the ends of integer ranges.
const INTERESTING: &[u8] = &[
    0x00, 0x7f, 0x80, 0xff, 0xc0, 0xc1, 0xc4, 0xc6, 0xcc, 0xcf, 0xd3, 0xd9, 0xdb, 0xdc, 0xdd, 0xde,
    0xdf, 0x90, 0x9f, 0xa0, 0xbf, b'\n', b'\r', b' ', b'"', b'\\', b'{', b'}', b'[', b']', b':',
    b'=', b',', b'/', b'.', b'#', b'\'', b'(', b')', 0xe2, 0xf0,
];

/// `seed` changed by the edits the fuzzer's bytes choose: flips, interesting bytes, inserts,
/// deletions, duplicated or spliced ranges, truncation, and pieces of `tokens`.
pub fn mutate(seed: &[u8], src: &mut Src<'_>, tokens: &[&str]) -> Vec<u8> {
    let mut out = seed.to_vec();
    let edits = 1 + src.below(8);
    for _ in 0..edits {
        if src.done() {
            break;
        }
        let at = src.below(out.len() + 1);
        match src.below(8) {
            0 if at < out.len() => out[at] ^= 1 << src.below(8),
            1 if at < out.len() => out[at] = *src.pick(INTERESTING),
            2 => out.insert(at, *src.pick(INTERESTING)),
            3 => {
                let end = (at + 1 + src.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 => {
                let end = (at + 1 + src.below(64)).min(out.len());
                let piece = out[at.min(end)..end].to_vec();
                let to = src.below(out.len() + 1);
                out.splice(to..to, piece);
            }
            5 => out.truncate(at),
            6 if !tokens.is_empty() => {
                let token = src.pick(tokens).as_bytes();
                out.splice(at..at, token.iter().copied());
            }
            _ => {
                let more = src.bytes(8);
                out.splice(at..at, more);
            }
        }
    }
    out
}

/// A MessagePack value to encode; `Str` keys make maps that look like a struct's.
#[derive(Debug, Clone)]
pub enum Mp {
    /// nil
    Nil,
    /// a boolean
    Bool(bool),
    /// an unsigned integer
    Uint(u64),
    /// a negative integer
    Int(i64),
    /// a float
    F64(f64),
    /// a string
    Str(String),
    /// binary
    Bin(Vec<u8>),
    /// an array
    Arr(Vec<Mp>),
    /// a map
    Map(Vec<(Mp, Mp)>),
}

impl Serialize for Mp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Mp::Nil => s.serialize_unit(),
            Mp::Bool(b) => s.serialize_bool(*b),
            Mp::Uint(n) => s.serialize_u64(*n),
            Mp::Int(n) => s.serialize_i64(*n),
            Mp::F64(f) => s.serialize_f64(*f),
            Mp::Str(t) => s.serialize_str(t),
            Mp::Bin(b) => s.serialize_bytes(b),
            Mp::Arr(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Mp::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl Mp {
    /// The value's MessagePack bytes.
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).unwrap_or_default()
    }
}

/// Strings a request's fields hold when they are valid, and near misses of them.
pub const WORDS: &[&str] = &[
    "",
    "a",
    "lead",
    "lead/worker",
    "lead/../x",
    "/lead",
    "human:alice",
    "office:south",
    "svc:post",
    "south",
    "refs/heads/l3m/lead/work",
    "refs/heads/../../x",
    "workspace",
    "workspace/a.txt",
    "c-0123456789abcdef",
    "0123456789abcdef0123456789abcdef01234567",
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "blake3:00",
    "persist",
    "drive",
    "letter",
    "receipt",
    "hello",
    "welcome",
    "refused",
    "letters",
    "delivered",
    "done",
    "status",
    "forecast",
    "interrupt",
    "rewind",
    "op",
    "kind",
    "\u{202e}evil",
    "x\ny",
    "é",
];

/// A value made from `src`, at most `depth` levels deep, whose maps use `keys` (a type's field
/// names) and whose strings are mostly [`WORDS`] or `keys`.
pub fn value(src: &mut Src<'_>, keys: &[&str], depth: usize) -> Mp {
    let top = if depth == 0 { 7 } else { 9 };
    match src.below(top) {
        0 => Mp::Nil,
        1 => Mp::Bool(src.byte() & 1 == 1),
        2 => Mp::Uint(match src.below(4) {
            0 => u64::from(src.byte()),
            1 => u64::MAX - u64::from(src.byte()),
            2 => u64::from(u32::MAX),
            _ => src.u64(),
        }),
        3 => Mp::Int(-1 - i64::from(src.byte()) * i64::from(src.byte())),
        4 => Mp::F64(f64::from(src.byte()) / 3.0),
        5 | 6 => Mp::Str(string(src, keys)),
        7 if src.byte() & 1 == 0 => Mp::Bin(src.bytes(64)),
        7 => Mp::Arr(
            (0..src.below(4))
                .map(|_| value(src, keys, depth - 1))
                .collect(),
        ),
        _ => object(src, keys, depth - 1),
    }
}

/// A string: one of [`WORDS`], one of `keys`, or raw bytes made text.
pub fn string(src: &mut Src<'_>, keys: &[&str]) -> String {
    match src.below(4) {
        0 | 1 => (*src.pick(WORDS)).to_owned(),
        2 if !keys.is_empty() => (*src.pick(keys)).to_owned(),
        _ => String::from_utf8_lossy(&src.bytes(24)).into_owned(),
    }
}

/// A map whose keys are mostly `keys` (a struct's fields, or an enum's tag and variants).
pub fn object(src: &mut Src<'_>, keys: &[&str], depth: usize) -> Mp {
    let keys = if keys.is_empty() { WORDS } else { keys };
    let n = src.below(keys.len() + 2);
    let entries = (0..n)
        .map(|_| {
            let key = match src.below(8) {
                0 => Mp::Str(string(src, &[])),
                1 => Mp::Uint(u64::from(src.byte())),
                _ => Mp::Str((*src.pick(keys)).to_owned()),
            };
            (key, value(src, keys, depth))
        })
        .collect();
    Mp::Map(entries)
}

/// The field names (or variant names) a type asks its deserializer for, read by asking it to
/// deserialize from a deserializer that only records them.
pub fn field_names<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
    let mut names = Vec::new();
    let _refused = T::deserialize(Names(&mut names));
    names
}

struct Names<'a>(&'a mut Vec<&'static str>);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("names read")
    }
}
impl std::error::Error for Stop {}
impl de::Error for Stop {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for Names<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        self.0.extend_from_slice(fields);
        Err(Stop)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        self.0.extend_from_slice(variants);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier
        ignored_any
    }
}
