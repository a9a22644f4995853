//! [`CliError`]: every way a command fails, the exit code it maps to, and what to do next.
//!
//! Exit codes are part of the CLI's interface (docs/cli.md): 0 ok, 1 runtime or internal
//! error, 2 usage error (clap's own), 3 not found (an unknown agent, hub or persona), 4 refused
//! by hubd (authority), 5 the stack is not running.

use std::path::PathBuf;

use l3m_wire::client::ClientError;
use l3m_wire::reply::ErrorCode;

/// The process exit codes the CLI uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A runtime or internal error.
    Runtime = 1,
    /// Bad arguments (clap exits with this code itself).
    Usage = 2,
    /// The agent, hub or persona named does not exist.
    NotFound = 3,
    /// hubd refused the request on authority grounds.
    Refused = 4,
    /// The stack is not running.
    StackDown = 5,
}

/// Why a command failed. Each message ends with what to do next where there is something to do.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The human's document does not exist yet.
    #[error("no l3m.toml at {path}: run `l3m init`")]
    NoDocument {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The human's document does not parse or holds a bad value.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The `--hub` named is not in the document.
    #[error(
        "no hub named `{name}` in {document}{known}: run `l3m init --hub {name}` or pick one with --hub"
    )]
    UnknownHub {
        /// The name asked for.
        name: String,
        /// The document.
        document: PathBuf,
        /// The hubs it lists, rendered.
        known: String,
    },
    /// The hub's folder is missing or is not a hub.
    #[error("no hub at {root}: run `l3m init`")]
    NoHub {
        /// The folder the document names.
        root: PathBuf,
    },
    /// The stack is not up.
    #[error("the stack is not up ({why}): run `l3m up`")]
    StackDown {
        /// What was found instead.
        why: String,
    },
    /// hubd says the thing named does not exist.
    #[error("{message}")]
    NotFound {
        /// hubd's or the CLI's words.
        message: String,
    },
    /// hubd refused on authority grounds.
    #[error("refused: {message}")]
    Refused {
        /// hubd's words, naming the axis or duty.
        message: String,
    },
    /// Bad input the CLI caught itself (a bad name, a bad grant flag).
    #[error("{message}")]
    Usage {
        /// What was wrong and how to fix it.
        message: String,
    },
    /// A file could not be read or written.
    #[error("could not {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Anything else that went wrong at run time.
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    /// The exit code this error maps to.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::UnknownHub { .. } | CliError::NoHub { .. } | CliError::NotFound { .. } => {
                Exit::NotFound
            }
            CliError::NoDocument { .. } => Exit::NotFound,
            CliError::Refused { .. } => Exit::Refused,
            CliError::StackDown { .. } => Exit::StackDown,
            CliError::Usage { .. } => Exit::Usage,
            CliError::Config(_) | CliError::Io { .. } | CliError::Runtime(_) => Exit::Runtime,
        }
    }

    /// A usage error with `message`.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage {
            message: message.into(),
        }
    }

    /// An IO error on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> CliError {
        CliError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl From<ClientError> for CliError {
    /// hubd's refusals keep their meaning: not-found is 3, refused, revoked or conflict is 4, invalid is 2, a bus
    /// with no hubd answering is the stack being down.
    fn from(error: ClientError) -> CliError {
        match &error {
            ClientError::Refused { error: remote, .. } => match remote.code {
                ErrorCode::NotFound => CliError::NotFound {
                    message: remote.message.clone(),
                },
                ErrorCode::Refused
                | ErrorCode::Conflict
                | ErrorCode::Revoked
                | ErrorCode::SessionEnded => CliError::Refused {
                    message: remote.message.clone(),
                },
                ErrorCode::Invalid => CliError::Usage {
                    message: remote.message.clone(),
                },
                _ => CliError::Runtime(error.to_string()),
            },
            ClientError::Wire { subject, source } => CliError::StackDown {
                why: format!("no answer on {subject}: {source}"),
            },
            _ => CliError::Runtime(error.to_string()),
        }
    }
}

#[cfg(feature = "embedded")]
impl From<sequencer::SequencerError> for CliError {
    /// A lease held by a running sequencer is a refusal (4); hubd's own answers keep their
    /// meaning; the rest is a runtime error.
    fn from(error: sequencer::SequencerError) -> CliError {
        match error {
            sequencer::SequencerError::Hub(client) => client.into(),
            held @ sequencer::SequencerError::LeaseHeld { .. } => CliError::Refused {
                message: held.to_string(),
            },
            refused @ sequencer::SequencerError::Restore(_) => CliError::Refused {
                message: refused.to_string(),
            },
            other => CliError::Runtime(other.to_string()),
        }
    }
}
