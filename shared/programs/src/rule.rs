//! The named rules a program is stopped by, at load or at run, and the errors that carry them.
//!
//! Every refusal names the file, the line and the rule, so an agent reading it knows exactly
//! what to change; the rule's name is stable data (kebab-case), never parsed out of a message.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which of the three load checks, or the run, a rule belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The shape of the file: one module, the restricted dialect, the literal declarations.
    Seal,
    /// Every name resolves against the builtins and the declared classes' functions.
    Type,
    /// The footprint is admitted for programs and covered by the agent's tokens.
    Surface,
    /// A limit or an error while the program ran, in its own process.
    Run,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Seal => "seal",
            Self::Type => "type",
            Self::Surface => "surface",
            Self::Run => "run",
        })
    }
}

/// One rule a program can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The file name is not `<name>.star` with a name of `[a-z][a-z0-9_]{0,39}`.
    FileName,
    /// The file is larger, or nests deeper (`seal::MAX_NESTING`), than a program may.
    TooLarge,
    /// The text does not parse as Starlark.
    Syntax,
    /// A `load` statement: a program is one module.
    NoLoad,
    /// A `while` loop: the dialect has none.
    NoWhile,
    /// A `lambda`: functions are named top-level `def`s only.
    NoLambda,
    /// A `def` inside a `def`.
    NoNestedDef,
    /// A function that can reach itself through calls.
    NoRecursion,
    /// A program function named anywhere but in the position of a call (so none can be passed
    /// around and called back: no recursion through higher-order calls).
    FunctionAsValue,
    /// A top-level statement other than a literal assignment or a `def`: a side effect at load.
    TopLevel,
    /// `FOOTPRINT` is missing, not a literal list of class names, or names a class twice.
    Footprint,
    /// `DESCRIPTION` is missing or not a literal string.
    Description,
    /// `INPUT` is missing or not a literal JSON Schema object.
    InputSchema,
    /// `def main(input)` is missing or takes other parameters.
    EntryPoint,
    /// A name that is neither the program's own, a builtin, nor a function of any class.
    UnknownName,
    /// A function of a class the footprint does not declare.
    UndeclaredClass,
    /// The interpreter refused the module when it loaded it against the footprint's functions.
    Load,
    /// A hook names an effect function or declares a class: hooks have no effect class at all.
    NoEffect,
    /// A plugin folder that is not exactly a bundle of `<name>.star` programs: a bad plugin
    /// name, an empty folder, another file, a nested folder or a link.
    Plugin,
    /// A class no program may use (it has no program functions, or programs must not reach it).
    NotAdmitted,
    /// A wild class no program function uses (any but `shell`).
    WildClass,
    /// A wild program longer than a reviewer is shown whole.
    TooLongToReview,
    /// The agent's tokens do not cover the footprint: the program is absent, like any tool.
    NotCovered,
    /// The program ran more statements than its step budget.
    StepBudget,
    /// The program ran past its deadline (wall clock or CPU time) and was killed.
    Deadline,
    /// The program ran out of memory under its address-space limit (heap or stack).
    Memory,
    /// The evaluator made a system call its filter forbids ([`crate::seccomp`]) and the
    /// kernel killed it: what an exploit of the interpreter would do, never a program's code.
    Syscall,
    /// The program failed: an error in its code, or an effect it asked for was refused.
    Runtime,
    /// A hook returned something that is not a disposition.
    NotDisposition,
    /// The evaluator broke the pipe protocol, died for another reason, or could not start.
    Evaluator,
    /// The evaluator's sandbox could not be built (bubblewrap missing, or no namespaces here):
    /// the program did not run, and nothing runs outside the sandbox unless configured so.
    Sandbox,
}

impl Rule {
    /// The rule's stable name, as refusals print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::FileName => "file-name",
            Self::TooLarge => "too-large",
            Self::Syntax => "syntax",
            Self::NoLoad => "no-load",
            Self::NoWhile => "no-while",
            Self::NoLambda => "no-lambda",
            Self::NoNestedDef => "no-nested-def",
            Self::NoRecursion => "no-recursion",
            Self::FunctionAsValue => "function-as-value",
            Self::TopLevel => "top-level",
            Self::Footprint => "footprint",
            Self::Description => "description",
            Self::InputSchema => "input-schema",
            Self::EntryPoint => "entry-point",
            Self::UnknownName => "unknown-name",
            Self::UndeclaredClass => "undeclared-class",
            Self::Load => "load",
            Self::NoEffect => "no-effect",
            Self::Plugin => "plugin",
            Self::NotAdmitted => "not-admitted",
            Self::WildClass => "wild-class",
            Self::TooLongToReview => "too-long-to-review",
            Self::NotCovered => "not-covered",
            Self::StepBudget => "step-budget",
            Self::Deadline => "deadline",
            Self::Memory => "memory",
            Self::Syscall => "syscall",
            Self::Runtime => "runtime",
            Self::NotDisposition => "not-disposition",
            Self::Evaluator => "evaluator",
            Self::Sandbox => "sandbox",
        }
    }

    /// The check (or the run) the rule belongs to.
    pub fn stage(self) -> Stage {
        match self {
            Self::FileName
            | Self::TooLarge
            | Self::Syntax
            | Self::NoLoad
            | Self::NoWhile
            | Self::NoLambda
            | Self::NoNestedDef
            | Self::NoRecursion
            | Self::FunctionAsValue
            | Self::TopLevel
            | Self::Footprint
            | Self::Description
            | Self::InputSchema
            | Self::EntryPoint
            | Self::Plugin => Stage::Seal,
            Self::UnknownName | Self::UndeclaredClass | Self::Load | Self::NoEffect => Stage::Type,
            Self::NotAdmitted | Self::WildClass | Self::TooLongToReview | Self::NotCovered => {
                Stage::Surface
            }
            Self::StepBudget
            | Self::Deadline
            | Self::Memory
            | Self::Syscall
            | Self::Runtime
            | Self::NotDisposition
            | Self::Evaluator
            | Self::Sandbox => Stage::Run,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A program refused at load: the file, the line (from 1), the rule and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{file}:{line}: refused by the {} check, rule {rule}: {detail}", rule.stage())]
pub struct LoadError {
    /// The program's file, as the agent names it (`agent/programs/todos.star`).
    pub file: String,
    /// The line the rule points at (1 when the whole file is at fault).
    pub line: u32,
    /// The rule broken.
    pub rule: Rule,
    /// What was wrong, and what would be right.
    pub detail: String,
}

impl LoadError {
    /// A refusal of `file` at `line` by `rule`.
    pub fn new(file: &str, line: u32, rule: Rule, detail: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            rule,
            detail: detail.into(),
        }
    }
}

/// A program stopped while it ran: the rule (a limit, or an error in its code), the line when
/// the interpreter knows it, and what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{file}{}: stopped, rule {rule}: {detail}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct RunError {
    /// The program's file.
    pub file: String,
    /// The line it was on, when known.
    pub line: Option<u32>,
    /// Why it stopped.
    pub rule: Rule,
    /// What happened.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_the_serde_names() {
        for rule in [
            Rule::FileName,
            Rule::NoLoad,
            Rule::FunctionAsValue,
            Rule::UndeclaredClass,
            Rule::NotCovered,
            Rule::StepBudget,
        ] {
            let json = serde_json::to_string(&rule).unwrap();
            assert_eq!(json, format!("\"{}\"", rule.name()));
        }
    }

    #[test]
    fn a_load_error_names_file_line_check_and_rule() {
        let e = LoadError::new("agent/programs/x.star", 3, Rule::NoLoad, "remove it");
        assert_eq!(
            e.to_string(),
            "agent/programs/x.star:3: refused by the seal check, rule no-load: remove it"
        );
    }
}
