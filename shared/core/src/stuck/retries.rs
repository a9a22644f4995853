//! How many attempts the model call owed now may spend: the fold that keeps a provider that is
//! known to fail from costing `max_attempts` calls at every wake.
//!
//! A turn whose last model call failed ended without a reply: its retries ran out (or the
//! failure was not retryable). A later wake (a letter, `l3m say`) owes the model a call again,
//! but the failure is known now, and retrying it up to the limit at each wake would spend the
//! agent's fuel on a provider that keeps failing. So, until a reply comes, the owed call gets
//! one attempt: if it fails too, the turn ends at once and [`stuck`](super::stuck) shows the
//! failure; a reply clears the fold, and later calls retry as usual.

use crate::log::RecordBody;

/// What the Log says about the last model calls, folded record by record with
/// [`Retries::apply`]: whether the last call failed, and whether a turn ended after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retries {
    /// The last model call's outcome was a failure (no reply since).
    last_failed: bool,
    /// A turn ended with its last call failed, and no reply came since.
    known: bool,
}

impl Retries {
    /// The fold over `bodies`, in order.
    pub fn of<'a>(bodies: impl IntoIterator<Item = &'a RecordBody>) -> Retries {
        let mut retries = Retries::default();
        for body in bodies {
            retries.apply(body);
        }
        retries
    }

    /// Folds in the next record.
    pub fn apply(&mut self, body: &RecordBody) {
        match body {
            RecordBody::AssistantReply { .. } => *self = Retries::default(),
            RecordBody::CallFailed { .. } => self.last_failed = true,
            RecordBody::TurnEnd | RecordBody::Interrupted { .. } | RecordBody::OutOfFuel { .. } => {
                self.known |= self.last_failed;
            }
            _ => {}
        }
    }

    /// Whether the failure is known: a turn ended with its last call failed and no reply came
    /// since, so the call owed now gets one attempt.
    pub fn known(&self) -> bool {
        self.known
    }

    /// The attempts the owed call may spend (core's `plan` takes it as `max_attempts`):
    /// `max_attempts` (at least one), or exactly one once the failure is [`known`](Self::known).
    pub fn attempts(&self, max_attempts: u32) -> u32 {
        if self.known { 1 } else { max_attempts.max(1) }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::effects::Footprint;
    use crate::log::{CallId, Log, Usage};
    use crate::names::Entity;
    use crate::owed::{Owed, PlanInput, Signal, journal, plan};
    use crate::stuck::{Stuck, stuck};

    /// What the provider answers one call.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Answer {
        Reply,
        Fail { retryable: bool },
    }

    fn answer() -> impl Strategy<Value = Answer> {
        prop_oneof![
            1 => Just(Answer::Reply),
            3 => Just(Answer::Fail { retryable: true }),
            1 => Just(Answer::Fail { retryable: false }),
        ]
    }

    /// A sequencer's run reduced to what spends calls: core's `journal` and `plan`, with the
    /// attempts [`Retries`] allows.
    struct Agent {
        log: Log,
        owed: Owed,
        retries: Retries,
        calls: u32,
    }

    impl Agent {
        fn new() -> Agent {
            let mut agent = Agent {
                log: Log::new(),
                owed: Owed::default(),
                retries: Retries::default(),
                calls: 0,
            };
            agent.write(vec![RecordBody::SystemPrompt {
                text: "p".into(),
                continues: false,
            }]);
            agent
        }

        fn write(&mut self, bodies: Vec<RecordBody>) {
            for body in bodies {
                let record = self.log.append(0, body).unwrap().clone();
                self.owed.apply(&record);
                self.retries.apply(&record.body);
            }
        }

        /// One wake: a letter, then passes until nothing is owed; the provider answers call
        /// `n` of the wake with `answers[n]` (a reply once they run out). Returns the calls
        /// spent.
        fn wake(&mut self, answers: &[Answer], max_attempts: u32) -> usize {
            let line = Signal::UserLine {
                from: Entity::parse("human:alice").unwrap(),
                text: "again".into(),
            };
            self.write(journal(&self.owed, line).unwrap());
            let mut spent = 0;
            loop {
                self.calls += 1;
                let call = CallId::new(format!("c{}", self.calls)).unwrap();
                let tools: BTreeMap<String, Footprint> = BTreeMap::new();
                let input = PlanInput {
                    call: &call,
                    provider: "p",
                    model: "m",
                    max_attempts: self.retries.attempts(max_attempts),
                    tools: &tools,
                };
                let bodies = plan(&self.owed, &input).unwrap();
                let started = (bodies.iter()).any(|b| matches!(b, RecordBody::CallStarted { .. }));
                self.write(bodies);
                if !started {
                    return spent;
                }
                let signal = match answers.get(spent).copied().unwrap_or(Answer::Reply) {
                    Answer::Reply => Signal::ModelReply {
                        call,
                        text: "ok".into(),
                        tool_uses: vec![],
                        usage: Usage::default(),
                        stop_reason: "end_turn".into(),
                    },
                    Answer::Fail { retryable } => Signal::ModelFailed {
                        call,
                        error: "HTTP 529: overloaded".into(),
                        retryable,
                    },
                };
                spent += 1;
                self.write(journal(&self.owed, signal).unwrap());
            }
        }
    }

    #[test]
    fn a_known_failure_costs_one_call_per_wake_until_a_reply() {
        let mut agent = Agent::new();
        let failing = [Answer::Fail { retryable: true }; 8];
        assert_eq!(agent.wake(&failing, 3), 3, "the first wake retries");
        assert!(agent.retries.known());
        assert_eq!(agent.wake(&failing, 3), 1, "a later wake spends one call");
        assert!(matches!(
            stuck(agent.log.records()),
            Some(Stuck::CallFailed {
                retryable: true,
                ..
            })
        ));
        assert_eq!(agent.wake(&[Answer::Reply], 3), 1);
        assert!(!agent.retries.known(), "a reply resumes retries");
        assert_eq!(agent.wake(&failing, 3), 3);
    }

    proptest! {
        /// The law: a wake spends calls until a reply or a failure it does not retry, at most
        /// `max_attempts` of them — but exactly one when the wake before it ended in a
        /// failure (the failure is known), and the agent is stuck, showing it, whenever a wake
        /// ends without a reply.
        #[test]
        fn each_wake_spends_one_call_once_the_failure_is_known(
            wakes in prop::collection::vec(prop::collection::vec(answer(), 0..6), 1..8),
            max_attempts in 1u32..5,
        ) {
            let mut agent = Agent::new();
            let mut last_failed = false;
            for answers in &wakes {
                let limit = if last_failed { 1 } else { max_attempts as usize };
                let ends = answers.iter().position(|a| *a != Answer::Fail { retryable: true });
                let expected = ends.map_or(answers.len() + 1, |at| at + 1).min(limit);
                let spent = agent.wake(answers, max_attempts);
                prop_assert_eq!(spent, expected, "answers {:?}, known {}", answers, last_failed);
                last_failed = answers.get(spent - 1).is_some_and(|a| *a != Answer::Reply);
                prop_assert_eq!(agent.retries.known(), last_failed);
                let shown = stuck(agent.log.records()).is_some();
                prop_assert_eq!(shown, last_failed);
            }
        }
    }
}
