//! Inboxes: a set of letters and read marks that merges by union.
//!
//! An inbox ref is append-only, and two hosts may append to copies of it at once; the postman
//! relays another hub's letters into it. Every one of those joins is [`Inbox::merge`], plain set
//! union, so it is commutative, associative and idempotent and nothing is lost or invented.
//!
//! # Two letters with one id
//! Ids are minted by hosts, so a faulty or hostile host could mint one id for two different
//! letters. The inbox keeps **both**, as a set ordered by the letters' total order, so every
//! replica holds the same thing whatever order they arrived in, and the union laws still hold.
//! Such an id is a *conflict*: [`Inbox::conflicts`] reports it, and [`Inbox::get`] answers `None`
//! for it rather than silently preferring one copy. A read mark names an id, so it covers every
//! letter under that id.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::letter::{Letter, LetterError, LetterId};
use super::line::InboxEntry;
use super::receipt::Receipt;
use crate::names::Entity;

/// A reader's mark on a letter: the sender's receipt, and a fact a vigil can watch.
///
/// A mark may reach an inbox before its letter does (receipts travel separately), so it is kept
/// whether or not the letter is present.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReadMark {
    /// The letter read.
    pub letter: LetterId,
    /// Who read it.
    pub by: Entity,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// The letters, read marks and receipts of one inbox, as sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inbox {
    /// Letters by id; a set per id holds more than one letter only under a conflict, and is
    /// never empty.
    letters: BTreeMap<LetterId, BTreeSet<Letter>>,
    marks: BTreeSet<ReadMark>,
    receipts: BTreeSet<Receipt>,
}

impl Inbox {
    /// Adds a letter; `false` if this exact letter was already there.
    pub fn insert(&mut self, letter: Letter) -> bool {
        self.letters
            .entry(letter.id.clone())
            .or_default()
            .insert(letter)
    }

    /// Adds a read mark; `false` if this exact mark was already there.
    pub fn mark_read(&mut self, mark: ReadMark) -> bool {
        self.marks.insert(mark)
    }

    /// Adds one entry of an inbox chain, whichever it is; `false` if it was already there.
    pub fn add(&mut self, entry: InboxEntry) -> bool {
        match entry {
            InboxEntry::Letter(letter) => self.insert(*letter),
            InboxEntry::ReadMark(mark) => self.mark_read(mark),
            InboxEntry::Receipt(receipt) => self.insert_receipt(receipt),
        }
    }

    /// Adds a receipt from another hub; `false` if this exact receipt was already there.
    pub fn insert_receipt(&mut self, receipt: Receipt) -> bool {
        self.receipts.insert(receipt)
    }

    /// The union of two inboxes: every letter, mark and receipt of either, nothing else.
    pub fn merge(&self, other: &Inbox) -> Inbox {
        let mut out = self.clone();
        for (id, letters) in &other.letters {
            out.letters
                .entry(id.clone())
                .or_default()
                .extend(letters.iter().cloned());
        }
        out.marks.extend(other.marks.iter().cloned());
        out.receipts.extend(other.receipts.iter().cloned());
        out
    }

    /// Every receipt another hub sent back, ordered by letter id.
    pub fn receipts(&self) -> impl Iterator<Item = &Receipt> {
        self.receipts.iter()
    }

    /// Every letter, ordered by id (and, under a conflict, by the letters' total order).
    pub fn letters(&self) -> impl Iterator<Item = &Letter> {
        self.letters.values().flatten()
    }

    /// Every read mark, ordered by letter id, reader and time.
    pub fn marks(&self) -> impl Iterator<Item = &ReadMark> {
        self.marks.iter()
    }

    /// The letter with this id, or `None` if there is none or the id is in conflict.
    pub fn get(&self, id: &LetterId) -> Option<&Letter> {
        match self.letters.get(id) {
            Some(letters) if letters.len() == 1 => letters.first(),
            _ => None,
        }
    }

    /// Ids that name more than one letter, with those letters.
    pub fn conflicts(&self) -> impl Iterator<Item = (&LetterId, &BTreeSet<Letter>)> {
        self.letters.iter().filter(|(_, letters)| letters.len() > 1)
    }

    /// Whether `by` has marked the letter `id` read.
    pub fn is_read(&self, id: &LetterId, by: &Entity) -> bool {
        let bound = |at_ms| ReadMark {
            letter: id.clone(),
            by: by.clone(),
            at_ms,
        };
        self.marks
            .range(bound(0)..=bound(u64::MAX))
            .next()
            .is_some()
    }

    /// The letters `reader` has not marked read, ordered by id.
    pub fn unread<'a>(&'a self, reader: &'a Entity) -> impl Iterator<Item = &'a Letter> + 'a {
        self.letters
            .iter()
            .filter(move |(id, _)| !self.is_read(id, reader))
            .flat_map(|(_, letters)| letters)
    }

    /// The letters of `entries` that `reader` has not marked read, in the order the chain holds
    /// them (the order they arrived, which is how the sequencer shows them and which a
    /// program's answer is taken in): [`Inbox::unread`] over the same entries, in chain order.
    /// A mark anywhere in `entries` counts, before or after its letter.
    pub fn unread_in_order<'a>(
        entries: &'a [InboxEntry],
        reader: &Entity,
    ) -> impl Iterator<Item = &'a Letter> + 'a {
        let inbox: Inbox = entries.iter().cloned().collect();
        let unread: BTreeSet<Letter> = inbox.unread(reader).cloned().collect();
        entries
            .iter()
            .filter_map(InboxEntry::letter)
            .filter(move |letter| unread.contains(*letter))
    }

    /// Reads an inbox blob of storage lines (blank lines skipped); errors carry the line number.
    pub fn from_lines(blob: &str) -> Result<Inbox, LetterError> {
        let mut inbox = Inbox::default();
        for (index, text) in blob.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            inbox.add(InboxEntry::from_line(text, index + 1)?);
        }
        Ok(inbox)
    }

    /// Writes the whole inbox as storage lines, letters, marks then receipts, each ending in a
    /// newline.
    pub fn to_lines(&self) -> Result<String, LetterError> {
        let letters = self
            .letters()
            .map(|l| InboxEntry::Letter(Box::new(l.clone())));
        let marks = self.marks().cloned().map(InboxEntry::ReadMark);
        let receipts = self.receipts().cloned().map(InboxEntry::Receipt);
        let mut out = String::new();
        for entry in letters.chain(marks).chain(receipts) {
            out.push_str(&entry.to_line()?);
            out.push('\n');
        }
        Ok(out)
    }
}

impl Extend<InboxEntry> for Inbox {
    fn extend<T: IntoIterator<Item = InboxEntry>>(&mut self, entries: T) {
        for entry in entries {
            self.add(entry);
        }
    }
}

impl FromIterator<InboxEntry> for Inbox {
    fn from_iter<T: IntoIterator<Item = InboxEntry>>(entries: T) -> Inbox {
        let mut inbox = Inbox::default();
        inbox.extend(entries);
        inbox
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::Address;

    fn letter(id: &str, body: &str) -> Letter {
        Letter {
            id: LetterId::parse(id).unwrap(),
            at_ms: 1,
            from: Address::parse("alice/main/worker").unwrap(),
            to: Address::parse("alice/main").unwrap(),
            subject: None,
            summary: None,
            in_reply_to: None,
            body: body.into(),
        }
    }

    fn entity(s: &str) -> Entity {
        Entity::parse(s).unwrap()
    }

    #[test]
    fn marks_make_letters_read_for_that_reader_only() {
        let mut inbox = Inbox::default();
        assert!(inbox.insert(letter("a", "x")));
        assert!(!inbox.insert(letter("a", "x")));
        inbox.insert(letter("b", "y"));
        let parent = entity("alice/main");
        let bob = entity("human:bob");
        assert!(inbox.mark_read(ReadMark {
            letter: LetterId::parse("a").unwrap(),
            by: parent.clone(),
            at_ms: 3,
        }));
        assert!(inbox.is_read(&LetterId::parse("a").unwrap(), &parent));
        assert!(!inbox.is_read(&LetterId::parse("a").unwrap(), &bob));
        let unread: Vec<_> = inbox.unread(&parent).map(|l| l.id.as_str()).collect();
        assert_eq!(unread, ["b"]);
        assert_eq!(inbox.unread(&bob).count(), 2);
    }

    #[test]
    fn a_conflicting_id_keeps_both_and_is_reported() {
        let mut inbox = Inbox::default();
        inbox.insert(letter("a", "one"));
        inbox.insert(letter("a", "two"));
        let id = LetterId::parse("a").unwrap();
        assert_eq!(inbox.get(&id), None);
        let conflicts: Vec<_> = inbox.conflicts().collect();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].1.len(), 2);
        assert_eq!(inbox.letters().count(), 2);
        let mut single = Inbox::default();
        single.insert(letter("a", "one"));
        assert_eq!(single.get(&id).map(|l| l.body.as_str()), Some("one"));
        assert_eq!(single.conflicts().count(), 0);
    }

    #[test]
    fn lines_round_trip_and_errors_name_the_line() {
        let mut inbox = Inbox::default();
        inbox.insert(letter("a", "x\u{2028}y"));
        inbox.mark_read(ReadMark {
            letter: LetterId::parse("zz").unwrap(),
            by: entity("human:bob"),
            at_ms: 2,
        });
        inbox.insert_receipt(Receipt {
            letter: LetterId::parse("a").unwrap(),
            office: crate::names::OfficeName::parse("south").unwrap(),
            sender: crate::names::AgentName::parse("alice/main").unwrap(),
            by: entity("bob"),
            at_ms: 3,
        });
        let blob = inbox.to_lines().unwrap();
        assert_eq!(blob.lines().count(), 3);
        assert_eq!(Inbox::from_lines(&format!("\n{blob}\n")).unwrap(), inbox);
        let err = Inbox::from_lines(&format!("{blob}{{broken\n")).unwrap_err();
        assert!(err.to_string().starts_with("line 4:"), "{err}");
    }
}
