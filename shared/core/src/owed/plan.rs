//! Planning: which records to journal now, from the tool table and what is owed.

use super::*;

/// The footprints of the tools offered to the model, by name (l3m-tools' `ToolTable` is the
/// table that builds and runs them; this is only what planning reads of it).
pub trait Footprints {
    /// The footprint of the tool called `name`, if the table has it.
    fn footprint(&self, name: &str) -> Option<&Footprint>;
}

impl Footprints for BTreeMap<String, Footprint> {
    fn footprint(&self, name: &str) -> Option<&Footprint> {
        self.get(name)
    }
}

impl Footprints for HashMap<String, Footprint> {
    fn footprint(&self, name: &str) -> Option<&Footprint> {
        self.get(name)
    }
}

/// What [`plan`] needs from the caller: a fresh call id (used only if a call is owed), where the
/// call goes, the retry limit, and the tool table.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    /// A call id never used in this Log.
    pub call: &'a CallId,
    /// The provider for the call.
    pub provider: &'a str,
    /// The model for the call.
    pub model: &'a str,
    /// Attempts allowed per owed call (at least 1); past it the turn ends.
    pub max_attempts: u32,
    /// The tool table.
    pub tools: &'a dyn Footprints,
}

impl std::fmt::Debug for PlanInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanInput")
            .field("call", self.call)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// The records to journal now, in order: admissions, refusals and starts of the latest reply's
/// tool uses; then the owed model call (or `out-of-fuel`, or `turn-end` once attempts run out);
/// or the owed `turn-end`. Journal them all, then start what they name.
pub fn plan(state: &Owed, input: &PlanInput<'_>) -> Result<Vec<RecordBody>, Stale> {
    let mut now = state.now.clone();
    let mut out = Vec::new();
    // Each record moves a tool use a stage on, opens the call, or ends the turn, so this stops.
    while let Some(body) = next_record(&now, &state.seen, input)? {
        now.apply(&body);
        out.push(body);
    }
    Ok(out)
}

fn next_record(now: &Now, seen: &Seen, input: &PlanInput<'_>) -> Result<Option<RecordBody>, Stale> {
    // The uses of one reply run one at a time, in the reply's order: a model that writes
    // `make_dir a` then `write_file a/b` in one reply means the second to see the first done.
    // A use waits while another runs or an earlier one is unresolved (under review, or at a
    // stalemate); admissions and refusals, which run nothing, are not held back.
    let mut held = !now.running.is_empty();
    for tool in &now.pending {
        let id = tool.id.clone();
        let body = match &tool.stage {
            Stage::Proposed if seen.started.contains(&id) => refusal(
                id,
                "tool-use-id",
                format!(
                    "(l3m) tool use id {} was already used; this use was not run",
                    tool.id
                ),
            ),
            Stage::Proposed => match input.tools.footprint(&tool.name) {
                Some(_) if now.input_of(&id).is_some_and(|v| !v.is_object()) => refusal(
                    id.clone(),
                    "tool-arguments",
                    not_an_object(now.input_of(&id)),
                ),
                Some(footprint) if footprint.tier() == Tier::Wild => {
                    match now.input_of(&id).map(split_justification) {
                        Some(Ok(_)) => RecordBody::ToolCall {
                            id,
                            name: tool.name.clone(),
                            tier: Tier::Wild,
                            footprint: footprint.clone(),
                        },
                        Some(Err(e)) => refusal(id, "review", format!("(l3m) not run: {e}")),
                        None => {
                            refusal(id, "review", "(l3m) not run: the call has no input".into())
                        }
                    }
                }
                Some(footprint) => RecordBody::ToolCall {
                    id,
                    name: tool.name.clone(),
                    tier: footprint.tier(),
                    footprint: footprint.clone(),
                },
                None => refusal(
                    id,
                    "tool-table",
                    format!("(l3m) no tool named {:?} is offered to you", tool.name),
                ),
            },
            Stage::Admitted { tier: Tier::Tame } | Stage::Approved if held => continue,
            Stage::Admitted { tier: Tier::Tame } | Stage::Approved => {
                RecordBody::ToolStarted { id }
            }
            Stage::Admitted { tier: Tier::Wild } | Stage::Stalemate { .. } => {
                held = true;
                continue;
            }
            Stage::Answered(conclusion) => refusal(id, "review", answered(conclusion)),
        };
        return Ok(Some(body));
    }
    if now.call_owed() {
        if let Some(unit) = now.fuel_short() {
            return Ok(Some(RecordBody::OutOfFuel { unit }));
        }
        if now.mistakes > MAX_CORRECTIONS {
            return Ok(Some(RecordBody::TurnEnd));
        }
        let attempt = now
            .retry
            .as_ref()
            .map_or(1, |r| r.attempt.saturating_add(1));
        if attempt > input.max_attempts {
            return Ok(Some(RecordBody::TurnEnd));
        }
        if seen.calls.contains(input.call) {
            return Err(Stale::CallIdReused {
                call: input.call.clone(),
            });
        }
        let fallback_of = now
            .retry
            .as_ref()
            .filter(|r| r.provider != input.provider || r.model != input.model)
            .map(|r| r.id.clone());
        return Ok(Some(RecordBody::CallStarted {
            call: input.call.clone(),
            provider: input.provider.to_owned(),
            model: input.model.to_owned(),
            attempt,
            fallback_of,
        }));
    }
    Ok(now.turn_end_owed().then_some(RecordBody::TurnEnd))
}

/// A tool use the harness refuses before it runs, by `boundary` (no grant axis is involved).
fn refusal(id: ToolUseId, boundary: &str, output: String) -> RecordBody {
    RecordBody::ToolResult {
        id,
        output,
        is_error: true,
        effects: vec![],
        refusal: Some(Refusal::new(boundary, None)),
    }
}

/// What the model is told when a tool use's arguments are not a JSON object.
fn not_an_object(input: Option<&serde_json::Value>) -> String {
    let wrote = match input {
        Some(serde_json::Value::String(raw)) => raw.chars().take(200).collect::<String>(),
        Some(other) => other.to_string().chars().take(200).collect(),
        None => String::new(),
    };
    format!(
        "(l3m) the arguments of this call are not a JSON object, so it was not run (you wrote: \
         {wrote}); call the tool again with a JSON object that matches its schema"
    )
}

/// What the model is told of a review that did not approve its call.
fn answered(conclusion: &Conclusion) -> String {
    match conclusion {
        Conclusion::Redirected {
            reason,
            alternative,
        } => format!("(l3m) declined by review: {reason}; instead: {alternative}"),
        Conclusion::Returned { reason } => format!(
            "(l3m) not approved by review yet: {reason}. If the call is needed, propose the same call again with a justification that answers this; otherwise do something else (which withdraws it)"
        ),
        Conclusion::Denied { reason } => format!("(l3m) denied by a human at its card: {reason}"),
        Conclusion::Approved | Conclusion::Stalemate { .. } => {
            format!("(l3m) review ended as {conclusion:?}; the call was not run")
        }
    }
}
