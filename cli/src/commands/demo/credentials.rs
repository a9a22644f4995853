//! The demo's credentials step: a host credential reaches exactly its subtree, and a revoke
//! ends it and its sessions at once.

use l3m_core::credential::Scope;
use l3m_core::duty::Duty;
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::credential::KeyFile;
use l3m_wire::reply::ErrorCode;

use super::runtime;
use crate::error::CliError;
use crate::render::time::now_ms;

/// What the step saw: its checks, and lines for the report.
pub struct Seen {
    /// Each check and whether it held.
    pub checks: Vec<(&'static str, bool)>,
    /// What to print.
    pub text: String,
}

/// As `me` (a human), issues a host credential for `subtree`, opens a sequencer session for
/// `inside` and tries the whole hub with it, then revokes it and tries the open session again.
pub async fn step(
    me: &HubClient,
    subtree: &AgentName,
    inside: &AgentName,
) -> Result<Seen, CliError> {
    let scope = Scope::Host {
        subtree: Some(subtree.clone()),
    };
    let key = KeyFile::generate(KeyFile::random_id().map_err(runtime)?, scope).map_err(runtime)?;
    let issued = me
        .issue_credential(&key, now_ms() + 600_000, "the demo's second host")
        .await?;
    let open = |duty| HubClient::open(me.bus().clone(), me.subjects().hub().clone(), &key, duty);
    let session = open(Duty::Sequencer {
        agent: inside.clone(),
    })
    .await;
    let whole = open(Duty::Host { subtree: None }).await;
    let refused_whole = whole
        .as_ref()
        .err()
        .and_then(|e| e.code())
        .is_some_and(|code| code == ErrorCode::Refused);
    let revoked = me.revoke_credential(issued.id.as_str()).await?;
    let after = match &session {
        Ok(session) => session
            .read_grant(inside)
            .await
            .err()
            .and_then(|e| e.code()),
        Err(_) => None,
    };
    let text = format!(
        "credential {} ({}): opened {inside}'s sequencer session: {}; the whole hub: {}; \
         revoked, ending {} session(s); its session then: {}\n",
        issued.id,
        issued.scope,
        if session.is_ok() { "yes" } else { "no" },
        if refused_whole {
            "refused"
        } else {
            "NOT refused"
        },
        revoked.sessions,
        after.map_or("still served".to_owned(), |code| format!("{code:?}")),
    );
    Ok(Seen {
        checks: vec![
            (
                "a host credential for lead/ opened its worker's session and not the whole hub",
                session.is_ok() && refused_whole,
            ),
            (
                "revoking the credential ended its open session at once",
                after == Some(ErrorCode::Revoked),
            ),
        ],
        text,
    })
}
