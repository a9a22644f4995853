//! The control vouchers hubd issued and has not yet seen expire: each spent once, by hubd.
//!
//! A voucher is hubd's word that one session may send one control request (its arguments'
//! digest included) to one agent. Whoever sees it on the bus must not be able to use it, and
//! no process's memory decides whether it was used: the process it is presented to (the
//! agent's sequencer, or the host of its subtree) asks hubd to spend it, and this table, the
//! one place that issued it, answers once [`SpendOutcome::Taken`] and then
//! [`SpendOutcome::Used`], whichever process asks. The table lives in hubd's memory: a voucher
//! issued before hubd restarted is [`SpendOutcome::Unknown`] to the new process, so no voucher
//! is ever taken twice, across processes or restarts.
//!
//! Bounded: at most [`VOUCHERS_PER_SESSION`] unexpired vouchers per requesting session (and
//! sessions per credential are bounded in [`crate::capability`]); an expired one is forgotten.

use std::collections::{BTreeSet, HashMap};

use l3m_wire::hubd::session::{SpendOutcome, Voucher};

/// The most unexpired vouchers one session may hold at once.
pub const VOUCHERS_PER_SESSION: usize = 64;

/// A session asked for more vouchers than it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this session holds {VOUCHERS_PER_SESSION} unexpired vouchers, the most it may; use or let \
     some expire first"
)]
pub struct TooManyVouchers;

/// One issued voucher.
#[derive(Debug)]
struct Issued {
    voucher: Voucher,
    /// The capability of the session that asked for it.
    requester: String,
    spent: bool,
}

/// The vouchers issued and not yet expired, by nonce.
#[derive(Debug, Default)]
pub struct Outstanding {
    by_nonce: HashMap<String, Issued>,
    /// `(expires_ms, nonce)`, to forget expired ones in order.
    by_expiry: BTreeSet<(u64, String)>,
    per_session: HashMap<String, usize>,
}

/// What a spend is checked against, besides the table.
pub struct Presented<'a> {
    /// The voucher as presented.
    pub voucher: &'a Voucher,
    /// The digest of the request it came with, as the spender computed it.
    pub digest: [u8; 32],
    /// Whether the spender's session runs the voucher's agent (its sequencer, or a host whose
    /// subtree holds it).
    pub spender_runs_agent: bool,
    /// Whether the presented proof is the requester's session's (given its capability).
    pub proves: &'a dyn Fn(&str) -> bool,
}

impl std::fmt::Debug for Presented<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented")
            .field("voucher", self.voucher)
            .field("spender_runs_agent", &self.spender_runs_agent)
            .finish_non_exhaustive()
    }
}

impl Outstanding {
    /// How many vouchers are held (spent or not, until they expire).
    pub fn len(&self) -> usize {
        self.by_nonce.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.by_nonce.is_empty()
    }

    /// Records `voucher`, asked for by session `requester`, unless that session already holds
    /// [`VOUCHERS_PER_SESSION`] unexpired ones.
    pub fn issue(
        &mut self,
        voucher: Voucher,
        requester: &str,
        now_ms: u64,
    ) -> Result<(), TooManyVouchers> {
        self.forget_expired(now_ms);
        let held = self.per_session.entry(requester.to_owned()).or_default();
        if *held >= VOUCHERS_PER_SESSION {
            return Err(TooManyVouchers);
        }
        *held += 1;
        self.by_expiry
            .insert((voucher.expires_ms, voucher.nonce.clone()));
        self.by_nonce.insert(
            voucher.nonce.clone(),
            Issued {
                voucher,
                requester: requester.to_owned(),
                spent: false,
            },
        );
        Ok(())
    }

    /// Spends the voucher `presented` names, or says why not. Only [`SpendOutcome::Taken`]
    /// changes the table: a wrong presentation does not burn the voucher for its requester.
    pub fn spend(&mut self, presented: &Presented<'_>, now_ms: u64) -> SpendOutcome {
        let Some(issued) = self.by_nonce.get_mut(&presented.voucher.nonce) else {
            return SpendOutcome::Unknown;
        };
        if issued.voucher != *presented.voucher {
            return SpendOutcome::Unknown;
        }
        if !presented.spender_runs_agent {
            return SpendOutcome::NotForYou;
        }
        if issued.spent {
            return SpendOutcome::Used;
        }
        if now_ms >= issued.voucher.expires_ms {
            return SpendOutcome::Expired;
        }
        if presented.digest != issued.voucher.digest {
            return SpendOutcome::OtherArguments;
        }
        if !(presented.proves)(&issued.requester) {
            return SpendOutcome::NotTheRequester;
        }
        issued.spent = true;
        SpendOutcome::Taken
    }

    fn forget_expired(&mut self, now_ms: u64) {
        while let Some(first) = self.by_expiry.first()
            && first.0 <= now_ms
        {
            let Some((_, nonce)) = self.by_expiry.pop_first() else {
                break;
            };
            if let Some(issued) = self.by_nonce.remove(&nonce)
                && let Some(held) = self.per_session.get_mut(&issued.requester)
            {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    self.per_session.remove(&issued.requester);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn voucher(nonce: &str, digest: u8) -> Voucher {
        Voucher {
            agent: "bob".into(),
            action: "rewind".into(),
            by: "human:alice".into(),
            expires_ms: 100,
            nonce: nonce.into(),
            digest: [digest; 32],
        }
    }

    fn presented<'a>(
        voucher: &'a Voucher,
        digest: u8,
        runs: bool,
        proves: &'a dyn Fn(&str) -> bool,
    ) -> Presented<'a> {
        Presented {
            voucher,
            digest: [digest; 32],
            spender_runs_agent: runs,
            proves,
        }
    }

    #[test]
    fn a_voucher_is_taken_once_for_its_request_by_its_requester_only() {
        let mut table = Outstanding::default();
        let v = voucher("n1", 7);
        table.issue(v.clone(), "cap-a", 0).unwrap();
        let requester = |cap: &str| cap == "cap-a";
        let stranger = |_: &str| false;
        let spend = |t: &mut Outstanding, d, runs, p: &dyn Fn(&str) -> bool, now| {
            t.spend(&presented(&v, d, runs, p), now)
        };
        assert_eq!(
            spend(&mut table, 7, false, &requester, 5),
            SpendOutcome::NotForYou
        );
        assert_eq!(
            spend(&mut table, 8, true, &requester, 5),
            SpendOutcome::OtherArguments
        );
        assert_eq!(
            spend(&mut table, 7, true, &stranger, 5),
            SpendOutcome::NotTheRequester
        );
        assert_eq!(
            spend(&mut table, 7, true, &requester, 100),
            SpendOutcome::Expired
        );
        assert_eq!(
            spend(&mut table, 7, true, &requester, 5),
            SpendOutcome::Taken
        );
        assert_eq!(
            spend(&mut table, 7, true, &requester, 6),
            SpendOutcome::Used
        );
        let mut altered = v.clone();
        altered.digest = [8; 32];
        assert_eq!(
            table.spend(&presented(&altered, 8, true, &requester), 6),
            SpendOutcome::Unknown
        );
        assert_eq!(
            Outstanding::default().spend(&presented(&v, 7, true, &requester), 5),
            SpendOutcome::Unknown,
            "a new hubd process never issued it"
        );
    }

    #[test]
    fn a_session_holds_a_bounded_number_of_unexpired_vouchers() {
        let mut table = Outstanding::default();
        for i in 0..VOUCHERS_PER_SESSION {
            table
                .issue(voucher(&format!("n{i}"), 1), "cap-a", 0)
                .unwrap();
        }
        assert_eq!(
            table.issue(voucher("more", 1), "cap-a", 0),
            Err(TooManyVouchers)
        );
        table.issue(voucher("other", 1), "cap-b", 0).unwrap();
        // Once they expire they are forgotten, and the session may ask again.
        table.issue(voucher("later", 1), "cap-a", 100).unwrap();
        assert_eq!(table.len(), 1);
    }
}
