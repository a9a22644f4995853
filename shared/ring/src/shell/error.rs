//! Why the sandboxed shell refused or failed a run; each refusal names the boundary that stopped it.

use l3m_core::axis::Axis;
use l3m_core::log::Refusal;

use crate::files::FilesError;

/// A run that did not happen. Every refusal is decided before any process starts.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The grant boundary: the wild token does not allow the `shell` class.
    #[error("refused by the grant boundary: the wild token allows {held:?}, not `shell`")]
    NotGranted {
        /// The classes the token allows.
        held: Vec<String>,
    },
    /// The program boundary: programs are named, never given as a path.
    #[error("refused by the program boundary: `{program}` is a path; name one of {listed:?}")]
    ProgramIsPath {
        /// The program as given.
        program: String,
        /// The programs that may run.
        listed: Vec<&'static str>,
    },
    /// The program boundary: only the fixed list of programs runs.
    #[error("refused by the program boundary: `{program}` is not one of {listed:?}")]
    ProgramNotListed {
        /// The program as given.
        program: String,
        /// The programs that may run.
        listed: Vec<&'static str>,
    },
    /// A listed program is not installed in any of the system directories.
    #[error("`{program}` is listed but not installed in {searched:?}")]
    ProgramMissing {
        /// The program.
        program: String,
        /// Where it was looked for.
        searched: Vec<&'static str>,
    },
    /// The working directory is not a real directory the files token can read.
    #[error("refused by the cwd boundary: `{cwd}`: {source}")]
    Cwd {
        /// The cwd as given.
        cwd: String,
        /// Why the files provider refused it.
        source: FilesError,
    },
    /// A write root is not a real directory (missing, or reached through a symlink), so it is
    /// not bound into the sandbox.
    #[error(
        "refused by the write-root boundary: root `{root}`: {source}; create it with files::mkdir"
    )]
    WriteRoot {
        /// The root.
        root: String,
        /// Why the files provider refused it.
        source: FilesError,
    },
    /// The sandbox boundary: bubblewrap is missing or cannot create its namespaces here, and
    /// nothing ever runs unsandboxed.
    #[error("refused by the sandbox boundary: {reason}; fix: {fix}")]
    SandboxUnavailable {
        /// What failed.
        reason: String,
        /// How to make the sandbox work.
        fix: &'static str,
    },
    /// The sandbox could not be started or waited for.
    #[error("running the sandbox failed: {source}")]
    Process {
        /// The OS error.
        source: std::io::Error,
    },
}

impl ShellError {
    /// The boundary that refused and the axis it guards, when this is a refusal (not a program
    /// that failed).
    pub fn refusal(&self) -> Option<Refusal> {
        let (boundary, axis) = match self {
            ShellError::NotGranted { .. } => ("grant", Some(Axis::Wild)),
            ShellError::ProgramIsPath { .. } | ShellError::ProgramNotListed { .. } => {
                ("program", Some(Axis::Wild))
            }
            ShellError::Cwd { .. } => ("cwd", Some(Axis::Files)),
            ShellError::WriteRoot { .. } => ("write-root", Some(Axis::Files)),
            ShellError::SandboxUnavailable { .. } => ("sandbox", None),
            _ => return None,
        };
        Some(Refusal::new(boundary, axis))
    }
}
