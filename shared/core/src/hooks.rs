//! Which dispositions an event admits: the harness's check on what an agent's hook decided.
//!
//! An agent's `agent/hooks.star` proposes a [`Disposition`] for each event; the hook is the
//! agent's own code and an event's text is foreign input, so the harness admits the proposal
//! only when the event allows it ([`admit`]) and otherwise falls back to the default
//! ([`Disposition::without_hook`]), naming the rule that refused it ([`decide`]):
//! - never an automatic reply to a reply, to the agent itself, or to anything but a letter;
//! - a reply or a forward goes only where the agent's mail token reaches, never to itself;
//! - a deferred program's completion cannot defer again, and only an admitted tame program is
//!   deferred to (a wild one's calls are reviewed on a model's justification, which a hook has
//!   not);
//! - a child is retired only by the event that says it is done, and only the agent's own child;
//! - and only a disposition the harness carries out ([`HookContext::carries`]) is journaled, so
//!   no event is swallowed by a disposition nothing acts on.
//!
//! Pure: the mail covers, the admitted programs and what the harness carries out come in as a
//! [`HookContext`].

use std::collections::{BTreeMap, BTreeSet};

use crate::effects::Tier;
use crate::grant::MailCover;
use crate::log::{Disposition, EventSource};
use crate::names::{AgentName, Entity};

/// The longest text an automatic reply may carry, in bytes: a reply is one short letter.
pub const MAX_REPLY: usize = 4096;

/// The dispositions that only decide what the model sees: every harness carries them out.
pub const PLAIN: &[&str] = &["show", "dismiss", "ignore", "close"];

/// The dispositions l3m's sequencer carries out: every one. A reply, forward or retire-child
/// goes through hubd under the agent's session; a `defer` runs the program as the harness's own
/// call of `program_<name>` and journals its completion as a `program-done` event, which the
/// hook then decides (never deferring it again). `l3m hooks test` admits by the same list, so
/// it shows what the sequencer would do; another harness passes its own list in
/// [`HookContext::carries`].
pub const CARRIED: &[&str] = &[
    "show",
    "dismiss",
    "ignore",
    "close",
    "reply",
    "forward",
    "defer",
    "retire-child",
];

/// Every disposition's kind, as [`kind`] names it.
pub const ALL: &[&str] = &[
    "show",
    "dismiss",
    "ignore",
    "close",
    "reply",
    "forward",
    "defer",
    "retire-child",
];

/// A disposition's kind: its serde tag (`reply`, `retire-child`).
pub fn kind(disposition: &Disposition) -> &'static str {
    match disposition {
        Disposition::Show => "show",
        Disposition::Dismiss => "dismiss",
        Disposition::Ignore => "ignore",
        Disposition::Close => "close",
        Disposition::Reply { .. } => "reply",
        Disposition::Forward { .. } => "forward",
        Disposition::Defer { .. } => "defer",
        Disposition::RetireChild { .. } => "retire-child",
    }
}

/// What the harness knows when it checks a disposition: who decides and what it may reach.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// The agent whose hook decided.
    pub agent: &'a AgentName,
    /// Every cover of its mail token, the default reach included (`grant::default_mail`).
    pub mail: &'a BTreeSet<MailCover>,
    /// Its admitted sealed programs (by name, without the `program_` prefix) and their tiers.
    pub programs: &'a BTreeMap<String, Tier>,
    /// The kinds of disposition the harness carries out ([`PLAIN`] at least); another is
    /// refused, since journaling it would leave the event unseen with nothing done about it.
    pub carries: &'a [&'a str],
}

/// Why an event does not admit a disposition. Each variant is one rule, named by
/// [`Inadmissible::rule`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Inadmissible {
    /// A reply to something that is not a letter: there is no one to answer.
    #[error("only a letter can be answered; this event is not one")]
    ReplyNotLetter,
    /// A reply to a letter that is itself a reply: two hooks could answer each other forever.
    #[error("letter {letter} answers letter {answers}; a reply is never answered automatically")]
    ReplyToReply {
        /// The letter the hook would answer.
        letter: String,
        /// The letter it answers.
        answers: String,
    },
    /// A reply or forward to the agent itself: it would come back as a new event.
    #[error("{to} is the agent itself; a hook never mails its own inbox")]
    ToSelf {
        /// The agent.
        to: Entity,
    },
    /// A reply or forward to someone the agent's mail token does not cover.
    #[error("the mail token does not reach {to}")]
    NotReached {
        /// The recipient.
        to: Entity,
    },
    /// A reply with no text, or longer than [`MAX_REPLY`].
    #[error("a reply's text must be 1 to {MAX_REPLY} bytes; it is {len}")]
    ReplyText {
        /// Its length in bytes.
        len: usize,
    },
    /// A reply or forward to a human or a service: hubd keeps inboxes for agents only, so the
    /// letter could not be delivered and the event would be swallowed.
    #[error("{to} has no inbox on this hub; only agents are written to automatically")]
    NoInbox {
        /// The addressee.
        to: Entity,
    },
    /// A forward of something that is not a letter.
    #[error("only a letter can be forwarded; this event is not one")]
    ForwardNotLetter,
    /// A deferred program's completion deferred again: a loop through programs.
    #[error("program {program} finished work a hook deferred; its completion cannot defer again")]
    DeferAgain {
        /// The program that finished.
        program: String,
    },
    /// A defer to a program the agent does not have (absent or refused at load).
    #[error("no admitted program is named {program}")]
    UnknownProgram {
        /// The program asked for.
        program: String,
    },
    /// A defer to a wild program: each of its calls is reviewed on the justification of the
    /// model that proposes it, and a hook is no model and has none to give.
    #[error(
        "program {program} declares a wild class, so only the model may call it (each call is \
         reviewed on its justification)"
    )]
    DeferWild {
        /// The program asked for.
        program: String,
    },
    /// A retire on an event that is not the named child's completion.
    #[error("{child} is retired only when the event says it is done")]
    RetireNotDone {
        /// The child named.
        child: AgentName,
    },
    /// A disposition the harness does not carry out (yet): journaled, it would swallow the
    /// event.
    #[error("the harness does not carry out `{kind}` dispositions; the event would be lost")]
    NotCarriedOut {
        /// The disposition's kind.
        kind: &'static str,
    },
    /// A retire of an agent that is not the deciding agent's own child.
    #[error("{child} is not a child of {agent}")]
    NotOwnChild {
        /// The child named.
        child: AgentName,
        /// The deciding agent.
        agent: AgentName,
    },
}

impl Inadmissible {
    /// The rule's stable name (kebab-case), as the journal and `l3m hooks test` print it.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::ReplyNotLetter => "reply-not-letter",
            Self::ReplyToReply { .. } => "reply-to-reply",
            Self::ToSelf { .. } => "to-self",
            Self::NotReached { .. } => "not-reached",
            Self::ReplyText { .. } => "reply-text",
            Self::ForwardNotLetter => "forward-not-letter",
            Self::NoInbox { .. } => "no-inbox",
            Self::DeferAgain { .. } => "defer-again",
            Self::UnknownProgram { .. } => "unknown-program",
            Self::DeferWild { .. } => "defer-wild",
            Self::RetireNotDone { .. } => "retire-not-done",
            Self::NotOwnChild { .. } => "not-own-child",
            Self::NotCarriedOut { .. } => "not-carried-out",
        }
    }
}

/// Whether `source` admits `disposition` for the agent of `cx`: the event's rules first, then
/// whether the harness carries the disposition out.
pub fn admit(
    cx: &HookContext<'_>,
    source: &EventSource,
    disposition: &Disposition,
) -> Result<(), Inadmissible> {
    admit_event(cx, source, disposition)?;
    let kind = kind(disposition);
    if cx.carries.contains(&kind) {
        Ok(())
    } else {
        Err(Inadmissible::NotCarriedOut { kind })
    }
}

/// The event's rules alone.
fn admit_event(
    cx: &HookContext<'_>,
    source: &EventSource,
    disposition: &Disposition,
) -> Result<(), Inadmissible> {
    let reach = |to: &Entity| {
        if to.as_agent() == Some(cx.agent) {
            Err(Inadmissible::ToSelf { to: to.clone() })
        } else if !cx.mail.iter().any(|c| c.covers(to)) {
            Err(Inadmissible::NotReached { to: to.clone() })
        } else if to.as_agent().is_none() {
            Err(Inadmissible::NoInbox { to: to.clone() })
        } else {
            Ok(())
        }
    };
    match (disposition, source) {
        (
            Disposition::Show | Disposition::Dismiss | Disposition::Ignore | Disposition::Close,
            _,
        ) => Ok(()),
        (Disposition::Reply { .. }, s) if !matches!(s, EventSource::Letter { .. }) => {
            Err(Inadmissible::ReplyNotLetter)
        }
        (
            Disposition::Reply { .. },
            EventSource::Letter {
                letter_id,
                in_reply_to: Some(answers),
                ..
            },
        ) => Err(Inadmissible::ReplyToReply {
            letter: letter_id.clone(),
            answers: answers.clone(),
        }),
        (Disposition::Reply { text }, EventSource::Letter { from, .. }) => {
            reach(from)?;
            if text.is_empty() || text.len() > MAX_REPLY {
                return Err(Inadmissible::ReplyText { len: text.len() });
            }
            Ok(())
        }
        (Disposition::Reply { .. }, _) => Err(Inadmissible::ReplyNotLetter),
        (Disposition::Forward { to }, EventSource::Letter { .. }) => reach(to),
        (Disposition::Forward { .. }, _) => Err(Inadmissible::ForwardNotLetter),
        (Disposition::Defer { .. }, EventSource::ProgramDone { program }) => {
            Err(Inadmissible::DeferAgain {
                program: program.clone(),
            })
        }
        (Disposition::Defer { program }, _) => match cx.programs.get(program) {
            Some(Tier::Tame) => Ok(()),
            Some(Tier::Wild) => Err(Inadmissible::DeferWild {
                program: program.clone(),
            }),
            None => Err(Inadmissible::UnknownProgram {
                program: program.clone(),
            }),
        },
        (Disposition::RetireChild { child }, EventSource::ChildDone { child: done })
            if child == done =>
        {
            if child.parent().as_ref() == Some(cx.agent) {
                Ok(())
            } else {
                Err(Inadmissible::NotOwnChild {
                    child: child.clone(),
                    agent: cx.agent.clone(),
                })
            }
        }
        (Disposition::RetireChild { child }, _) => Err(Inadmissible::RetireNotDone {
            child: child.clone(),
        }),
    }
}

/// What the harness journals for one event: the disposition in force and, when the hook's
/// proposal was refused, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The disposition journaled.
    pub disposition: Disposition,
    /// The proposal refused, with the rule, when the default replaced it.
    pub refused: Option<(Disposition, Inadmissible)>,
}

/// The disposition journaled for `source` when the hook proposed `proposed`: the proposal if
/// the event admits it, else the default (the refused proposal and its rule kept for the
/// narration).
pub fn decide(cx: &HookContext<'_>, source: &EventSource, proposed: Disposition) -> Decided {
    match admit(cx, source, &proposed) {
        Ok(()) => Decided {
            disposition: proposed,
            refused: None,
        },
        Err(why) => Decided {
            disposition: Disposition::without_hook(source),
            refused: Some((proposed, why)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::default_mail;
    use proptest::prelude::*;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn letter(from: &str, in_reply_to: Option<&str>) -> EventSource {
        EventSource::Letter {
            letter_id: "l1".into(),
            from: Entity::parse(from).unwrap(),
            in_reply_to: in_reply_to.map(str::to_owned),
        }
    }

    fn sources() -> impl Strategy<Value = EventSource> {
        let who = prop::sample::select(vec![
            "alice/main",
            "alice/main/w",
            "alice/main/w/x",
            "alice/other",
            "bob/main",
            "human:alice",
        ]);
        let child = prop::sample::select(vec!["alice/main/w", "alice/main/w/x", "alice/other"]);
        prop_oneof![
            (who, prop::option::of(Just("l0"))).prop_map(|(f, r)| letter(f, r)),
            child.prop_map(|c| EventSource::ChildDone { child: agent(c) }),
            prop::sample::select(vec!["triage", "other"])
                .prop_map(|p| EventSource::ProgramDone { program: p.into() }),
            Just(EventSource::Deadline),
            Just(EventSource::Notice),
            Just(EventSource::Vigil { vigil: "v".into() }),
        ]
    }

    fn dispositions() -> impl Strategy<Value = Disposition> {
        let who = prop::sample::select(vec![
            "alice/main",
            "alice/main/w",
            "alice/other",
            "human:alice",
        ]);
        let child = prop::sample::select(vec!["alice/main/w", "alice/main/w/x", "alice/other"]);
        prop_oneof![
            Just(Disposition::Show),
            Just(Disposition::Dismiss),
            Just(Disposition::Ignore),
            Just(Disposition::Close),
            prop::sample::select(vec!["", "thanks", "x"]).prop_map(|t| Disposition::Reply {
                text: t.repeat(if t == "x" { MAX_REPLY + 1 } else { 1 })
            }),
            who.prop_map(|t| Disposition::Forward {
                to: Entity::parse(t).unwrap()
            }),
            prop::sample::select(vec!["triage", "sweep", "missing"])
                .prop_map(|p| Disposition::Defer { program: p.into() }),
            child.prop_map(|c| Disposition::RetireChild { child: agent(c) }),
        ]
    }

    fn with<T>(f: impl FnOnce(&HookContext<'_>) -> T) -> T {
        let me = agent("alice/main");
        let mut mail = default_mail(&me);
        mail.insert(MailCover::parse("human:alice").unwrap());
        let programs = BTreeMap::from([
            ("triage".to_owned(), Tier::Tame),
            ("sweep".to_owned(), Tier::Wild),
        ]);
        f(&HookContext {
            agent: &me,
            mail: &mail,
            programs: &programs,
            carries: ALL,
        })
    }

    #[test]
    fn each_rule_is_named() {
        with(|cx| {
            let reply = |t: &str| Disposition::Reply { text: t.into() };
            let rule = |s: &EventSource, d: &Disposition| admit(cx, s, d).unwrap_err().rule();
            assert_eq!(
                rule(&letter("alice/main/w", Some("l0")), &reply("ok")),
                "reply-to-reply"
            );
            assert_eq!(rule(&letter("alice/main", None), &reply("ok")), "to-self");
            assert_eq!(rule(&letter("bob/main", None), &reply("ok")), "not-reached");
            assert_eq!(
                rule(&letter("alice/main/w", None), &reply("")),
                "reply-text"
            );
            assert_eq!(
                rule(&EventSource::Deadline, &reply("ok")),
                "reply-not-letter"
            );
            assert_eq!(rule(&letter("human:alice", None), &reply("ok")), "no-inbox");
            assert!(admit(cx, &letter("alice/main/w", None), &reply("ok")).is_ok());
            let done = EventSource::ProgramDone {
                program: "triage".into(),
            };
            let defer = Disposition::Defer {
                program: "triage".into(),
            };
            assert_eq!(rule(&done, &defer), "defer-again");
            assert!(admit(cx, &EventSource::Notice, &defer).is_ok());
            let retire = |c: &str| Disposition::RetireChild { child: agent(c) };
            let child_done = |c: &str| EventSource::ChildDone { child: agent(c) };
            assert!(admit(cx, &child_done("alice/main/w"), &retire("alice/main/w")).is_ok());
            assert_eq!(
                rule(&child_done("alice/main/w/x"), &retire("alice/main/w/x")),
                "not-own-child"
            );
            assert_eq!(
                rule(&child_done("alice/main/w"), &retire("alice/other")),
                "retire-not-done"
            );
            let forward = Disposition::Forward {
                to: Entity::parse("alice/main").unwrap(),
            };
            assert_eq!(rule(&letter("alice/main/w", None), &forward), "to-self");
            assert_eq!(rule(&EventSource::Notice, &forward), "forward-not-letter");
            let plain = HookContext {
                carries: PLAIN,
                ..*cx
            };
            let human = letter("human:alice", None);
            let child = letter("alice/main/w", None);
            assert_eq!(
                admit(&plain, &child, &reply("ok")).unwrap_err().rule(),
                "not-carried-out"
            );
            // The event's own rule is named first.
            assert_eq!(
                admit(&plain, &letter("alice/main", None), &reply("ok"))
                    .unwrap_err()
                    .rule(),
                "to-self"
            );
            assert!(admit(&plain, &human, &Disposition::Dismiss).is_ok());
        });
    }

    /// The sequencer carries out every disposition, `defer` included: with its list, no
    /// proposal is refused as `not-carried-out`, and a defer to an admitted program on any
    /// event but a program's completion is journaled as proposed.
    #[test]
    fn the_sequencer_carries_out_every_disposition() {
        let mut carried = CARRIED.to_vec();
        let mut all = ALL.to_vec();
        carried.sort_unstable();
        all.sort_unstable();
        assert_eq!(carried, all);
        with(|cx| {
            let cx = HookContext {
                carries: CARRIED,
                ..*cx
            };
            let defer = |p: &str| Disposition::Defer { program: p.into() };
            let done = EventSource::ProgramDone {
                program: "triage".into(),
            };
            for source in [letter("alice/main/w", None), EventSource::Notice] {
                let decided = decide(&cx, &source, defer("triage"));
                assert_eq!(decided.disposition, defer("triage"));
                assert!(decided.refused.is_none());
                assert_eq!(
                    admit(&cx, &source, &defer("missing")).unwrap_err().rule(),
                    "unknown-program"
                );
                assert_eq!(
                    admit(&cx, &source, &defer("sweep")).unwrap_err().rule(),
                    "defer-wild"
                );
            }
            let again = decide(&cx, &done, defer("triage"));
            assert_eq!(again.disposition, Disposition::Close);
            assert_eq!(
                again.refused.map(|(_, why)| why.rule()),
                Some("defer-again")
            );
        });
    }

    proptest! {
        /// `hook_never_replies_to_reply_or_self`: whatever a hook proposes, the disposition
        /// journaled never answers a reply, never mails the agent itself, never goes beyond
        /// the mail token, and a deferred program's completion never defers again.
        #[test]
        fn hook_never_replies_to_reply_or_self(source in sources(), proposed in dispositions()) {
            with(|cx| {
                let decided = decide(cx, &source, proposed.clone());
                match (&decided.disposition, &source) {
                    (Disposition::Reply { text }, EventSource::Letter { from, in_reply_to, .. }) => {
                        prop_assert!(in_reply_to.is_none());
                        prop_assert_ne!(from.as_agent(), Some(cx.agent));
                        prop_assert!(cx.mail.iter().any(|c| c.covers(from)));
                        prop_assert!(!text.is_empty() && text.len() <= MAX_REPLY);
                    }
                    (Disposition::Reply { .. }, _) => prop_assert!(false, "a reply to a non-letter"),
                    (Disposition::Forward { to }, EventSource::Letter { .. }) => {
                        prop_assert_ne!(to.as_agent(), Some(cx.agent));
                        prop_assert!(cx.mail.iter().any(|c| c.covers(to)));
                    }
                    (Disposition::Forward { .. }, _) => prop_assert!(false, "a forward of a non-letter"),
                    (Disposition::Defer { program }, s) => {
                        prop_assert!(!matches!(s, EventSource::ProgramDone { .. }), "deferred again");
                        prop_assert_eq!(cx.programs.get(program), Some(&Tier::Tame));
                    }
                    (Disposition::RetireChild { child }, s) => {
                        let done = EventSource::ChildDone { child: child.clone() };
                        prop_assert_eq!(s, &done);
                        prop_assert_eq!(child.parent(), Some(cx.agent.clone()));
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }

        /// `inadmissible_becomes_default`: the journaled disposition is the proposal exactly
        /// when the event admits it, and otherwise the default, with the refused proposal and
        /// its rule kept.
        #[test]
        fn inadmissible_becomes_default(source in sources(), proposed in dispositions()) {
            with(|cx| {
                let decided = decide(cx, &source, proposed.clone());
                match admit(cx, &source, &proposed) {
                    Ok(()) => {
                        prop_assert_eq!(&decided.disposition, &proposed);
                        prop_assert!(decided.refused.is_none());
                    }
                    Err(why) => {
                        prop_assert_eq!(&decided.disposition, &Disposition::without_hook(&source));
                        prop_assert_eq!(decided.refused, Some((proposed, why)));
                    }
                }
                Ok(())
            })?;
        }

        /// `hook_journals_only_what_is_carried_out`: whatever the hook proposes, the journaled
        /// disposition is one the harness carries out (no event is swallowed).
        #[test]
        fn hook_journals_only_what_is_carried_out(
            source in sources(),
            proposed in dispositions(),
            carried in prop::sample::subsequence(ALL[PLAIN.len()..].to_vec(), 0..=4),
        ) {
            with(|cx| {
                let carries: Vec<&str> = PLAIN.iter().copied().chain(carried).collect();
                let cx = HookContext { carries: &carries, ..*cx };
                let decided = decide(&cx, &source, proposed.clone());
                prop_assert!(carries.contains(&kind(&decided.disposition)));
                Ok(())
            })?;
        }

        /// `plain_dispositions_always_admitted`: show, dismiss, ignore and close need nothing
        /// of the event.
        #[test]
        fn plain_dispositions_always_admitted(source in sources()) {
            with(|cx| {
                for d in [Disposition::Show, Disposition::Dismiss, Disposition::Ignore, Disposition::Close] {
                    prop_assert!(admit(cx, &source, &d).is_ok());
                }
                Ok(())
            })?;
        }
    }
}
