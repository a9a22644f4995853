//! The postman's status: each office's link as the serving postman sees it, for `l3m office
//! ls` and `l3m doctor`.
//!
//! The postman serves `Subjects::request(Service::Postman, "status")`. Only NATS users allowed
//! to publish there (the `cli` user of `deploy/nats.conf`) can ask; the answer names offices,
//! their addresses, link states and counts, never a letter.
//!
//! # Format
//! A [`StatusRequest`] (`postman.status`): `{ probe: bool }` → a [`PostmanStatus`]
//! (`postman.status-reply`): `{ me, fingerprint, offices: [{ name, addr, link, since_ms,
//! last_delivery_ms, delivered, backlog, error, probe }] }`. With `probe`, the postman dials
//! every office now (handshake and hello) and reports each outcome in `probe`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::HubClient;
use crate::envelope::{Limits, Message};
use crate::error::WireError;
use crate::reply::RemoteError;
use crate::subjects::{Operation, Service};

/// The status op's subject token.
pub const OP_STATUS: &str = "status";

/// Asks the postman how its links are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRequest {
    /// Dial every office now and report the outcome (slower: up to the hello timeout).
    pub probe: bool,
}

impl Message for StatusRequest {
    const KIND: &'static str = "postman.status";
}

/// The state of a link to an office.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkState {
    /// No link was tried yet (nothing to carry since the postman started).
    Idle,
    /// The last exchange with the office succeeded.
    Up,
    /// The last attempt failed (see the error).
    Down,
}

/// One office as the postman sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfficeStatus {
    /// The office's name in this hub's settings.
    pub name: String,
    /// Where its postman listens.
    pub addr: String,
    /// The link's state.
    pub link: LinkState,
    /// Since when it is in that state, in milliseconds since the Unix epoch.
    pub since_ms: Option<u64>,
    /// When the office last held a batch from here.
    pub last_delivery_ms: Option<u64>,
    /// Lines (letters and receipts) the office took from here since the postman started.
    pub delivered: u64,
    /// Lines staged for the office at the last round and not yet held by it.
    pub backlog: u64,
    /// The last failure, if the link is down.
    pub error: Option<String>,
    /// With a probe: what dialling the office now came to.
    pub probe: Option<Probe>,
}

/// What dialling an office came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Probe {
    /// The handshake passed both pins and the office welcomed the hello.
    Welcomed,
    /// It did not, and why (unreachable, a certificate that does not match its pin, ...).
    Failed {
        /// Why, for the operator.
        reason: String,
    },
}

/// The postman's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostmanStatus {
    /// The name this hub gives itself in hellos.
    pub me: String,
    /// This hub's certificate fingerprint.
    pub fingerprint: String,
    /// Each office the settings pinned when the postman started.
    pub offices: Vec<OfficeStatus>,
}

impl Message for PostmanStatus {
    const KIND: &'static str = "postman.status-reply";
}

/// Asks the postman of `client`'s hub for its status. `Err` on the outer level: nobody
/// answered (no postman runs) or the wire failed.
pub async fn status(
    client: &HubClient,
    probe: bool,
    timeout: Duration,
) -> Result<Result<PostmanStatus, RemoteError>, WireError> {
    let op = Operation::parse(OP_STATUS)?;
    let subject = client.subjects().request(Service::Postman, &op);
    crate::typed::call(
        client.bus().as_ref(),
        &subject,
        &StatusRequest { probe },
        timeout,
        &Limits::default(),
    )
    .await
}
