//! What can go wrong serving a request, and the typed reply each failure becomes.

use l3m_core::credential::CredentialError;
use l3m_core::duty::DutyError;
use l3m_core::ledger::LedgerError;
use l3m_core::names::NameError;
use l3m_wire::reply::{ErrorCode, RemoteError};

use super::lease::LeaseError;
use crate::capability::Closed;
use crate::store::{StoreError, Tip};

/// Why a request was not carried out. Every variant maps to one [`ErrorCode`].
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request's capability was never minted by this hubd (forged, or from before a
    /// restart).
    #[error(
        "the capability is not one this hubd minted (sessions end when hubd restarts); open a \
         new session"
    )]
    UnknownCapability,
    /// The request's capability was revoked: its agent retired or was collected, or its
    /// credential was revoked.
    #[error(
        "the capability was revoked: its agent retired or was collected (a name spawned again is \
         a new agent, so open a new session for it), or its credential was revoked"
    )]
    Revoked,
    /// The open request's signature is not the credential's over what it asks.
    #[error(
        "the signature does not prove possession of credential {credential} for this hub and \
         duty; use the credential's own key file"
    )]
    BadSignature {
        /// The credential named.
        credential: String,
    },
    /// The credential may not open this session.
    #[error(transparent)]
    Credential(#[from] CredentialError),
    /// The request does not come from the session's holder.
    #[error("{0}")]
    Unsealed(&'static str),
    /// The duty table refused a ref write.
    #[error(transparent)]
    Duty(#[from] DutyError),
    /// The session's duty may not make this request at all.
    #[error("{duty} may not {action}: {reason}")]
    NotAllowed {
        /// The session's duty, as text.
        duty: String,
        /// What it asked.
        action: String,
        /// Why not, and who may.
        reason: &'static str,
    },
    /// A build or run voucher was asked for what the agent's grant does not cover.
    #[error(transparent)]
    Uncovered(#[from] l3m_core::build::Uncovered),
    /// A name in the request does not parse.
    #[error("{what} {input:?} is not a valid name: {error}")]
    BadName {
        /// Which name.
        what: &'static str,
        /// The text given.
        input: String,
        /// The rule it broke.
        #[source]
        error: NameError,
    },
    /// The request names an agent, human or service the ledger does not hold (or not live).
    #[error("{what} {name} is not known to the ledger{detail}")]
    NotFound {
        /// What kind of thing.
        what: &'static str,
        /// Its name.
        name: String,
        /// More, e.g. its life if it is not live.
        detail: String,
    },
    /// A tip in the request is not a commit id.
    #[error("tip {input:?} is not a hex commit id: {reason}")]
    BadTip {
        /// The text given.
        input: String,
        /// Why.
        reason: String,
    },
    /// The request's content is invalid (a record, a range, an address).
    #[error("{0}")]
    Invalid(String),
    /// A compare-and-swap lost.
    #[error("{refname} is not at {expected}: its actual tip is {actual}; re-read and retry")]
    Conflict {
        /// The ref.
        refname: String,
        /// The tip the caller expected.
        expected: Tip,
        /// The tip it is at.
        actual: Tip,
    },
    /// A push would move a branch to a commit that does not descend from its tip.
    #[error(
        "{refname} is at {old}, and {new} does not descend from it; a push only fast-forwards \
         (fetch, rebase or merge onto {old}, and push again)"
    )]
    NotFastForward {
        /// The branch.
        refname: String,
        /// Its tip.
        old: String,
        /// The commit asked for.
        new: String,
    },
    /// A push would move a branch back to a commit that is not on its history, or brought
    /// objects with a move back (which needs none).
    #[error(
        "{refname} is at {old}, and {new} is not one of its ancestors; a move back (a rewind) \
         only goes back along the branch's own history, with an empty pack"
    )]
    NotAncestor {
        /// The branch.
        refname: String,
        /// Its tip.
        old: String,
        /// The commit asked for.
        new: String,
    },
    /// The branches moved between two chunks of one fetch.
    #[error("the branches of {agent} moved while their pack was fetched; fetch again from byte 0")]
    PackChanged {
        /// Whose branches.
        agent: String,
    },
    /// A persona pull would overwrite a wearer's edit of a file upstream also changed.
    #[error(
        "{agent} changed {file} and so did persona {persona} upstream; publish the wearer's \
         version first (l3m persona publish {persona} --from {agent}) or reconcile by hand"
    )]
    PersonaConflict {
        /// The wearer.
        agent: String,
        /// The persona.
        persona: String,
        /// The file both sides changed.
        file: String,
    },
    /// A ledger gate refused the row (a spawn that widens, a retire out of order, …).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A regrant would leave a live child of the agent wider than the agent's new grant.
    #[error(
        "regranting {agent} refused: its live child {child} would no longer lie within it \
         ({widening}); narrow or retire {child} first"
    )]
    ChildOutside {
        /// The agent regranted.
        agent: l3m_core::names::AgentName,
        /// The child left outside.
        child: l3m_core::names::AgentName,
        /// Where the child's grant exceeds the new bound.
        widening: l3m_core::grant::Widening,
    },
    /// A fork's grant is wider than its source's: a fork never gains authority over its source.
    #[error("a fork may not be wider than its source {source_agent}: {widening}")]
    ForkWider {
        /// The agent forked from.
        source_agent: l3m_core::names::AgentName,
        /// Where the fork's grant exceeds the source's.
        widening: l3m_core::grant::Widening,
    },
    /// A persona the spawn asked for is not published.
    #[error(
        "persona {persona} is not published ({refname} does not exist); publish it first or \
         spawn without a persona"
    )]
    UnknownPersona {
        /// The persona.
        persona: String,
        /// The ref looked for.
        refname: String,
    },
    /// The store failed on a good request.
    #[error("storage failed: {0}")]
    Store(StoreError),
    /// A file outside the store (an ACR directory) could not be made or removed.
    #[error("{action} {path} failed: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A session lease was not granted, renewed or released.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// A lease's grant or end could not be made durable; it was not granted or ended.
    #[error(transparent)]
    LeaseJournal(super::lease::journal::JournalError),
    /// The open request's X25519 key is of low order (all zero, say): a third party could
    /// derive the session's key too.
    #[error(
        "the client's X25519 key is of low order, so the session's key would not be secret; \
         send a fresh key made from the OS's random source"
    )]
    WeakKey,
    /// A session asked for more vouchers than it may hold at once.
    #[error(transparent)]
    TooManyVouchers(#[from] crate::vouchers::TooManyVouchers),
    /// Something internal failed (randomness, a blocking task, an encoding).
    #[error("internal failure: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Stale {
                refname,
                expected,
                actual,
            } => ServiceError::Conflict {
                refname,
                expected,
                actual,
            },
            StoreError::PackRefused { .. } | StoreError::PackTooLarge { .. } => {
                ServiceError::Invalid(error.to_string())
            }
            other => ServiceError::Store(other),
        }
    }
}

impl ServiceError {
    /// The stable code a client branches on.
    pub fn code(&self) -> ErrorCode {
        match self {
            ServiceError::UnknownCapability => ErrorCode::SessionEnded,
            ServiceError::BadSignature { .. }
            | ServiceError::Unsealed(_)
            | ServiceError::Duty(_)
            | ServiceError::NotAllowed { .. }
            | ServiceError::UnknownPersona { .. }
            | ServiceError::ChildOutside { .. }
            | ServiceError::ForkWider { .. }
            | ServiceError::NotFastForward { .. }
            | ServiceError::NotAncestor { .. }
            | ServiceError::WeakKey
            | ServiceError::TooManyVouchers(_)
            | ServiceError::Uncovered(_) => ErrorCode::Refused,
            ServiceError::Ledger(LedgerError::UnknownAgent { .. }) => ErrorCode::NotFound,
            ServiceError::Ledger(_) => ErrorCode::Refused,
            ServiceError::BadName { .. }
            | ServiceError::BadTip { .. }
            | ServiceError::Invalid(_) => ErrorCode::Invalid,
            ServiceError::NotFound { .. } => ErrorCode::NotFound,
            ServiceError::Revoked
            | ServiceError::Credential(
                CredentialError::Revoked { .. } | CredentialError::Expired { .. },
            ) => ErrorCode::Revoked,
            ServiceError::Credential(
                CredentialError::BadId { .. } | CredentialError::BadKey { .. },
            ) => ErrorCode::Invalid,
            ServiceError::Credential(_) => ErrorCode::Refused,
            ServiceError::Conflict { .. }
            | ServiceError::PersonaConflict { .. }
            | ServiceError::PackChanged { .. } => ErrorCode::Conflict,
            ServiceError::Lease(LeaseError::BadTtl { .. } | LeaseError::HolderTooLong { .. }) => {
                ErrorCode::Invalid
            }
            ServiceError::Lease(_) => ErrorCode::Conflict,
            ServiceError::Store(_)
            | ServiceError::Io { .. }
            | ServiceError::LeaseJournal(_)
            | ServiceError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The typed reply for this failure, with the grant axis it refused on as data.
    pub fn to_remote(&self) -> RemoteError {
        RemoteError::new(self.code(), self.to_string()).on_axis(self.axis())
    }

    /// The grant axis a refusal was about: a spawn's gate, a regrant leaving a child outside,
    /// a fork wider than its source.
    pub fn axis(&self) -> Option<l3m_core::axis::Axis> {
        match self {
            ServiceError::Ledger(LedgerError::Spawn { refusal, .. }) => refusal.axis(),
            ServiceError::ChildOutside { widening, .. } => Some(widening.axis),
            ServiceError::ForkWider { widening, .. } => Some(widening.axis),
            ServiceError::Uncovered(l3m_core::build::Uncovered::Axis { axis, .. }) => Some(*axis),
            _ => None,
        }
    }
}

impl From<Closed> for ServiceError {
    fn from(closed: Closed) -> Self {
        match closed {
            Closed::Unknown => ServiceError::UnknownCapability,
            Closed::Revoked => ServiceError::Revoked,
            Closed::Expired => ServiceError::Unsealed(
                "the session's credential expired; ask a human for a new one (l3m credential issue)",
            ),
            Closed::Unsealed => ServiceError::Unsealed(
                "the request carries no seal; every request of a session is sealed with its key",
            ),
            Closed::BadSeal => ServiceError::Unsealed(
                "the request's seal was not made with its session's key over this request",
            ),
            Closed::Replayed => ServiceError::Unsealed(
                "the request's number was used before in its session (a replay) or is too old",
            ),
            Closed::OtherInbox => ServiceError::Unsealed(
                "the answer would go to another inbox than the one the session was opened from",
            ),
        }
    }
}
