//! The laws of the Log, its view and the sequencer's pure step, as property tests.
//!
//! Two kinds of random Logs are used. *Arbitrary* Logs are any records a checked [`Log`] accepts
//! (replies for calls never started, results for tools never run, rewinds and compactions
//! anywhere): the view must be well defined on all of them. *Driven* Logs are what a sequencer
//! writes: random signals (including stale replies, duplicate results, interrupts, rewinds)
//! pushed through [`journal`], interleaved with [`plan`] passes.
//!
//! Every content text in an arbitrary Log carries a tag `#<seq>#` naming the record it came
//! from, so a law can tell where each element of a view came from.

// The helpers below build test data; a panic in them is a failed test (clippy.toml allows
// unwrap inside #[test] functions only, not in an integration test's helpers).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};

use l3m_core::budget::Fuel;
use l3m_core::effects::{EffectClass, Footprint, Tier};
use l3m_core::log::{
    CallId, Disposition, EventId, EventSource, FuelUnit, Log, Record, RecordBody, ToolUse,
    ToolUseId, Usage, Verdict,
};
use l3m_core::names::Entity;
use l3m_core::owed::{Owed, PlanInput, Signal, close_at_boot, journal, plan};
use l3m_core::review::ReviewSpent;
use l3m_core::review::card::CardLine;
use l3m_core::view::{Message, Part, View, ViewFold, fit_view, floor_bytes, view, view_bytes};
use l3m_core::wake;
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Arbitrary Logs

fn tag(seq: u64) -> String {
    format!("#{seq}#")
}

/// The seq a text's tag names, if it has one.
fn tag_of(text: &str) -> Option<u64> {
    let start = text.find('#')? + 1;
    let len = text[start..].find('#')?;
    text[start..start + len].parse().ok()
}

fn tool_id(k: u8) -> ToolUseId {
    ToolUseId::new(format!("t{k}")).unwrap()
}

fn event_id(k: u8) -> EventId {
    EventId::new(format!("e{k}")).unwrap()
}

fn call_id(k: u8) -> CallId {
    CallId::new(format!("c{k}")).unwrap()
}

fn alice() -> Entity {
    Entity::parse("human:alice").unwrap()
}

/// One record of an arbitrary Log, before its seq is known.
#[derive(Debug, Clone)]
enum Shape {
    Line,
    Call(u8),
    Reply(u8, Vec<u8>),
    Result(u8),
    Interrupt(Vec<u8>),
    Event(u8),
    Decide(u8, bool),
    Grant,
    Budget,
    Prompt(bool),
    Rewind(u16),
    Compact(u16, u16),
    Bookkeeping(u8),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        4 => Just(Shape::Line),
        2 => (0u8..3).prop_map(Shape::Call),
        4 => (0u8..3, vec(0u8..6, 0..3)).prop_map(|(c, t)| Shape::Reply(c, t)),
        4 => (0u8..6).prop_map(Shape::Result),
        1 => vec(0u8..6, 0..3).prop_map(Shape::Interrupt),
        2 => (0u8..4).prop_map(Shape::Event),
        2 => (0u8..4, any::<bool>()).prop_map(|(e, s)| Shape::Decide(e, s)),
        1 => Just(Shape::Grant),
        1 => Just(Shape::Budget),
        1 => any::<bool>().prop_map(Shape::Prompt),
        2 => any::<u16>().prop_map(Shape::Rewind),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Shape::Compact(a, b)),
        3 => (0u8..9).prop_map(Shape::Bookkeeping),
    ]
}

fn reply(call: CallId, text: String, tools: &[ToolUseId]) -> RecordBody {
    RecordBody::AssistantReply {
        call,
        text,
        tool_uses: tools
            .iter()
            .map(|id| ToolUse {
                id: id.clone(),
                name: "read".into(),
                input: serde_json::json!({ "path": "a" }),
            })
            .collect(),
        usage: Usage::default(),
        stop_reason: "end_turn".into(),
    }
}

/// A record that never changes the view: the harness's bookkeeping.
fn bookkeeping(kind: u8) -> RecordBody {
    match kind % 5 {
        0 => RecordBody::ToolCall {
            id: tool_id(kind % 6),
            name: "sh".into(),
            tier: Tier::Wild,
            footprint: Footprint::of([EffectClass::Shell]),
        },
        1 => RecordBody::ToolStarted {
            id: tool_id(kind % 6),
        },
        2 => RecordBody::Review {
            call: tool_id(kind % 6),
            round: 1,
            of: 2,
            verdict: Verdict::Unclear { reason: None },
            by: "svc:reviewer".into(),
            spent: ReviewSpent::default(),
        },
        3 => RecordBody::TurnEnd,
        _ => RecordBody::OutOfFuel {
            unit: FuelUnit::Bytes,
        },
    }
}

fn body(shape: &Shape, seq: u64) -> RecordBody {
    let text = tag(seq);
    match shape {
        Shape::Line => RecordBody::UserLine {
            from: alice(),
            text,
        },
        Shape::Call(call) => started(call_id(*call)),
        Shape::Reply(call, tools) => {
            let mut ids: Vec<ToolUseId> = Vec::new();
            for t in tools {
                if !ids.contains(&tool_id(*t)) {
                    ids.push(tool_id(*t));
                }
            }
            reply(call_id(*call), text, &ids)
        }
        Shape::Result(t) => RecordBody::ToolResult {
            id: tool_id(*t),
            output: text,
            is_error: false,
            effects: vec![],
            refusal: None,
        },
        Shape::Interrupt(tools) => RecordBody::Interrupted {
            reason: text,
            closed_call: None,
            closed_tools: tools.iter().map(|t| tool_id(*t)).collect(),
        },
        Shape::Event(e) => RecordBody::Event {
            id: event_id(*e),
            source: EventSource::Vigil { vigil: "ci".into() },
            text,
        },
        Shape::Decide(e, show) => RecordBody::HookDecision {
            event: event_id(*e),
            disposition: if *show {
                Disposition::Show
            } else {
                Disposition::Dismiss
            },
        },
        Shape::Grant => RecordBody::GrantChange {
            summary: text,
            grants_commit: "abc".into(),
        },
        Shape::Budget => RecordBody::BudgetChange {
            left: Fuel {
                model_calls: 3,
                bytes: 100,
                wakes: 1,
            },
            summary: text,
        },
        Shape::Prompt(continues) => RecordBody::SystemPrompt {
            text,
            continues: *continues,
        },
        Shape::Rewind(frac) => RecordBody::Rewind {
            to: u64::from(*frac) % seq,
            reason: text,
        },
        Shape::Compact(a, b) => {
            let (a, b) = (u64::from(*a) % seq, u64::from(*b) % seq);
            RecordBody::Compaction {
                from: a.min(b),
                to: a.max(b),
                summary: text,
            }
        }
        Shape::Bookkeeping(kind) => match kind {
            5 | 6 => RecordBody::CallFailed {
                call: call_id(*kind),
                error: text,
                retryable: true,
            },
            7 | 8 => RecordBody::Interrupted {
                reason: text,
                closed_call: None,
                closed_tools: vec![],
            },
            _ => bookkeeping(*kind),
        },
    }
}

fn log_of(bodies: Vec<RecordBody>) -> Vec<Record> {
    let mut log = Log::new();
    for b in bodies {
        log.append(0, b).unwrap();
    }
    log.records().to_vec()
}

fn arbitrary(shapes: &[Shape]) -> Vec<Record> {
    let mut bodies = vec![RecordBody::SystemPrompt {
        text: tag(0),
        continues: false,
    }];
    for (i, s) in shapes.iter().enumerate() {
        bodies.push(body(s, i as u64 + 1));
    }
    log_of(bodies)
}

fn arbitrary_log() -> impl Strategy<Value = Vec<Record>> {
    vec(shape(), 0..48).prop_map(|s| arbitrary(&s))
}

// ---------------------------------------------------------------------------------------------
// Reading views

/// One element of a view, in order: an assistant message or one part of a user message.
#[derive(Debug, Clone, PartialEq)]
enum Elem {
    Assistant(Option<u64>, Vec<ToolUseId>),
    Text(Option<u64>),
    /// A result: its tool use, its tag, and the tag of the reply it answers.
    Result(ToolUseId, Option<u64>, Option<u64>),
}

fn elems(v: &View) -> Vec<Elem> {
    let mut out = Vec::new();
    let mut reply = None;
    for m in &v.messages {
        match m {
            Message::Assistant { text, tool_uses } => {
                reply = tag_of(text);
                out.push(Elem::Assistant(
                    reply,
                    tool_uses.iter().map(|u| u.id.clone()).collect(),
                ))
            }
            Message::User { content } => {
                for p in content {
                    out.push(match p {
                        Part::Text { text } => Elem::Text(tag_of(text)),
                        Part::ToolResult { id, output, .. } => {
                            Elem::Result(id.clone(), tag_of(output), reply)
                        }
                    });
                }
            }
        }
    }
    out
}

fn elem_tag(e: &Elem) -> Option<u64> {
    match e {
        Elem::Assistant(t, _) | Elem::Text(t) | Elem::Result(_, t, _) => *t,
    }
}

fn tags(v: &View) -> Vec<u64> {
    elems(v).iter().filter_map(elem_tag).collect()
}

/// The shape every view must have. With `strict` (a view sent to the model), every tool use has
/// its result; otherwise the last assistant message may still wait for some.
fn well_formed(v: &View, strict: bool) -> Result<(), String> {
    let last_assistant = v
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }));
    for (i, m) in v.messages.iter().enumerate() {
        match m {
            Message::User { content } => {
                if content.is_empty() {
                    return Err(format!("message {i} is an empty user message"));
                }
                if i > 0 && matches!(v.messages[i - 1], Message::User { .. }) {
                    return Err(format!("messages {} and {i} are both user messages", i - 1));
                }
                let leading = content
                    .iter()
                    .take_while(|p| matches!(p, Part::ToolResult { .. }))
                    .count();
                let mut answered = HashSet::new();
                for (j, p) in content.iter().enumerate() {
                    match p {
                        Part::Text { text } if text.is_empty() => {
                            return Err(format!("message {i} part {j} is empty text"));
                        }
                        Part::Text { .. } => {}
                        Part::ToolResult { id, .. } => {
                            if j >= leading {
                                return Err(format!("message {i}: result {id} after text"));
                            }
                            let uses = match i.checked_sub(1).map(|k| &v.messages[k]) {
                                Some(Message::Assistant { tool_uses, .. }) => tool_uses,
                                _ => {
                                    return Err(format!(
                                        "message {i}: result {id} answers no reply"
                                    ));
                                }
                            };
                            if !uses.iter().any(|u| u.id == *id) {
                                return Err(format!("message {i}: result {id} has no tool use"));
                            }
                            if !answered.insert(id.clone()) {
                                return Err(format!("message {i}: two results for {id}"));
                            }
                        }
                    }
                }
            }
            Message::Assistant { tool_uses, .. } => {
                let may_wait = !strict && Some(i) == last_assistant;
                if tool_uses.is_empty() || may_wait {
                    continue;
                }
                let results: Vec<&ToolUseId> = match v.messages.get(i + 1) {
                    Some(Message::User { content }) => content
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolResult { id, .. } => Some(id),
                            Part::Text { .. } => None,
                        })
                        .collect(),
                    _ => vec![],
                };
                for u in tool_uses {
                    if !results.contains(&&u.id) {
                        return Err(format!("message {i}: tool use {} has no result", u.id));
                    }
                }
            }
        }
    }
    Ok(())
}

fn incremental_views(records: &[Record]) -> Vec<View> {
    let mut fold = ViewFold::new();
    let mut out = vec![fold.view().clone()];
    for r in records {
        fold.advance(r);
        out.push(fold.view().clone());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Driven Logs

/// A signal (or a pass) the random sequencer run receives.
#[derive(Debug, Clone)]
enum Act {
    Pass,
    Line,
    /// A reply: to the open call (`None`) or to the k-th call started; tools are fresh ids or
    /// ids from a small pool (so some are reused).
    Reply(Option<u8>, Vec<(bool, u8)>),
    Fail(Option<u8>, bool),
    /// A finished tool: a running one (even k) or any id ever named (odd k).
    Finish(u8),
    Event(bool),
    Decide(u8, u8),
    Review(u8, u8),
    Interrupt,
    Rewind(u16),
    Compact(u16, u16),
    Prompt(bool),
    Budget(u8),
}

fn act() -> impl Strategy<Value = Act> {
    // k = 4 names the wild `sh` with a justification, so deliberations and stalemates happen.
    let tools = vec((any::<bool>(), 0u8..6), 0..3);
    prop_oneof![
        20 => Just(Act::Pass),
        5 => Just(Act::Line),
        14 => (proptest::option::weighted(0.1, any::<u8>()), tools)
            .prop_map(|(c, t)| Act::Reply(c, t)),
        1 => (proptest::option::weighted(0.3, any::<u8>()), any::<bool>())
            .prop_map(|(c, r)| Act::Fail(c, r)),
        14 => any::<u8>().prop_map(Act::Finish),
        1 => any::<bool>().prop_map(Act::Event),
        4 => (any::<u8>(), 0u8..4).prop_map(|(e, d)| Act::Decide(e, d)),
        4 => (any::<u8>(), 0u8..3).prop_map(|(t, v)| Act::Review(t, v)),
        1 => Just(Act::Interrupt),
        1 => any::<u16>().prop_map(Act::Rewind),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Act::Compact(a, b)),
        1 => proptest::bool::weighted(0.7).prop_map(Act::Prompt),
        1 => (0u8..6).prop_map(Act::Budget),
    ]
}

struct Driver {
    log: Log,
    owed: Owed,
    fold: ViewFold,
    tools: BTreeMap<String, Footprint>,
    calls: Vec<CallId>,
    tool_ids: Vec<ToolUseId>,
    fresh: u32,
}

const TOOL_NAMES: [&str; 3] = ["read", "sh", "nope"];

impl Driver {
    fn new() -> Self {
        let mut d = Self {
            log: Log::new(),
            owed: Owed::default(),
            fold: ViewFold::new(),
            tools: BTreeMap::from([
                ("read".to_owned(), Footprint::of([EffectClass::FsRead])),
                ("sh".to_owned(), Footprint::of([EffectClass::Shell])),
            ]),
            calls: vec![],
            tool_ids: vec![],
            fresh: 0,
        };
        d.signal(Signal::Prompt {
            text: "prompt".into(),
            continues: false,
        });
        d
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn write(&mut self, bodies: Vec<RecordBody>) {
        for b in bodies {
            let record = self.log.append(0, b).unwrap().clone();
            if let RecordBody::CallStarted { call, .. } = &record.body {
                self.calls.push(call.clone());
            }
            self.owed.apply(&record);
            self.fold.advance(&record);
        }
    }

    fn signal(&mut self, signal: Signal) {
        if let Ok(bodies) = journal(&self.owed, signal) {
            self.write(bodies);
        }
    }

    fn pick_call(&self, which: Option<u8>) -> Option<CallId> {
        match which {
            None => self.owed.open_call().map(|o| o.id.clone()),
            Some(k) if !self.calls.is_empty() => {
                Some(self.calls[usize::from(k) % self.calls.len()].clone())
            }
            Some(_) => None,
        }
    }

    fn pass(&mut self) {
        let call = CallId::new(self.fresh("call")).unwrap();
        let input = PlanInput {
            call: &call,
            provider: "anthropic",
            model: "m",
            max_attempts: 3,
            tools: &self.tools,
        };
        let bodies = plan(&self.owed, &input).unwrap();
        self.write(bodies);
    }

    fn act(&mut self, act: &Act) {
        let next = self.log.next_seq();
        let signal = match act {
            Act::Pass => return self.pass(),
            Act::Line => Signal::UserLine {
                from: alice(),
                text: "go on".into(),
            },
            Act::Reply(which, tools) => {
                let Some(call) = self.pick_call(*which) else {
                    return;
                };
                let mut uses = Vec::new();
                for (fresh, k) in tools {
                    let id = if *fresh {
                        ToolUseId::new(self.fresh("f")).unwrap()
                    } else {
                        tool_id(*k)
                    };
                    self.tool_ids.push(id.clone());
                    uses.push(ToolUse {
                        id,
                        name: TOOL_NAMES[usize::from(*k) % 3].into(),
                        // Every other use forgets its justification: a wild one is sent back.
                        input: if k % 2 == 0 {
                            serde_json::json!({ "justification": "needed" })
                        } else {
                            serde_json::json!({})
                        },
                    });
                }
                Signal::ModelReply {
                    call,
                    text: "reply".into(),
                    tool_uses: uses,
                    usage: Usage::default(),
                    stop_reason: "end_turn".into(),
                }
            }
            Act::Fail(which, retryable) => {
                let Some(call) = self.pick_call(*which) else {
                    return;
                };
                Signal::ModelFailed {
                    call,
                    error: "overloaded".into(),
                    retryable: *retryable,
                }
            }
            Act::Finish(k) => {
                let running = self.owed.running();
                let id = if k % 2 == 0 && !running.is_empty() {
                    running[usize::from(k / 2) % running.len()].clone()
                } else if !self.tool_ids.is_empty() {
                    self.tool_ids[usize::from(*k) % self.tool_ids.len()].clone()
                } else {
                    return;
                };
                Signal::ToolFinished {
                    id,
                    output: "done".into(),
                    is_error: false,
                    effects: vec![],
                    refusal: None,
                }
            }
            Act::Event(duplicate) => {
                let id = if *duplicate {
                    event_id(0)
                } else {
                    EventId::new(self.fresh("ev")).unwrap()
                };
                Signal::Event {
                    id,
                    source: EventSource::Notice,
                    text: "something happened".into(),
                }
            }
            Act::Decide(k, d) => {
                let undecided = self.owed.undecided_events();
                let event = if undecided.is_empty() {
                    event_id(*k)
                } else {
                    undecided[usize::from(*k) % undecided.len()].id.clone()
                };
                let disposition = [
                    Disposition::Show,
                    Disposition::Dismiss,
                    Disposition::Ignore,
                    Disposition::Close,
                ][usize::from(*d)]
                .clone();
                Signal::Decision { event, disposition }
            }
            Act::Review(k, v) => {
                // A reviewer's round for a call waiting for one, or else a human's answer at a
                // stalemate's card (the round after the last).
                let waiting: Vec<ToolUseId> = self.owed.awaiting_review().cloned().collect();
                let carded: Vec<ToolUseId> =
                    self.owed.stalemates().map(|(id, _)| id.clone()).collect();
                let (tool, round) = match (waiting.is_empty(), carded.is_empty()) {
                    (false, _) => {
                        let tool = waiting[usize::from(*k) % waiting.len()].clone();
                        (tool.clone(), self.owed.review_round(&tool))
                    }
                    (true, false) => (carded[usize::from(*k) % carded.len()].clone(), 3),
                    (true, true) => (tool_id(k % 4), 1),
                };
                let verdict = match v {
                    0 => Verdict::Safe,
                    1 => Verdict::Unsafe {
                        reason: "too wide".into(),
                        alternative: Some("narrow it".into()),
                    },
                    _ => Verdict::Unclear { reason: None },
                };
                Signal::Review {
                    tool,
                    round,
                    of: 2,
                    verdict,
                    by: "svc:reviewer".into(),
                    spent: ReviewSpent::default(),
                }
            }
            Act::Interrupt => Signal::Interrupt {
                reason: "esc".into(),
            },
            Act::Rewind(frac) => Signal::Rewind {
                to: u64::from(*frac) % next,
                reason: "undo".into(),
            },
            Act::Compact(a, b) => {
                let (a, b) = (u64::from(*a) % next, u64::from(*b) % next);
                Signal::Compact {
                    from: a.min(b),
                    to: a.max(b),
                    summary: "what happened".into(),
                }
            }
            Act::Prompt(continues) => Signal::Prompt {
                text: "prompt again".into(),
                continues: *continues,
            },
            Act::Budget(calls) => Signal::BudgetChanged {
                left: Fuel {
                    model_calls: u64::from(*calls) * 4,
                    bytes: 1 << 20,
                    wakes: 1,
                },
                summary: "loan".into(),
            },
        };
        self.signal(signal);
    }
}

fn driven(acts: &[Act]) -> Driver {
    let mut d = Driver::new();
    for a in acts {
        d.act(a);
    }
    d
}

fn driven_acts() -> impl Strategy<Value = Vec<Act>> {
    vec(act(), 0..160)
}

fn id_of_call(body: &RecordBody) -> Option<&CallId> {
    match body {
        RecordBody::AssistantReply { call, .. } | RecordBody::CallFailed { call, .. } => Some(call),
        _ => None,
    }
}

proptest! {
    // Failures are not persisted to a file beside this one; proptest prints the minimal case.
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The view is a function of the records alone: folding the same records (also after a
    /// round trip through their stored form) gives the same view, and the incremental fold
    /// equals the full fold at every prefix.
    #[test]
    fn view_is_pure_function_of_records(records in arbitrary_log()) {
        let incremental = incremental_views(&records);
        for (k, v) in incremental.iter().enumerate() {
            prop_assert_eq!(v, &view(&records[..k]), "prefix {}", k);
        }
        let mut log = Log::new();
        for r in &records {
            log.push(r.clone()).unwrap();
        }
        let stored = Log::decode(&log.encode().unwrap()).unwrap();
        prop_assert_eq!(view(stored.records()), view(&records));
    }

    /// After `rewind{to: t}` the view is exactly the view of the records up to `t` followed
    /// at once by that rewind (which settles what `t` was waiting for); and until the next
    /// rewind, nothing from the records between `t` and the rewind appears in it.
    #[test]
    fn nothing_past_rewind_target_survives(records in arbitrary_log()) {
        let views = incremental_views(&records);
        for (r, record) in records.iter().enumerate() {
            let RecordBody::Rewind { to, .. } = record.body else { continue };
            let t = to as usize;
            let mut at_once = records[..=t].to_vec();
            at_once.push(Record { seq: to + 1, at_ms: 0, body: record.body.clone() });
            prop_assert_eq!(&views[r + 1], &view(&at_once), "rewind at {} to {}", r, t);
            let next_rewind = records[r + 1..]
                .iter()
                .position(|x| matches!(x.body, RecordBody::Rewind { .. }))
                .map_or(records.len(), |p| r + 1 + p);
            for v in &views[r + 1..=next_rewind] {
                for s in tags(v) {
                    prop_assert!(s <= to || s > r as u64, "tag {} survived rewind {} -> {}", s, r, to);
                }
            }
        }
    }

    /// In every view of every Log, each result answers a tool use of the assistant message just
    /// before it, once, ahead of any text; each tool use has exactly one result following it,
    /// except uses of the last reply still in flight. A view sent to the model (the view when a
    /// call starts in a driven Log) has no use in flight and ends with a user message.
    #[test]
    fn every_tool_use_paired(records in arbitrary_log(), acts in driven_acts()) {
        for (k, v) in incremental_views(&records).iter().enumerate() {
            if let Err(e) = well_formed(v, false) {
                prop_assert!(false, "prefix {}: {}", k, e);
            }
        }
        let d = driven(&acts);
        let mut fold = ViewFold::new();
        for r in d.log.records() {
            if matches!(r.body, RecordBody::CallStarted { .. }) {
                if let Err(e) = well_formed(fold.view(), true) {
                    prop_assert!(false, "view sent at seq {}: {}", r.seq, e);
                }
                let ends_with_user = matches!(fold.view().messages.last(), Some(Message::User { .. }));
                prop_assert!(ends_with_user, "view sent at seq {} does not end with a user turn", r.seq);
            }
            fold.advance(r);
        }
    }

    /// A compaction replaces one unbroken stretch of the view by its summary: the stretch runs
    /// from the first element the span showed to the last, widened so that a tool use and its
    /// results go together, and everything before and after it stays as it was. So nothing the
    /// span showed remains, and a span that showed nothing changes nothing.
    #[test]
    fn compaction_replaces_span(records in arbitrary_log()) {
        let views = incremental_views(&records);
        for (c, record) in records.iter().enumerate() {
            let RecordBody::Compaction { from, to, .. } = record.body else { continue };
            let (before, after) = (elems(&views[c]), elems(&views[c + 1]));
            let in_span = |e: &Elem| elem_tag(e).is_some_and(|s| from <= s && s <= to);
            let summary = Elem::Text(Some(c as u64));
            let Some(a) = after.iter().position(|e| *e == summary) else {
                prop_assert!(!before.iter().any(in_span), "compaction {} showed its span but no summary", c);
                prop_assert_eq!(&before, &after);
                continue;
            };
            prop_assert!(after.len() <= before.len(), "compaction {} replaced nothing", c);
            let b = a + before.len() - after.len();
            prop_assert_eq!(&after[..a], &before[..a]);
            prop_assert_eq!(&after[a + 1..], &before[b + 1..]);
            for (k, e) in before.iter().enumerate() {
                prop_assert!(!in_span(e) || (a <= k && k <= b), "{:?} of the span survived compaction {}", e, c);
            }
            prop_assert!(!matches!(before[a], Elem::Result(..)), "compaction {} split a reply from its results", c);
            prop_assert!(!matches!(before.get(b + 1), Some(Elem::Result(..))), "compaction {} split results", c);
            // Where every element's origin is known from its tag, the stretch is exactly the
            // span's, widened over pairs.
            if let (true, Some(first), Some(last)) = (
                before.iter().all(|e| elem_tag(e).is_some()),
                before.iter().position(in_span),
                before.iter().rposition(in_span),
            ) {
                let mut x = first;
                if matches!(before[x], Elem::Result(..)) {
                    x = before[..x].iter().rposition(|e| matches!(e, Elem::Assistant(..))).unwrap_or(x);
                }
                let mut y = last;
                while matches!(before.get(y + 1), Some(Elem::Result(..))) {
                    y += 1;
                }
                prop_assert_eq!((a, b), (x, y), "compaction {} of [{}, {}]", c, from, to);
            }
        }
    }

    /// Bookkeeping lowers to nothing: adding tool admissions, starts, reviews, turn ends and
    /// out-of-fuel records anywhere, starting each reply's call just before it, and changing
    /// replies' token usage, leaves every view unchanged.
    #[test]
    fn bookkeeping_lowers_to_nothing(
        records in arbitrary_log(),
        inserts in vec((any::<u16>(), 0u8..5), 0..24),
        tokens in any::<u32>(),
    ) {
        let mut extra: BTreeMap<usize, Vec<RecordBody>> = BTreeMap::new();
        for (at, kind) in &inserts {
            let at = 1 + usize::from(*at) % records.len();
            extra.entry(at).or_default().push(bookkeeping(*kind));
        }
        // Rebuild with the inserts placed before each chosen position, every reply preceded by
        // the start of its call, and seqs (and rewind/compaction targets) renumbered.
        let mut new_seq = vec![0u64; records.len()];
        let mut bodies = Vec::new();
        for (i, r) in records.iter().enumerate() {
            bodies.extend(extra.remove(&i).unwrap_or_default());
            let mut b = r.body.clone();
            if let RecordBody::AssistantReply { call, usage, .. } = &mut b {
                bodies.push(started(call.clone()));
                usage.output_tokens = u64::from(tokens);
            }
            new_seq[i] = bodies.len() as u64;
            match &mut b {
                RecordBody::Rewind { to, .. } => *to = new_seq[*to as usize],
                RecordBody::Compaction { from, to, .. } => {
                    *from = new_seq[*from as usize];
                    *to = new_seq[*to as usize];
                }
                _ => {}
            }
            bodies.push(b);
        }
        let padded = log_of(bodies);
        for (i, s) in new_seq.iter().enumerate() {
            prop_assert_eq!(view(&records[..=i]), view(&padded[..=*s as usize]), "record {}", i);
        }
    }

    /// A system prompt without `continues` cuts the view: what follows it is seen as if the Log
    /// began there. With `continues` the conversation is kept and only the prompt changes.
    #[test]
    fn epoch_cuts_view(head in vec(shape(), 0..24), tail in vec(shape(), 0..24), continues in any::<bool>()) {
        let before = arbitrary(&head);
        let at = before.len() as u64;
        let prompt = RecordBody::SystemPrompt { text: tag(at), continues };
        // The tail's rewinds and compactions stay inside the tail, so it can stand alone.
        let tail_bodies: Vec<RecordBody> = tail
            .iter()
            .enumerate()
            .map(|(i, s)| body(s, i as u64 + 1))
            .collect();
        let shift = |b: &RecordBody, by: u64| match b.clone() {
            RecordBody::Rewind { to, reason } => RecordBody::Rewind { to: to + by, reason },
            RecordBody::Compaction { from, to, summary } => {
                RecordBody::Compaction { from: from + by, to: to + by, summary }
            }
            other => other,
        };
        let mut whole: Vec<RecordBody> = before.iter().map(|r| r.body.clone()).collect();
        whole.push(prompt.clone());
        whole.extend(tail_bodies.iter().map(|b| shift(b, at)));
        let whole = log_of(whole);
        let mut alone = vec![RecordBody::SystemPrompt { text: tag(at), continues: false }];
        alone.extend(tail_bodies);
        let alone = log_of(alone);
        let joined = view(&whole[..=at as usize]);
        if continues {
            let mut expected = view(&before);
            expected.system = tag(at);
            prop_assert_eq!(joined, expected);
        } else {
            prop_assert!(joined.messages.is_empty());
            prop_assert_eq!(view(&whole), view(&alone));
        }
    }

    /// At most one model call is open at any point of a driven Log, and it is the last call
    /// started; no reply or failure is journaled for a call that is not open.
    #[test]
    fn open_call_is_last_call(acts in driven_acts()) {
        let d = driven(&acts);
        let mut open: Vec<CallId> = Vec::new();
        let mut last = None;
        for r in d.log.records() {
            match &r.body {
                RecordBody::CallStarted { call, .. } => {
                    open.push(call.clone());
                    last = Some(call.clone());
                }
                RecordBody::Interrupted { closed_call: Some(call), .. } => {
                    prop_assert!(open.contains(call), "seq {} closes {} which is not open", r.seq, call);
                    open.retain(|c| c != call);
                }
                body => if let Some(call) = id_of_call(body) {
                    prop_assert!(open.contains(call), "seq {} answers {} which is not open", r.seq, call);
                    open.retain(|c| c != call);
                }
            }
            prop_assert!(open.len() <= 1, "seq {}: calls {:?} open", r.seq, open);
            if let Some(o) = open.first() {
                prop_assert_eq!(Some(o), last.as_ref());
            }
        }
        prop_assert_eq!(d.owed.open_call().map(|o| &o.id), open.first());
    }

    /// Each owed action starts once: no call id and no tool use id is started twice, every
    /// start follows its admission, and no tool use gets two results.
    #[test]
    fn start_once(acts in driven_acts()) {
        let d = driven(&acts);
        let (mut calls, mut started, mut admitted, mut results) =
            (HashSet::new(), HashSet::new(), HashSet::new(), HashSet::new());
        for r in d.log.records() {
            match &r.body {
                RecordBody::CallStarted { call, .. } => {
                    prop_assert!(calls.insert(call.clone()), "call {} started twice", call);
                }
                RecordBody::ToolCall { id, .. } => {
                    admitted.insert(id.clone());
                }
                RecordBody::ToolStarted { id } => {
                    prop_assert!(admitted.contains(id), "tool {} started unadmitted", id);
                    prop_assert!(started.insert(id.clone()), "tool {} started twice", id);
                }
                RecordBody::ToolResult { id, .. } => {
                    prop_assert!(results.insert(id.clone()), "tool {} has two results", id);
                }
                _ => {}
            }
        }
    }

    /// A reply's tool uses run one at a time, in its order: no use starts while another runs,
    /// nor before every earlier use of its reply has its result (a model that writes
    /// `make_dir a` then `write_file a/b` in one reply means them in that order).
    #[test]
    fn a_replys_uses_run_one_at_a_time_in_its_order(acts in driven_acts()) {
        let d = driven(&acts);
        let (mut order, mut running, mut done): (Vec<ToolUseId>, Vec<ToolUseId>, HashSet<ToolUseId>) =
            Default::default();
        for r in d.log.records() {
            match &r.body {
                RecordBody::AssistantReply { tool_uses, .. } => {
                    order = tool_uses.iter().map(|u| u.id.clone()).collect();
                }
                RecordBody::ToolStarted { id } => {
                    prop_assert!(running.is_empty(), "seq {}: {} starts while {:?} run", r.seq, id, running);
                    let earlier = order.iter().take_while(|u| *u != id);
                    for u in earlier {
                        prop_assert!(done.contains(u), "seq {}: {} starts before {} has its result", r.seq, id, u);
                    }
                    running.push(id.clone());
                }
                RecordBody::ToolResult { id, .. } => {
                    running.retain(|u| u != id);
                    done.insert(id.clone());
                }
                RecordBody::Interrupted { closed_tools, .. } => {
                    running.retain(|u| !closed_tools.contains(u));
                    done.extend(closed_tools.iter().cloned());
                }
                _ => {}
            }
        }
    }

    /// Booting closes what a dead process left open exactly as an interrupt would: the state a
    /// fresh process folds from the stored Log equals the live one, closing it gives the same
    /// records, and afterwards the view and what is owed are the same, with nothing open or owed.
    /// The one difference: a wild call at a stalemate keeps waiting for its card's answer at
    /// boot (an interrupt closes it), with nothing else open and the turn still live.
    #[test]
    fn boot_close_eq_interrupt_close(acts in driven_acts()) {
        let mut live = driven(&acts);
        let stored = Log::decode(&live.log.encode().unwrap()).unwrap();
        let booted = Owed::from_records(stored.records());
        prop_assert_eq!(&booted, &live.owed);
        let reason = "the sequencer stopped";
        let at_boot = close_at_boot(&booted, reason);
        let at_interrupt = journal(&live.owed, Signal::Interrupt { reason: reason.into() }).unwrap();
        let carded: Vec<ToolUseId> = booted.stalemates().map(|(id, _)| id.clone()).collect();
        if !carded.is_empty() {
            let mut kept = booted.clone();
            let mut kept_log = stored;
            for b in at_boot {
                let RecordBody::Interrupted { closed_tools, .. } = &b else {
                    return Err(TestCaseError::fail(format!("boot journaled {b:?}")));
                };
                prop_assert!(closed_tools.iter().all(|t| !carded.contains(t)));
                let r = kept_log.append(0, b).unwrap().clone();
                kept.apply(&r);
            }
            let still: Vec<ToolUseId> = kept.stalemates().map(|(id, _)| id.clone()).collect();
            prop_assert_eq!(&still, &carded);
            prop_assert!(kept.waits_only_on_cards() && kept.is_live());
            prop_assert!(!kept.call_owed() && !kept.turn_end_owed());
            prop_assert!(close_at_boot(&kept, reason).is_empty());
            return Ok(());
        }
        prop_assert_eq!(&at_boot, &at_interrupt);
        live.write(at_interrupt);
        let mut boot_log = stored;
        let mut boot_owed = booted;
        for b in at_boot {
            let r = boot_log.append(0, b).unwrap().clone();
            boot_owed.apply(&r);
        }
        prop_assert_eq!(&boot_owed, &live.owed);
        prop_assert_eq!(&view(boot_log.records()), live.fold.view());
        prop_assert!(boot_owed.open_call().is_none());
        prop_assert!(boot_owed.running().is_empty() && boot_owed.pending().is_empty());
        prop_assert!(!boot_owed.is_live() && !boot_owed.call_owed() && !boot_owed.turn_end_owed());
        prop_assert!(close_at_boot(&boot_owed, reason).is_empty());
    }
}

fn started(call: CallId) -> RecordBody {
    RecordBody::CallStarted {
        call,
        provider: "anthropic".into(),
        model: "m".into(),
        attempt: 1,
        fallback_of: None,
    }
}

proptest! {
    /// The Log is folded for spend in one place (`Owed::spent`): it counts one call per
    /// `call-started` and per `compaction` (a summary call), never decreases along a Log — rewinds give nothing back — and charges
    /// bytes only from the budget change journaled with a call.
    #[test]
    fn spend_is_folded_once_and_never_given_back(log in arbitrary_log(), drop_bytes in 0u64..500) {
        let mut bodies: Vec<RecordBody> = log.iter().map(|r| r.body.clone()).collect();
        let before = Fuel { model_calls: 10, bytes: 10_000, wakes: 1 };
        let after = Fuel { bytes: before.bytes - drop_bytes, ..before };
        bodies.push(RecordBody::BudgetChange { left: before, summary: "s".into() });
        bodies.push(started(call_id(200)));
        bodies.push(RecordBody::BudgetChange { left: after, summary: "a call".into() });
        bodies.push(RecordBody::Rewind { to: 0, reason: "back".into() });
        let records = log_of(bodies);
        let mut owed = Owed::default();
        let mut last = Fuel::ZERO;
        for r in &records {
            owed.apply(r);
            let now = owed.spent();
            prop_assert!(now.model_calls >= last.model_calls && now.bytes >= last.bytes);
            last = now;
        }
        let calls = records
            .iter()
            .filter(|r| matches!(r.body, RecordBody::CallStarted { .. } | RecordBody::Compaction { .. }))
            .count() as u64;
        prop_assert_eq!(owed.spent().model_calls, calls);
        prop_assert!(owed.spent().bytes >= drop_bytes);
    }
}

proptest! {
    /// Undecided events live in one place, `Owed`, with their sources: a rewind retracts them
    /// all (the copy the sequencer once kept beside them did not), and each carries the source
    /// its event was journaled with.
    #[test]
    fn undecided_events_are_retracted_by_a_rewind_and_keep_their_source(log in arbitrary_log()) {
        let mut owed = Owed::default();
        for r in &log {
            owed.apply(r);
            if matches!(r.body, RecordBody::Rewind { .. }) {
                prop_assert!(owed.undecided_events().is_empty());
            }
            for u in owed.undecided_events() {
                let journaled = log.iter().find_map(|e| match &e.body {
                    RecordBody::Event { id, source, .. } if *id == u.id => Some(source),
                    _ => None,
                });
                prop_assert_eq!(journaled, Some(&u.source));
            }
        }
    }

    /// The sequencer reads fuel and tool uses from `Owed` alone: fuel left is the last
    /// budget-change less the calls started since, and a tool use is found only while the
    /// reply that proposed it stands — a rewind or a fresh prompt retracts it.
    #[test]
    fn fuel_and_tool_uses_are_folded_once_and_retracted_with_their_reply(log in arbitrary_log()) {
        let mut owed = Owed::default();
        let mut fuel: Option<l3m_core::budget::Fuel> = None;
        let mut standing: Vec<l3m_core::log::ToolUse> = Vec::new();
        for r in &log {
            owed.apply(r);
            match &r.body {
                RecordBody::BudgetChange { left, .. } => fuel = Some(*left),
                RecordBody::CallStarted { .. } | RecordBody::Compaction { .. } => {
                    if let Some(f) = &mut fuel {
                        f.model_calls = f.model_calls.saturating_sub(1);
                    }
                }
                RecordBody::AssistantReply { tool_uses, .. } => standing = tool_uses.clone(),
                RecordBody::Rewind { .. } | RecordBody::SystemPrompt { continues: false, .. } => {
                    for gone in standing.drain(..) {
                        prop_assert!(owed.tool_use(&gone.id).is_none());
                    }
                }
                _ => {}
            }
            prop_assert_eq!(owed.fuel_left(), fuel);
            for u in &standing {
                prop_assert_eq!(owed.tool_use(&u.id), Some(u));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compaction at the window

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Wherever a sequencer starts a call, compacting the oldest span the fold names keeps the
    /// tail after it exactly as it was (so the call answers the same last message), shows the
    /// summary first, keeps the view well formed, and a rewind to before the compaction or a
    /// fork after it gives the view a fresh fold of those records gives.
    #[test]
    fn compacting_the_oldest_span_keeps_the_tail(acts in driven_acts(), keep in 0u64..4000) {
        let d = driven(&acts);
        let records = d.log.records().to_vec();
        let mut fold = ViewFold::new();
        for (i, r) in records.iter().enumerate() {
            if matches!(r.body, RecordBody::CallStarted { .. }) {
                let before = fold.view().clone();
                if let Some(span) = fold.oldest_span(keep) {
                    let mut compacted = records[..i].to_vec();
                    compacted.push(Record {
                        seq: i as u64,
                        at_ms: 0,
                        body: RecordBody::Compaction { from: span.from, to: span.to, summary: "S".into() },
                    });
                    let after = view(&compacted);
                    let kept = before.messages.len() - span.messages;
                    prop_assert!(after.messages.len() > kept);
                    let cut = after.messages.len() - kept;
                    prop_assert_eq!(&after.messages[cut..], &before.messages[span.messages..]);
                    let shows_summary = after.messages[..cut].iter().any(|m| matches!(
                        m,
                        Message::User { content } if content.iter().any(|p| matches!(p, Part::Text { text } if text.ends_with(": S")))
                    ));
                    prop_assert!(shows_summary, "{:?}", after.messages);
                    prop_assert!(view_bytes(&after) <= view_bytes(&before) + 64);
                    if let Err(e) = well_formed(&after, true) {
                        prop_assert!(false, "compacted at seq {}: {}", i, e);
                    }
                    // A rewind to before the compaction restores the view it compacted.
                    let mut rewound = compacted.clone();
                    rewound.push(Record {
                        seq: i as u64 + 1,
                        at_ms: 0,
                        body: RecordBody::Rewind { to: i as u64 - 1, reason: "back".into() },
                    });
                    let mut settled = records[..i].to_vec();
                    settled.push(Record { seq: i as u64, at_ms: 0, body: RecordBody::Rewind { to: i as u64 - 1, reason: "back".into() } });
                    prop_assert_eq!(view(&rewound), view(&settled));
                    // A fork after it starts from the same compacted view.
                    let forked = l3m_core::owed::fork_log(compacted.clone(), "fork", 0);
                    prop_assert_eq!(&view(&forked).messages[..after.messages.len()], &after.messages[..]);
                }
            }
            fold.advance(r);
        }
    }

    /// The estimate never counts fewer tokens than the rate it observed, and the bytes it
    /// allows for a token budget never estimate over that budget.
    #[test]
    fn token_estimate_errs_high_and_inverts_safely(
        observed in vec((1u64..1_000_000, 1u64..400_000), 0..6),
        bytes in 0u64..10_000_000,
        budget in 0u64..1_000_000,
    ) {
        let mut estimate = l3m_core::view::TokenEstimate::default();
        for (b, t) in &observed {
            estimate.observe(*b, *t);
        }
        let (sum_b, sum_t) = observed.iter().fold((0u64, 0u64), |(b, t), (x, y)| (b + x, t + y));
        if sum_b > 0 {
            prop_assert!(u128::from(estimate.tokens(bytes)) * u128::from(sum_b) >= u128::from(bytes) * u128::from(sum_t));
        }
        prop_assert!(estimate.tokens(estimate.bytes(budget)) <= budget + 1);
    }
}

// ---------------------------------------------------------------------------------------------
// A lean view

fn fuel_strategy() -> impl Strategy<Value = Fuel> {
    (0u64..12, 0u64..200_000, 0u64..3).prop_map(|(model_calls, bytes, wakes)| Fuel {
        model_calls,
        bytes,
        wakes,
    })
}

proptest! {
    /// The view narrates exactly the budget changes that matter (`budget_matters` against the
    /// budget before), and a session whose fuel only goes down without running low reads no
    /// budget line at all, however many calls it makes.
    #[test]
    fn budget_lines_only_when_they_matter(changes in vec(fuel_strategy(), 0..30), start in 4u64..1000) {
        use l3m_core::view::{LOW_BYTES, LOW_CALLS, budget_matters};
        let mut bodies = vec![RecordBody::SystemPrompt { text: "p".into(), continues: false }];
        let mut before: Option<Fuel> = None;
        let mut shown = 0;
        for left in &changes {
            bodies.push(RecordBody::BudgetChange { left: *left, summary: "s".into() });
            shown += usize::from(budget_matters(before.as_ref(), left));
            before = Some(*left);
        }
        let budget_lines = |v: &View| v.messages.iter().map(|m| match m {
            Message::User { content } => content.iter().filter(|p| matches!(p, Part::Text { text } if text.starts_with("(l3m) your budget"))).count(),
            Message::Assistant { .. } => 0,
        }).sum::<usize>();
        prop_assert_eq!(budget_lines(&view(&log_of(bodies))), shown);

        // Calls that only spend, never low: no budget line.
        let mut bodies = vec![RecordBody::SystemPrompt { text: "p".into(), continues: false }];
        let calls = start.min(40);
        for n in 0..calls {
            bodies.push(RecordBody::UserLine { from: alice(), text: format!("line {n}") });
            bodies.push(RecordBody::BudgetChange {
                left: Fuel { model_calls: LOW_CALLS + 1 + calls - n, bytes: LOW_BYTES + 1000 * (calls - n), wakes: 1 },
                summary: "a model call".into(),
            });
        }
        prop_assert_eq!(budget_lines(&view(&log_of(bodies))), 0);
    }
}

proptest! {
    /// Letters are shown by a short id that is the seq of their event (so the harness maps it
    /// back through the Log), never by their long id; the same letter keeps its short id in
    /// every later view.
    #[test]
    fn letters_are_shown_by_short_stable_ids(ids in vec("[0-9a-f]{64}", 1..6), lines in vec(0usize..3, 1..6)) {
        let mut bodies = vec![RecordBody::SystemPrompt { text: "p".into(), continues: false }];
        for (k, letter_id) in ids.iter().enumerate() {
            for n in 0..lines[k % lines.len()] {
                bodies.push(RecordBody::UserLine { from: alice(), text: format!("line {n}") });
            }
            let id = EventId::new(format!("e{k}")).unwrap();
            bodies.push(RecordBody::Event {
                id: id.clone(),
                source: EventSource::Letter { letter_id: letter_id.clone(), from: alice(), in_reply_to: None },
                text: "hello".into(),
            });
            bodies.push(RecordBody::HookDecision { event: id, disposition: Disposition::Show });
        }
        let records = log_of(bodies);
        let text = serde_json::to_string(&view(&records)).unwrap();
        for letter_id in &ids {
            prop_assert!(!text.contains(letter_id.as_str()));
        }
        for r in &records {
            if let RecordBody::Event { .. } = r.body {
                let short = l3m_core::view::letter_short_id(r.seq);
                let shown = format!("letter {short} from");
                prop_assert!(text.contains(&shown));
                // Stable: a longer Log shows the same letter by the same id.
                let mut longer = records.clone();
                longer.push(Record { seq: records.len() as u64, at_ms: 0, body: RecordBody::UserLine { from: alice(), text: "more".into() } });
                prop_assert!(serde_json::to_string(&view(&longer)).unwrap().contains(&shown));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Waking an asleep agent

/// A cards chain's answers, about the tool uses the arbitrary Logs use.
fn answers() -> impl Strategy<Value = Vec<CardLine>> {
    vec((0u8..6, any::<bool>()), 0..3).prop_map(|answers| {
        answers
            .into_iter()
            .map(|(t, approve)| CardLine::Answered {
                id: tool_id(t),
                by: alice(),
                approve,
                reason: String::new(),
            })
            .collect()
    })
}

proptest! {
    /// The supervisor reads a whole Log only when its last record and the two chains say it may
    /// owe a wake: skipping the read never misses one.
    #[test]
    fn a_log_not_read_owes_no_wake(
        records in arbitrary_log(),
        cards in answers(),
        fired in vec((0u8..4).prop_map(event_id), 0..3),
    ) {
        let last = records.last().map(|r| &r.body);
        if !wake::log_may_owe(last, &cards, &fired) {
            prop_assert_eq!(wake::owed_wake(&records, &cards, &fired), None);
        }
    }

    /// A vigil whose event the Log journaled wakes no one, and a fired one it did not journal
    /// wakes the agent unless something before it in the order already does.
    #[test]
    fn only_an_unjournaled_vigil_wakes(
        records in arbitrary_log(),
        cards in answers(),
        fired in vec((0u8..4).prop_map(event_id), 0..3),
    ) {
        let owed = Owed::from_records(&records);
        let journaled: Vec<EventId> = fired.iter().filter(|id| owed.has_event(id)).cloned().collect();
        let without = wake::owed_wake(&records, &cards, &[]);
        prop_assert_eq!(wake::owed_wake(&records, &cards, &journaled), without);
        let woken = wake::owed_wake(&records, &cards, &fired);
        if journaled.len() < fired.len() {
            prop_assert_eq!(woken, without.or(Some(wake::Wake::VigilUnseen)));
        } else {
            prop_assert_eq!(woken, without);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A request that always fits

/// An arbitrary Log with some of its texts grown large (up to 200 KB, within the record
/// limit): the tag stays first, so the records are the arbitrary Log's, only heavier.
fn heavy_log() -> impl Strategy<Value = Vec<Record>> {
    let pad = prop_oneof![
        6 => Just(0usize),
        2 => 0usize..4_000,
        1 => 20_000usize..200_000,
    ];
    (arbitrary_log(), vec(pad, 48)).prop_map(|(mut records, pads)| {
        for (record, pad) in records.iter_mut().zip(pads) {
            let text = match &mut record.body {
                RecordBody::UserLine { text, .. }
                | RecordBody::AssistantReply { text, .. }
                | RecordBody::Event { text, .. } => text,
                RecordBody::ToolResult { output, .. } => output,
                RecordBody::Compaction { summary, .. } => summary,
                _ => continue,
            };
            text.push_str(&"é\"x".repeat(pad / 4));
        }
        records
    })
}

/// The least a window must leave a request, as the law reads "the fixed prefix plus one
/// exchange": the system prompt, a summary of `summary` bytes with its narration, a message the
/// span could not take (1 KiB in all, well under any real model's fixed prefix of tools), and
/// the view's last exchange (from its last reply on; its last message when it has none) with
/// every part stubbed.
fn prefix_and_one_exchange(view: &View, summary: u64) -> u64 {
    let last = (view.messages.iter())
        .rposition(|m| matches!(m, Message::Assistant { .. }))
        .unwrap_or(view.messages.len().saturating_sub(1));
    let exchange = View {
        system: String::new(),
        messages: view.messages[last..].to_vec(),
    };
    view.system.len() as u64 + summary + 1024 + floor_bytes(&exchange)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The law of issue 37: for any Log (records of every kind, some large, compactions
    /// anywhere) and any window at least the fixed prefix plus one exchange, the next request
    /// fits. The path is the sequencer's: fold the Log into its view; when the view nears the
    /// window (three quarters of it), compact the oldest span so the tail kept measures at most
    /// a third, its summary at most a twelfth (the summary is the model's, cut to that); fold
    /// the compaction in; fit the view to the window, stubbing its largest parts.
    #[test]
    fn the_next_request_fits_any_window_above_the_prefix_and_one_exchange(
        records in heavy_log(),
        slack in prop_oneof![0u64..2_000, 0u64..40_000, 0u64..400_000],
    ) {
        let mut fold = ViewFold::new();
        for r in &records {
            fold.advance(r);
        }
        let summary = 64 + slack / 12;
        let budget = prefix_and_one_exchange(fold.view(), summary) + slack;
        let summary = budget / 12;
        if view_bytes(fold.view()) > budget / 4 * 3
            && let Some(span) = fold.oldest_span(budget / 3)
        {
            let compaction = Record {
                seq: records.len() as u64,
                at_ms: 0,
                body: RecordBody::Compaction {
                    from: span.from,
                    to: span.to,
                    summary: "s".repeat(usize::try_from(summary).unwrap()),
                },
            };
            fold.advance(&compaction);
        }
        let sent = fit_view(fold.view(), budget);
        prop_assert!(
            view_bytes(&sent) <= budget,
            "the request is {} bytes, the window leaves {budget}",
            view_bytes(&sent)
        );
    }
}
