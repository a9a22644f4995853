//! The evaluator's jobs, in the process the sequencer starts for them: check a program (seal,
//! type, load) and run it under a step budget; check a hooks file and run its `on_event` over a
//! batch of events.
//!
//! [`check`] never runs a program's functions: the seal admits only literal assignments and
//! `def`s at the top level, so loading the module defines functions and constants and nothing
//! else. [`Program::load`] checks again (the source it is handed is the one checked at boot,
//! but the child trusts nothing it is handed), loads the module against its footprint's
//! globals and freezes it; [`Program::call`] runs `main(input)` in a fresh heap against that
//! frozen module, counting every statement against the budget. A frozen value cannot change,
//! so a program's constants are constants and no call can leave state for the next: a serving
//! evaluator loads once and calls many times, and [`run`] is one load and one call.

use l3m_core::effects::Footprint;
use serde_json::Value;
use starlark::codemap::FileSpanRef;
use starlark::environment::{FrozenModule, Module};
use starlark::eval::{BeforeStmtFuncDyn, Evaluator};
use starlark::syntax::AstModule;
use starlark::values::OwnedFrozenValue;

use crate::decl::{MAX_SOURCE, ProgramDecl, program_name};
use crate::globals;
use crate::rule::{LoadError, Rule, RunError};
use crate::seal::{self, ENTRY, HOOK_ENTRY};
use crate::types;

/// How deep calls may nest. With no recursion the call depth is bounded by the number of
/// functions anyway; this is the interpreter's own backstop.
const MAX_CALL_DEPTH: usize = 64;

/// The seal and type checks of `source`, named `file`, and its load against its footprint.
pub fn check(file: &str, source: &str) -> Result<ProgramDecl, LoadError> {
    check_parsed(file, source).map(|(decl, _)| decl)
}

/// Refuses a source longer than [`MAX_SOURCE`].
fn within_size(file: &str, source: &str) -> Result<(), LoadError> {
    if source.len() > MAX_SOURCE {
        return Err(LoadError::new(
            file,
            1,
            Rule::TooLarge,
            format!(
                "{} bytes; a program is at most {MAX_SOURCE} bytes",
                source.len()
            ),
        ));
    }
    Ok(())
}

fn check_parsed(file: &str, source: &str) -> Result<(ProgramDecl, FrozenModule), LoadError> {
    let file_name = file.rsplit('/').next().unwrap_or(file);
    let name = program_name(file, file_name)?;
    within_size(file, source)?;
    let module = seal::parse(file, source)?;
    let shape = seal::seal(file, &module)?;
    types::resolve(file, &shape.footprint, &shape.free)?;
    let frozen = load(file, module, &shape.footprint)?;
    let decl = ProgramDecl {
        name,
        description: shape.description,
        footprint: shape.footprint,
        footprint_line: shape.footprint_line,
        input_schema: shape.input_schema,
    };
    Ok((decl, frozen))
}

/// The seal and type checks of a hooks file, named `file`, and its load with no effect
/// function at all.
pub fn check_hook(file: &str, source: &str) -> Result<(), LoadError> {
    check_hook_parsed(file, source).map(|_| ())
}

fn check_hook_parsed(file: &str, source: &str) -> Result<FrozenModule, LoadError> {
    within_size(file, source)?;
    let module = seal::parse(file, source)?;
    let free = seal::seal_hook(file, &module)?;
    types::resolve_hook(file, &free)?;
    load(file, module, &Footprint::default())
}

/// Loads the module in a fresh environment against exactly its footprint's globals (the
/// interpreter resolves every name statically, so a name outside them fails here), and
/// freezes it. The seal admits nothing at the top level but literals and `def`s, so no step
/// budget is needed.
fn load(file: &str, module: AstModule, footprint: &Footprint) -> Result<FrozenModule, LoadError> {
    let refuse = |line, detail| LoadError::new(file, line, Rule::Load, detail);
    let env = Module::new();
    {
        let mut eval = Evaluator::new(&env);
        eval.eval_module(module, &globals::for_footprint(footprint))
            .map_err(|e| {
                refuse(
                    error_line(&e).unwrap_or(1),
                    e.without_diagnostic().to_string(),
                )
            })?;
    }
    env.freeze()
        .map_err(|e| refuse(1, format!("freezing the module: {e:?}")))
}

/// The function `name` of the frozen module: `main` of a program, `on_event` of a hook.
fn entry(file: &str, frozen: &FrozenModule, name: &str) -> Result<OwnedFrozenValue, LoadError> {
    frozen.get(name).map_err(|e| {
        LoadError::new(
            file,
            1,
            Rule::EntryPoint,
            format!("`{name}` is missing after load: {e}"),
        )
    })
}

/// A refusal at load, as the run it stopped reports it.
fn refused_at_load(e: LoadError) -> RunError {
    RunError {
        file: e.file,
        line: Some(e.line),
        rule: e.rule,
        detail: format!("refused at load: {}", e.detail),
    }
}

/// The 1-based line an interpreter error points at, if it points anywhere.
fn error_line(e: &starlark::Error) -> Option<u32> {
    e.span()
        .map(|s| u32::try_from(s.resolve_span().begin.line + 1).unwrap_or(u32::MAX))
}

/// Counts statements and stops the program when the budget is spent.
struct Steps {
    left: u64,
    spent: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<'a, 'e: 'a> BeforeStmtFuncDyn<'a, 'e> for Steps {
    fn call<'v>(
        &mut self,
        _span: FileSpanRef,
        _eval: &mut Evaluator<'v, 'a, 'e>,
    ) -> starlark::Result<()> {
        if self.left == 0 {
            self.spent.set(true);
            return Err(starlark::Error::new_other(anyhow::anyhow!(
                "the step budget is spent"
            )));
        }
        self.left -= 1;
        Ok(())
    }
}

/// A program checked, loaded and frozen once, whose `main` may be called many times.
#[derive(Debug)]
pub struct Program {
    /// The program's file, as errors name it.
    file: String,
    /// Its `main`, which keeps the frozen module alive.
    main: OwnedFrozenValue,
}

impl Program {
    /// Checks `source` (named `file`) again, loads it against its footprint's globals and
    /// freezes it; a refusal is the [`RunError`] every call of it would report.
    pub fn load(file: &str, source: &str) -> Result<Self, RunError> {
        let (_, frozen) = check_parsed(file, source).map_err(refused_at_load)?;
        let main = entry(file, &frozen, ENTRY).map_err(refused_at_load)?;
        Ok(Self {
            file: file.to_owned(),
            main,
        })
    }

    /// Runs `main(input)` with at most `steps` statements, in a heap of its own. Its class
    /// functions reach the parent through the link `globals::connect` installed.
    pub fn call(&self, input: Value, steps: u64) -> Result<Value, RunError> {
        call_frozen(&self.file, &self.main, ENTRY, input, steps)
    }
}

/// Runs `main(input)` of the program in `source` once, with at most `steps` statements.
pub fn run(file: &str, source: &str, input: Value, steps: u64) -> Result<Value, RunError> {
    Program::load(file, source)?.call(input, steps)
}

/// Runs the hook in `source` on each of `events`: `on_event(event)`, each call with its own
/// budget of `steps` statements, in its own heap, against the module frozen after load (so no
/// call can leave state for the next: a decision depends on its event alone, however events
/// are batched). A refusal at load stops them all; a failure of one call is that event's.
pub fn run_hook(
    file: &str,
    source: &str,
    events: Vec<Value>,
    steps: u64,
) -> Result<Vec<Result<Value, RunError>>, RunError> {
    let frozen = check_hook_parsed(file, source).map_err(refused_at_load)?;
    let on_event = entry(file, &frozen, HOOK_ENTRY).map_err(refused_at_load)?;
    Ok(events
        .into_iter()
        .map(|event| call_frozen(file, &on_event, HOOK_ENTRY, event, steps))
        .collect())
}

/// Calls the frozen function `function` (named `name`) on `arg` in a fresh module and heap,
/// with at most `steps` statements, and returns its result as JSON.
fn call_frozen(
    file: &str,
    function: &OwnedFrozenValue,
    name: &str,
    arg: Value,
    steps: u64,
) -> Result<Value, RunError> {
    let call = Module::new();
    let mut eval = Evaluator::new(&call);
    let spent = limit(&mut eval, file, steps)?;
    let function = function.owned_value(call.frozen_heap());
    let arg = eval.heap().alloc(arg);
    let out = eval
        .eval_function(function, &[arg], &[])
        .map_err(|e| stopped(file, &spent, steps, e))?;
    json_of(file, name, out)
}

/// Sets the call depth and installs a step counter of `steps` on `eval`; the flag it returns
/// says whether the budget was what stopped a run.
fn limit(
    eval: &mut Evaluator<'_, '_, '_>,
    file: &str,
    steps: u64,
) -> Result<std::rc::Rc<std::cell::Cell<bool>>, RunError> {
    eval.set_max_callstack_size(MAX_CALL_DEPTH)
        .map_err(|e| RunError {
            file: file.to_owned(),
            line: None,
            rule: Rule::Evaluator,
            detail: e.to_string(),
        })?;
    let spent = std::rc::Rc::new(std::cell::Cell::new(false));
    let counter: Box<dyn BeforeStmtFuncDyn<'_, '_>> = Box::new(Steps {
        left: steps,
        spent: spent.clone(),
    });
    eval.before_stmt_for_dap(counter.into());
    Ok(spent)
}

/// The stop an interpreter error means: the step budget when the counter tripped, else a
/// runtime error at its line.
fn stopped(file: &str, spent: &std::cell::Cell<bool>, steps: u64, e: starlark::Error) -> RunError {
    let (rule, detail) = if spent.get() {
        (
            Rule::StepBudget,
            format!("the program ran more than {steps} statements"),
        )
    } else {
        (Rule::Runtime, e.without_diagnostic().to_string())
    };
    RunError {
        file: file.to_owned(),
        line: error_line(&e),
        rule,
        detail,
    }
}

/// What `function` returned, as JSON.
fn json_of(
    file: &str,
    function: &str,
    out: starlark::values::Value<'_>,
) -> Result<Value, RunError> {
    match out.unpack_str() {
        Some(text) => Ok(Value::String(text.to_owned())),
        None => out.to_json_value().map_err(|e| RunError {
            file: file.to_owned(),
            line: None,
            rule: Rule::Runtime,
            detail: format!("`{function}` returned a value with no JSON form: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::FUNCTIONS;

    const TRIAGE: &str = r#"
BORING = ["ci-bot", "newsletter"]

def quiet(sender):
    return sender in BORING

def on_event(event):
    if event["kind"] != "letter":
        return "show"
    if quiet(event["from"]):
        return "dismiss"
    if "spin" in event["text"]:
        n = 0
        for a in range(1000000):
            n += a
    return {"kind": "reply", "text": "got it: " + event["text"]}
"#;

    /// `hook_effect_refused_at_load`: a hook naming any function of any class is refused at
    /// load by `no-effect`, at the line that names it.
    #[test]
    fn hook_effect_refused_at_load() {
        for f in FUNCTIONS {
            let source = format!(
                "def on_event(event):\n    {}()\n    return \"show\"\n",
                f.name
            );
            let e = check_hook("agent/hooks.star", &source).unwrap_err();
            assert_eq!((e.rule, e.line), (Rule::NoEffect, 2), "{}: {e}", f.name);
            assert!(e.detail.contains(f.name), "{e}");
        }
        let e = check_hook("agent/hooks.star", "def main(input):\n    return 1\n").unwrap_err();
        assert_eq!(e.rule, Rule::EntryPoint);
        assert!(e.detail.contains("on_event"), "{e}");
        assert!(
            check_hook(
                "agent/hooks.star",
                "FOOTPRINT = []\n\ndef on_event(e):\n    return \"show\"\n"
            )
            .is_ok()
        );
    }

    /// Each event is decided alone: its own step budget, no state left by another.
    #[test]
    fn each_event_has_its_own_budget_and_sees_no_other() {
        let letter = |from: &str, text: &str| serde_json::json!({"kind": "letter", "letter_id": "l", "from": from, "id": "e", "text": text});
        let events = vec![
            letter("newsletter", "sale"),
            letter("alice/main", "spin"),
            letter("alice/main", "hello"),
            serde_json::json!({"kind": "deadline", "id": "e", "text": ""}),
        ];
        let out = run_hook("agent/hooks.star", TRIAGE, events, 10_000).unwrap();
        assert_eq!(out[0], Ok(Value::String("dismiss".into())));
        assert_eq!(out[1].as_ref().unwrap_err().rule, Rule::StepBudget);
        assert_eq!(
            out[2],
            Ok(serde_json::json!({"kind": "reply", "text": "got it: hello"}))
        );
        assert_eq!(out[3], Ok(Value::String("show".into())));
        let remembers =
            "SEEN = []\n\ndef on_event(event):\n    SEEN.append(1)\n    return \"show\"\n";
        let out = run_hook("agent/hooks.star", remembers, vec![Value::Null; 2], 100).unwrap();
        assert!(
            out.iter()
                .all(|r| r.as_ref().unwrap_err().rule == Rule::Runtime),
            "{out:?}"
        );
    }
}
