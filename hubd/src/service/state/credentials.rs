//! Sessions and the credentials that open them: the open handshake, the check every later
//! request passes, and the humans' issue, revoke and list.

use l3m_core::credential::{CredentialId, CredentialRow, PublicKey, Scope};
use l3m_core::duty::Duty;
use l3m_core::record_format;
use l3m_core::refs;
use l3m_wire::credential::{Ephemeral, open_statement, verify};
use l3m_wire::envelope::Envelope;
use l3m_wire::hubd::credential::{
    CredentialIssued, CredentialRevoked, Credentials, IssueCredential, ListCredentials,
};
use l3m_wire::hubd::session::{
    Capability, OpenSession, SessionOpened, SpendVoucher, Vouch, Vouched, Voucher, VoucherSpent,
};
use l3m_wire::sealed_reply::sign_refusal;
use l3m_wire::typed::Prechecked;

use super::State;
use crate::capability::{Closed, Opening, inbox_of};
use crate::service::error::ServiceError;
use crate::service::gate;

impl State {
    /// `hubd.open-session`: the credential's signature over what is asked, its registry entry
    /// (live, in scope), the entity it asks for (live or registered), then a fresh key agreed.
    pub fn open_session(
        &self,
        req: OpenSession,
        reply: Option<&str>,
    ) -> Result<SessionOpened, ServiceError> {
        let id = CredentialId::parse(&req.credential)?;
        let expires_ms = {
            let registry = self.credentials();
            let credential = registry.admit(&id, &req.duty, self.now_ms())?;
            let statement = open_statement(
                self.subjects().hub().as_str(),
                &id,
                &req.duty,
                &req.client_key,
            );
            if !verify(&credential.key, &statement, &req.signature) {
                return Err(ServiceError::BadSignature {
                    credential: id.to_string(),
                });
            }
            credential.expires_ms
        };
        self.check_exists(&req.duty)?;
        let ephemeral = Ephemeral::generate()
            .map_err(|e| ServiceError::Internal(format!("making a session key: {e}")))?;
        let key = ephemeral
            .with_client(&req.client_key)
            .ok_or(ServiceError::WeakKey)?;
        let capability = self
            .sessions
            .open(Opening {
                duty: req.duty.clone(),
                credential: id,
                expires_ms,
                key,
                inbox: inbox_of(reply).map(str::to_owned),
            })
            .map_err(|e| ServiceError::Internal(format!("the OS random source failed: {e}")))?;
        let mut opened = SessionOpened {
            capability: Capability(capability),
            duty: req.duty,
            hub_key: ephemeral.public,
            voucher_key: self.vouchers.public(),
            signature: None,
        };
        let statement = opened.statement(self.subjects().hub().as_str(), &req.client_key);
        opened.signature = Some(self.identity.sign(&statement));
        Ok(opened)
    }

    /// Whom `duty` names exists: a live agent, a registered human or service, a host's subtree
    /// root that is live.
    fn check_exists(&self, duty: &Duty) -> Result<(), ServiceError> {
        let tree = self.tree();
        let known = match duty {
            Duty::Sequencer { agent }
            | Duty::Host {
                subtree: Some(agent),
            } => tree.ledger.is_live(agent),
            Duty::Human { human } => tree.ledger.human_grant(human).is_some(),
            Duty::Postman { service } => tree.ledger.service_grant(service).is_some(),
            Duty::Host { subtree: None } => true,
        };
        if known {
            return Ok(());
        }
        Err(ServiceError::NotFound {
            what: "the one a session is for",
            name: duty.to_string(),
            detail: " as live or registered".into(),
        })
    }

    /// Checks, before its body is decoded, that a request of `kind` comes from the holder of the
    /// session its envelope names: sealed with its key over the body's bytes, a fresh number,
    /// answered to its inbox. Once the seal verified, the session's reply key seals the answer.
    pub(in crate::service) fn check_envelope(
        &self,
        kind: &str,
        envelope: &Envelope,
        reply: Option<&str>,
    ) -> Prechecked {
        let Some(capability) = envelope.cap.as_deref() else {
            let closed = if envelope.seal.is_none() {
                Closed::Unsealed
            } else {
                Closed::Unknown
            };
            return Prechecked {
                reply_key: None,
                verdict: Err(ServiceError::from(closed).to_remote()),
            };
        };
        let checked = self.sessions.check_parts(
            capability,
            kind,
            envelope.seal.as_ref(),
            &envelope.body,
            reply,
            self.now_ms(),
        );
        // A refusal hubd cannot seal (it knows no key for the capability) is signed with its
        // identity, bound to the request, so a client believes only hubd's.
        let sign = |error| match &envelope.seal {
            Some(seal) if checked.reply_key.is_none() => {
                sign_refusal(&self.identity, (capability, seal.n, kind), error)
            }
            _ => error,
        };
        Prechecked {
            verdict: checked
                .verdict
                .map_err(|closed| sign(ServiceError::from(closed).to_remote())),
            reply_key: checked.reply_key,
        }
    }

    /// `hubd.vouch`: a human, or the sequencer of a strict ancestor, may control a live agent.
    pub fn vouch(&self, req: Vouch) -> Result<Vouched, ServiceError> {
        let duty = self.duty(&req.capability)?;
        let agent = gate::agent(&req.agent)?;
        gate::may_prune(&duty, &agent, &format!("send `{}` to", req.action))?;
        if !self.tree().ledger.is_live(&agent) {
            return Err(ServiceError::NotFound {
                what: "agent",
                name: agent.to_string(),
                detail: " as live".into(),
            });
        }
        let nonce = l3m_wire::credential::random_hex()
            .map_err(|e| ServiceError::Internal(format!("the OS random source failed: {e}")))?;
        let now = self.now_ms();
        let voucher = Voucher {
            agent: agent.to_string(),
            action: req.action,
            by: duty.to_string(),
            expires_ms: now + VOUCHER_MS,
            nonce: nonce[..16].to_owned(),
            digest: req.digest,
        };
        self.outstanding()
            .issue(voucher.clone(), &req.capability.0, now)?;
        let signature = self.vouchers.sign(&voucher.statement());
        Ok(Vouched {
            voucher,
            signature,
            proof: None,
        })
    }

    /// `hubd.spend-voucher`: the agent's sequencer, or the host of its subtree, spends a
    /// voucher presented to it, once, for the request it came with, if the requester's session
    /// proved it presented it.
    pub fn spend_voucher(&self, req: &SpendVoucher) -> Result<VoucherSpent, ServiceError> {
        let duty = self.duty(&req.capability)?;
        let voucher = &req.vouched.voucher;
        let runs =
            l3m_core::names::AgentName::parse(&voucher.agent).is_ok_and(|agent| match &duty {
                Duty::Sequencer { agent: own } => *own == agent,
                Duty::Host { subtree: None } => true,
                Duty::Host {
                    subtree: Some(root),
                } => agent.is_within(root),
                Duty::Human { .. } | Duty::Postman { .. } => false,
            });
        let statement = voucher.statement();
        let proves = |requester: &str| {
            req.vouched
                .proof
                .as_ref()
                .is_some_and(|proof| self.sessions.proves_holder(requester, &statement, proof))
        };
        let presented = crate::vouchers::Presented {
            voucher,
            digest: req.digest,
            spender_runs_agent: runs,
            proves: &proves,
        };
        let outcome = self.outstanding().spend(&presented, self.now_ms());
        Ok(VoucherSpent { outcome })
    }

    fn outstanding(&self) -> std::sync::MutexGuard<'_, crate::vouchers::Outstanding> {
        // Every change is one insert or one flag set, with no step that can panic between.
        self.outstanding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `hubd.issue-credential`: humans only; a human scope names a registered human.
    pub fn issue_credential(&self, req: IssueCredential) -> Result<CredentialIssued, ServiceError> {
        let by = self.human_only(&req.capability, "issue a credential")?;
        let id = CredentialId::parse(&req.id)?;
        let key = PublicKey::parse(&req.key)?;
        if let Scope::Human { human } = &req.scope
            && self.tree().ledger.human_grant(human).is_none()
        {
            return Err(ServiceError::NotFound {
                what: "human",
                name: human.to_string(),
                detail: "; a human credential is issued for a registered human".into(),
            });
        }
        if req.expires_ms <= self.now_ms() {
            return Err(ServiceError::Invalid(format!(
                "credential {id} would expire at {} ms, which has passed; give a later expiry",
                req.expires_ms
            )));
        }
        if req.label.len() > MAX_LABEL || req.label.contains(['\n', '\r']) {
            return Err(ServiceError::Invalid(format!(
                "a credential's label is one line of at most {MAX_LABEL} bytes"
            )));
        }
        let row = CredentialRow::Issue {
            id: id.clone(),
            scope: req.scope.clone(),
            key,
            expires_ms: req.expires_ms,
            by,
            label: req.label.clone(),
            at_ms: self.now_ms(),
        };
        let summary = format!("issue {id} for the {} ({})", req.scope, req.label);
        self.append_credential(&row, &summary)?;
        let credential = self
            .credentials()
            .get(&id)
            .cloned()
            .ok_or_else(|| ServiceError::Internal(format!("{id} is not in the registry")))?;
        Ok(CredentialIssued { credential })
    }

    /// `hubd.revoke-credential`: humans only; the credential's sessions end now.
    pub fn revoke_credential(
        &self,
        capability: &Capability,
        id: &str,
    ) -> Result<CredentialRevoked, ServiceError> {
        let by = self.human_only(capability, "revoke a credential")?;
        let id = CredentialId::parse(id)?;
        let row = CredentialRow::Revoke {
            id: id.clone(),
            by,
            at_ms: self.now_ms(),
        };
        self.append_credential(&row, &format!("revoke {id}"))?;
        let sessions = self.sessions.revoke_credential(&id) as u64;
        Ok(CredentialRevoked {
            id: id.to_string(),
            sessions,
        })
    }

    /// `hubd.list-credentials`: humans only; one page, live credentials unless `all`.
    pub fn list_credentials(&self, req: &ListCredentials) -> Result<Credentials, ServiceError> {
        self.human_only(&req.capability, "list credentials")?;
        let after = req.after.as_deref().map(CredentialId::parse).transpose()?;
        let now = self.now_ms();
        let (credentials, next) = self.credentials().page(
            after.as_ref(),
            l3m_wire::hubd::credential::CREDENTIALS_PAGE,
            |c| req.all || (c.revoked_ms.is_none() && c.expires_ms > now),
        );
        Ok(Credentials {
            credentials,
            next: next.map(|id| id.to_string()),
        })
    }

    /// The human behind `capability`, as the `by` of a credential row; anyone else is refused.
    fn human_only(&self, capability: &Capability, action: &str) -> Result<String, ServiceError> {
        match self.duty(capability)? {
            Duty::Human { human } => Ok(format!("human:{human}")),
            duty => Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: action.to_owned(),
                reason: "credentials are issued, listed and revoked by humans only",
            }),
        }
    }

    /// Applies `row` to a copy of the registry, appends it, then installs the copy; the lock is
    /// held throughout, so rows reach the chain in the order the registry applied them.
    fn append_credential(&self, row: &CredentialRow, summary: &str) -> Result<(), ServiceError> {
        let mut registry = self.credentials();
        let mut next = registry.clone();
        next.apply(row)?;
        let line = record_format::to_line(row)
            .map_err(|e| ServiceError::Internal(format!("encoding a credential row: {e}")))?;
        let tip = self.hub.tip(refs::CREDENTIALS)?;
        self.hub.append(refs::CREDENTIALS, tip, &[line], summary)?;
        *registry = next;
        Ok(())
    }

    fn credentials(&self) -> std::sync::MutexGuard<'_, l3m_core::credential::Registry> {
        // Every write is a whole-value replace after the store write succeeded.
        self.credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How long a voucher is good for.
pub const VOUCHER_MS: u64 = 30_000;

/// The longest label a credential may carry.
pub const MAX_LABEL: usize = 200;
