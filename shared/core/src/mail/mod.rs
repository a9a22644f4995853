//! Mail: addresses, letters, inboxes and read marks, as pure values.
//!
//! This module decides what a letter is, not how it travels. The host stamps every letter's id,
//! time and sender ([`stamp`]); an address stars exactly the one party that must handle it, and
//! the star lands only on a reader the machine can vouch for ([`Address::check_star`]); a letter
//! is stored as exactly one line that no body can break ([`Letter::render_line`]); and an inbox
//! is a set that merges by union, losing nothing and inventing nothing ([`Inbox::merge`]).
//!
//! **Must never** read a clock, mint an id or touch a ref: ids and times are arguments, and the
//! hub store appends the lines this module renders.
//!
//! # Layout
//! - `address`: [`Address`] and its two written forms.
//! - `party`: the [`Party`] kinds, the [`Star`], and [`PlaceName`]s for the hint parties.
//! - `letter`: [`Letter`], [`LetterId`] and the one-line headline for `git log`.
//! - `line`: the versioned, break-free storage line of every [`InboxEntry`].
//! - `stamp`: [`stamp`], turning a sender's [`Draft`] into a [`Letter`].
//! - `inbox`: [`Inbox`] and [`ReadMark`].
//! - `relay`: airmail arriving from another hub ([`receive`]), and the [`bounce`] for one that
//!   cannot be delivered.
//! - [`delivery`]: a batch of airmail another hub carried here: what goes onto the mirror,
//!   into which inbox, and what is bounced or refused.
//! - `receipt`: [`Receipt`], a read mark on airmail travelling back to its sender's hub.
//!
//! # Example
//! ```
//! use l3m_core::mail::{stamp, Address, Draft, Inbox, LetterId, Sender};
//! use l3m_core::names::{AgentName, Entity};
//!
//! let worker = AgentName::parse("alice/main/worker")?;
//! let to = Address::parse("alice/main")?;
//! let sender = Sender::Agent { agent: worker, worktree: None, human: None };
//! let letter = stamp(Draft::new(to, "done\nsecond line"), &sender, LetterId::parse("l-1")?, 7)?;
//!
//! let line = letter.render_line()?;
//! assert_eq!(line.lines().count(), 1);
//! assert_eq!(l3m_core::mail::Letter::parse_line(&line)?, letter);
//!
//! let mut inbox = Inbox::default();
//! inbox.insert(letter);
//! let parent = Entity::parse("alice/main")?;
//! assert_eq!(inbox.unread(&parent).count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod address;
pub mod delivery;
mod inbox;
mod letter;
mod line;
mod party;
mod receipt;
mod relay;
mod stamp;

pub use address::{Address, AddressError};
pub use inbox::{Inbox, ReadMark};
pub use letter::{HEADLINE_TEXT_CHARS, Letter, LetterError, LetterId, MAX_ID_LEN};
pub use line::InboxEntry;
pub use party::{MAX_PLACE_LEN, Parties, Party, PlaceName, Star};
pub use receipt::Receipt;
pub use relay::{AirmailRefusal, BOUNCE_REASON_CHARS, bounce, receive};
pub use stamp::{Draft, Sender, StampError, stamp};

/// Why a short token (a place name or a letter id) was refused.
///
/// Shared by [`PlaceName`] and [`LetterId`], which differ only in the characters they allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenFault {
    /// Nothing was given.
    #[error("it is empty")]
    Empty,
    /// A character outside the token's alphabet.
    #[error("the character {0:?} is not allowed here")]
    BadChar(char),
    /// Longer than the token allows.
    #[error("it is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Length found, in bytes.
        len: usize,
        /// Longest allowed, in bytes.
        max: usize,
    },
}

/// Checks a token is non-empty, at most `max` bytes, and made only of `allowed` characters.
fn check_token(s: &str, max: usize, allowed: impl Fn(char) -> bool) -> Result<(), TokenFault> {
    if s.is_empty() {
        return Err(TokenFault::Empty);
    }
    if let Some(c) = s.chars().find(|c| !allowed(*c)) {
        return Err(TokenFault::BadChar(c));
    }
    if s.len() > max {
        return Err(TokenFault::TooLong { len: s.len(), max });
    }
    Ok(())
}
