//! The evaluator's two jobs, in the process the sequencer starts for them: check a program
//! (seal, type, load) and run it under a step budget.
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
use crate::seal::{self, ENTRY};
use crate::types;

/// How deep calls may nest. With no recursion the call depth is bounded by the number of
/// functions anyway; this is the interpreter's own backstop.
const MAX_CALL_DEPTH: usize = 64;

/// The seal and type checks of `source`, named `file`, and its load against its footprint.
pub fn check(file: &str, source: &str) -> Result<ProgramDecl, LoadError> {
    check_parsed(file, source).map(|(decl, _)| decl)
}

fn check_parsed(file: &str, source: &str) -> Result<(ProgramDecl, AstModule), LoadError> {
    let file_name = file.rsplit('/').next().unwrap_or(file);
    let name = program_name(file, file_name)?;
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
    let spent = std::rc::Rc::new(std::cell::Cell::new(false));
    let globals = globals::for_footprint(&decl.footprint);
    let mut eval = Evaluator::new(&env);
    eval.set_max_callstack_size(MAX_CALL_DEPTH)
        .map_err(|e| stop(Rule::Evaluator, None, e.to_string()))?;
    let counter: Box<dyn BeforeStmtFuncDyn<'_, '_>> = Box::new(Steps {
        left: steps,
        spent: spent.clone(),
    });
    eval.before_stmt_for_dap(counter.into());
    let failed = |e: starlark::Error| {
        if spent.get() {
            stop(
                Rule::StepBudget,
                error_line(&e),
                format!("the program ran more than {steps} statements"),
            )
        } else {
            stop(
                Rule::Runtime,
                error_line(&e),
                e.without_diagnostic().to_string(),
            )
        }
    };
    eval.eval_module(module, &globals).map_err(&failed)?;
    let main = env
        .get(ENTRY)
        .ok_or_else(|| stop(Rule::Evaluator, None, "`main` vanished after load".into()))?;
    let input = eval.heap().alloc(input);
    let out = eval.eval_function(main, &[input], &[]).map_err(&failed)?;
    match out.unpack_str() {
        Some(text) => Ok(Value::String(text.to_owned())),
        None => out.to_json_value().map_err(|e| {
            stop(
                Rule::Runtime,
                None,
                format!("`main` returned a value with no JSON form: {e}"),
            )
        }),
    }
}
