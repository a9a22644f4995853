//! Fuel: what a parent lends a child and what the child spends.
//!
//! Fuel is counted in three units — model calls, bytes and wakes — and lent down the tree the
//! same way authority is: a loan larger than what the lender has left is refused, never clamped.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An amount of fuel in each of its units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fuel {
    /// Model calls.
    pub model_calls: u64,
    /// Bytes (model input and output, fetched bodies).
    pub bytes: u64,
    /// Times the agent may be woken from sleep.
    pub wakes: u64,
}

impl Fuel {
    /// No fuel at all.
    pub const ZERO: Fuel = Fuel {
        model_calls: 0,
        bytes: 0,
        wakes: 0,
    };

    /// Whether every unit of `self` is at most the same unit of `other`.
    pub fn fits_in(&self, other: &Fuel) -> bool {
        self.model_calls <= other.model_calls
            && self.bytes <= other.bytes
            && self.wakes <= other.wakes
    }

    /// `self - other`, or `None` if any unit would go below zero.
    pub fn checked_sub(&self, other: &Fuel) -> Option<Fuel> {
        Some(Fuel {
            model_calls: self.model_calls.checked_sub(other.model_calls)?,
            bytes: self.bytes.checked_sub(other.bytes)?,
            wakes: self.wakes.checked_sub(other.wakes)?,
        })
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Fuel) -> Option<Fuel> {
        Some(Fuel {
            model_calls: self.model_calls.checked_add(other.model_calls)?,
            bytes: self.bytes.checked_add(other.bytes)?,
            wakes: self.wakes.checked_add(other.wakes)?,
        })
    }
}

impl fmt::Display for Fuel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} bytes, {} wakes",
            self.model_calls, self.bytes, self.wakes
        )
    }
}
