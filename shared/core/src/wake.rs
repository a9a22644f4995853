//! Whether an asleep agent is owed a wake: the supervisor's decision, over what one read of the
//! agent's Log, cards chain and vigils chain gives.
//!
//! Unread mail wakes an agent before anything else is read ([`crate::mail::Inbox::unread`]).
//! Past that, an agent is owed a wake for a turn its Log left under way that waits on its
//! sequencer (one that died mid-turn), a human's answer at a card whose call its Log holds at a
//! stalemate, or a vigil that fired and its Log has not journaled ([`owed_wake`]). Most asleep
//! agents ended their last turn, which the Log's last record shows: [`log_may_owe`] says from
//! that record alone, and the two chains, whether the whole Log need be read at all, and it
//! never says no when [`owed_wake`] would say yes.

use crate::log::{EventId, Record, RecordBody};
use crate::owed::Owed;
use crate::review::card::{CardLine, answers_awaited};

/// Why an asleep agent is owed a wake, when its mail does not already say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A turn under way that waits on its sequencer, not on humans at cards: a sequencer that
    /// died mid-turn left it, and nothing else would wake the agent.
    TurnLeftOpen,
    /// A human answered a card whose call the Log still holds at a stalemate.
    CardAnswered,
    /// A vigil fired whose event the Log has not journaled.
    VigilUnseen,
}

/// Whether the Log may owe a wake, judged from its last record (`None` for an empty Log), the
/// cards chain and the fired vigils' event ids: `false` means [`owed_wake`] is `None` whatever
/// the rest of the Log holds, so it need not be read.
pub fn log_may_owe(last: Option<&RecordBody>, cards: &[CardLine], fired: &[EventId]) -> bool {
    !ended(last)
        || cards.iter().any(|l| matches!(l, CardLine::Answered { .. }))
        || !fired.is_empty()
}

/// Why an asleep agent whose Log is `records` is owed a wake, given its cards chain and the
/// event ids of the vigils that fired for it; `None` if it is not.
pub fn owed_wake(records: &[Record], cards: &[CardLine], fired: &[EventId]) -> Option<Wake> {
    let owed = Owed::from_records(records);
    if !ended(records.last().map(|r| &r.body)) && owed.is_live() && !owed.waits_only_on_cards() {
        Some(Wake::TurnLeftOpen)
    } else if !answers_awaited(cards, &owed).is_empty() {
        Some(Wake::CardAnswered)
    } else if fired.iter().any(|id| !owed.has_event(id)) {
        Some(Wake::VigilUnseen)
    } else {
        None
    }
}

/// Whether a Log whose last record is `last` ended its last turn (an empty Log has none open).
fn ended(last: Option<&RecordBody>) -> bool {
    matches!(last, None | Some(RecordBody::TurnEnd))
}
