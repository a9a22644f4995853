//! Server-sent events, parsed incrementally from the chunks of a response body.
//!
//! Both dialects stream their replies as `text/event-stream`. Chunks split anywhere — inside a
//! line, inside a UTF-8 character, between `\r` and `\n` — so the parser keeps the bytes of the
//! unfinished line and hands out an [`Event`] at each blank line. It follows the WHATWG rules the
//! providers rely on: `event:` and `data:` fields (one optional space after the colon), several
//! `data:` lines joined by `\n`, comments (`:`) and other fields ignored, lines ended by `\n`,
//! `\r\n` or `\r`.
//!
//! **Must never**: hold unbounded memory for a hostile stream; a line longer than
//! [`MAX_LINE_BYTES`] is refused.
//!
//! # Layout
//! - [`Event`]: one dispatched event.
//! - [`Parser`]: the incremental parser; [`Parser::feed`] takes a chunk and returns the events
//!   it completed.

/// The longest line accepted, in bytes. A tool call's whole input arrives in many small deltas,
/// so no honest line comes near this.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field, if the event had one.
    pub name: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// Why a stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line is longer than [`MAX_LINE_BYTES`].
    #[error("an event-stream line is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    /// A line is not UTF-8.
    #[error("an event-stream line is not UTF-8: {0}")]
    NotUtf8(String),
}

/// The incremental parser.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The last byte seen was a `\r`, so a following `\n` belongs to the same line end.
    after_cr: bool,
    /// The event being built.
    pending: Event,
    /// Whether `pending` has any field yet (an empty `data:` still dispatches).
    has_data: bool,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next chunk of the body and returns the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, SseError> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line)? {
                        events.push(event);
                    }
                }
                _ => {
                    if self.line.len() >= MAX_LINE_BYTES {
                        return Err(SseError::LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    /// The event a stream's end completes, if its last event had no blank line after it.
    pub fn finish(&mut self) -> Result<Option<Event>, SseError> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.end_line(&line)?;
        }
        Ok(self.dispatch())
    }

    fn end_line(&mut self, line: &[u8]) -> Result<Option<Event>, SseError> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        let line = std::str::from_utf8(line).map_err(|e| SseError::NotUtf8(e.to_string()))?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.pending.name = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<Event> {
        let event = std::mem::take(&mut self.pending);
        let had_data = std::mem::take(&mut self.has_data);
        had_data.then_some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(parser.feed(chunk).unwrap());
        }
        events.extend(parser.finish().unwrap());
        events
    }

    fn event(name: Option<&str>, data: &str) -> Event {
        Event {
            name: name.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_split_anywhere_parse_the_same() {
        let body = "event: a\r\ndata: {\"x\":\"é\"}\r\n\r\n: comment\n\ndata: one\ndata:two\n\n";
        let whole = all(&[body.as_bytes()]);
        assert_eq!(
            whole,
            vec![event(Some("a"), "{\"x\":\"é\"}"), event(None, "one\ntwo")]
        );
        let bytes = body.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(all(&[&bytes[..cut], &bytes[cut..]]), whole, "cut at {cut}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(all(&singles), whole);
    }

    #[test]
    fn bare_cr_ends_lines_and_a_final_event_without_blank_line_dispatches() {
        assert_eq!(
            all(&[b"data: a\r\rdata: b"]),
            vec![event(None, "a"), event(None, "b")]
        );
    }

    #[test]
    fn fields_without_data_dispatch_nothing() {
        assert_eq!(all(&[b"event: ping\n\nretry: 5\n\n"]), vec![]);
    }

    #[test]
    fn bad_utf8_and_endless_lines_are_errors() {
        let mut parser = Parser::new();
        assert!(matches!(
            parser.feed(b"data: \xff\xfe\n"),
            Err(SseError::NotUtf8(_))
        ));
        let mut parser = Parser::new();
        let long = vec![b'x'; MAX_LINE_BYTES + 1];
        assert_eq!(parser.feed(&long), Err(SseError::LineTooLong));
    }
}
