//! Who may control this sequencer: only the requester of a voucher hubd signed for this agent,
//! this op and these exact arguments, within its time, once — once as hubd counts, not as this
//! process remembers.
//!
//! The control subjects can be published on by more parties than may control the agent (any
//! process allowed `l3m.<hub>.sequencer.>` on the bus), and a voucher travels in clear on its
//! requester's reply inbox. So a control request carries hubd's voucher ([`Vouched`]): hubd
//! checked the caller's session (a human, or a strict ancestor's sequencer) and signed, with the
//! key this sequencer learnt when it opened its own session, the agent, the op and the digest
//! of the whole request ([`ControlRequest::digest`]); the requester adds its session's proof.
//! This process checks what it can alone ([`check`]: hubd's signature, the agent and op, the
//! time, the arguments), then asks hubd to spend the voucher ([`Vouchers::spend`]): hubd takes
//! each voucher once across every process and restart, and only from its requester.

use l3m_wire::client::HubClient;
use l3m_wire::control::ControlRequest;
use l3m_wire::hubd::session::{SpendOutcome, Vouched};

/// Why a control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unvouched {
    /// hubd did not sign it (or not this hubd process).
    #[error("the voucher is not signed by this hub's hubd; ask hubd for one (hubd.vouch)")]
    Forged,
    /// It is for another agent or op.
    #[error("the voucher is for `{action}` to {agent}, not for this request")]
    Elsewhere {
        /// The agent it names.
        agent: String,
        /// The op it names.
        action: String,
    },
    /// It is for the same op with other arguments.
    #[error("the voucher was issued for another request (other arguments), not for this one")]
    OtherArguments,
    /// Its time passed.
    #[error("the voucher expired; ask hubd for a fresh one")]
    Expired,
    /// hubd would not spend it (used before, anywhere; not presented by its requester; from
    /// before hubd restarted).
    #[error("{0}")]
    NotSpent(SpendOutcome),
    /// hubd could not be asked.
    #[error("hubd could not spend the voucher: {0}")]
    Hub(String),
}

/// Checks `vouched` for `request` to `agent` at `now_ms` against hubd's voucher key `key`,
/// without asking anyone: signed by hubd, for this agent and op, these arguments, unexpired.
pub fn check(
    key: &[u8; 32],
    vouched: &Vouched,
    agent: &str,
    request: &ControlRequest,
    now_ms: u64,
) -> Result<[u8; 32], Unvouched> {
    if !vouched.signed_by(key) {
        return Err(Unvouched::Forged);
    }
    let voucher = &vouched.voucher;
    if voucher.agent != agent || voucher.action != request.op() {
        return Err(Unvouched::Elsewhere {
            agent: voucher.agent.clone(),
            action: voucher.action.clone(),
        });
    }
    if now_ms >= voucher.expires_ms {
        return Err(Unvouched::Expired);
    }
    let digest = request
        .digest()
        .map_err(|e| Unvouched::Hub(e.to_string()))?;
    if digest != voucher.digest {
        return Err(Unvouched::OtherArguments);
    }
    Ok(digest)
}

/// The vouchers this sequencer (or host) takes: checked here, spent by hubd through its own
/// session.
#[derive(Debug, Clone)]
pub struct Vouchers {
    client: HubClient,
}

impl Vouchers {
    /// Takes vouchers signed with the key of `client`'s hubd, spending them through `client`'s
    /// session (the agent's sequencer's, or the host's).
    pub fn new(client: HubClient) -> Vouchers {
        Vouchers { client }
    }

    /// [`check`] against the current hubd's key.
    pub fn check(
        &self,
        vouched: &Vouched,
        agent: &str,
        request: &ControlRequest,
        now_ms: u64,
    ) -> Result<[u8; 32], Unvouched> {
        check(&self.client.voucher_key(), vouched, agent, request, now_ms)
    }

    /// Asks hubd to spend `vouched` for the request whose digest is `digest`; only
    /// [`SpendOutcome::Taken`] admits the request.
    pub async fn spend(&self, vouched: &Vouched, digest: [u8; 32]) -> Result<(), Unvouched> {
        match self.client.spend_voucher(vouched, digest).await {
            Ok(SpendOutcome::Taken) => Ok(()),
            Ok(outcome) => Err(Unvouched::NotSpent(outcome)),
            Err(e) => Err(Unvouched::Hub(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_wire::credential::LifetimeSigner;
    use l3m_wire::hubd::session::Voucher;

    fn vouched(signer: &LifetimeSigner, agent: &str, request: &ControlRequest) -> Vouched {
        let voucher = Voucher {
            agent: agent.into(),
            action: request.op().into(),
            by: "human:alice".into(),
            expires_ms: 100,
            nonce: "n1".into(),
            digest: request.digest().unwrap(),
        };
        let signature = signer.sign(&voucher.statement());
        Vouched {
            voucher,
            signature,
            proof: None,
        }
    }

    #[test]
    fn only_a_voucher_for_this_request_passes_the_local_check() {
        let hubd = LifetimeSigner::generate().unwrap();
        let key = hubd.public();
        let rewind = |to| ControlRequest::Rewind {
            to,
            reason: "r".into(),
        };
        let good = vouched(&hubd, "bob", &rewind(3));
        assert!(check(&key, &good, "bob", &rewind(3), 5).is_ok());
        assert_eq!(
            check(&key, &good, "bob", &rewind(4), 5),
            Err(Unvouched::OtherArguments)
        );
        assert!(matches!(
            check(&key, &good, "carol", &rewind(3), 5),
            Err(Unvouched::Elsewhere { .. })
        ));
        assert!(matches!(
            check(&key, &good, "bob", &ControlRequest::Status, 5),
            Err(Unvouched::Elsewhere { .. })
        ));
        assert_eq!(
            check(&key, &good, "bob", &rewind(3), 100),
            Err(Unvouched::Expired)
        );
        let stranger = LifetimeSigner::generate().unwrap();
        let forged = vouched(&stranger, "bob", &rewind(3));
        assert_eq!(
            check(&key, &forged, "bob", &rewind(3), 5),
            Err(Unvouched::Forged)
        );
        let mut altered = vouched(&hubd, "bob", &rewind(3));
        altered.voucher.digest = rewind(4).digest().unwrap();
        assert_eq!(
            check(&key, &altered, "bob", &rewind(4), 5),
            Err(Unvouched::Forged)
        );
    }
}
