//! hubd's requests and responses: the typed messages a client (the CLI, a sequencer, the
//! postman) exchanges with the hub's gatekeeper.
//!
//! Every request but [`session::OpenSession`] carries a [`session::Capability`], minted by
//! hubd for one entity and one duty; hubd checks it, then the duty table, then the fine gates,
//! before it writes a ref. Names travel as text and are parsed by hubd, so a bad name is
//! answered with a typed `invalid` naming it rather than with a decoding failure.
//!
//! Commit ids travel as lowercase hex strings; an absent ref is `None`.
//!
//! # Layout
//! - [`session`]: opening a session with a credential's signature; the capability.
//! - [`credential`]: issuing, listing and revoking credentials (humans only).
//! - [`log`]: appending to and reading an agent's Log.
//! - [`undo`]: appending to and reading an agent's undo chain (what its tame edits replaced).
//! - [`authority`]: reading an agent's grant and budget; regranting it.
//! - [`tree`]: spawning, retiring, collecting and listing agents.
//! - [`mail`]: sending letters, reading an inbox, marking a letter read, staging airmail.
//! - [`lease`]: the session lock that makes one sequencer the only one running an agent.
//! - [`notify`]: the announcement published after every ref write.
//! - [`persona`]: publishing an upstream persona (humans only) and pulling it into a wearer.
//! - [`settings`]: reading the hub's settings; replacing them (humans only).
//! - [`build_voucher`]: hubd's word that a grant covers one build or run; the builder's policy.
//! - [`blessing`]: pinning a build target's inputs (humans only) and reading the pin.
//! - [`cards`]: raising (the agent's sequencer), answering (humans only) and reading review cards.
//! - [`pack`]: fetching an agent's branches and pushing commits back, as packs in chunks.
//! - [`vigils`]: arming, cancelling (the agent, an ancestor pinning, a human) and reading vigils.
//! - [`Op`]: each request's operation token, so clients and hubd agree on subjects.

pub mod authority;
pub mod blessing;
pub mod build_voucher;
pub mod cards;
pub mod credential;
pub mod lease;
pub mod log;
pub mod mail;
pub mod notify;
pub mod pack;
pub mod persona;
pub mod session;
pub mod settings;
pub mod tree;
pub mod undo;
pub mod vigils;

use crate::subjects::{Operation, Service, Subjects};

/// A request of an open session: it names its session by capability, and its envelope carries
/// the session's seal. Every hubd request but [`session::OpenSession`] is one.
pub trait InSession {
    /// The session it claims to belong to.
    fn capability(&self) -> &session::Capability;

    /// The same, for a client to set: to the session it seals the request with, or to a new
    /// session's when it asks again after hubd restarted.
    fn capability_mut(&mut self) -> &mut session::Capability;
}

macro_rules! in_session {
    ($($request:path),* $(,)?) => {
        $(impl InSession for $request {
            fn capability(&self) -> &session::Capability {
                &self.capability
            }

            fn capability_mut(&mut self) -> &mut session::Capability {
                &mut self.capability
            }
        })*
    };
}

in_session!(
    authority::ReadGrant,
    authority::Regrant,
    credential::IssueCredential,
    credential::RevokeCredential,
    credential::ListCredentials,
    lease::AcquireLease,
    lease::RenewLease,
    lease::ReleaseLease,
    log::AppendLog,
    log::ReadLog,
    undo::AppendUndo,
    undo::ReadUndo,
    mail::SendLetter,
    mail::ReadInbox,
    mail::MarkRead,
    mail::StageAirmail,
    mail::DeliverAirmail,
    mail::ReturnBounces,
    mail::ReadOutbox,
    mail::ReadCursor,
    mail::MoveCursor,
    persona::PublishPersona,
    persona::PullPersona,
    settings::ReadSettings,
    settings::UpdateSettings,
    blessing::Bless,
    blessing::ReadBlessing,
    session::Vouch,
    session::SpendVoucher,
    build_voucher::VouchBuild,
    tree::Spawn,
    tree::Retire,
    tree::Collect,
    tree::ListAgents,
    tree::ListTree,
    cards::AppendCard,
    cards::ReadCards,
    pack::FetchPack,
    pack::PushPack,
    vigils::ArmVigil,
    vigils::CancelVigil,
    vigils::ReadVigils,
);

/// The operations hubd serves, one subject each (`l3m.<hub>.hubd.<op>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`session::OpenSession`].
    OpenSession,
    /// [`log::AppendLog`].
    AppendLog,
    /// [`log::ReadLog`].
    ReadLog,
    /// [`authority::ReadGrant`].
    ReadGrant,
    /// [`tree::Spawn`].
    Spawn,
    /// [`tree::Retire`].
    Retire,
    /// [`tree::Collect`].
    Collect,
    /// [`tree::ListAgents`].
    ListAgents,
    /// [`tree::ListTree`].
    ListTree,
    /// [`mail::SendLetter`].
    SendLetter,
    /// [`mail::ReadInbox`].
    ReadInbox,
    /// [`mail::MarkRead`].
    MarkRead,
    /// [`lease::AcquireLease`].
    AcquireLease,
    /// [`lease::RenewLease`].
    RenewLease,
    /// [`lease::ReleaseLease`].
    ReleaseLease,
    /// [`authority::Regrant`].
    Regrant,
    /// [`mail::StageAirmail`].
    StageAirmail,
    /// [`persona::PublishPersona`].
    PublishPersona,
    /// [`persona::PullPersona`].
    PullPersona,
    /// [`settings::ReadSettings`].
    ReadSettings,
    /// [`settings::UpdateSettings`].
    UpdateSettings,
    /// [`credential::IssueCredential`].
    IssueCredential,
    /// [`credential::RevokeCredential`].
    RevokeCredential,
    /// [`credential::ListCredentials`].
    ListCredentials,
    /// [`session::Vouch`].
    Vouch,
    /// [`undo::AppendUndo`].
    AppendUndo,
    /// [`undo::ReadUndo`].
    ReadUndo,
    /// [`mail::DeliverAirmail`].
    DeliverAirmail,
    /// [`mail::ReturnBounces`].
    ReturnBounces,
    /// [`mail::ReadOutbox`].
    ReadOutbox,
    /// [`mail::ReadCursor`].
    ReadCursor,
    /// [`mail::MoveCursor`].
    MoveCursor,
    /// [`blessing::Bless`].
    Bless,
    /// [`blessing::ReadBlessing`].
    ReadBlessing,
    /// [`cards::AppendCard`].
    AppendCard,
    /// [`cards::ReadCards`].
    ReadCards,
    /// [`pack::FetchPack`].
    FetchPack,
    /// [`pack::PushPack`].
    PushPack,
    /// [`build_voucher::VouchBuild`].
    VouchBuild,
    /// [`build_voucher::ReadBuildPolicy`].
    ReadBuildPolicy,
    /// [`vigils::ArmVigil`].
    ArmVigil,
    /// [`vigils::CancelVigil`].
    CancelVigil,
    /// [`vigils::ReadVigils`].
    ReadVigils,
    /// [`session::SpendVoucher`].
    SpendVoucher,
}

impl Op {
    /// Every operation, in a fixed order.
    pub const ALL: [Op; 44] = [
        Op::OpenSession,
        Op::AppendLog,
        Op::ReadLog,
        Op::ReadGrant,
        Op::Spawn,
        Op::Retire,
        Op::Collect,
        Op::ListAgents,
        Op::ListTree,
        Op::SendLetter,
        Op::ReadInbox,
        Op::MarkRead,
        Op::AcquireLease,
        Op::RenewLease,
        Op::ReleaseLease,
        Op::Regrant,
        Op::StageAirmail,
        Op::PublishPersona,
        Op::PullPersona,
        Op::ReadSettings,
        Op::UpdateSettings,
        Op::IssueCredential,
        Op::RevokeCredential,
        Op::ListCredentials,
        Op::Vouch,
        Op::AppendUndo,
        Op::ReadUndo,
        Op::DeliverAirmail,
        Op::ReturnBounces,
        Op::ReadOutbox,
        Op::ReadCursor,
        Op::MoveCursor,
        Op::Bless,
        Op::ReadBlessing,
        Op::AppendCard,
        Op::ReadCards,
        Op::FetchPack,
        Op::PushPack,
        Op::VouchBuild,
        Op::ReadBuildPolicy,
        Op::ArmVigil,
        Op::CancelVigil,
        Op::ReadVigils,
        Op::SpendVoucher,
    ];

    /// The operation's subject token.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::OpenSession => "open-session",
            Op::AppendLog => "append-log",
            Op::ReadLog => "read-log",
            Op::ReadGrant => "read-grant",
            Op::Spawn => "spawn",
            Op::Retire => "retire",
            Op::Collect => "collect",
            Op::ListAgents => "list-agents",
            Op::ListTree => "list-tree",
            Op::SendLetter => "send-letter",
            Op::ReadInbox => "read-inbox",
            Op::MarkRead => "mark-read",
            Op::AcquireLease => "acquire-lease",
            Op::RenewLease => "renew-lease",
            Op::ReleaseLease => "release-lease",
            Op::Regrant => "regrant",
            Op::StageAirmail => "stage-airmail",
            Op::PublishPersona => "publish-persona",
            Op::PullPersona => "pull-persona",
            Op::ReadSettings => "read-settings",
            Op::UpdateSettings => "update-settings",
            Op::IssueCredential => "issue-credential",
            Op::RevokeCredential => "revoke-credential",
            Op::ListCredentials => "list-credentials",
            Op::Vouch => "vouch",
            Op::AppendUndo => "append-undo",
            Op::ReadUndo => "read-undo",
            Op::DeliverAirmail => "deliver-airmail",
            Op::ReturnBounces => "return-bounces",
            Op::ReadOutbox => "read-outbox",
            Op::ReadCursor => "read-cursor",
            Op::MoveCursor => "move-cursor",
            Op::Bless => "bless",
            Op::ReadBlessing => "read-blessing",
            Op::AppendCard => "append-card",
            Op::ReadCards => "read-cards",
            Op::FetchPack => "fetch-pack",
            Op::PushPack => "push-pack",
            Op::VouchBuild => "vouch-build",
            Op::ReadBuildPolicy => "read-build-policy",
            Op::ArmVigil => "arm-vigil",
            Op::CancelVigil => "cancel-vigil",
            Op::ReadVigils => "read-vigils",
            Op::SpendVoucher => "spend-voucher",
        }
    }

    /// The subject this operation is requested on, for the hub of `subjects`.
    pub fn subject(self, subjects: &Subjects) -> String {
        let token = self.as_str();
        match Operation::parse(token) {
            Ok(op) => subjects.request(Service::Hubd, &op),
            // Every token above is a valid operation (checked by a test); this arm only keeps
            // the function total.
            Err(_) => format!("{}hubd.{token}", subjects.prefix()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_token_is_a_valid_operation() {
        for op in Op::ALL {
            assert!(Operation::parse(op.as_str()).is_ok(), "{}", op.as_str());
        }
    }
}
