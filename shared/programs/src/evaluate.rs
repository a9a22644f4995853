//! The evaluator's jobs, in the process the sequencer starts for them: check a program (seal,
//! type, load) and run it under a step budget; check a hooks file and run its `on_event` over a
//! batch of events.
//!
//! [`check`] never runs a program's functions: the seal admits only literal assignments and
//! `def`s at the top level, so loading the module defines functions and constants and nothing
//! else. [`run`] checks again (the source it is handed is the one checked at boot, but the
//! child trusts nothing it is handed), loads the module against its footprint's globals, and
//! calls `main(input)`, counting every statement against the budget.

use l3m_core::effects::Footprint;
use serde_json::Value;
use starlark::codemap::FileSpanRef;
use starlark::environment::Module;
use starlark::eval::{BeforeStmtFuncDyn, Evaluator};
use starlark::syntax::AstModule;

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

fn check_parsed(file: &str, source: &str) -> Result<(ProgramDecl, AstModule), LoadError> {
    let file_name = file.rsplit('/').next().unwrap_or(file);
    let name = program_name(file, file_name)?;
    within_size(file, source)?;
    let module = seal::parse(file, source)?;
    let shape = seal::seal(file, &module)?;
    types::resolve(file, &shape.footprint, &shape.free)?;
    load(file, module.clone(), &shape.footprint)?;
    let decl = ProgramDecl {
        name,
        description: shape.description,
        footprint: shape.footprint,
        footprint_line: shape.footprint_line,
        input_schema: shape.input_schema,
    };
    Ok((decl, module))
}

/// The seal and type checks of a hooks file, named `file`, and its load with no effect
/// function at all.
pub fn check_hook(file: &str, source: &str) -> Result<(), LoadError> {
    check_hook_parsed(file, source).map(|_| ())
}

fn check_hook_parsed(file: &str, source: &str) -> Result<AstModule, LoadError> {
    within_size(file, source)?;
    let module = seal::parse(file, source)?;
    let free = seal::seal_hook(file, &module)?;
    types::resolve_hook(file, &free)?;
    load(file, module.clone(), &Footprint::default())?;
    Ok(module)
}

/// Loads the module in a fresh environment against exactly its footprint's globals: the
/// interpreter resolves every name statically, so a name outside them fails here.
fn load(file: &str, module: AstModule, footprint: &Footprint) -> Result<(), LoadError> {
    let env = Module::new();
    let mut eval = Evaluator::new(&env);
    eval.eval_module(module, &globals::for_footprint(footprint))
        .map(|_| ())
        .map_err(|e| {
            LoadError::new(
                file,
                error_line(&e).unwrap_or(1),
                Rule::Load,
                e.without_diagnostic().to_string(),
            )
        })
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

/// Runs `main(input)` of the program in `source` with at most `steps` statements. Its class
/// functions reach the parent through the link `globals::connect` installed.
pub fn run(file: &str, source: &str, input: Value, steps: u64) -> Result<Value, RunError> {
    let stop = |rule, line, detail: String| RunError {
        file: file.to_owned(),
        line,
        rule,
        detail,
    };
    let (decl, module) = check_parsed(file, source).map_err(|e| {
        stop(
            e.rule,
            Some(e.line),
            format!("refused at load: {}", e.detail),
        )
    })?;
    let env = Module::new();
    let globals = globals::for_footprint(&decl.footprint);
    let mut eval = Evaluator::new(&env);
    let spent = limit(&mut eval, file, steps)?;
    let failed = |e: starlark::Error| stopped(file, &spent, steps, e);
    eval.eval_module(module, &globals).map_err(&failed)?;
    let main = env
        .get(ENTRY)
        .ok_or_else(|| stop(Rule::Evaluator, None, "`main` vanished after load".into()))?;
    let input = eval.heap().alloc(input);
    let out = eval.eval_function(main, &[input], &[]).map_err(&failed)?;
    json_of(file, ENTRY, out)
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
    let stop = |rule, line, detail: String| RunError {
        file: file.to_owned(),
        line,
        rule,
        detail,
    };
    let module = check_hook_parsed(file, source).map_err(|e| {
        stop(
            e.rule,
            Some(e.line),
            format!("refused at load: {}", e.detail),
        )
    })?;
    let env = Module::new();
    {
        let mut eval = Evaluator::new(&env);
        let spent = limit(&mut eval, file, steps)?;
        eval.eval_module(module, &globals::for_footprint(&Footprint::default()))
            .map_err(|e| stopped(file, &spent, steps, e))?;
    }
    let frozen = env
        .freeze()
        .map_err(|e| stop(Rule::Evaluator, None, format!("freezing the hook: {e:?}")))?;
    let entry = frozen
        .get(HOOK_ENTRY)
        .map_err(|e| stop(Rule::Evaluator, None, format!("`{HOOK_ENTRY}`: {e}")))?;
    Ok(events
        .into_iter()
        .map(|event| {
            let call = Module::new();
            let mut eval = Evaluator::new(&call);
            let spent = limit(&mut eval, file, steps)?;
            let on_event = entry.owned_value(call.frozen_heap());
            let event = eval.heap().alloc(event);
            let out = eval
                .eval_function(on_event, &[event], &[])
                .map_err(|e| stopped(file, &spent, steps, e))?;
            json_of(file, HOOK_ENTRY, out)
        })
        .collect())
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
