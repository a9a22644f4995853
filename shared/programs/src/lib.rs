//! `l3m-programs`: sealed programs, the tools an agent writes for itself in Starlark.
//!
//! A file `agent/programs/<name>.star` on the agent's persona becomes the tool
//! `program_<name>` at its next boot if it passes three checks, each refusal naming the file,
//! the line and the rule ([`LoadError`]):
//! - the **seal** ([`seal`]): one module, no `load`, no `while`, no `lambda`, no nested `def`, no
//!   recursion, nothing at the top level but literal assignments and `def`s; a literal
//!   `FOOTPRINT`, `DESCRIPTION` and `INPUT` schema, and `def main(input)`;
//! - the **type** ([`types`], then the load against [`globals::for_footprint`]): every name
//!   resolves against the kept builtins and exactly the functions of the declared classes;
//! - the **surface** ([`decl::surface`]): every class is admitted for programs and the agent's
//!   tokens cover the footprint; otherwise the program is absent, like any uncovered tool.
//!
//! Programs never run inside the sequencer. The evaluator (`l3m-program`, [`child`]) is a
//! separate process, started in a sandbox ([`sandbox`]: bubblewrap, an empty read-only root, no
//! network, no other process), that limits itself ([`limits`]: address space, CPU time, no
//! files, no processes), filters its own system calls (`seccomp`: its pipes, memory never
//! executable, its clocks, nothing else) and counts statements; it reaches effects only by asking its parent over a pipe
//! ([`protocol`]). The parent ([`host::ProgramTool`], an ordinary [`l3m_tools::Tool`]) answers
//! each call through the same ring providers as the built-in tools, with exactly the classes of
//! the program's footprint granted, and kills the child at its deadline. One evaluator serves a
//! program's calls one after another, its module loaded once and frozen, each call in a heap
//! of its own; a call that does not end cleanly leaves none behind, and the next gets a fresh
//! one. The program never holds a token or the grant, and has no function to call a model, run a shell, build, or
//! wait on a vigil. With the `spawn` class it drives children ([`menu`], `drive`): each is
//! spawned driven through hubd's spawn gate (so within the agent's grant), its answer reaches
//! the program only as a word of the program's fixed menu, and the parent retires it when the
//! call ends, however it ends.
//!
//! A plugin, a folder `agent/plugins/<plugin>/` of such programs ([`plugin`]), is admitted
//! all-or-nothing: every program becomes the tool `program_<plugin>-<name>` when each passes
//! the three checks, and none does when one fails; the refusal names the plugin, the failing
//! file, its line and its rule.
//!
//! An agent's hook, `agent/hooks.star` ([`hooks`]), is checked the same way with no effect class
//! at all and runs in the same evaluator, over batches of events; it only proposes a
//! disposition, which the caller admits with `l3m_core::hooks::decide`.
//!
//! **Must never**: evaluate Starlark in the calling process outside the evaluator binary and
//! this crate's tests; hand the evaluator a token, a path to the hub, or the grant.
//!
//! # Layout
//! - [`rule`]: [`Rule`], [`Stage`], [`LoadError`], [`RunError`].
//! - [`vocabulary`]: the admitted classes, their functions, the kept builtins.
//! - [`decl`]: [`ProgramDecl`], file names, the surface check.
//! - [`types`]: the name check over what the seal gathered.
//! - [`input`]: a program's `INPUT` schema: the part of JSON Schema it may use, enforced on
//!   every call's input.
//! - [`plugin`]: a plugin folder: what it may hold, and its all-or-nothing admission.
//! - [`protocol`]: the JSON lines between parent and evaluator.
//! - [`process`]: the evaluator as a process: [`process::Evaluator`], one request, one answer.
//! - [`host`]: the parent: [`host::check`], [`host::ProgramTool`].
//! - `warm`: a serving evaluator, kept by a [`host::ProgramTool`] between calls.
//! - [`hooks`]: an agent's `agent/hooks.star`: its check, its batch of decisions, the event the
//!   hook sees and the disposition it returns.
//! - [`limits`]: the OS limits the evaluator sets on itself.
//! - `seccomp` (with `eval`): the system-call allowlist the evaluator confines itself to.
//! - [`sandbox`]: bubblewrap around the evaluator: no files, no network, no other processes.
//! - [`menu`]: the fixed menu a driven child's answer is read against (the quarantined reader).
//! - `drive`: the children one program call drives, retired when the call returns.
//! - with the `eval` feature: [`seal`], [`globals`], [`evaluate`], [`child`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "host")]
mod answer;
#[cfg(feature = "eval")]
pub mod child;
pub mod decl;
#[cfg(feature = "host")]
mod drive;
#[cfg(feature = "eval")]
pub mod evaluate;
#[cfg(feature = "eval")]
pub mod globals;
pub mod hooks;
#[cfg(feature = "host")]
pub mod host;
pub mod input;
pub mod limits;
pub mod menu;
pub mod plugin;
pub mod process;
pub mod protocol;
pub mod rule;
pub mod sandbox;
#[cfg(feature = "eval")]
pub mod seal;
#[cfg(feature = "eval")]
pub mod seccomp;
pub mod types;
pub mod vocabulary;
#[cfg(feature = "host")]
mod warm;

pub use decl::ProgramDecl;
pub use rule::{LoadError, Rule, RunError, Stage};
