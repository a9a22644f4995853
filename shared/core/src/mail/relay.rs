//! Receiving airmail: what a hub makes of a letter another hub's postman carried to it. Pure,
//! so the rules that keep relay honest are tested here.
//!
//! The sending hub stamped the letter: its `from` is that hub's own party (no office: a hub
//! never stamps one), and its `to` names this hub as an office. The receiving hub knows which
//! office carried it (the authenticated peer), so it writes that office into `from` — the
//! recipient sees the true origin — and takes it out of `to`, which is now local. A letter whose
//! `from` already names an office was not stamped by its origin hub: it is refused, never
//! relayed, so a peer cannot pass off a letter as another hub's.

use crate::names::OfficeName;

use super::line::excerpt;
use super::{Address, AddressError, Letter, LetterError, LetterId};

/// How many characters of an office's reason a bounce quotes: the reason is the other hub's
/// text, so it is cut before it reaches an inbox.
pub const BOUNCE_REASON_CHARS: usize = 500;

/// Why a carried letter is not delivered here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AirmailRefusal {
    /// `from` names an office: the letter claims an origin the carrying peer cannot vouch for.
    #[error(
        "letter {letter} claims to come from office {claimed}, but office {carrier} carried it: \
         a hub stamps its own letters without an office, so this one is forged"
    )]
    ForgedOrigin {
        /// The letter.
        letter: String,
        /// The office its `from` names.
        claimed: String,
        /// The office that carried it.
        carrier: String,
    },
    /// `to` names no office: it was never addressed to another hub.
    #[error("letter {letter} is not addressed to an office, so it is not airmail")]
    NotAirmail {
        /// The letter.
        letter: String,
    },
    /// The rewritten address is not valid.
    #[error("letter {letter}: {source}")]
    Address {
        /// The letter.
        letter: String,
        /// Why.
        source: AddressError,
    },
}

/// The letter as delivered here: `from` stamped with `carrier`, the office that brought it,
/// and `to` local.
pub fn receive(letter: Letter, carrier: &OfficeName) -> Result<Letter, AirmailRefusal> {
    let id = letter.id.to_string();
    if let Some(claimed) = letter.from.office() {
        return Err(AirmailRefusal::ForgedOrigin {
            letter: id,
            claimed: claimed.to_string(),
            carrier: carrier.to_string(),
        });
    }
    if letter.to.office().is_none() {
        return Err(AirmailRefusal::NotAirmail { letter: id });
    }
    let with_office = |address: &Address, office: Option<OfficeName>| {
        let mut parties = address.parties();
        parties.office = office;
        Address::new(parties, address.star()).map_err(|source| AirmailRefusal::Address {
            letter: id.clone(),
            source,
        })
    };
    let from = with_office(&letter.from, Some(carrier.clone()))?;
    let to = with_office(&letter.to, None)?;
    Ok(Letter { from, to, ..letter })
}

/// The letter that tells the sender of `letter` (as staged on this hub, addressed to
/// `office`) that the office did not deliver it, and why.
///
/// Its id is derived from the letter's (`bounce:<id>`), so writing it again after a crash or a
/// retry is the same letter, kept once by set union. It comes from the recipient's address at
/// the office and answers the letter (`in_reply_to`); `reason` is the office's text, quoted
/// at most [`BOUNCE_REASON_CHARS`] characters long.
pub fn bounce(
    letter: &Letter,
    office: &OfficeName,
    reason: &str,
    at_ms: u64,
) -> Result<Letter, LetterError> {
    let id = LetterId::parse(&format!("bounce:{}", letter.id))?;
    let what = letter
        .subject
        .as_deref()
        .or(letter.summary.as_deref())
        .unwrap_or(&letter.body);
    Ok(Letter {
        id,
        at_ms,
        from: letter.to.clone(),
        to: letter.from.clone(),
        subject: Some(format!("undeliverable: {}", excerpt(what, 60))),
        summary: None,
        in_reply_to: Some(letter.id.clone()),
        body: format!(
            "Office {office} did not deliver your letter {} to {}: {}",
            letter.id,
            letter.to.render_short(),
            excerpt(reason, BOUNCE_REASON_CHARS)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::{Draft, LetterId, Sender, stamp};
    use crate::names::AgentName;
    use proptest::prelude::*;

    fn office(s: &str) -> OfficeName {
        OfficeName::parse(s).unwrap()
    }

    fn airmail(id: &str, to: &str) -> Letter {
        let sender = Sender::Agent {
            agent: AgentName::parse("lead").unwrap(),
            worktree: None,
            human: None,
        };
        let draft = Draft::new(Address::parse(to).unwrap(), "hello");
        stamp(draft, &sender, LetterId::parse(id).unwrap(), 7).unwrap()
    }

    #[test]
    fn a_carried_letter_names_its_carrier_as_origin_and_is_local_here() {
        let sent = airmail("l1", "office:south agent:bob/main*");
        let got = receive(sent.clone(), &office("north")).unwrap();
        assert_eq!(got.from.office(), Some(&office("north")));
        assert_eq!(got.from.agent(), sent.from.agent());
        assert_eq!(got.to.office(), None);
        assert_eq!(got.to.agent(), sent.to.agent());
        assert_eq!((got.id, got.body), (sent.id, sent.body));
    }

    #[test]
    fn a_letter_claiming_an_origin_or_not_addressed_to_an_office_is_refused() {
        let forged = receive(airmail("l2", "office:south agent:bob*"), &office("north"))
            .and_then(|once| receive(once, &office("east")));
        assert!(
            matches!(&forged, Err(AirmailRefusal::ForgedOrigin { claimed, carrier, .. })
                if claimed == "north" && carrier == "east"),
            "{forged:?}"
        );
        assert!(matches!(
            receive(airmail("l3", "agent:bob*"), &office("north")),
            Err(AirmailRefusal::NotAirmail { .. })
        ));
    }

    #[test]
    fn a_bounce_answers_the_letter_from_its_recipient_and_is_the_same_twice() {
        let sent = airmail("l4", "office:south agent:bob*");
        let reason = "no agent bob lives on this hub\n".repeat(100);
        let first = bounce(&sent, &office("south"), &reason, 9).unwrap();
        assert_eq!(first.id.as_str(), "bounce:l4");
        assert_eq!(first.in_reply_to, Some(sent.id.clone()));
        assert_eq!(
            (first.from.clone(), first.to.clone()),
            (sent.to.clone(), sent.from.clone())
        );
        assert!(
            first
                .body
                .contains("Office south did not deliver your letter l4")
        );
        assert!(
            first.body.chars().count() < BOUNCE_REASON_CHARS + 100,
            "the reason is cut"
        );
        assert!(
            !first.body.contains('\n'),
            "the office's text is quoted escaped"
        );
        assert_eq!(bounce(&sent, &office("south"), &reason, 9).unwrap(), first);
    }

    proptest! {
        /// No fabrication: whatever is received keeps the letter's id, time and text, names
        /// exactly the carrier as origin, and is never received twice over (a second hop is
        /// refused as forged).
        #[test]
        fn receiving_changes_only_the_offices(
            id in "[a-z0-9]{1,12}",
            carrier in "[a-z]{1,8}",
            recipient in "[a-z]{1,8}(/[a-z]{1,8}){0,2}",
        ) {
            let sent = airmail(&id, &format!("office:home agent:{recipient}*"));
            let got = receive(sent.clone(), &office(&carrier)).unwrap();
            prop_assert_eq!(got.from.office().map(|o| o.to_string()), Some(carrier.clone()));
            prop_assert_eq!(&got.id, &sent.id);
            prop_assert_eq!(got.at_ms, sent.at_ms);
            prop_assert_eq!(&got.body, &sent.body);
            prop_assert_eq!(got.to.recipient().0, sent.to.recipient().0);
            let again = receive(got, &office(&carrier));
            prop_assert!(matches!(again, Err(AirmailRefusal::ForgedOrigin { .. })), "relayed twice");
        }
    }
}
