//! `hubd.vouch-build` and `hubd.read-build-policy`: hubd's signed word that an agent's grant
//! covers one build or one run, and what the builder and the runner need to check it.

use l3m_core::build::grant_covers;
use l3m_core::duty::Duty;
use l3m_wire::hubd::build_voucher::{
    BUILD_VOUCHER_MS, BuildPolicy, BuildVouched, BuildVoucher, VouchBuild,
};

use super::State;
use crate::service::error::ServiceError;

impl State {
    /// `hubd.vouch-build`: only an agent's own sequencer asks, and only for what the agent's
    /// grant, as the ledger holds it now, covers.
    pub fn vouch_build(&self, req: VouchBuild) -> Result<BuildVouched, ServiceError> {
        let duty = self.duty(&req.capability)?;
        let Duty::Sequencer { agent } = &duty else {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: format!("ask for a voucher for {}", req.cover),
                reason: "build and run vouchers go to an agent's own sequencer, for its grant",
            });
        };
        let grant =
            self.tree()
                .ledger
                .grant(agent)
                .cloned()
                .ok_or_else(|| ServiceError::NotFound {
                    what: "agent",
                    name: agent.to_string(),
                    detail: " as live".into(),
                })?;
        grant_covers(&grant, agent, &req.cover)?;
        let nonce = l3m_wire::credential::random_hex()
            .map_err(|e| ServiceError::Internal(format!("the OS random source failed: {e}")))?;
        let voucher = BuildVoucher {
            agent: agent.to_string(),
            by: duty.to_string(),
            cover: req.cover,
            expires_ms: self.now_ms() + BUILD_VOUCHER_MS,
            nonce: nonce[..16].to_owned(),
        };
        let signature = self.vouchers.sign(&voucher.statement());
        Ok(BuildVouched { voucher, signature })
    }

    /// `hubd.read-build-policy`: the voucher key's public half and the images the settings pin.
    pub fn build_policy(&self) -> BuildPolicy {
        let images = self
            .settings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .images
            .iter()
            .cloned()
            .collect();
        BuildPolicy {
            voucher_key: self.vouchers.public(),
            images,
        }
    }
}
