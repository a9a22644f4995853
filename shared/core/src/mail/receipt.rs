//! Receipts: a read mark on airmail, travelling back to the hub that sent the letter.
//!
//! When a reader marks read a letter another hub carried here, the host also stages a
//! [`Receipt`] on the reader's outbox, naming the office the letter came from and its sender
//! there. The postman carries it back like a letter; the sending hub checks that the named
//! sender really staged that letter for that office ([`Receipt::returned`] rewrites the office
//! to the carrier, as [`receive`](super::receive) does for a letter) and puts it in the
//! sender's inbox, where a receipt is kept by set union like any entry.

use serde::{Deserialize, Serialize};

use super::letter::LetterId;
use crate::names::{AgentName, Entity, OfficeName};

/// A read mark on a letter that crossed between hubs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Receipt {
    /// The letter read.
    pub letter: LetterId,
    /// The other hub: on the reader's outbox, the office the letter came from (where the
    /// receipt goes); in the sender's inbox, the office that carried the receipt back.
    pub office: OfficeName,
    /// Who sent the letter, on the sending hub.
    pub sender: AgentName,
    /// Who read it, on the reading hub.
    pub by: Entity,
    /// When, in milliseconds since the Unix epoch (the reading hub's clock).
    pub at_ms: u64,
}

impl Receipt {
    /// The receipt as kept on the sending hub: `office` is now the office that carried it
    /// back, whatever the reading hub wrote there.
    pub fn returned(self, carrier: &OfficeName) -> Receipt {
        Receipt {
            office: carrier.clone(),
            ..self
        }
    }

    /// Whether `self` and `other` say the same thing: the same letter, read by the same
    /// reader, reported by the same office. A second mark of the same read (a retry, or the
    /// reader marking it again) adds nothing.
    pub fn same_read(&self, other: &Receipt) -> bool {
        (&self.letter, &self.office, &self.by) == (&other.letter, &other.office, &other.by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(office: &str, at_ms: u64) -> Receipt {
        Receipt {
            letter: LetterId::parse("l1").unwrap(),
            office: OfficeName::parse(office).unwrap(),
            sender: AgentName::parse("lead").unwrap(),
            by: Entity::parse("bob").unwrap(),
            at_ms,
        }
    }

    #[test]
    fn a_returned_receipt_names_its_carrier_and_keeps_the_rest() {
        let back = receipt("north", 5).returned(&OfficeName::parse("south").unwrap());
        assert_eq!(back.office.as_str(), "south");
        assert_eq!((back.sender.as_str(), back.at_ms), ("lead", 5));
        assert!(back.same_read(&receipt("south", 9)));
        assert!(!back.same_read(&receipt("north", 5)));
    }
}
