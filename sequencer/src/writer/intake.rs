//! Taking inputs into the writer: signals, letters, grant moves, control requests and the
//! hooks that decide events — each journaled through core, or dropped as stale.
//!
//! The agent's hook runs off the writer's loop: [`Session::hooks`] hands the undecided events
//! to a blocking thread (one evaluator per batch, killed at its deadline), and the proposals
//! come back as an input ([`Session::hooked`]), where core admits each or falls back to the
//! default, naming the rule. The decision is journaled; a replay reads it and never reruns the
//! hook. A reply, forward or retire is carried out through hubd once the decision is appended;
//! a defer runs its program as the harness's own call (`defer`).

use super::*;

impl Session {
    pub(super) fn take_input(&mut self, input: Input) -> Option<Exit> {
        match input {
            Input::Signal(signal) => {
                if let Signal::ToolFinished { id, .. } = &signal {
                    self.running.running_tools.remove(id);
                }
                if let Signal::ModelReply { call, .. } | Signal::ModelFailed { call, .. } = &signal
                {
                    self.running.calls.remove(call);
                }
                self.signal_or_drop(signal);
            }
            Input::Letter(letter) => self.letter(*letter),
            Input::Event { id, source, text } => {
                match self.signal(Signal::Event { id, source, text }) {
                    Ok(()) | Err(Stale::DuplicateEvent { .. }) => {}
                    Err(stale) => tracing::debug!(%stale, "event not journaled"),
                }
            }
            Input::Grant(view, tip) => self.grant_moved(*view, tip),
            Input::Retired => return Some(Exit::Retired),
            Input::LeaseLost(why) => {
                tracing::warn!(agent = %self.agent, why, "lease lost; stopping");
                return Some(Exit::LeaseLost);
            }
            Input::NeedsReview(id, card) => self.notice(
                format!("review-{id}"),
                format!("tool use {id} waits for review and was not run: {card}"),
                Disposition::Show,
            ),
            Input::CardAnswered {
                id,
                by,
                approve,
                reason,
            } => self.card_answered(id, by, approve, &reason),
            Input::Note(text) => {
                let id = format!("note-{}", self.log.owed.next_seq());
                self.notice(id, text, Disposition::Dismiss);
            }
            Input::Oversized(call, error) => self.oversized(call, error),
            Input::Overflow(call, error) => self.overflowed(call, error),
            Input::Control(request, reply) => self.control(request, reply),
            Input::Summary(summary) => self.summarized(summary),
            Input::Hooked(proposals) => self.hooked(proposals),
            Input::Deferred(done) => self.deferred(*done),
        }
        None
    }

    /// Journals an oversized reply as a failed call; the first in a row is told to the model.
    pub(super) fn oversized(&mut self, call: CallId, error: String) {
        self.running.calls.remove(&call);
        let failed = Signal::ModelFailed {
            call,
            retryable: false,
            error: error.clone(),
        };
        if self.signal(failed).is_err() {
            return;
        }
        self.log.oversized_in_a_row = self.log.oversized_in_a_row.saturating_add(1);
        if self.log.oversized_in_a_row == 1 {
            let id = format!("oversized-{}", self.log.owed.next_seq());
            self.notice(id, format!("(l3m) {error}"), Disposition::Show);
        }
    }

    /// Journals a call the provider refused as over its context window as a retryable
    /// failure, and learns the window from it: the request just sent is the provider's proof
    /// that requests of its size do not fit, so the retry is compacted and fitted below it.
    pub(super) fn overflowed(&mut self, call: CallId, error: String) {
        self.running.calls.remove(&call);
        let failed = Signal::ModelFailed {
            call,
            retryable: true,
            error: format!(
                "{error} (l3m: the request was over the model's context window; it is                  compacted and asked again)"
            ),
        };
        if self.signal(failed).is_ok() {
            self.learn_overflow();
        }
    }

    pub(super) fn letter(&mut self, letter: Letter) {
        let Ok(id) = EventId::new(letter.id.as_str()) else {
            tracing::warn!(letter = letter.id.as_str(), "letter id is not an event id");
            return;
        };
        let from = letter.from.recipient().0;
        let text = crate::boundary::letter_text(&letter, self.models.economy.tool_output_cap);
        let event = Signal::Event {
            id,
            source: EventSource::Letter {
                letter_id: letter.id.to_string(),
                from,
                in_reply_to: letter.in_reply_to.as_ref().map(ToString::to_string),
            },
            text,
        };
        match self.signal(event) {
            Ok(()) | Err(Stale::DuplicateEvent { .. }) => {
                self.buffer.to_mark.push(letter.id.to_string());
            }
            Err(stale) => tracing::debug!(%stale, "letter not journaled"),
        }
    }

    pub(super) fn grant_moved(&mut self, view: GrantView, tip: String) {
        if self.log.grants_commit.as_deref() == Some(tip.as_str()) {
            return;
        }
        // A ref that moved without changing the grant (a loan) is nothing the
        // model can act on: it is not journaled as a grant change (a new loan shows as the
        // budget change below).
        let changed = view.grant != self.grant.grant;
        if changed {
            match crate::toolbox::Toolbox::build(
                (self.build_tools)(),
                &view,
                &self.agent,
                crate::acr::Acr::at(&self.forest, &self.agent).root(),
                self.tools.outlet(),
                self.tools.undo(),
                self.limits.evaluator().as_ref(),
            ) {
                Ok(tools) => {
                    self.tools = Arc::new(tools);
                    self.specs = self.tools.specs();
                    self.log.reshaped = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not rebuild the tools; keeping the old")
                }
            }
        }
        if changed {
            self.signal_or_drop(Signal::GrantChanged {
                summary: "your grant changed; the tools offered follow it from now on".to_owned(),
                grants_commit: tip,
            });
        } else {
            self.log.grants_commit = Some(tip);
        }
        self.grant = view;
        self.budget_from_hub("the budget was re-read with the grant");
    }

    /// Journals the budget hubd's account implies (its `left`, less what this Log spent), if
    /// it differs from the Log's.
    pub fn budget_from_hub(&mut self, why: &str) {
        let account = self.grant.account.left();
        let spent = self.log.owed.spent();
        let left = Fuel {
            model_calls: account.model_calls.saturating_sub(spent.model_calls),
            bytes: account.bytes.saturating_sub(spent.bytes),
            wakes: account.wakes,
        };
        if self.log.owed.fuel_left() != Some(left) {
            self.signal_or_drop(Signal::BudgetChanged {
                left,
                summary: why.to_owned(),
            });
        }
    }

    pub(super) fn control(
        &mut self,
        request: ControlRequest,
        reply: oneshot::Sender<ControlReply>,
    ) {
        let answer = match request {
            ControlRequest::Interrupt { reason } => {
                for (_, call) in self.running.calls.drain() {
                    call.abort();
                }
                self.drop_summary();
                match self.signal(Signal::Interrupt { reason }) {
                    Ok(()) => ControlReply::Done {
                        next_seq: self.log.owed.next_seq(),
                    },
                    Err(e) => ControlReply::Refused {
                        reason: e.to_string(),
                    },
                }
            }
            ControlRequest::Rewind { to, reason } => {
                for (_, call) in self.running.calls.drain() {
                    call.abort();
                }
                self.drop_summary();
                match self.signal(Signal::Rewind { to, reason }) {
                    Ok(()) => {
                        self.buffer.rewinds.push(to);
                        ControlReply::Done {
                            next_seq: self.log.owed.next_seq(),
                        }
                    }
                    Err(e) => ControlReply::Refused {
                        reason: e.to_string(),
                    },
                }
            }
            ControlRequest::Status => ControlReply::Status(self.status()),
            // The control server answers a forecast itself; one reaching the writer is a bug.
            ControlRequest::Forecast { .. } => ControlReply::Refused {
                reason: "a forecast is answered by the control server, not journaled".into(),
            },
        };
        self.buffer.replies.push((reply, answer));
    }

    pub(super) fn status(&self) -> Status {
        Status {
            agent: self.agent.to_string(),
            next_seq: self.log.owed.next_seq(),
            live: self.log.owed.is_live(),
            open_call: self.log.owed.open_call().map(|c| c.id.to_string()),
            running_tools: self
                .log
                .owed
                .running()
                .iter()
                .map(ToString::to_string)
                .collect(),
            fuel: self.log.owed.fuel_left(),
        }
    }

    /// Decides every undecided event: with no admitted hook, by the default (`without_hook`)
    /// at once; with one, by handing the events not yet handed to it to a blocking thread, so
    /// a slow or hung evaluator never holds up the writer (its deadline ends it).
    pub(super) fn hooks(&mut self) {
        self.close_orphaned_defers();
        let undecided = self.log.owed.undecided_events().to_vec();
        let Some(hook) = self.tools.hook().cloned() else {
            for event in undecided {
                let disposition = Disposition::without_hook(&event.source);
                self.signal_or_drop(Signal::Decision {
                    event: event.id,
                    disposition,
                });
            }
            return;
        };
        let handed: Vec<_> = undecided
            .into_iter()
            .filter(|e| self.running.hooking.insert(e.id.clone()))
            .collect();
        if handed.is_empty() {
            return;
        }
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let events: Vec<serde_json::Value> = handed
                .iter()
                .map(|e| l3m_programs::hooks::event_json(&e.id, &e.source, &e.text))
                .collect();
            let proposals = hook.decide(&events);
            let _closed = tx.send(Input::Hooked(
                handed.into_iter().map(|e| e.id).zip(proposals).collect(),
            ));
        });
    }

    /// Journals the decision for each event the hook proposed about (still undecided): the
    /// proposal when the event admits it, else the default; a refused proposal or a failed
    /// hook is narrated, shown with the event when the event is shown.
    pub(super) fn hooked(
        &mut self,
        proposals: Vec<(EventId, Result<Disposition, l3m_programs::RunError>)>,
    ) {
        let mut mail = l3m_core::grant::default_mail(&self.agent);
        mail.extend(self.grant.grant.mail.iter().cloned());
        let programs = self.tools.programs();
        for (id, proposal) in proposals {
            self.running.hooking.remove(&id);
            let Some(event) = self
                .log
                .owed
                .undecided_events()
                .iter()
                .find(|e| e.id == id)
                .cloned()
            else {
                continue;
            };
            let cx = l3m_core::hooks::HookContext {
                agent: &self.agent,
                mail: &mail,
                programs: &programs,
                carries: l3m_core::hooks::CARRIED,
            };
            let (disposition, narration) = match proposal {
                Ok(proposed) => {
                    let decided = l3m_core::hooks::decide(&cx, &event.source, proposed);
                    let narration = decided.refused.map(|(proposed, why)| {
                        format!(
                            "your hook proposed {} for event {id}; refused by rule {}: {why}",
                            l3m_core::story::disposition(&proposed),
                            why.rule()
                        )
                    });
                    (decided.disposition, narration)
                }
                Err(failed) => (
                    Disposition::without_hook(&event.source),
                    Some(format!("your hook failed on event {id}: {failed}")),
                ),
            };
            if let Some(text) = narration {
                tracing::info!(agent = %self.agent, event = %id, %text, "hook fell back");
                let shown = if disposition == Disposition::Show {
                    Disposition::Show
                } else {
                    Disposition::Dismiss
                };
                let default = l3m_core::story::disposition(&disposition);
                self.notice(
                    format!("hook-{}", self.log.owed.next_seq()),
                    format!("(l3m) {text}; the default, {default}, was used"),
                    shown,
                );
            }
            let carry = match (&disposition, &event.source) {
                (
                    Disposition::Reply { text },
                    EventSource::Letter {
                        from, letter_id, ..
                    },
                ) => Some(Carry::Reply {
                    to: from.clone(),
                    answered: letter_id.clone(),
                    text: text.clone(),
                }),
                (Disposition::Forward { to }, _) => Some(Carry::Forward {
                    to: to.clone(),
                    text: event.text.clone(),
                }),
                (Disposition::RetireChild { child }, _) => Some(Carry::Retire(child.clone())),
                _ => None,
            };
            let defer = match &disposition {
                Disposition::Defer { program } => Some(program.clone()),
                _ => None,
            };
            let decision = self.log.owed.next_seq();
            match self.signal(Signal::Decision {
                event: id,
                disposition,
            }) {
                Ok(()) => {
                    self.buffer.carry.extend(carry);
                    if let Some(program) = defer {
                        self.defer(decision, &event, &program);
                    }
                }
                Err(stale) => tracing::debug!(agent = %self.agent, %stale, "dropped a decision"),
            }
        }
    }
}
