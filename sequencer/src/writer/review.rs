//! Asking the reviewer about a wild call, once its admission (`tool-call`) is appended: the
//! request is built from the Log (the effect, the justification, the earlier rounds), sent on
//! the bus, and the answer comes back as a signal — a `review` record, or, if the reviewer
//! crashed, timed out, refused or answered garbage, a refusal telling the model why. Either
//! way nothing ran before the record.

use std::time::Instant;

use l3m_core::effects::EffectClass;
use l3m_core::review::card::{CardLine, answers_awaited, parse_card_line};
use l3m_core::review::{Effect, Family, ReviewRequest, ReviewSpent, split_justification};

use super::*;

impl Session {
    /// Asks the reviewer about wild tool use `id`, or journals why it cannot be asked.
    pub(super) fn ask_review(&mut self, id: &ToolUseId) {
        if !self.running.asked.insert(id.clone()) {
            return;
        }
        // This runs after the pass's append: a failure goes back as an input, so the next pass
        // journals it (staging it here would leave it waiting for some unrelated input).
        let failed = |tool: ToolUseId, error: String| {
            let _closed = self
                .tx
                .send(Input::Signal(Signal::ReviewFailed { tool, error }));
        };
        let Some(config) = self.review.clone() else {
            failed(
                id.clone(),
                "no reviewer is configured for this hub ([review] in l3m.toml), so wild calls cannot run".into(),
            );
            return;
        };
        let request = match self.review_request(id, config.rounds) {
            Ok(request) => request,
            Err(error) => {
                failed(id.clone(), error);
                return;
            }
        };
        let client = self.client.clone();
        let tx = self.tx.clone();
        let timeout = Duration::from_secs(config.timeout_secs);
        let (tool, round, of) = (id.clone(), request.round, request.of);
        tokio::spawn(async move {
            let asked = Instant::now();
            let answer = l3m_wire::reviewer::ask(&client, request, timeout).await;
            let ms = u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX);
            let signal = match answer {
                Ok(Ok(answer)) => Signal::Review {
                    tool,
                    round,
                    of,
                    verdict: answer.verdict,
                    by: answer.by,
                    spent: ReviewSpent {
                        model_calls: answer.spent.model_calls,
                        ms,
                    },
                },
                Ok(Err(refused)) => Signal::ReviewFailed {
                    tool,
                    error: format!(
                        "the reviewer answered {}: {}",
                        refused.code, refused.message
                    ),
                },
                Err(e) => Signal::ReviewFailed {
                    tool,
                    error: format!("the reviewer did not answer: {e}"),
                },
            };
            let _closed = tx.send(Input::Signal(signal));
        });
    }

    /// Raises a card for each stalemate of the appended Log that has none yet: the effect, the
    /// justification and the reviewer's reason, for a human. Awaited, so the session counts as
    /// idle only once its cards are on the chain; one that could not be raised is tried again
    /// at the next pass (or the next boot, which reads the chain).
    pub(super) async fn raise_cards(&mut self) {
        let stalemates: Vec<(ToolUseId, String)> = (self.log.owed.stalemates())
            .filter(|(id, _)| !self.running.raised.contains(*id))
            .map(|(id, reason)| (id.clone(), reason.to_owned()))
            .collect();
        for (id, reason) in stalemates {
            let Ok(request) = self.review_request(&id, 0) else {
                tracing::warn!(%id, "a stalemated call is no longer in the Log; no card");
                continue;
            };
            let line = CardLine::Raised {
                id: id.clone(),
                round: request.round,
                effect: request.effect,
                justification: request.justification,
                reason,
            };
            let Ok(text) = serde_json::to_string(&line) else {
                continue;
            };
            match self.client.append_card(&self.agent, text).await {
                Ok(_) => {
                    self.running.raised.insert(id);
                }
                Err(e) => {
                    tracing::warn!(agent = %self.agent, %id, error = %e, "could not raise a card")
                }
            }
        }
    }

    /// At boot: reads the cards chain, so a card raised before a restart is not raised again,
    /// and returns the answers the Log still waits for (given while no sequencer ran).
    pub(crate) async fn resume_cards(&mut self) -> Result<Vec<Input>, SequencerError> {
        if self.log.owed.stalemates().next().is_none() {
            return Ok(Vec::new());
        }
        let mut lines = Vec::new();
        for text in self.client.read_cards(&self.agent).await? {
            match parse_card_line(&text) {
                Ok(line) => lines.push(line),
                Err(e) => tracing::warn!(agent = %self.agent, error = %e, "skipped a card line"),
            }
        }
        (self.running.raised).extend(
            (lines.iter())
                .filter(|l| matches!(l, CardLine::Raised { .. }))
                .map(|l| l.id().clone()),
        );
        Ok(answers_awaited(&lines, &self.log.owed)
            .into_iter()
            .filter_map(|line| match line {
                CardLine::Answered {
                    id,
                    by,
                    approve,
                    reason,
                } => Some(Input::CardAnswered {
                    id: id.clone(),
                    by: by.to_string(),
                    approve: *approve,
                    reason: reason.clone(),
                }),
                CardLine::Raised { .. } => None,
            })
            .collect())
    }

    /// Journals a human's answer at a card as the round after the stalemate's; an answer for a
    /// call no longer waiting (closed by an interrupt or a rewind, answered before) is dropped
    /// as stale.
    pub(super) fn card_answered(&mut self, id: ToolUseId, by: String, approve: bool, reason: &str) {
        if !self.log.owed.stalemates().any(|(s, _)| *s == id) {
            return;
        }
        let round = self.log.owed.review_round(&id);
        self.signal_or_drop(Signal::Review {
            tool: id,
            round: round.saturating_add(1),
            of: round,
            verdict: CardLine::verdict(approve, reason),
            by,
            spent: ReviewSpent::default(),
        });
    }

    /// The round to ask about `id`: its effect (from the tool's own account and the grant's
    /// bounds), the justification, and the exchange so far, all read from the Log.
    fn review_request(&self, id: &ToolUseId, of: u32) -> Result<ReviewRequest, String> {
        let use_ = (self.log.owed.tool_use(id)).ok_or("the call is not in the latest reply")?;
        let (justification, input) = split_justification(&use_.input).map_err(|e| e.to_string())?;
        let footprint = (self.tools.footprints().get(&use_.name))
            .ok_or("the tool is not offered")?
            .clone();
        let what = (self.tools.effect(&use_.name, &input)).ok_or("the tool is not offered")?;
        let proposer = Family::of_dialect(self.models.primary.0.name()).ok_or_else(|| {
            format!(
                "the proposer's model family ({}) is unknown, so no reviewer of another family can be chosen",
                self.models.primary.0.name()
            )
        })?;
        let grant = &self.grant.grant;
        let hosts = if footprint.0.contains(&EffectClass::Net) {
            grant.net.iter().map(ToString::to_string).collect()
        } else {
            Vec::new()
        };
        Ok(ReviewRequest {
            agent: self.agent.clone(),
            tool_use: id.clone(),
            round: self.log.owed.review_round(id),
            of,
            proposer,
            effect: Effect {
                tool: use_.name.clone(),
                footprint,
                what,
                write_roots: grant.files.iter().map(ToString::to_string).collect(),
                hosts,
                input,
            },
            justification,
            earlier: self.log.owed.earlier_rounds(id).to_vec(),
        })
    }
}
