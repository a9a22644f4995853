//! The single writer: the session's state, its inputs, and the pass.
//!
//! The state is folded one record at a time (core's `Owed` and `ViewFold`, plus the budget),
//! never refolded from the whole Log. A pass stages records (folding each in as it goes), then
//! appends them all in one compare-and-swap; any append failure ends the run, because the fold
//! is then ahead of the Log and only a fresh boot (which reads the Log) may continue.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use l3m_core::budget::Fuel;
use l3m_core::log::{
    CallId, Disposition, EventId, EventSource, Record, RecordBody, ToolUse, ToolUseId,
};
use l3m_core::mail::Letter;
use l3m_core::names::AgentName;
use l3m_core::owed::{self, Owed, PlanInput, Signal, Stale};
use l3m_core::view::ViewFold;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::authority::GrantView;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Limits;
use crate::model::{ModelRequest, Provider, ToolSpec};
use crate::toolbox::{Outcome, Toolbox};
use crate::{Exit, SequencerError, now_ms};
use l3m_wire::control::{ControlReply, ControlRequest, Status};

/// Something for the writer to journal or act on.
#[derive(Debug)]
pub(crate) enum Input {
    /// A signal core journals as it is.
    Signal(Signal),
    /// A letter found unread in the inbox.
    Letter(Box<Letter>),
    /// The grant as hubd now reads it, with the grants ref's tip.
    Grant(Box<GrantView>, String),
    /// The agent was retired (its grant is gone).
    Retired,
    /// A tool use that needs review and was not run.
    NeedsReview(ToolUseId, String),
    /// A harness notice to record but not show (e.g. what a rewind restored).
    Note(String),
    /// A model reply too large to journal (`bounds::check_reply`), refused as a failed call.
    Oversized(CallId, String),
    /// A control request and where to answer.
    Control(ControlRequest, oneshot::Sender<ControlReply>),
    /// The lease was lost.
    LeaseLost(String),
}

/// One model of the session: its provider, the model id asked, and its own notes.
pub(crate) type ModelEntry = (Arc<dyn Provider>, String, Option<String>);

/// The models of the session, by attempt.
#[derive(Debug, Clone)]
pub(crate) struct Models {
    pub primary: ModelEntry,
    pub fallback: Option<ModelEntry>,
}

/// The writer's state.
pub(crate) struct Session {
    pub client: HubClient,
    pub agent: AgentName,
    pub hub_root: PathBuf,
    pub limits: Limits,
    pub models: Models,
    pub tools: Arc<Toolbox>,
    pub specs: Vec<ToolSpec>,
    pub build_tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
    pub tx: mpsc::UnboundedSender<Input>,
    pub owed: Owed,
    pub fold: ViewFold,
    pub tip: Option<String>,
    /// Bytes of records journaled since the last call started: what the next call is charged.
    bytes_since_call: u64,
    /// Oversized replies since the model last replied in bounds: the first is told to the model
    /// (so it can answer in smaller steps), a repeat is not, and the agent waits for its next
    /// wake instead of spending call after call.
    oversized_in_a_row: u32,
    /// Wild uses already noticed as waiting for review.
    noticed: HashSet<ToolUseId>,
    /// Running activities by id (call or tool use), so an interrupt can stop model calls.
    calls: HashMap<CallId, AbortHandle>,
    running_tools: HashSet<ToolUseId>,
    /// Records staged in this pass, not yet appended.
    staged: Vec<Record>,
    /// Letters to mark read once their events are appended.
    to_mark: Vec<String>,
    /// Grant commit last journaled.
    pub grants_commit: Option<String>,
    /// Control replies to send once this pass's records are appended.
    replies: Vec<(oneshot::Sender<ControlReply>, ControlReply)>,
    /// Rewinds to restore files for once appended.
    rewinds: Vec<u64>,
    /// The last request sent, kept so the next one copies only what changed since.
    sent: Option<Arc<ModelRequest>>,
    /// Whether the next request is built whole: a record since the last one reshaped the view
    /// (rewind, compaction, epoch), or the tools offered changed.
    reshaped: bool,
    pub grant: GrantView,
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
        hub_root: PathBuf,
        limits: Limits,
        models: Models,
        tools: Arc<Toolbox>,
        build_tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
        tx: mpsc::UnboundedSender<Input>,
        grant: GrantView,
    ) -> Session {
        let specs = tools.specs();
        Session {
            client,
            agent,
            hub_root,
            limits,
            models,
            tools,
            specs,
            build_tools,
            tx,
            owed: Owed::default(),
            fold: ViewFold::new(),
            tip: None,
            bytes_since_call: 0,
            oversized_in_a_row: 0,
            noticed: HashSet::new(),
            calls: HashMap::new(),
            running_tools: HashSet::new(),
            staged: Vec::new(),
            to_mark: Vec::new(),
            grants_commit: None,
            replies: Vec::new(),
            rewinds: Vec::new(),
            sent: None,
            reshaped: true,
            grant,
        }
    }

    /// Folds in a record already in the Log (boot) or just staged.
    pub fn observe(&mut self, record: &Record) {
        self.owed.apply(record);
        self.fold.advance(record);
        match &record.body {
            RecordBody::CallStarted { .. } => self.bytes_since_call = 0,
            RecordBody::AssistantReply { .. } => self.oversized_in_a_row = 0,
            RecordBody::GrantChange { grants_commit, .. } => {
                self.grants_commit = Some(grants_commit.clone());
            }
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
            self.reshaped = true;
        }
    }

    /// Stages `body` as the next record.
    pub fn stage(&mut self, body: RecordBody) {
        let record = Record {
            seq: self.owed.next_seq(),
            at_ms: now_ms(),
            body,
        };
        let len = record.to_line().map_or(0, |l| l.len() as u64);
        self.observe(&record);
        if !matches!(record.body, RecordBody::CallStarted { .. }) {
            self.bytes_since_call += len;
        }
        self.staged.push(record);
    }

    /// Journals a signal, or drops it if core refuses it as stale.
    pub fn signal(&mut self, signal: Signal) -> Result<(), Stale> {
        let bodies = owed::journal(&self.owed, signal)?;
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

    fn take_input(&mut self, input: Input) -> Option<Exit> {
        match input {
            Input::Signal(signal) => {
                if let Signal::ToolFinished { id, .. } = &signal {
                    self.running_tools.remove(id);
                }
                if let Signal::ModelReply { call, .. } | Signal::ModelFailed { call, .. } = &signal
                {
                    self.calls.remove(call);
                }
                self.signal_or_drop(signal);
            }
            Input::Letter(letter) => self.letter(*letter),
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
            Input::Note(text) => {
                let id = format!("note-{}", self.owed.next_seq());
                self.notice(id, text, Disposition::Dismiss);
            }
            Input::Oversized(call, error) => self.oversized(call, error),
            Input::Control(request, reply) => self.control(request, reply),
        }
        None
    }

    /// Journals an oversized reply as a failed call; the first in a row is told to the model.
    fn oversized(&mut self, call: CallId, error: String) {
        self.calls.remove(&call);
        let failed = Signal::ModelFailed {
            call,
            retryable: false,
            error: error.clone(),
        };
        if self.signal(failed).is_err() {
            return;
        }
        self.oversized_in_a_row = self.oversized_in_a_row.saturating_add(1);
        if self.oversized_in_a_row == 1 {
            let id = format!("oversized-{}", self.owed.next_seq());
            self.notice(id, format!("(l3m) {error}"), Disposition::Show);
        }
    }

    fn letter(&mut self, letter: Letter) {
        let Ok(id) = EventId::new(letter.id.as_str()) else {
            tracing::warn!(letter = letter.id.as_str(), "letter id is not an event id");
            return;
        };
        let from = letter.from.recipient().0;
        let body = match &letter.subject {
            Some(s) => format!("[{s}] {}", letter.body),
            None => letter.body.clone(),
        };
        let text: String = body
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let event = Signal::Event {
            id,
            source: EventSource::Letter {
                letter_id: letter.id.to_string(),
                from,
            },
            text,
        };
        match self.signal(event) {
            Ok(()) | Err(Stale::DuplicateEvent { .. }) => {
                self.to_mark.push(letter.id.to_string());
            }
            Err(stale) => tracing::debug!(%stale, "letter not journaled"),
        }
    }

    fn grant_moved(&mut self, view: GrantView, tip: String) {
        if self.grants_commit.as_deref() == Some(tip.as_str()) {
            return;
        }
        let summary = if view.grant == self.grant.grant {
            "the grants ref moved; the grant itself is unchanged".to_owned()
        } else {
            "your grant changed; the tools offered follow it from now on".to_owned()
        };
        if view.grant != self.grant.grant {
            match crate::toolbox::Toolbox::build(
                (self.build_tools)(),
                &view,
                &self.agent,
                &self.hub_root.join(l3m_core::refs::paths::acr(&self.agent)),
                self.tools.outlet(),
                self.tools.undo(),
            ) {
                Ok(tools) => {
                    self.tools = Arc::new(tools);
                    self.specs = self.tools.specs();
                    self.reshaped = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not rebuild the tools; keeping the old")
                }
            }
        }
        self.signal_or_drop(Signal::GrantChanged {
            summary,
            grants_commit: tip,
        });
        self.grant = view;
        self.budget_from_hub("the budget was re-read with the grant");
    }

    /// Journals the budget hubd's account implies (its `left`, less what this Log spent), if
    /// it differs from the Log's.
    pub fn budget_from_hub(&mut self, why: &str) {
        let account = self.grant.account.left();
        let spent = self.owed.spent();
        let left = Fuel {
            model_calls: account.model_calls.saturating_sub(spent.model_calls),
            bytes: account.bytes.saturating_sub(spent.bytes),
            wakes: account.wakes,
        };
        if self.owed.fuel_left() != Some(left) {
            self.signal_or_drop(Signal::BudgetChanged {
                left,
                summary: why.to_owned(),
            });
        }
    }

    fn control(&mut self, request: ControlRequest, reply: oneshot::Sender<ControlReply>) {
        let answer = match request {
            ControlRequest::Interrupt { reason } => {
                for (_, call) in self.calls.drain() {
                    call.abort();
                }
                match self.signal(Signal::Interrupt { reason }) {
                    Ok(()) => ControlReply::Done {
                        next_seq: self.owed.next_seq(),
                    },
                    Err(e) => ControlReply::Refused {
                        reason: e.to_string(),
                    },
                }
            }
            ControlRequest::Rewind { to, reason } => {
                for (_, call) in self.calls.drain() {
                    call.abort();
                }
                match self.signal(Signal::Rewind { to, reason }) {
                    Ok(()) => {
                        self.rewinds.push(to);
                        ControlReply::Done {
                            next_seq: self.owed.next_seq(),
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
        self.replies.push((reply, answer));
    }

    fn status(&self) -> Status {
        Status {
            agent: self.agent.to_string(),
            next_seq: self.owed.next_seq(),
            live: self.owed.is_live(),
            open_call: self.owed.open_call().map(|c| c.id.to_string()),
            running_tools: self
                .owed
                .running()
                .iter()
                .map(ToString::to_string)
                .collect(),
            fuel: self.owed.fuel_left(),
        }
    }

    /// Decides every undecided event with the default hook (no hook: `without_hook`).
    fn hooks(&mut self) {
        let undecided = self.owed.undecided_events().to_vec();
        for event in undecided {
            let disposition = Disposition::without_hook(&event.source);
            self.signal_or_drop(Signal::Decision {
                event: event.id,
                disposition,
            });
        }
        let waiting: Vec<ToolUseId> = self
            .owed
            .awaiting_review()
            .filter(|id| !self.noticed.contains(*id))
            .cloned()
            .collect();
        for id in waiting {
            self.noticed.insert(id.clone());
            self.notice(
                format!("review-{id}"),
                format!("tool use {id} is wild and waits for a reviewer; it was not run"),
                Disposition::Show,
            );
        }
    }

    /// What `plan` owes now, staged; the call's budget charge follows its `call-started`.
    fn plan(&mut self) -> Result<Vec<RecordBody>, SequencerError> {
        let attempt = self.owed.retrying().map_or(1, |r| r.attempt + 1);
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
                0 => format!("c{}", self.owed.next_seq()),
                n => format!("c{}-{n}", self.owed.next_seq()),
            };
            let call = CallId::new(id)?;
            let input = PlanInput {
                call: &call,
                provider: &provider,
                model: &model,
                max_attempts: self.limits.max_attempts,
                tools: tools.footprints(),
            };
            match owed::plan(&self.owed, &input) {
                Ok(bodies) => break bodies,
                Err(Stale::CallIdReused { .. }) if n < 8 => n += 1,
                Err(e) => return Err(e.into()),
            }
        };
        for body in &bodies {
            let charge = self.bytes_since_call;
            self.stage(body.clone());
            if matches!(body, RecordBody::CallStarted { .. })
                && let Some(before) = self.owed.fuel_left()
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
            if let Some(exit) = self.take_input(input) {
                stop = Some(exit);
                break;
            }
        }
        if let Some(Exit::LeaseLost) = stop {
            // The lease is gone: another sequencer may be writing. Append nothing.
            self.staged.clear();
            return Ok(Next::Stop(Exit::LeaseLost));
        }
        let mut planned = Vec::new();
        if stop.is_none() {
            self.hooks();
            planned = self.plan()?;
        }
        self.append().await?;
        self.start(&planned);
        for (reply, answer) in self.replies.drain(..) {
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

    /// Appends the staged records in one compare-and-swap.
    async fn append(&mut self) -> Result<(), SequencerError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.staged);
        match self
            .client
            .append_log(&self.agent, self.tip.as_deref(), &records)
            .await
        {
            Ok(appended) => {
                self.tip = Some(appended.tip);
                Ok(())
            }
            Err(e) if e.is_conflict() => Err(SequencerError::LostWriter {
                agent: self.agent.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts what the appended records authorize, and the follow-ups of the pass.
    fn start(&mut self, planned: &[RecordBody]) {
        for body in planned {
            match body {
                RecordBody::CallStarted { call, attempt, .. } => self.start_call(call, *attempt),
                RecordBody::ToolStarted { id } => self.start_tool(id),
                _ => {}
            }
        }
        for letter in self.to_mark.drain(..) {
            let client = self.client.clone();
            tokio::spawn(async move {
                if let Err(e) = client.mark_read(&letter).await {
                    tracing::warn!(letter, error = %e, "could not mark a letter read");
                }
            });
        }
        for to in self.rewinds.drain(..) {
            let client = self.client.clone();
            let (hub_root, agent, grant) = (
                self.hub_root.clone(),
                self.agent.clone(),
                self.grant.clone(),
            );
            let tx = self.tx.clone();
            let undo = self.tools.undo();
            tokio::spawn(async move {
                let note = match crate::control::restore_after(
                    &client, &undo, &hub_root, &agent, &grant, to,
                )
                .await
                {
                    Ok(note) => note,
                    Err(e) => format!("rewind to {to}: restoring failed: {e}"),
                };
                let _closed = tx.send(Input::Note(note));
            });
        }
    }

    fn start_call(&mut self, call: &CallId, attempt: u32) {
        let (provider, model, notes) = match (&self.models.fallback, attempt > 1) {
            (Some(fallback), true) => fallback.clone(),
            _ => self.models.primary.clone(),
        };
        let request = self.request(call, model, notes);
        let backoff = match attempt {
            0 | 1 => Duration::ZERO,
            n => Duration::from_millis(self.limits.retry_backoff_ms)
                .saturating_mul(1 << (n - 2).min(6)),
        };
        let tx = self.tx.clone();
        let call_id = call.clone();
        let handle = tokio::spawn(async move {
            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            }
            let outcome = provider.complete(&request).await;
            drop(request);
            let oversized = outcome
                .as_ref()
                .ok()
                .and_then(|reply| crate::bounds::check_reply(&reply.text, &reply.tool_uses).err());
            if let Some(error) = oversized {
                let _closed = tx.send(Input::Oversized(call_id, error));
                return;
            }
            let signal = match outcome {
                Ok(reply) => Signal::ModelReply {
                    call: call_id,
                    text: reply.text,
                    tool_uses: reply.tool_uses,
                    usage: reply.usage,
                    stop_reason: reply.stop_reason,
                },
                Err(e) => Signal::ModelFailed {
                    call: call_id,
                    retryable: e.retryable(),
                    error: e.to_string(),
                },
            };
            let _closed = tx.send(Input::Signal(signal));
        });
        self.calls.insert(call.clone(), handle.abort_handle());
    }

    /// The request for `call`: the previous request's view with only what changed since
    /// copied in (the fold only ever changes its last message or appends, unless a rewind, a
    /// compaction or a new epoch reshaped it), so a turn's cost does not grow with history. The
    /// tools are copied only when they changed, since their schemas are the bulk of a request
    /// with a short conversation.
    fn request(
        &mut self,
        call: &CallId,
        model: String,
        notes: Option<String>,
    ) -> Arc<ModelRequest> {
        let view = self.fold.view();
        let full = |model: String, notes: Option<String>| {
            Arc::new(ModelRequest {
                model,
                view: view.clone(),
                notes,
                tools: self.specs.clone(),
                max_tokens: self.limits.max_tokens,
                call: call.clone(),
            })
        };
        let request = match self.sent.take() {
            Some(mut sent) if !self.reshaped => match Arc::get_mut(&mut sent) {
                Some(request) => {
                    let keep =
                        (request.view.messages.len().saturating_sub(1)).min(view.messages.len());
                    request.view.messages.truncate(keep);
                    request
                        .view
                        .messages
                        .extend_from_slice(&view.messages[keep..]);
                    request.view.system.clone_from(&view.system);
                    request.model = model;
                    request.notes = notes;
                    request.call = call.clone();
                    sent
                }
                None => full(model, notes),
            },
            _ => full(model, notes),
        };
        debug_assert_eq!(&request.view, view);
        debug_assert_eq!(request.tools, self.specs);
        self.reshaped = false;
        self.sent = Some(Arc::clone(&request));
        request
    }

    fn start_tool(&mut self, id: &ToolUseId) {
        let Some(use_) = self.owed.tool_use(id).cloned() else {
            tracing::warn!(%id, "a started tool use is not in the latest reply");
            return;
        };
        self.running_tools.insert(id.clone());
        let tools = Arc::clone(&self.tools);
        let tx = self.tx.clone();
        // The blocking thread reports to the writer itself: no task in between to wake.
        tokio::task::spawn_blocking(move || {
            let ToolUse { id, name, input } = use_;
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tools.run(&name, input)));
            let input = match outcome {
                Ok(Outcome::Finished {
                    output,
                    is_error,
                    effects,
                    refusal,
                }) => Input::Signal(Signal::ToolFinished {
                    id,
                    output,
                    is_error,
                    effects,
                    refusal,
                }),
                Ok(Outcome::NeedsReview { card }) => Input::NeedsReview(id, card),
                Err(panic) => Input::Signal(Signal::ToolFinished {
                    id,
                    output: format!("(l3m) the tool crashed: {}", panic_message(&*panic)),
                    is_error: true,
                    effects: vec![],
                    refusal: None,
                }),
            };
            let _closed = tx.send(input);
        });
    }

    /// Whether nothing is running, so the session may count as idle.
    pub fn quiet(&self) -> bool {
        self.calls.is_empty() && self.running_tools.is_empty() && !self.owed.is_live()
    }
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("it panicked")
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
