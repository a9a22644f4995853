//! The check every build and run request passes before anything starts: it carries a voucher
//! hubd signed, within its time, never taken before, and the request stays within what the
//! voucher covers.
//!
//! The builder and the runner learn hubd's voucher key by asking `hubd.read-build-policy`
//! (their NATS users may publish that one hubd subject and no other). The key is kept until a
//! voucher fails to verify with it; then it is asked for once more, since a restarted hubd
//! signs with a new key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use l3m_core::build::Uncovered;
use l3m_core::clock::Clock;

use crate::bus::Bus;
use crate::envelope::Limits;
use crate::hubd::Op;
use crate::hubd::build_voucher::{BuildPolicy, BuildVouched, BuildVoucher, ReadBuildPolicy};
use crate::reply::{ErrorCode, RemoteError};
use crate::subjects::Subjects;

/// How long the gate waits for hubd's policy.
const POLICY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a build or run request was refused before anything started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unvouched {
    /// The request carries no voucher.
    #[error(
        "the request carries no voucher; the agent's sequencer asks hubd for one \
         (hubd.vouch-build) and hubd signs only what the agent's grant covers"
    )]
    Missing,
    /// hubd did not sign it (or not the hubd now running).
    #[error("the voucher is not signed by this hub's hubd; ask hubd for one (hubd.vouch-build)")]
    Forged,
    /// Its time passed.
    #[error("the voucher expired at {expires_ms} ms; ask hubd for a fresh one")]
    Expired {
        /// When it expired.
        expires_ms: u64,
    },
    /// It was taken before.
    #[error("the voucher was taken before; each is good for one request")]
    Used,
    /// The request asks for something the voucher does not cover.
    #[error(transparent)]
    Uncovered(#[from] Uncovered),
    /// hubd's policy could not be read, so no voucher can be checked.
    #[error("cannot read hubd's build policy (hubd.read-build-policy): {reason}")]
    Policy {
        /// What went wrong.
        reason: String,
    },
}

impl Unvouched {
    /// The typed refusal a caller gets on the wire.
    pub fn to_remote(&self) -> RemoteError {
        let code = match self {
            Unvouched::Policy { .. } => ErrorCode::Internal,
            _ => ErrorCode::Refused,
        };
        RemoteError::new(code, self.to_string())
    }
}

/// The builder's or the runner's voucher check: hubd's key, and the vouchers already taken.
#[derive(Debug)]
pub struct VoucherGate {
    bus: Arc<dyn Bus>,
    subjects: Subjects,
    clock: Arc<dyn Clock>,
    key: Mutex<Option<[u8; 32]>>,
    /// Nonces taken, each until its voucher expires.
    spent: Mutex<HashMap<String, u64>>,
}

impl VoucherGate {
    /// A gate asking the hubd of `subjects` on `bus`, telling time by `clock`.
    pub fn new(bus: Arc<dyn Bus>, subjects: Subjects, clock: Arc<dyn Clock>) -> VoucherGate {
        VoucherGate {
            bus,
            subjects,
            clock,
            key: Mutex::new(None),
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// Asks hubd for its policy (voucher key and pinned images), and keeps the key.
    pub async fn policy(&self) -> Result<BuildPolicy, Unvouched> {
        let subject = Op::ReadBuildPolicy.subject(&self.subjects);
        let failed = |reason: String| Unvouched::Policy { reason };
        let policy: BuildPolicy = crate::typed::call(
            self.bus.as_ref(),
            &subject,
            &ReadBuildPolicy {},
            POLICY_TIMEOUT,
            &Limits::default(),
        )
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))?;
        *lock(&self.key) = Some(policy.voucher_key);
        Ok(policy)
    }

    /// Takes `vouched` if hubd signed it, it has not expired, `within` finds the request inside
    /// its cover, and it was never taken before; returns the voucher taken.
    pub async fn admit(
        &self,
        vouched: Option<&BuildVouched>,
        within: impl FnOnce(&BuildVoucher) -> Result<(), Uncovered>,
    ) -> Result<BuildVoucher, Unvouched> {
        let voucher = self.check(vouched, within).await?;
        let now = self.clock.now_ms();
        let mut spent = lock(&self.spent);
        spent.retain(|_, expires| *expires > now);
        if spent
            .insert(voucher.nonce.clone(), voucher.expires_ms)
            .is_some()
        {
            return Err(Unvouched::Used);
        }
        Ok(voucher)
    }

    /// What [`VoucherGate::admit`] checks, without taking the voucher: for what comes before
    /// the request it is for (its source's upload).
    pub async fn check(
        &self,
        vouched: Option<&BuildVouched>,
        within: impl FnOnce(&BuildVoucher) -> Result<(), Uncovered>,
    ) -> Result<BuildVoucher, Unvouched> {
        let vouched = vouched.ok_or(Unvouched::Missing)?;
        let known = *lock(&self.key);
        let signed = match known {
            Some(key) if vouched.signed_by(&key) => true,
            // No key yet, or hubd restarted since: ask once.
            _ => vouched.signed_by(&self.policy().await?.voucher_key),
        };
        if !signed {
            return Err(Unvouched::Forged);
        }
        let voucher = &vouched.voucher;
        let now = self.clock.now_ms();
        if now >= voucher.expires_ms {
            return Err(Unvouched::Expired {
                expires_ms: voucher.expires_ms,
            });
        }
        within(voucher)?;
        let mut spent = lock(&self.spent);
        spent.retain(|_, expires| *expires > now);
        if spent.contains_key(&voucher.nonce) {
            return Err(Unvouched::Used);
        }
        Ok(voucher.clone())
    }
}

/// Every write under these locks is a whole-value replace or a single insert, so a poisoned
/// lock still holds a consistent value.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::LocalBus;
    use crate::credential::LifetimeSigner;
    use crate::subjects::HubId;
    use crate::test_support::VoucherIssuer;
    use l3m_core::build::{ArtifactDigest, Cover, run_within};
    use l3m_core::clock::FixedClock;

    fn run_of(byte: u8) -> Cover {
        Cover::Run {
            artifact: ArtifactDigest::from_bytes([byte; 32]),
        }
    }

    #[tokio::test]
    async fn only_a_signed_fresh_unused_voucher_within_its_cover_is_taken() {
        let bus = LocalBus::new();
        let subjects = Subjects::new(HubId::parse("main").unwrap());
        let hubd = VoucherIssuer::serve(&bus, &subjects).await;
        let gate = VoucherGate::new(Arc::new(bus), subjects, Arc::new(FixedClock(50)));
        let artifact = ArtifactDigest::from_bytes([1; 32]);
        let within = |v: &BuildVoucher| run_within(&v.cover, &artifact);

        assert_eq!(gate.admit(None, within).await, Err(Unvouched::Missing));
        let good = hubd.vouch("alice", run_of(1), 100);
        // A check (for an upload before the request) does not take it, however often.
        assert!(gate.check(Some(&good), within).await.is_ok());
        assert!(gate.check(Some(&good), within).await.is_ok());
        assert!(gate.admit(Some(&good), within).await.is_ok());
        assert_eq!(gate.admit(Some(&good), within).await, Err(Unvouched::Used));
        assert_eq!(gate.check(Some(&good), within).await, Err(Unvouched::Used));
        let expired = hubd.vouch("alice", run_of(1), 50);
        assert_eq!(
            gate.admit(Some(&expired), within).await,
            Err(Unvouched::Expired { expires_ms: 50 })
        );
        let elsewhere = gate
            .admit(Some(&hubd.vouch("alice", run_of(2), 100)), within)
            .await;
        assert!(
            matches!(elsewhere, Err(Unvouched::Uncovered(_))),
            "{elsewhere:?}"
        );
        let stranger = LifetimeSigner::generate().unwrap();
        let mut forged = hubd.vouch("alice", run_of(1), 100);
        forged.signature = stranger.sign(&forged.voucher.statement());
        assert_eq!(
            gate.admit(Some(&forged), within).await,
            Err(Unvouched::Forged)
        );
        let mut altered = hubd.vouch("alice", run_of(1), 100);
        altered.voucher.expires_ms = 10_000;
        assert_eq!(
            gate.admit(Some(&altered), within).await,
            Err(Unvouched::Forged)
        );

        // hubd restarts with a new key: the gate asks again and takes its vouchers.
        hubd.rotate();
        let fresh = hubd.vouch("alice", run_of(1), 100);
        assert!(gate.admit(Some(&fresh), within).await.is_ok());
    }
}
