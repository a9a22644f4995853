//! `hubd.bless` and `hubd.read-blessing`: a human's pin of a build target's inputs.
//!
//! The duty table decides who may write a blessing ref (humans only); this module checks the
//! pin's shape (a plain target, repository-relative paths, the Makefile pinned) and stores it
//! as `blessing.json` on `refs/l3m/blessings/<agent>/_/<target>`, replacing an earlier pin.

use std::sync::Arc;

use l3m_core::build::Blessing;
use l3m_core::duty::{RefWrite, may_write};
use l3m_core::refs;
use l3m_wire::hubd::blessing::{Bless, Blessed, BlessingView, ReadBlessing};

use super::error::ServiceError;
use super::gate;
use super::handlers::blocking;
use super::state::State;
use crate::store::{StoreError, Tip};

/// The file a blessing commit holds.
const BLESSING_FILE: &str = "blessing.json";

fn bless(state: &State, req: &Bless) -> Result<Blessed, ServiceError> {
    let duty = state.duty(&req.capability)?;
    let refname = refs::blessing(&req.agent, &req.blessing.target);
    may_write(&duty, &refname, RefWrite::Set)?;
    req.blessing
        .check_shape()
        .map_err(|e| ServiceError::Invalid(e.to_string()))?;
    let text = serde_json::to_vec_pretty(&req.blessing)
        .map_err(|e| ServiceError::Internal(format!("encoding a blessing: {e}")))?;
    let expected = state.hub().tip(&refname)?;
    let summary = format!(
        "{} blessed {} of {} for {}",
        duty, req.blessing.target, req.blessing.makefile, req.agent
    );
    let commit =
        state
            .hub()
            .commit_files(&refname, expected, &[(BLESSING_FILE, &text)], &summary)?;
    Ok(Blessed {
        tip: commit.to_string(),
    })
}

fn read(state: &State, req: &ReadBlessing) -> Result<BlessingView, ServiceError> {
    state.duty(&req.capability)?;
    l3m_core::build::check_target(&req.target).map_err(|e| ServiceError::Invalid(e.to_string()))?;
    let refname = refs::blessing(&req.agent, &req.target);
    let Tip::At(commit) = state.hub().tip(&refname)? else {
        return Ok(BlessingView {
            blessing: None,
            tip: None,
        });
    };
    let bytes = state.hub().read_file(&refname, BLESSING_FILE)?;
    let blessing: Blessing = serde_json::from_slice(&bytes).map_err(|e| {
        ServiceError::Store(StoreError::Io {
            op: "parse blessing.json of",
            path: state.hub().git_dir(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    })?;
    Ok(BlessingView {
        blessing: Some(blessing),
        tip: gate::tip_hex(Tip::At(commit)),
    })
}

/// `hubd.bless` (the store fsyncs).
pub async fn bless_target(state: Arc<State>, req: Bless) -> Result<Blessed, ServiceError> {
    blocking(&state, move |s| bless(s, &req)).await
}

/// `hubd.read-blessing` (it reads from `hub.git`).
pub async fn read_blessing(
    state: Arc<State>,
    req: ReadBlessing,
) -> Result<BlessingView, ServiceError> {
    blocking(&state, move |s| read(s, &req)).await
}
