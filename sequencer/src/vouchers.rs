//! Who may control this sequencer: only the bearer of a voucher hubd signed for this agent and
//! this op, within its time, once.
//!
//! The control subjects can be published on by more parties than may control the agent (any
//! process allowed `l3m.<hub>.sequencer.>` on the bus). So a control request carries hubd's
//! voucher ([`Vouched`]): hubd checked the caller's session (a human, or a strict ancestor's
//! sequencer) and signed, with the key this sequencer learnt when it opened its own session.

use std::collections::HashMap;
use std::sync::Mutex;

use l3m_wire::hubd::session::Vouched;

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
    /// Its time passed.
    #[error("the voucher expired; ask hubd for a fresh one")]
    Expired,
    /// It was used before.
    #[error("the voucher was used before; each is good for one request")]
    Used,
}

/// Where the key vouchers must be signed with comes from: the sequencer's own session, whose
/// hubd key changes when hubd restarts (and the session is opened again).
type KeySource = Box<dyn Fn() -> [u8; 32] + Send + Sync>;

/// The vouchers this sequencer accepts, and the ones already used (until they expire).
pub struct Vouchers {
    key: KeySource,
    used: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for Vouchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vouchers").finish_non_exhaustive()
    }
}

impl Vouchers {
    /// Accepts vouchers signed with the key `key` gives at the time (hubd's, from the
    /// sequencer's own session).
    pub fn new(key: impl Fn() -> [u8; 32] + Send + Sync + 'static) -> Vouchers {
        Vouchers {
            key: Box::new(key),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `vouched` for `action` to `agent` at `now_ms`, or says why not.
    pub fn admit(
        &self,
        vouched: &Vouched,
        agent: &str,
        action: &str,
        now_ms: u64,
    ) -> Result<(), Unvouched> {
        if !vouched.signed_by(&(self.key)()) {
            return Err(Unvouched::Forged);
        }
        let voucher = &vouched.voucher;
        if voucher.agent != agent || voucher.action != action {
            return Err(Unvouched::Elsewhere {
                agent: voucher.agent.clone(),
                action: voucher.action.clone(),
            });
        }
        if now_ms >= voucher.expires_ms {
            return Err(Unvouched::Expired);
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.retain(|_, expires| *expires > now_ms);
        if used
            .insert(voucher.nonce.clone(), voucher.expires_ms)
            .is_some()
        {
            return Err(Unvouched::Used);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_wire::credential::LifetimeSigner;
    use l3m_wire::hubd::session::Voucher;

    fn vouched(signer: &LifetimeSigner, agent: &str, action: &str, nonce: &str) -> Vouched {
        let voucher = Voucher {
            agent: agent.into(),
            action: action.into(),
            by: "human:alice".into(),
            expires_ms: 100,
            nonce: nonce.into(),
        };
        let signature = signer.sign(&voucher.statement());
        Vouched { voucher, signature }
    }

    #[test]
    fn only_a_fresh_unused_voucher_for_this_request_is_taken() {
        let hubd = LifetimeSigner::generate().unwrap();
        let vouchers = Vouchers::new({
            let key = hubd.public();
            move || key
        });
        let good = vouched(&hubd, "bob", "interrupt", "n1");
        assert_eq!(vouchers.admit(&good, "bob", "interrupt", 5), Ok(()));
        assert_eq!(
            vouchers.admit(&good, "bob", "interrupt", 6),
            Err(Unvouched::Used)
        );
        let other = vouched(&hubd, "bob", "interrupt", "n2");
        assert!(matches!(
            vouchers.admit(&other, "carol", "interrupt", 6),
            Err(Unvouched::Elsewhere { .. })
        ));
        assert!(matches!(
            vouchers.admit(&other, "bob", "rewind", 6),
            Err(Unvouched::Elsewhere { .. })
        ));
        assert_eq!(
            vouchers.admit(&other, "bob", "interrupt", 100),
            Err(Unvouched::Expired)
        );
        let stranger = LifetimeSigner::generate().unwrap();
        let forged = vouched(&stranger, "bob", "interrupt", "n3");
        assert_eq!(
            vouchers.admit(&forged, "bob", "interrupt", 6),
            Err(Unvouched::Forged)
        );
        let mut altered = vouched(&hubd, "bob", "status", "n4");
        altered.voucher.action = "interrupt".into();
        assert_eq!(
            vouchers.admit(&altered, "bob", "interrupt", 6),
            Err(Unvouched::Forged)
        );
    }
}
