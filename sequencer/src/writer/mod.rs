//! The single writer: the session's state, its inputs, and the pass.
//!
//! # Layout
//! - this module: [`Session`], the pass (plan, stage, one append) and the run loop;
//! - `state`: what the Log says ([`LogState`]), what runs, and the pass's buffer;
//! - `intake`: inputs taken in (signals, letters, grant moves, control, hooks);
//! - `activities`: model calls and tool uses started for the plan;
//! - `defer`: a hook's `defer` carried out, the program run as the harness's own call.
//!
//! The state is folded one record at a time (core's `Owed` and `ViewFold`, plus the budget),
//! never refolded from the whole Log. A pass stages records (folding each in as it goes), then
//! appends them all in one compare-and-swap; any append failure ends the run, because the fold
//! is then ahead of the Log and only a fresh boot (which reads the Log) may continue.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use l3m_core::budget::Fuel;
use l3m_core::effects::{EffectClass, Tier};
use l3m_core::log::{
    CallId, Disposition, EffectNote, EventId, EventSource, Record, RecordBody, Refusal, ToolUse,
    ToolUseId,
};
use l3m_core::mail::Letter;
use l3m_core::names::AgentName;
use l3m_core::owed::{self, PlanInput, Signal, Stale};
use l3m_core::review::ReviewConfig;
use l3m_core::view::ViewFold;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::authority::GrantView;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::Limits;
use crate::health::RunMeter;
use crate::model::{ModelRequest, Provider, ToolSpec};
use crate::toolbox::{Outcome, Toolbox};
use crate::{Exit, SequencerError, now_ms};
use l3m_wire::control::{ControlReply, ControlRequest, Status};

mod activities;
mod compact;
mod defer;
mod intake;
mod review;
mod state;

pub(crate) use state::LogState;
use state::{Carry, PassBuffer, Running};

/// Something for the writer to journal or act on.
#[derive(Debug)]
pub(crate) enum Input {
    /// A signal core journals as it is.
    Signal(Signal),
    /// A letter found unread in the inbox.
    Letter(Box<Letter>),
    /// Something that happened for the agent, journaled as an event once (a fired vigil).
    Event {
        /// Its id: the same each time it is found, so it is journaled once.
        id: EventId,
        /// Where it came from.
        source: EventSource,
        /// What the agent reads.
        text: String,
    },
    /// The grant as hubd now reads it, with the grants ref's tip.
    Grant(Box<GrantView>, String),
    /// The agent was retired (its grant is gone).
    Retired,
    /// A tool use that needs review and was not run.
    NeedsReview(ToolUseId, String),
    /// A human answered a card on the agent's cards chain (hubd admitted the answer).
    CardAnswered {
        /// The stalemated tool use.
        id: ToolUseId,
        /// The human, as hubd wrote it.
        by: String,
        /// Whether the call may run.
        approve: bool,
        /// Why.
        reason: String,
    },
    /// A harness notice to record but not show (e.g. what a rewind restored).
    Note(String),
    /// A model reply too large to journal (`boundary::check_reply`), refused as a failed call.
    Oversized(CallId, String),
    /// A provider refused a call's request as over the model's context window: journaled as a
    /// retryable failure, and the window learnt, so the retry is compacted and fitted.
    Overflow(CallId, String),
    /// A control request and where to answer.
    Control(ControlRequest, oneshot::Sender<ControlReply>),
    /// The lease was lost.
    LeaseLost(String),
    /// A compaction's summary came back.
    Summary(compact::Summary),
    /// The hook's proposals for events handed to it, in the order handed (or why none).
    Hooked(Vec<(EventId, Result<Disposition, l3m_programs::RunError>)>),
    /// A program a hook deferred to came back.
    Deferred(Box<defer::DeferDone>),
}

/// One model of the session: its provider, the model id asked, and its own notes.
pub(crate) type ModelEntry = (Arc<dyn Provider>, String, Option<String>);

/// The models of the session, by attempt.
#[derive(Debug, Clone)]
pub(crate) struct Models {
    pub primary: ModelEntry,
    pub fallback: Option<ModelEntry>,
    /// The primary model's window and result cap; a fallback must serve the same view.
    pub economy: crate::model::Economy,
}

/// The writer's state.
pub(crate) struct Session {
    pub client: HubClient,
    pub agent: AgentName,
    pub forest: PathBuf,
    pub limits: Limits,
    pub models: Models,
    pub tools: Arc<Toolbox>,
    pub specs: Vec<ToolSpec>,
    pub build_tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
    pub tx: mpsc::UnboundedSender<Input>,
    pub grant: GrantView,
    /// How wild calls are reviewed (`[review]`); `None`: they are not run, and the model is told.
    pub review: Option<ReviewConfig>,
    /// What the Log says, folded once per record.
    pub log: LogState,
    /// The model calls and tools running now.
    running: Running,
    /// What this pass stages, and what waits for its append.
    buffer: PassBuffer,
    /// The token estimate and the compaction under way.
    gauge: compact::Gauge,
    /// What this run has done, for its health answer.
    pub meter: Arc<RunMeter>,
}

/// How a pass ended.
pub(crate) enum Next {
    Continue,
    Stop(Exit),
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: HubClient,
        agent: AgentName,
        forest: PathBuf,
        limits: Limits,
        models: Models,
        tools: Arc<Toolbox>,
        build_tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
        tx: mpsc::UnboundedSender<Input>,
        grant: GrantView,
    ) -> Session {
        let specs = tools.specs();
        let meter = Arc::new(RunMeter::new(agent.clone()));
        Session {
            client,
            agent,
            forest,
            limits,
            models,
            tools,
            specs,
            build_tools,
            tx,
            log: LogState {
                fold: ViewFold::new(),
                reshaped: true,
                ..LogState::default()
            },
            running: Running::default(),
            buffer: PassBuffer::default(),
            gauge: compact::Gauge::default(),
            meter,
            grant,
            review: None,
        }
    }

    /// Folds in a record already in the Log (boot) or just staged.
    pub fn observe(&mut self, record: &Record) {
        self.log.owed.apply(record);
        self.log.fold.advance(record);
        self.log.retries.apply(&record.body);
        owed::fold_defers(&mut self.log.defers, record);
        match &record.body {
            RecordBody::CallStarted { .. } => {
                // The request this call sends is built from the view as it is now; measured
                // here, at boot too, so the estimate is a fold over the Log and a fresh boot
                // starts calibrated.
                self.gauge.sent_bytes = self.request_bytes();
                self.gauge.compacted = false;
            }
            RecordBody::AssistantReply { usage, .. } => {
                self.log.oversized_in_a_row = 0;
                self.calibrate(usage);
            }
            RecordBody::GrantChange { grants_commit, .. } => {
                self.log.grants_commit = Some(grants_commit.clone());
            }
            RecordBody::TurnEnd | RecordBody::OutOfFuel { .. } => self.gauge.compacted = false,
            _ => {}
        }
        if matches!(
            record.body,
            RecordBody::Rewind { .. }
                | RecordBody::Compaction { .. }
                | RecordBody::SystemPrompt {
                    continues: false,
                    ..
                }
        ) {
            self.log.reshaped = true;
            self.gauge.stale = true;
        }
    }

    /// Stages `body` as the next record, through the boundary: what is folded and appended is
    /// the record as fitted (bounded, control characters made visible), the one hubd accepts.
    /// A record the boundary refuses is the sequencer's own logic gone wrong, never content: it
    /// is not folded, and the pass's append stops the run.
    pub fn stage(&mut self, body: RecordBody) {
        let record = Record {
            seq: self.log.owed.next_seq(),
            at_ms: now_ms(),
            body,
        };
        let journaled = match crate::boundary::fit(record) {
            Ok(journaled) => journaled,
            Err(refused) => {
                tracing::error!(agent = %self.agent, %refused, "a record was refused");
                self.buffer.refused.get_or_insert(refused);
                return;
            }
        };
        let len = journaled.line().len() as u64;
        self.observe(journaled.record());
        self.log.charge.journaled(&journaled.record().body, len);
        self.buffer.staged.push(journaled);
    }

    /// Journals a signal, or drops it if core refuses it as stale.
    pub fn signal(&mut self, signal: Signal) -> Result<(), Stale> {
        let bodies = owed::journal(&self.log.owed, signal)?;
        for body in bodies {
            self.stage(body);
        }
        Ok(())
    }

    fn signal_or_drop(&mut self, signal: Signal) {
        if let Err(stale) = self.signal(signal) {
            tracing::debug!(agent = %self.agent, %stale, "dropped a stale signal");
        }
    }

    /// Journals a harness notice with its decision in one go.
    pub fn notice(&mut self, id: String, text: String, disposition: Disposition) {
        let Ok(id) = EventId::new(id) else { return };
        let event = Signal::Event {
            id: id.clone(),
            source: EventSource::Notice,
            text,
        };
        if self.signal(event).is_ok() {
            self.signal_or_drop(Signal::Decision {
                event: id,
                disposition,
            });
        }
    }

    /// What `plan` owes now, staged; the call's budget charge follows its `call-started`.
    fn plan(&mut self) -> Result<Vec<RecordBody>, SequencerError> {
        let attempt = self.log.owed.retrying().map_or(1, |r| r.attempt + 1);
        let (provider, model) = match (&self.models.fallback, attempt > 1) {
            (Some((p, m, _)), true) => (p.name().to_owned(), m.clone()),
            _ => (
                self.models.primary.0.name().to_owned(),
                self.models.primary.1.clone(),
            ),
        };
        // The table is shared; holding it by `Arc` lets `plan` borrow its footprints while
        // `self` is staged into, without copying the table every pass.
        let tools = Arc::clone(&self.tools);
        let mut n = 0u32;
        let bodies = loop {
            let id = match n {
                0 => format!("c{}", self.log.owed.next_seq()),
                n => format!("c{}-{n}", self.log.owed.next_seq()),
            };
            let call = CallId::new(id)?;
            let input = PlanInput {
                call: &call,
                provider: &provider,
                model: &model,
                // Once a turn ended in a failure, each wake spends one call until a reply.
                max_attempts: self.log.retries.attempts(self.limits.max_attempts),
                tools: tools.footprints(),
            };
            match owed::plan(&self.log.owed, &input) {
                Ok(bodies) => break bodies,
                Err(Stale::CallIdReused { .. }) if n < 8 => n += 1,
                Err(e) => return Err(e.into()),
            }
        };
        for body in &bodies {
            let charge = self.log.charge.bytes();
            self.stage(body.clone());
            if matches!(body, RecordBody::CallStarted { .. })
                && let Some(before) = self.log.owed.fuel_left()
            {
                let left = Fuel {
                    bytes: before.bytes.saturating_sub(charge),
                    ..before
                };
                self.stage(RecordBody::BudgetChange {
                    left,
                    summary: format!("a model call: 1 call and {charge} bytes"),
                });
            }
        }
        Ok(bodies)
    }

    /// One pass over `inputs`: journal, hooks, plan, append, start.
    pub async fn pass(&mut self, inputs: Vec<Input>) -> Result<Next, SequencerError> {
        let mut stop = None;
        for input in inputs {
            if let Input::Signal(signal) = &input {
                match signal {
                    Signal::ModelReply { .. } => self.meter.call_ended(None),
                    Signal::ModelFailed { error, .. } => self.meter.call_ended(Some(error)),
                    _ => {}
                }
            }
            if let Some(exit) = self.take_input(input) {
                stop = Some(exit);
                break;
            }
        }
        if let Some(Exit::LeaseLost) = stop {
            // The lease is gone: another sequencer may be writing. Append nothing.
            self.buffer.staged.clear();
            return Ok(Next::Stop(Exit::LeaseLost));
        }
        let mut planned = Vec::new();
        if stop.is_none() {
            self.hooks();
            if !self.compaction_first() {
                planned = self.plan()?;
            }
        }
        self.append().await?;
        self.start(&planned);
        self.meter.running(
            self.running.calls.len()
                + self.running.running_tools.len()
                + self.running.deferred.len(),
        );
        self.raise_cards().await;
        for (reply, answer) in self.buffer.replies.drain(..) {
            let _gone = reply.send(answer);
        }
        if let Some(exit) = stop {
            return Ok(Next::Stop(exit));
        }
        if planned
            .iter()
            .any(|b| matches!(b, RecordBody::OutOfFuel { .. }))
        {
            return Ok(Next::Stop(Exit::OutOfFuel));
        }
        Ok(Next::Continue)
    }

    /// Appends the staged records by compare-and-swap: in one append, or in as few as keep
    /// each within the bus's message (`log_rule::appends`), each from the tip the last left.
    async fn append(&mut self) -> Result<(), SequencerError> {
        if let Some(refused) = self.buffer.refused.take() {
            return Err(SequencerError::Unjournalable(refused));
        }
        if self.buffer.staged.is_empty() {
            return Ok(());
        }
        let staged = std::mem::take(&mut self.buffer.staged);
        for batch in l3m_core::log_rule::appends(staged) {
            let records: Vec<Record> = batch.into_iter().map(|j| j.into_record()).collect();
            let started = std::time::Instant::now();
            match self
                .client
                .append_log(&self.agent, self.log.tip.as_deref(), &records)
                .await
            {
                Ok(appended) => {
                    self.meter.appended(records.len(), started.elapsed());
                    self.log.tip = Some(appended.tip);
                }
                Err(e) if e.is_conflict() => {
                    return Err(SequencerError::LostWriter {
                        agent: self.agent.to_string(),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Whether nothing is running, so the session may count as idle: no turn is live, or the
    /// turn waits only for humans at cards already raised (an answer wakes the agent again).
    pub fn quiet(&self) -> bool {
        let owed = &self.log.owed;
        let waits_on_cards = owed.waits_only_on_cards()
            && (owed.stalemates()).all(|(id, _)| self.running.raised.contains(id));
        self.running.calls.is_empty()
            && self.running.running_tools.is_empty()
            && self.running.hooking.is_empty()
            && self.running.deferred.is_empty()
            && (!owed.is_live() || waits_on_cards)
    }
}

/// The writer loop: waits for inputs, runs passes, stops on exit or shutdown.
pub(crate) async fn run_loop(
    mut session: Session,
    mut rx: mpsc::UnboundedReceiver<Input>,
    shutdown: CancellationToken,
) -> Result<Exit, SequencerError> {
    let idle = session.limits.idle_exit_secs.map(Duration::from_secs);
    loop {
        let first = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(Exit::Shutdown),
            input = rx.recv() => match input {
                Some(input) => input,
                None => return Ok(Exit::Shutdown),
            },
            () = sleep_or_forever(idle), if session.quiet() => return Ok(Exit::Idle),
        };
        let mut inputs = vec![first];
        while let Ok(more) = rx.try_recv() {
            inputs.push(more);
        }
        if let Next::Stop(exit) = session.pass(inputs).await? {
            return Ok(exit);
        }
    }
}

async fn sleep_or_forever(after: Option<Duration>) {
    match after {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
