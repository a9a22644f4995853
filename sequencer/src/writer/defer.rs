//! Carrying out a hook's `defer`: the program runs as the harness's own call of
//! `program_<name>`, with the agent's tokens and under the same deadline and limits as a
//! model's call of it, and its completion comes back as a `program-done` event the hook decides.
//!
//! # Records
//! A defer decided by the `hook-decision` at seq `d` is journaled, in the pass that decides it
//! and so before the program starts, as
//! - `hook-decision {event, defer {program}}` at `d`, then
//! - `tool-call {id: l3m-defer-<d>, name: program_<name>, tier, footprint}`: the call the harness
//!   makes, named after the decision that is its origin;
//!
//! and its completion, in one append once the program returned, as
//! - `tool-result {id: l3m-defer-<d>, output, is_error, effects, refusal}`, whose effects name
//!   the undo entries the program's tame edits left, so a rewind to before them restores them
//!   exactly as it does a model's call's (`aftermath` folds every tool result);
//! - `event {id: program-done-<d>, source: program-done {program}, text}`, the text `ok: <result>`
//!   or `failed: <why>`; the hook decides it like any event, and a defer of it is refused
//!   (`defer-again`).
//!
//! No `tool-started` is journaled: the run answers no model reply, so core's fold owes nothing
//! for it (it holds up no model call or turn end), the view shows nothing of it but its event,
//! and an interrupt or a rewind does not close it: it ends by its deadline like any program.
//!
//! # Crash
//! A defer is open exactly while its decision has no `program-done-<d>` event; the fold of
//! open defers ([`OpenDefers`]) is read from the Log at boot like every other. A writer that
//! finds an open defer it did not start — at boot, one a dead process left between the
//! decision and the completion — journals its completion as failed and never runs the program
//! again: a deferred program runs at most once. What it changed before the crash stays on the
//! undo chain unnamed by the Log (as for a model's call a crash cut), so a rewind does not
//! restore it.
//!
//! # Input
//! The program receives `{"event": E}`, E being the dict the hook saw for the event
//! (`l3m_programs::hooks::event_json`): `id`, `kind`, `text` and the source's own fields (for a
//! letter `letter_id`, `from` and, for a reply, `in_reply_to`).

use l3m_core::owed::{OpenDefer, Undecided, completion_id};

use super::*;

/// A defer to start once its decision is appended.
#[derive(Debug, Clone)]
pub(crate) struct DeferRun {
    /// The decision's seq.
    pub(crate) decision: u64,
    /// The program, without the prefix.
    pub(crate) program: String,
    /// `{"event": …}`, what the program receives.
    pub(crate) input: serde_json::Value,
}

/// What a deferred program came to.
#[derive(Debug)]
pub(crate) struct DeferDone {
    /// The decision's seq.
    pub(crate) decision: u64,
    /// Its result (or why it failed), cut to the model's cap on one result.
    pub(crate) output: String,
    /// Whether it failed.
    pub(crate) is_error: bool,
    /// The undo entries it left, and what no entry covers.
    pub(crate) effects: Vec<EffectNote>,
    /// Which boundary refused it, when it was refused.
    pub(crate) refusal: Option<Refusal>,
}

/// The ids the harness's call for the defer decided at seq `decision` may carry, first choice
/// first (a later one only when a model's reply happened to use the first).
fn run_ids(decision: u64) -> impl Iterator<Item = ToolUseId> {
    (0u32..).filter_map(move |n| {
        let id = match n {
            0 => format!("l3m-defer-{decision}"),
            n => format!("l3m-defer-{decision}-{n}"),
        };
        ToolUseId::new(id).ok()
    })
}

impl Session {
    /// Whether `id` names a tool use of the model's latest reply or one running: the harness's
    /// own call must never take it, or its admission or result would stand for the model's.
    fn taken(&self, id: &ToolUseId) -> bool {
        self.log.owed.tool_use(id).is_some() || self.log.owed.running().contains(id)
    }

    /// The id the harness's call for `decision` carries now.
    fn run_id(&self, decision: u64) -> Option<ToolUseId> {
        run_ids(decision).take(64).find(|id| !self.taken(id))
    }

    /// Stages the harness's call of the program a decision just staged at `decision` defers
    /// `event` to, and queues the run for after the append.
    pub(super) fn defer(&mut self, decision: u64, event: &Undecided, program: &str) {
        let name = format!("{}{program}", l3m_programs::decl::TOOL_PREFIX);
        let footprint = self.tools.footprints().get(&name).cloned();
        // The first choice of id is the one its result will carry; a model's use holding it
        // (only a provider letting the model pick ids could) must not be admitted by this.
        let id = run_ids(decision).next().filter(|id| !self.taken(id));
        if let (Some(footprint), Some(id)) = (footprint, id) {
            self.stage(RecordBody::ToolCall {
                id,
                name,
                tier: footprint.tier(),
                footprint,
            });
        }
        let input = serde_json::json!({
            "event": l3m_programs::hooks::event_json(&event.id, &event.source, &event.text),
        });
        self.buffer.carry.push(Carry::Defer(DeferRun {
            decision,
            program: program.to_owned(),
            input,
        }));
    }

    /// Runs a deferred program on a blocking thread, as a model's call of it would run; its
    /// outcome comes back as [`Input::Deferred`].
    pub(super) fn start_defer(&mut self, run: DeferRun) {
        self.running.deferred.insert(run.decision);
        let tools = Arc::clone(&self.tools);
        let cap = self.models.economy.tool_output_cap;
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let DeferRun {
                decision,
                program,
                input,
            } = run;
            let name = format!("{}{program}", l3m_programs::decl::TOOL_PREFIX);
            let done = match tools.run(&name, input, cap) {
                Outcome::Finished {
                    output,
                    is_error,
                    effects,
                    refusal,
                } => DeferDone {
                    decision,
                    output,
                    is_error,
                    effects,
                    refusal,
                },
                // A hook may defer only to a tame program (`defer-wild`); had a wild one come
                // here, it would not run unreviewed.
                Outcome::NeedsReview { card } => DeferDone {
                    decision,
                    output: format!("(l3m) not run: it needs review ({card})"),
                    is_error: true,
                    effects: vec![],
                    refusal: Some(Refusal::new("review", None)),
                },
            };
            let _closed = tx.send(Input::Deferred(Box::new(done)));
        });
    }

    /// Journals a deferred program's completion: its result with the effects it left, and the
    /// `program-done` event the hook decides next.
    pub(super) fn deferred(&mut self, done: DeferDone) {
        self.running.deferred.remove(&done.decision);
        let Some(id) = completion_id(done.decision) else {
            return;
        };
        let Some(open) = self.log.defers.get(&id).cloned() else {
            tracing::debug!(
                decision = done.decision,
                "a deferred program's completion is already journaled"
            );
            return;
        };
        self.complete(id, &open, done);
    }

    /// Journals as failed every open defer this writer did not start (one a dead process left
    /// between its decision and its completion): the program is never run again.
    pub(super) fn close_orphaned_defers(&mut self) {
        let queued = |d: u64| {
            (self.buffer.carry.iter()).any(|c| matches!(c, Carry::Defer(r) if r.decision == d))
        };
        let orphans: Vec<(EventId, OpenDefer)> = (self.log.defers.iter())
            .filter(|(_, d)| !self.running.deferred.contains(&d.decision) && !queued(d.decision))
            .map(|(id, d)| (id.clone(), d.clone()))
            .collect();
        for (id, open) in orphans {
            tracing::info!(agent = %self.agent, decision = open.decision, program = open.program, "closing a defer a dead process left");
            let done = DeferDone {
                decision: open.decision,
                output: format!(
                    "(l3m) the sequencer stopped before program {} finished; it was not run \
                     again, and what it changed before is not undone by a rewind",
                    open.program
                ),
                is_error: true,
                effects: vec![],
                refusal: None,
            };
            self.complete(id, &open, done);
        }
    }

    /// Stages the completion `id` of `open`: the call's result, then its event, in one append.
    fn complete(&mut self, id: EventId, open: &OpenDefer, done: DeferDone) {
        if self.log.owed.has_event(&id) {
            return;
        }
        let text = format!(
            "{}: {}",
            if done.is_error { "failed" } else { "ok" },
            done.output
        );
        if let Some(run) = self.run_id(open.decision) {
            // A refusal the model could correct (`tool-table`, `tool-arguments`) is not the
            // model's mistake here: it must not count against its corrections this turn.
            let refusal = done.refusal.filter(|r| !owed::is_mistake(r));
            self.stage(RecordBody::ToolResult {
                id: run,
                output: done.output,
                is_error: done.is_error,
                effects: done.effects,
                refusal,
            });
        }
        self.signal_or_drop(Signal::Event {
            id,
            source: EventSource::ProgramDone {
                program: open.program.clone(),
            },
            text,
        });
    }
}
