//! The laws of mail: addresses round-trip and star only vouchable readers, stamping overwrites
//! what the machine owns, a letter is one line whatever its text, and inboxes merge by union.
//! Then every refusal, each naming the bad part.

// The strategies below build values from literals and regexes the name rules accept; clippy's
// `allow-unwrap-in-tests` covers only `#[test]` functions, and a panic here is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use l3m_core::mail::delivery::{self, Chain, Delivery, Held};
use l3m_core::mail::{
    self, Address, AddressError, Draft, Inbox, InboxEntry, Letter, LetterId, Parties, Party,
    PlaceName, ReadMark, Receipt, Sender, StampError, Star, TokenFault, stamp,
};
use l3m_core::names::{AgentName, Entity, HumanName, NameError, OfficeName};
use proptest::prelude::*;

// ---------------------------------------------------------------- strategies

fn agent_name() -> impl Strategy<Value = AgentName> {
    prop::collection::vec("[a-z][a-z0-9-]{0,4}", 1..4)
        .prop_map(|segments| AgentName::parse(&segments.join("/")).unwrap())
}

/// A small pool, so a claimed human often equals (and often differs from) the known one.
fn human_name() -> impl Strategy<Value = HumanName> {
    prop::sample::select(vec!["alice", "bob", "carol"]).prop_map(|h| HumanName::parse(h).unwrap())
}

fn office_name() -> impl Strategy<Value = OfficeName> {
    "[a-z][a-z0-9-]{0,6}".prop_map(|o| OfficeName::parse(&o).unwrap())
}

/// Any one-token place name, Unicode included; what the rules refuse is filtered out.
fn place_name() -> impl Strategy<Value = PlaceName> {
    "[^\\s*]{1,8}".prop_filter_map("not a place name", |p| PlaceName::parse(&p).ok())
}

fn parties() -> impl Strategy<Value = Parties> {
    (
        prop::option::of(office_name()),
        prop::option::of(place_name()),
        prop::option::of(agent_name()),
        prop::option::of(place_name()),
        prop::option::of(place_name()),
        prop::option::of(human_name()),
    )
        .prop_map(
            |(office, worktree, agent, branch, repository, human)| Parties {
                office,
                worktree,
                agent,
                branch,
                repository,
                human,
            },
        )
}

fn star() -> impl Strategy<Value = Star> {
    prop_oneof![Just(Star::Agent), Just(Star::Human)]
}

fn address() -> impl Strategy<Value = Address> {
    (parties(), star(), agent_name(), human_name()).prop_map(|(mut p, star, agent, human)| {
        match star {
            Star::Agent => p.agent = p.agent.or(Some(agent)),
            Star::Human => p.human = p.human.or(Some(human)),
        }
        Address::new(p, star).unwrap()
    })
}

/// Text biased toward everything that could break a line or fool a terminal or a parser.
fn nasty_text() -> impl Strategy<Value = String> {
    let nasty = vec![
        '\n', '\r', '\t', '\u{0B}', '\u{0C}', '\u{1C}', '\u{1D}', '\u{1E}', '\u{85}', '\u{2028}',
        '\u{2029}', '\0', '\u{1b}', '\u{7f}', '\u{9b}', '\u{202e}', '\u{2066}', '"', '\\', '{',
        '}', ':', '*', ' ',
    ];
    prop::collection::vec(
        prop_oneof![
            3 => any::<char>(),
            3 => prop::sample::select(nasty),
            2 => prop::char::range(' ', '~'),
        ],
        0..48,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

fn letter_id() -> impl Strategy<Value = LetterId> {
    "[A-Za-z0-9._:/-]{1,12}".prop_map(|id| LetterId::parse(&id).unwrap())
}

fn letter() -> impl Strategy<Value = Letter> {
    (
        letter_id(),
        any::<u64>(),
        address(),
        address(),
        prop::option::of(nasty_text()),
        prop::option::of(nasty_text()),
        prop::option::of(letter_id()),
        nasty_text(),
    )
        .prop_map(
            |(id, at_ms, from, to, subject, summary, in_reply_to, body)| Letter {
                id,
                at_ms,
                from,
                to,
                subject,
                summary,
                in_reply_to,
                body,
            },
        )
}

/// Letters drawn from tiny pools, so inboxes share letters and collide on ids.
fn pooled_letter() -> impl Strategy<Value = Letter> {
    (
        prop::sample::select(vec!["a", "b", "c"]),
        0u64..2,
        prop::sample::select(vec!["alice/main", "human:bob* branch:fix"]),
        prop::sample::select(vec!["x", "y\nz"]),
    )
        .prop_map(|(id, at_ms, to, body)| Letter {
            id: LetterId::parse(id).unwrap(),
            at_ms,
            from: Address::parse("alice/main/worker").unwrap(),
            to: Address::parse(to).unwrap(),
            subject: None,
            summary: None,
            in_reply_to: None,
            body: body.into(),
        })
}

fn pooled_mark() -> impl Strategy<Value = ReadMark> {
    (
        prop::sample::select(vec!["a", "b", "d"]),
        prop::sample::select(vec!["alice/main", "human:bob"]),
        0u64..2,
    )
        .prop_map(|(letter, by, at_ms)| ReadMark {
            letter: LetterId::parse(letter).unwrap(),
            by: Entity::parse(by).unwrap(),
            at_ms,
        })
}

fn pooled_receipt() -> impl Strategy<Value = Receipt> {
    (pooled_mark(), prop::sample::select(vec!["south", "east"])).prop_map(|(mark, office)| {
        Receipt {
            letter: mark.letter,
            office: OfficeName::parse(office).unwrap(),
            sender: AgentName::parse("alice/main").unwrap(),
            by: mark.by,
            at_ms: mark.at_ms,
        }
    })
}

/// One entry of an inbox chain, drawn from the pools.
fn pooled_entry() -> impl Strategy<Value = InboxEntry> {
    prop_oneof![
        pooled_letter().prop_map(|l| InboxEntry::Letter(Box::new(l))),
        pooled_mark().prop_map(InboxEntry::ReadMark),
        pooled_receipt().prop_map(InboxEntry::Receipt),
    ]
}

fn inbox() -> impl Strategy<Value = Inbox> {
    (
        prop::collection::vec(pooled_letter(), 0..6),
        prop::collection::vec(pooled_mark(), 0..5),
        prop::collection::vec(pooled_receipt(), 0..3),
    )
        .prop_map(|(letters, marks, receipts)| {
            let mut inbox = Inbox::default();
            letters.into_iter().for_each(|l| {
                inbox.insert(l);
            });
            marks.into_iter().for_each(|m| {
                inbox.mark_read(m);
            });
            receipts.into_iter().for_each(|r| {
                inbox.insert_receipt(r);
            });
            inbox
        })
}

fn sender() -> impl Strategy<Value = Sender> {
    prop_oneof![
        (
            agent_name(),
            prop::option::of(place_name()),
            prop::option::of(human_name())
        )
            .prop_map(|(agent, worktree, human)| Sender::Agent {
                agent,
                worktree,
                human
            }),
        (human_name(), prop::option::of(place_name()))
            .prop_map(|(human, worktree)| Sender::Human { human, worktree }),
    ]
}

/// Address text as a model might write it: well-formed addresses, the same with the star moved
/// to any party, short forms, and loose tokens with any key, value and star.
fn address_text() -> impl Strategy<Value = String> {
    let loose_token = (
        prop::sample::select(vec![
            "agent", "human", "worktree", "branch", "repo", "office", "persona",
        ]),
        prop::sample::select(vec![
            "alice",
            "alice/main",
            "bob",
            "carol",
            "fix",
            "Bad",
            "",
        ]),
        prop::bool::weighted(0.4),
    )
        .prop_map(|(k, v, starred)| format!("{k}:{v}{}", if starred { "*" } else { "" }));
    prop_oneof![
        address().prop_map(|a| a.render()),
        (address(), any::<prop::sample::Index>()).prop_map(|(a, i)| {
            let mut tokens: Vec<String> = a
                .render()
                .replace('*', "")
                .split(' ')
                .map(String::from)
                .collect();
            let at = i.index(tokens.len());
            tokens[at].push('*');
            tokens.join(" ")
        }),
        agent_name().prop_map(|a| a.to_string()),
        prop::collection::vec(loose_token, 1..4).prop_map(|t| t.join(" ")),
    ]
}

fn set<T: Ord + Clone>(items: impl Iterator<Item = T>) -> BTreeSet<T> {
    items.collect()
}

/// Any character a line splitter (Rust's `lines`, Python's `splitlines`, Unicode-aware editors)
/// or a terminal would act on: this is the test's own oracle, independent of the crate's.
fn breaks_or_controls(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn assert_one_clean_line(line: &str) {
    assert_eq!(line.lines().count(), 1, "{line:?}");
    assert!(!line.chars().any(breaks_or_controls), "{line:?}");
}

// ---------------------------------------------------------------- laws

proptest! {
    #[test]
    fn merge_no_fabrication(a in inbox(), b in inbox()) {
        let m = a.merge(&b);
        let letters_in = set(a.letters().chain(b.letters()).cloned());
        let marks_in = set(a.marks().chain(b.marks()).cloned());
        prop_assert_eq!(set(m.letters().cloned()), letters_in);
        prop_assert_eq!(set(m.marks().cloned()), marks_in);
    }

    #[test]
    fn merge_commutative(a in inbox(), b in inbox()) {
        prop_assert_eq!(a.merge(&b), b.merge(&a));
    }

    #[test]
    fn merge_associative(a in inbox(), b in inbox(), c in inbox()) {
        prop_assert_eq!(a.merge(&b).merge(&c), a.merge(&b.merge(&c)));
    }

    #[test]
    fn merge_idempotent(a in inbox(), b in inbox()) {
        prop_assert_eq!(a.merge(&a), a.clone());
        let m = a.merge(&b);
        prop_assert_eq!(m.merge(&b), m);
    }

    #[test]
    fn render_no_newline(l in letter(), forged in letter(), prefix in nasty_text()) {
        for letter in [l.clone(), Letter { body: format!("{prefix}\n{}\n", forged.render_line().unwrap()), ..l }] {
            let line = letter.render_line().unwrap();
            assert_one_clean_line(&line);
            assert_one_clean_line(&letter.headline());
            prop_assert_eq!(&Letter::parse_line(&line).unwrap(), &letter);
            let blob = format!("{line}\n");
            let mut alone = Inbox::default();
            alone.insert(letter.clone());
            prop_assert_eq!(Inbox::from_lines(&blob).unwrap(), alone);
        }
    }

    /// Unread in chain order is the set fold's unread, in the order the chain holds the
    /// letters, and only the reader's own marks make a letter read: a mark by anyone else
    /// changes nothing.
    #[test]
    fn unread_in_order_is_the_one_fold_in_chain_order(
        entries in prop::collection::vec(pooled_entry(), 0..12),
        other in prop::sample::select(vec!["alice/main", "human:bob"]),
    ) {
        let reader = Entity::parse("alice/main").unwrap();
        let inbox: Inbox = entries.iter().cloned().collect();
        let ordered: Vec<&Letter> = Inbox::unread_in_order(&entries, &reader).collect();
        prop_assert_eq!(set(ordered.iter().map(|l| (*l).clone())), set(inbox.unread(&reader).cloned()));
        // A subsequence of the chain's letters: each next one found after the one before.
        let mut chain = entries.iter().filter_map(InboxEntry::letter);
        prop_assert!(ordered.iter().all(|l| chain.any(|c| c == *l)), "{ordered:?}");
        let by_other: Vec<InboxEntry> = entries
            .iter()
            .filter(|e| !matches!(e, InboxEntry::ReadMark(m) if m.by != reader))
            .cloned()
            .collect();
        let other = Entity::parse(other).unwrap();
        let without: Vec<&Letter> = Inbox::unread_in_order(&by_other, &reader).collect();
        prop_assert_eq!(&without, &ordered);
        if other != reader {
            let theirs: Vec<InboxEntry> = entries
                .iter()
                .filter_map(|e| e.letter())
                .map(|l| InboxEntry::ReadMark(ReadMark { letter: l.id.clone(), by: other.clone(), at_ms: 0 }))
                .chain(entries.iter().cloned())
                .collect();
            prop_assert_eq!(Inbox::unread_in_order(&theirs, &reader).collect::<Vec<_>>(), ordered);
        }
    }

    #[test]
    fn inbox_lines_round_trip(a in inbox()) {
        let blob = a.to_lines().unwrap();
        prop_assert_eq!(blob.lines().count(), a.letters().count() + a.marks().count() + a.receipts().count());
        prop_assert_eq!(Inbox::from_lines(&blob).unwrap(), a);
    }

    #[test]
    fn address_round_trip(a in address(), turn in any::<prop::sample::Index>()) {
        prop_assert_eq!(Address::parse(&a.render()).unwrap(), a.clone());
        prop_assert_eq!(Address::parse(&a.render_short()).unwrap(), a.clone());
        let lone_agent = a.parties() == Parties { agent: a.agent().cloned(), ..Parties::default() }
            && a.star() == Star::Agent;
        prop_assert_eq!(a.render_short() != a.render(), lone_agent);
        // Any token order and spacing parses to the same address.
        let long = a.render();
        let mut tokens: Vec<&str> = long.split(' ').collect();
        let n = tokens.len();
        tokens.rotate_left(turn.index(n));
        prop_assert_eq!(Address::parse(&format!("  {}\t", tokens.join("   "))).unwrap(), a.clone());
        let json = serde_json::to_string(&a).unwrap();
        prop_assert_eq!(serde_json::from_str::<Address>(&json).unwrap(), a);
    }

    #[test]
    fn star_admitted_is_vouchable(
        text in address_text(),
        known in prop::sample::subsequence(
            vec!["alice", "alice/main", "human:alice", "human:bob", "carol"],
            0..=5,
        ),
    ) {
        let known: BTreeSet<Entity> = known.iter().map(|e| Entity::parse(e).unwrap()).collect();
        if let Ok(a) = Address::parse(&text) {
            let starred: Vec<&str> = text
                .split_whitespace()
                .filter(|t| t.ends_with('*') || !t.contains(':'))
                .map(|t| t.split_once(':').map_or("agent", |(k, _)| k))
                .collect();
            prop_assert_eq!(starred.len(), 1, "{}", text);
            prop_assert!(starred[0] == "agent" || starred[0] == "human", "{}", text);
            let (who, _) = a.recipient();
            prop_assert!(matches!(who, Entity::Agent(_) | Entity::Human(_)));
            prop_assert_eq!(a.check_star(|e| known.contains(e)).is_ok(), known.contains(&who));
        }
    }

    #[test]
    fn stamp_overwrites_machine_fields(
        sender in sender(),
        claims in parties(),
        to in address(),
        subject in prop::option::of(nasty_text()),
        body in nasty_text(),
        id in letter_id(),
        at_ms in any::<u64>(),
    ) {
        let draft = Draft { claims: claims.clone(), subject: subject.clone(), ..Draft::new(to.clone(), body.clone()) };
        let result = stamp(draft, &sender, id.clone(), at_ms);
        let (agent, worktree, known_human, star) = match &sender {
            Sender::Agent { agent, worktree, human } => (Some(agent), worktree, human.as_ref(), Star::Agent),
            Sender::Human { human, worktree } => (None, worktree, Some(human), Star::Human),
        };
        if let Some(office) = claims.office.clone() {
            prop_assert_eq!(result, Err(StampError::OfficeClaimed { office }));
        } else if let (Some(claimed), Some(known)) = (&claims.human, known_human)
            && claimed != known
        {
            prop_assert_eq!(result, Err(StampError::WrongHuman { claimed: claimed.clone(), known: known.clone() }));
        } else {
            let l = result.unwrap();
            // Machine-owned: the true sender, whatever was claimed.
            prop_assert_eq!(l.from.agent(), agent);
            prop_assert_eq!(l.from.worktree(), worktree.as_ref());
            prop_assert_eq!(l.from.star(), star);
            prop_assert_eq!(l.from.office(), None);
            prop_assert_eq!(l.from.human(), known_human.or(claims.human.as_ref()));
            // Hints pass through blind.
            prop_assert_eq!(l.from.branch(), claims.branch.as_ref());
            prop_assert_eq!(l.from.repository(), claims.repository.as_ref());
            // Host-stamped and sender-chosen fields.
            prop_assert_eq!((&l.id, l.at_ms), (&id, at_ms));
            prop_assert_eq!((&l.to, &l.subject, &l.body), (&to, &subject, &body));
        }
    }
}

// ---------------------------------------------------------------- examples

#[test]
fn short_and_long_forms_mean_the_same() {
    let short = Address::parse("alice/main/worker").unwrap();
    assert_eq!(short, Address::parse("agent:alice/main/worker*").unwrap());
    assert_eq!(short.render(), "agent:alice/main/worker*");
    assert_eq!(short.render_short(), "alice/main/worker");
    let bob = Address::parse("human:bob* branch:fix").unwrap();
    assert_eq!(bob.render(), "branch:fix human:bob*");
    assert_eq!(bob.render_short(), "branch:fix human:bob*");
    let (who, office) = bob.recipient();
    assert_eq!((who.to_string(), office), ("human:bob".to_owned(), None));
    let carol = Address::parse("office:berlin agent:carol*").unwrap();
    let (who, office) = carol.recipient();
    assert_eq!(who.to_string(), "carol");
    assert_eq!(office.map(OfficeName::as_str), Some("berlin"));
}

#[test]
fn a_long_hostile_body_stays_one_line() {
    let hostile = "\n\r\u{2028}\u{2029}\u{85}\t\"\\\u{1b}[2J\u{202e}\0";
    let body = hostile.repeat(20_000);
    let letter = Letter {
        id: LetterId::parse("l-1").unwrap(),
        at_ms: 0,
        from: Address::parse("alice/main/worker").unwrap(),
        to: Address::parse("alice/main").unwrap(),
        subject: Some(hostile.into()),
        summary: Some(hostile.into()),
        in_reply_to: Some(LetterId::parse("l-0").unwrap()),
        body,
    };
    let line = letter.render_line().unwrap();
    assert_one_clean_line(&line);
    assert_eq!(Letter::parse_line(&line).unwrap(), letter);
    assert!(matches!(
        InboxEntry::from_line(&line, 1).unwrap(),
        InboxEntry::Letter(_)
    ));
}

// ---------------------------------------------------------------- refusals

fn refused(text: &str) -> (AddressError, String) {
    let err = Address::parse(text).unwrap_err();
    let message = err.to_string();
    (err, message)
}

#[test]
fn empty_address_is_refused() {
    for text in ["", "  \t"] {
        assert_eq!(refused(text).0, AddressError::Empty);
    }
}

#[test]
fn token_without_key_is_named() {
    let (err, msg) = refused("agent:alice* bob");
    assert_eq!(
        err,
        AddressError::NoKey {
            token: "bob".into()
        }
    );
    assert!(
        msg.contains("\"bob\"") && msg.contains("agent:bob"),
        "{msg}"
    );
}

#[test]
fn unknown_key_is_named() {
    let (err, msg) = refused("persona:alice*");
    assert_eq!(
        err,
        AddressError::UnknownKey {
            token: "persona:alice*".into(),
            key: "persona".into()
        }
    );
    assert!(msg.contains("\"persona\""), "{msg}");
}

#[test]
fn duplicate_key_names_both_tokens() {
    let (err, msg) = refused("agent:alice* branch:a branch:b");
    assert_eq!(
        err,
        AddressError::DuplicateKey {
            party: Party::Branch,
            first: "branch:a".into(),
            second: "branch:b".into()
        }
    );
    assert!(
        msg.contains("branch:a") && msg.contains("branch:b"),
        "{msg}"
    );
}

#[test]
fn missing_star_is_refused_with_the_address() {
    let (err, msg) = refused("agent:alice human:bob");
    assert_eq!(
        err,
        AddressError::NoStar {
            address: "agent:alice human:bob".into()
        }
    );
    assert!(msg.contains("agent:alice human:bob"), "{msg}");
}

#[test]
fn two_stars_name_both_tokens() {
    let (err, msg) = refused("agent:alice* human:bob*");
    assert_eq!(
        err,
        AddressError::TwoStars {
            first: "agent:alice*".into(),
            second: "human:bob*".into()
        }
    );
    assert!(
        msg.contains("agent:alice*") && msg.contains("human:bob*"),
        "{msg}"
    );
}

#[test]
fn star_on_empty_party_is_refused() {
    let (err, msg) = refused("human:* branch:fix");
    assert_eq!(
        err,
        AddressError::StarOnEmpty {
            party: Party::Human
        }
    );
    assert!(msg.contains("human"), "{msg}");
    let err = Address::new(Parties::default(), Star::Agent).unwrap_err();
    assert_eq!(
        err,
        AddressError::StarOnEmpty {
            party: Party::Agent
        }
    );
}

#[test]
fn empty_value_is_named() {
    let (err, msg) = refused("agent:alice* branch:");
    assert_eq!(
        err,
        AddressError::EmptyValue {
            token: "branch:".into()
        }
    );
    assert!(msg.contains("\"branch:\""), "{msg}");
}

#[test]
fn bad_names_carry_the_name_error() {
    let (err, msg) = refused("agent:alice/Main*");
    assert!(
        matches!(&err, AddressError::BadName { token, party: Party::Agent, source: NameError::BadSegment { segment, .. } }
            if token == "agent:alice/Main*" && segment == "Main"),
        "{err:?}"
    );
    assert!(
        msg.contains("agent:alice/Main*") && msg.contains("\"Main\""),
        "{msg}"
    );
    let (err, _) = refused("alice/Main");
    assert!(
        matches!(
            err,
            AddressError::BadName {
                party: Party::Agent,
                ..
            }
        ),
        "{err:?}"
    );
    let (err, msg) = refused("human:bob/x*");
    assert!(
        matches!(
            err,
            AddressError::BadName {
                party: Party::Human,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("human:bob/x*"), "{msg}");
    let (err, _) = refused("office:Berlin agent:carol*");
    assert!(
        matches!(
            err,
            AddressError::BadName {
                party: Party::Office,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn bad_places_are_named() {
    let (err, msg) = refused("agent:alice* branch:fix\u{7}");
    assert_eq!(
        err,
        AddressError::BadPlace {
            token: "branch:fix\u{7}".into(),
            fault: TokenFault::BadChar('\u{7}')
        }
    );
    assert!(msg.contains("branch:fix"), "{msg}");
    let long = format!("agent:alice* repo:{}", "r".repeat(256));
    assert!(matches!(
        refused(&long).0,
        AddressError::BadPlace {
            fault: TokenFault::TooLong { len: 256, max: 255 },
            ..
        }
    ));
    assert!(matches!(
        PlaceName::parse(""),
        Err(AddressError::BadPlace {
            fault: TokenFault::Empty,
            ..
        })
    ));
    assert!(PlaceName::parse("a*b").is_err());
    assert!(PlaceName::parse("a\u{2028}b").is_err());
}

#[test]
fn star_on_a_hint_is_refused() {
    for (text, token, party) in [
        ("worktree:w* agent:alice", "worktree:w*", Party::Worktree),
        ("agent:alice branch:fix*", "branch:fix*", Party::Branch),
        ("repo:l3m* human:bob", "repo:l3m*", Party::Repository),
    ] {
        let (err, msg) = refused(text);
        assert_eq!(
            err,
            AddressError::StarOnHint {
                token: token.into(),
                party
            }
        );
        assert!(msg.contains(token) && msg.contains("hint"), "{msg}");
    }
}

#[test]
fn star_on_the_office_is_refused() {
    let (err, msg) = refused("office:berlin* agent:carol");
    assert_eq!(
        err,
        AddressError::StarOnOffice {
            token: "office:berlin*".into()
        }
    );
    assert!(msg.contains("office:berlin*"), "{msg}");
}

#[test]
fn an_unvouched_star_is_refused_naming_it() {
    let a = Address::parse("human:mallory* branch:fix").unwrap();
    let err = a.check_star(|_| false).unwrap_err();
    assert_eq!(
        err,
        AddressError::Unvouched {
            entity: Entity::parse("human:mallory").unwrap(),
            address: "branch:fix human:mallory*".into()
        }
    );
    assert!(err.to_string().contains("human:mallory"), "{err}");
    assert!(a.check_star(|e| e.to_string() == "human:mallory").is_ok());
}

fn agent_sender(human: Option<&str>) -> Sender {
    Sender::Agent {
        agent: AgentName::parse("alice/main/worker").unwrap(),
        worktree: Some(PlaceName::parse("forest/alice/main/worker/self/workspace").unwrap()),
        human: human.map(|h| HumanName::parse(h).unwrap()),
    }
}

fn draft_claiming(claims: &str) -> Draft {
    let claims = Address::parse(claims).unwrap().parties();
    Draft {
        claims,
        ..Draft::new(Address::parse("alice/main").unwrap(), "hi")
    }
}

#[test]
fn a_wrong_human_is_refused_naming_both() {
    let err = stamp(
        draft_claiming("human:mallory*"),
        &agent_sender(Some("alice")),
        LetterId::parse("l-1").unwrap(),
        0,
    )
    .unwrap_err();
    assert_eq!(
        err,
        StampError::WrongHuman {
            claimed: HumanName::parse("mallory").unwrap(),
            known: HumanName::parse("alice").unwrap()
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("human:mallory") && msg.contains("human:alice"),
        "{msg}"
    );
    let human_sender = Sender::Human {
        human: HumanName::parse("alice").unwrap(),
        worktree: None,
    };
    assert!(matches!(
        stamp(
            draft_claiming("human:mallory*"),
            &human_sender,
            LetterId::parse("l-2").unwrap(),
            0
        ),
        Err(StampError::WrongHuman { .. })
    ));
}

#[test]
fn a_claimed_office_is_refused_naming_it() {
    let err = stamp(
        draft_claiming("office:berlin agent:carol*"),
        &agent_sender(None),
        LetterId::parse("l-1").unwrap(),
        0,
    )
    .unwrap_err();
    assert_eq!(
        err,
        StampError::OfficeClaimed {
            office: OfficeName::parse("berlin").unwrap()
        }
    );
    assert!(err.to_string().contains("office:berlin"), "{err}");
}

#[test]
fn stamping_overwrites_a_forged_agent_and_keeps_hints() {
    let letter = stamp(
        draft_claiming("worktree:elsewhere agent:bob/boss* branch:fix repo:l3m"),
        &agent_sender(Some("alice")),
        LetterId::parse("l-1").unwrap(),
        42,
    )
    .unwrap();
    assert_eq!(
        letter.from.render(),
        "worktree:forest/alice/main/worker/self/workspace agent:alice/main/worker* branch:fix repo:l3m human:alice"
    );
    assert_eq!(letter.at_ms, 42);
}

// ---------------------------------------------------------------- delivering airmail

/// Airmail as another hub's postman carries it: letters from a tiny pool of ids, to a live
/// agent, a dead one or a human, some with a forged origin, and receipts for letters staged
/// here for that office or another.
fn carried_entry() -> impl Strategy<Value = InboxEntry> {
    let letter = (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::sample::select(vec!["agent:lead*", "office:east agent:lead*"]),
        prop::sample::select(vec![
            "office:south agent:bob*",
            "office:south agent:gone*",
            "office:south human:bob*",
            "agent:bob*",
        ]),
    )
        .prop_map(|(id, from, to)| Letter {
            id: LetterId::parse(id).unwrap(),
            at_ms: 1,
            from: Address::parse(from).unwrap(),
            to: Address::parse(to).unwrap(),
            subject: None,
            summary: None,
            in_reply_to: None,
            body: "hi".into(),
        });
    let receipt = (
        prop::sample::select(vec!["s1", "s2", "e1", "zz"]),
        prop::sample::select(vec!["bob", "carol"]),
    )
        .prop_map(|(letter, by)| Receipt {
            letter: LetterId::parse(letter).unwrap(),
            office: OfficeName::parse("nowhere").unwrap(),
            sender: AgentName::parse("lead").unwrap(),
            by: Entity::parse(by).unwrap(),
            at_ms: 2,
        });
    prop_oneof![
        3 => letter.prop_map(|l| InboxEntry::Letter(Box::new(l))),
        1 => receipt.prop_map(InboxEntry::Receipt),
    ]
}

/// The hub the airmail lands on: lead staged s1 and s2 for office south and e1 for east.
fn delivery_chains() -> BTreeMap<Chain, Vec<InboxEntry>> {
    let staged = |id: &str, office: &str| {
        let to = Address::parse(&format!("office:{office} agent:bob*")).unwrap();
        let sender = Sender::Agent {
            agent: AgentName::parse("lead").unwrap(),
            worktree: None,
            human: None,
        };
        InboxEntry::Letter(Box::new(
            stamp(
                Draft::new(to, "x"),
                &sender,
                LetterId::parse(id).unwrap(),
                0,
            )
            .unwrap(),
        ))
    };
    let lead = AgentName::parse("lead").unwrap();
    BTreeMap::from([(
        Chain::Outbox(lead),
        vec![
            staged("s1", "south"),
            staged("s2", "south"),
            staged("e1", "east"),
        ],
    )])
}

/// One delivery against `chains` and `mirror`, its writes applied to both.
fn deliver_once(
    batch: &[InboxEntry],
    chains: &mut BTreeMap<Chain, Vec<InboxEntry>>,
    mirror: &mut Vec<InboxEntry>,
) -> Delivery {
    let south = OfficeName::parse("south").unwrap();
    let live = |a: &AgentName| a.as_str() == "bob" || a.as_str() == "lead";
    let read = |chain: &Chain| -> Result<Held, ()> {
        Ok(Held::of(chains.get(chain).cloned().unwrap_or_default()))
    };
    let done =
        delivery::deliver(&south, batch.to_vec(), Held::of(mirror.clone()), live, read).unwrap();
    mirror.extend(done.to_mirror.iter().cloned());
    for (agent, entries) in &done.to_inbox {
        (chains.entry(Chain::Inbox(agent.clone())).or_default()).extend(entries.iter().cloned());
    }
    done
}

proptest! {
    /// A retry delivers nothing twice: delivering a batch again writes nothing, and reports
    /// what it delivered as already there; what it bounced and refused, it bounces and refuses
    /// again.
    #[test]
    fn a_delivery_retried_writes_nothing(batch in prop::collection::vec(carried_entry(), 0..8)) {
        let (mut chains, mut mirror) = (delivery_chains(), Vec::new());
        let first = deliver_once(&batch, &mut chains, &mut mirror);
        let again = deliver_once(&batch, &mut chains, &mut mirror);
        prop_assert!(again.to_mirror.is_empty() && again.to_inbox.is_empty(), "{again:?}");
        prop_assert!(again.delivered.is_empty());
        prop_assert_eq!(
            set(again.already.iter().cloned()),
            set(first.delivered.iter().chain(&first.already).cloned())
        );
        prop_assert_eq!(&again.bounced, &first.bounced);
        prop_assert_eq!(&again.refused, &first.refused);
    }

    /// Nothing is invented: each letter an inbox gets is a carried letter as received from the
    /// carrier, into the inbox of the live agent it stars, and also on the mirror; each receipt
    /// answers a letter its sender staged for the carrying office.
    #[test]
    fn a_delivery_invents_nothing(batch in prop::collection::vec(carried_entry(), 0..8)) {
        let south = OfficeName::parse("south").unwrap();
        let (mut chains, mut mirror) = (delivery_chains(), Vec::new());
        let done = deliver_once(&batch, &mut chains, &mut mirror);
        let carried: Vec<Letter> = batch.iter().filter_map(|e| e.letter().cloned()).collect();
        for (agent, entries) in &done.to_inbox {
            for entry in entries {
                if let Some(letter) = entry.letter() {
                    let source = carried.iter().find(|c| c.id == letter.id && mail::receive((*c).clone(), &south).as_ref() == Ok(letter));
                    prop_assert!(source.is_some(), "{letter:?}");
                    prop_assert_eq!(letter.to.recipient().0, Entity::Agent(agent.clone()));
                    prop_assert!(mirror.iter().any(|m| m.letter() == source));
                }
                if let Some(receipt) = entry.receipt() {
                    prop_assert!(["s1", "s2"].contains(&receipt.letter.as_str()), "{receipt:?}");
                    prop_assert_eq!(&receipt.office, &south);
                }
            }
        }
        prop_assert!(done.to_inbox.keys().all(|a| a.as_str() == "bob" || a.as_str() == "lead"));
    }
}
