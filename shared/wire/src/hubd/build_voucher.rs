//! Build and run vouchers: hubd's signed word that an agent's grant covers one build or one run,
//! and what the builder and the runner learn from hubd to check it.
//!
//! The builder and the runner hold no grant and open no session, and more parties may publish
//! on their subjects than may build (every sequencer, the CLI). So each request carries a
//! [`BuildVouched`]: the agent's own sequencer asked hubd, hubd checked the agent's grant
//! (`l3m_core::build::grant_covers`) and signed. The builder and the runner verify the
//! signature with the key [`BuildPolicy`] gives them, its time, that they never took it
//! before, and that the request stays within its [`Cover`].
//!
//! # Format
//! - `hubd.vouch-build` `{ capability, cover }` → `hubd.build-vouched` `{ voucher: { agent, by,
//!   cover, expires_ms, nonce }, signature: bin 64 }`. `cover` is `l3m_core::build::Cover`, a
//!   map tagged by `axis`: `{ axis: "build", source, lockfile, hosts }` or `{ axis: "run",
//!   artifact }`. Only an agent's own sequencer asks; `refused` names the axis, folder or host
//!   the grant does not cover. Good for [`BUILD_VOUCHER_MS`], once.
//! - `hubd.read-build-policy` `{}` (outside any session: it tells a public key and image ids) →
//!   `hubd.build-policy` `{ voucher_key: bin 32, images: [str] }`: the key this hubd process
//!   signs vouchers with, and the image ids the hub's settings pin (`[builds] images`).

use l3m_core::build::Cover;
use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// How long a build or run voucher is good for: long enough to reach a busy builder's queue.
pub const BUILD_VOUCHER_MS: u64 = 120_000;

/// Asks hubd to vouch that the caller's agent may have `cover` carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VouchBuild {
    /// The agent's sequencer's session; the agent is the session's.
    pub capability: Capability,
    /// The build or run asked for.
    pub cover: Cover,
}

impl Message for VouchBuild {
    const KIND: &'static str = "hubd.vouch-build";
}

/// What hubd vouches for: that `agent`'s grant covers `cover`, until when, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildVoucher {
    /// The agent whose grant covers it; the builder resolves a source under its ACR.
    pub agent: String,
    /// Who asked (the duty, as text), for the builder's and the runner's logs.
    pub by: String,
    /// Exactly what may be carried out.
    pub cover: Cover,
    /// Until when it is good (ms since the Unix epoch).
    pub expires_ms: u64,
    /// 16 random hex digits, so each voucher is taken once.
    pub nonce: String,
}

impl BuildVoucher {
    /// The bytes hubd signs: a prefix no control voucher starts with, then every field, each
    /// ended by a zero byte (no field can hold one: names, paths, hosts and digests refuse
    /// control characters).
    pub fn statement(&self) -> Vec<u8> {
        let mut statement = b"l3m build voucher v1\0".to_vec();
        let mut push = |part: &str| {
            statement.extend_from_slice(part.as_bytes());
            statement.push(0);
        };
        push(&self.agent);
        push(&self.by);
        push(&self.nonce);
        match &self.cover {
            Cover::Build {
                source,
                lockfile,
                hosts,
            } => {
                push("build");
                push(source.as_str());
                push(lockfile.as_ref().map_or("", |l| l.as_str()));
                push(&hosts.len().to_string());
                for host in hosts {
                    push(&host.to_string());
                }
            }
            Cover::Run { artifact } => {
                push("run");
                push(artifact.as_str());
            }
        }
        statement.extend_from_slice(&self.expires_ms.to_le_bytes());
        statement
    }
}

/// A build voucher and hubd's signature over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildVouched {
    /// What is vouched for.
    pub voucher: BuildVoucher,
    /// hubd's Ed25519 signature over [`BuildVoucher::statement`].
    #[serde(with = "serde_bytes")]
    pub signature: [u8; 64],
}

impl Message for BuildVouched {
    const KIND: &'static str = "hubd.build-vouched";
}

impl BuildVouched {
    /// Whether hubd's key `voucher_key` signed this voucher.
    pub fn signed_by(&self, voucher_key: &[u8; 32]) -> bool {
        crate::credential::verify(
            &l3m_core::credential::PublicKey(*voucher_key),
            &self.voucher.statement(),
            &self.signature,
        )
    }
}

/// Asks hubd what the builder and the runner must know from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadBuildPolicy {}

impl Message for ReadBuildPolicy {
    const KIND: &'static str = "hubd.read-build-policy";
}

/// What the builder and the runner learn from hubd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildPolicy {
    /// The Ed25519 key this hubd process signs vouchers with (a new one at every start).
    #[serde(with = "serde_bytes")]
    pub voucher_key: [u8; 32],
    /// The image ids the hub's settings pin; empty when they pin none.
    pub images: Vec<String>,
}

impl Message for BuildPolicy {
    const KIND: &'static str = "hubd.build-policy";
}
