//! The versioned JSON-lines encoding shared by every record l3m stores in Git.
//!
//! Ledger rows, Log records, letters and read marks are stored one JSON object per line, each
//! carrying a `v` field. A reader refuses a line whose version it does not know, by number, rather
//! than guessing; a line that is not valid JSON is refused with its position, and nothing is lost.

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// The encoding version written by this build.
pub const VERSION: u32 = 1;

/// The longest line a chain stores (a Log record, an inbox line), in bytes as rendered. Writers
/// refuse a longer one, naming this limit, so no stored item can outgrow what its reader reads:
/// one line, in a reply page with its envelope, always fits the bus's 1 MiB message.
pub const MAX_STORED_LINE: usize = 256 * 1024;

/// The most line bytes one reply page carries beyond its first line; a reader asks again from
/// where the page ended. With [`MAX_STORED_LINE`] it bounds every page under the bus's limit.
pub const PAGE_BYTES: usize = 512 * 1024;

/// The most lines one reply page carries, whatever their size: a reader of a long chain then
/// reads each stored line once, not the whole rest of the chain for every page.
pub const PAGE_LINES: u64 = 512;

/// How many of `lines` (lengths in bytes, oldest first) one page carries: as many as fit
/// [`PAGE_BYTES`], and always at least one, so a reader always makes progress.
pub fn page_len(lines: impl IntoIterator<Item = usize>) -> usize {
    let mut total = 0usize;
    let mut n = 0usize;
    for len in lines {
        total = total.saturating_add(len);
        if n > 0 && total > PAGE_BYTES {
            break;
        }
        n += 1;
    }
    n
}

/// `lines` in order, grouped so each group's bytes stay within `max_bytes` (a line longer
/// than that goes alone): how a writer splits lines into messages its reader can take.
pub fn batches(lines: impl IntoIterator<Item = String>, max_bytes: usize) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut bytes = 0usize;
    for line in lines {
        match out.last_mut() {
            Some(batch) if bytes.saturating_add(line.len()) <= max_bytes => {
                bytes += line.len();
                batch.push(line);
            }
            _ => {
                bytes = line.len();
                out.push(vec![line]);
            }
        }
    }
    out
}

/// A record as stored: the version and the record's own fields, flattened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versioned<T> {
    /// Encoding version; see [`VERSION`].
    pub v: u32,
    /// The record.
    #[serde(flatten)]
    pub body: T,
}

/// A stored line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line is not JSON, or not a record of the expected shape.
    #[error("line {line}: not a valid record: {reason}")]
    Malformed {
        /// One-based line number within the blob.
        line: usize,
        /// What the parser said.
        reason: String,
    },
    /// The line carries a version this build does not read.
    #[error(
        "line {line}: record version {found} is not supported (this build reads version {VERSION}); upgrade l3m"
    )]
    UnknownVersion {
        /// One-based line number within the blob.
        line: usize,
        /// The version found.
        found: u32,
    },
    /// A rendered line contained a newline, which would split it into two records.
    #[error("a record rendered to more than one line")]
    Newline,
}

/// Renders one record as one JSON line (without the trailing newline).
pub fn to_line<T: Serialize>(body: &T) -> Result<String, LineError> {
    #[derive(Serialize)]
    struct Out<'a, T> {
        v: u32,
        #[serde(flatten)]
        body: &'a T,
    }
    let line =
        serde_json::to_string(&Out { v: VERSION, body }).map_err(|e| LineError::Malformed {
            line: 1,
            reason: e.to_string(),
        })?;
    // serde_json escapes control characters inside strings, so this can only fire if a custom
    // Serialize impl writes raw text; it is checked rather than assumed.
    if line.contains('\n') {
        return Err(LineError::Newline);
    }
    Ok(line)
}

/// Parses one line; `line` is its one-based number, used in errors.
pub fn from_line<T: DeserializeOwned>(text: &str, line: usize) -> Result<T, LineError> {
    #[derive(Deserialize)]
    struct Probe {
        v: u32,
    }
    let probe: Probe = serde_json::from_str(text).map_err(|e| LineError::Malformed {
        line,
        reason: e.to_string(),
    })?;
    if probe.v != VERSION {
        return Err(LineError::UnknownVersion {
            line,
            found: probe.v,
        });
    }
    let rec: Versioned<T> = serde_json::from_str(text).map_err(|e| LineError::Malformed {
        line,
        reason: e.to_string(),
    })?;
    Ok(rec.body)
}

/// Parses a blob of JSON lines, skipping blank lines.
pub fn from_lines<T: DeserializeOwned>(blob: &str) -> Result<Vec<T>, LineError> {
    blob.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| from_line(l, i + 1))
        .collect()
}

/// Renders records as a blob of JSON lines, each ending in a newline.
pub fn to_lines<'a, T: Serialize + 'a>(
    records: impl IntoIterator<Item = &'a T>,
) -> Result<String, LineError> {
    let mut out = String::new();
    for r in records {
        out.push_str(&to_line(r)?);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_keep_order_and_stay_within_the_limit_but_for_a_longer_line() {
        let lines: Vec<String> = [10, 300, 300, 5, 700, 7]
            .iter()
            .enumerate()
            .map(|(i, n)| i.to_string().repeat(*n))
            .collect();
        let batches = batches(lines.clone(), 600);
        assert_eq!(batches.concat(), lines);
        for batch in &batches {
            let bytes: usize = batch.iter().map(String::len).sum();
            assert!(
                !batch.is_empty() && (bytes <= 600 || batch.len() == 1),
                "{bytes}"
            );
        }
        assert_eq!(batches.len(), 4);
    }

    proptest::proptest! {
        /// A page is never empty when lines remain, and never carries more than its budget
        /// beyond its first line; so a page of stored lines always fits one bus message.
        #[test]
        fn a_page_makes_progress_and_stays_within_its_budget(
            lens in proptest::collection::vec(0usize..=MAX_STORED_LINE, 0..40)
        ) {
            let n = page_len(lens.iter().copied());
            proptest::prop_assert_eq!(n == 0, lens.is_empty());
            let carried: usize = lens[..n].iter().sum();
            proptest::prop_assert!(n <= 1 || carried <= PAGE_BYTES);
            proptest::prop_assert!(carried <= PAGE_BYTES.max(MAX_STORED_LINE));
            if n < lens.len() {
                proptest::prop_assert!(carried + lens[n] > PAGE_BYTES, "a page stops only when full");
            }
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "kebab-case")]
    enum Rec {
        Hello { text: String },
    }

    #[test]
    fn round_trips_and_refuses_versions() {
        let r = Rec::Hello {
            text: "a\nb".into(),
        };
        let line = to_line(&r).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains("\"v\":1"));
        assert_eq!(from_line::<Rec>(&line, 1).unwrap(), r);
        let future = line.replace("\"v\":1", "\"v\":9");
        assert_eq!(
            from_line::<Rec>(&future, 3),
            Err(LineError::UnknownVersion { line: 3, found: 9 })
        );
        assert!(matches!(
            from_line::<Rec>("{", 2),
            Err(LineError::Malformed { line: 2, .. })
        ));
        let blob = to_lines([&r, &r]).unwrap();
        assert_eq!(from_lines::<Rec>(&blob).unwrap().len(), 2);
    }
}
