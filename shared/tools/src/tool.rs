//! The contract every tool body implements, what it returns, and how it fails.

use l3m_core::effects::{EffectClass, ToolDecl};
use l3m_core::log::{EffectNote, Refusal};
use l3m_ring::effects::{EffectsError, Granted, MailError, OutletError, SpawnError, StageError};
use l3m_ring::files::FilesError;
use l3m_ring::git::GitError;
use l3m_ring::net::NetError;
use l3m_ring::shell::ShellError;
use serde_json::Value;

/// A tool the model may call. Its body reaches the world only through `fx`, which holds exactly
/// the classes [`Tool::decl`] names; it is object-safe so a table can hold any mix of tools.
pub trait Tool: Send + Sync {
    /// Name, footprint and claimed reversibility; the table computes the tier from it.
    fn decl(&self) -> ToolDecl;
    /// What the tool does, as the model is told.
    fn description(&self) -> &str;
    /// The JSON Schema of the tool's input, as the model is shown it.
    fn input_schema(&self) -> Value;
    /// What a call with `input` would change and where, for a review card. The default names
    /// the footprint's classes and their ceilings; wild tools should say more.
    fn effect(&self, input: &Value) -> String {
        let _ = input;
        let classes: Vec<String> = self
            .decl()
            .footprint
            .0
            .iter()
            .map(|c: &EffectClass| format!("{c} ({})", c.ceiling()))
            .collect();
        format!("uses {}", classes.join(", "))
    }
    /// Runs the tool on `input` with the granted effects.
    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError>;
}

/// What a tool call returns to the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutput {
    /// The result as text, the form every model provider accepts.
    pub text: String,
    /// Effects no undo entry covers, named by the tool that knows them (a push's remote and
    /// branch, a letter's address), so a rewind can say exactly what it did not take back.
    #[serde(default)]
    pub effects: Vec<EffectNote>,
}

impl ToolOutput {
    /// An output of `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            effects: Vec::new(),
        }
    }

    /// The same output, noting an effect of `class` on `target` that no rewind takes back.
    #[must_use]
    pub fn lasting(mut self, class: EffectClass, target: impl Into<String>) -> Self {
        self.effects.push(EffectNote {
            class,
            target: target.into(),
            undo: None,
        });
        self
    }
}

/// Why a tool call did not produce an output; the text goes back to the model.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The input does not fit the tool's schema.
    #[error("bad input at `{field}`: {reason}")]
    BadInput {
        /// The field at fault (`input` for the whole value).
        field: String,
        /// What is wrong with it, and what was expected.
        reason: String,
    },
    /// The file provider refused or failed the call; its text names the boundary.
    #[error("the file provider refused: {0}")]
    Files(#[from] FilesError),
    /// The git provider refused or failed the call; its text names the boundary.
    #[error("the git provider refused: {0}")]
    Git(#[from] GitError),
    /// The HTTP provider refused or failed the fetch; its text names the boundary.
    #[error("the net provider refused: {0}")]
    Net(#[from] NetError),
    /// The mail provider refused the letter, or hubd did.
    #[error("the mail provider refused: {0}")]
    Mail(#[from] MailError),
    /// The spawn provider refused the request, or hubd's spawn gate did.
    #[error("the spawn provider refused: {0}")]
    Spawn(#[from] SpawnError),
    /// hubd refused the vigil (its gate names why) or could not be reached.
    #[error("the vigil was not armed or cancelled: {0}")]
    Vigil(#[from] OutletError),
    /// The sandboxed shell refused or failed the run; its text names the boundary.
    #[error("the shell refused: {0}")]
    Shell(#[from] ShellError),
    /// A build or run was refused (by the ring, hubd, the builder or the runner) or could not
    /// reach its service; a stage that ran and failed is an output, not this.
    #[error("not carried out: {0}")]
    Stage(#[from] StageError),
    /// The tool's effects could not be granted, or it reached for a class it did not declare.
    #[error("effects not granted: {0}")]
    Effects(#[from] EffectsError),
    /// `edit_file`'s `old` text does not occur in the file.
    #[error("`old` does not occur in `{path}`; read the file and quote the text exactly")]
    NoMatch {
        /// The file.
        path: String,
    },
    /// `edit_file`'s `old` text occurs more than once, so the edit is ambiguous.
    #[error(
        "`old` occurs {count} times in `{path}`; include more surrounding text so it matches once"
    )]
    Ambiguous {
        /// The file.
        path: String,
        /// How many times it occurs (overlapping occurrences count).
        count: usize,
    },
    /// A sealed program stopped before it returned: a limit it hit, or an error in its code,
    /// by the named rule of its evaluation (`l3m_programs::Rule`).
    #[error("{detail}")]
    Program {
        /// The rule's name (`step-budget`, `deadline`, `memory`, `runtime`, `evaluator`, …).
        rule: String,
        /// What happened, with the program's file and line when known.
        detail: String,
        /// Whether a limit stopped it (refused by the `program` boundary) rather than its code.
        limit: bool,
    },
    /// The file is not UTF-8 text, which is all these tools read.
    #[error("`{path}` is not UTF-8 text ({len} bytes); this tool reads text only")]
    NotText {
        /// The file.
        path: String,
        /// Its size.
        len: usize,
    },
}

impl ToolError {
    /// The refusal as data — the refusing boundary and the axis it guards — when the call was
    /// refused rather than failed (a missing file and a failed push are failures; arguments that break the tool's schema
    /// are refused by `tool-arguments`).
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            ToolError::Files(e) => e.refusal(),
            ToolError::Git(e) => e.refusal(),
            ToolError::Net(e) => e.refusal(),
            ToolError::Mail(e) => e.refusal(),
            ToolError::Spawn(e) => e.refusal(),
            ToolError::Vigil(e) => e.refusal(),
            ToolError::Shell(e) => e.refusal(),
            ToolError::Stage(e) => e.refusal(),
            ToolError::Effects(e) => Some(e.refusal()),
            ToolError::Program { limit: true, .. } => Some(Refusal::new("program", None)),
            // Arguments that break the schema are a mistake the model can correct; core counts
            // them against the turn's corrections by this boundary.
            ToolError::BadInput { .. } => Some(Refusal::new("tool-arguments", None)),
            _ => None,
        }
    }
}

/// A declaration of `name` over `classes`, claiming `claims` (the table checks the claim).
pub(crate) fn declare(
    name: &str,
    classes: impl IntoIterator<Item = EffectClass>,
    claims: l3m_core::effects::Reversibility,
) -> ToolDecl {
    ToolDecl {
        name: name.to_owned(),
        footprint: l3m_core::effects::Footprint::of(classes),
        claims,
    }
}
