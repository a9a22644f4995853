//! The spawn token: how an agent may spawn children.

use l3m_core::axis::Axis;

use super::TokenError;

/// The spawn axis when it is on (DESIGN §4). `off` is the absence of a token. Ordered:
/// `Drive < Persist`, so narrowing may only move down.
///
/// This mirrors the level `l3m_core::grant` will define; it will be replaced by it when it lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpawnLevel {
    /// Children retire when the call that started them returns.
    Drive,
    /// Children outlive the call that started them.
    Persist,
}

/// The right to ask hubd to admit children, at a level.
#[derive(Debug)]
pub struct SpawnToken {
    /// The highest level this token allows.
    level: SpawnLevel,
}

impl SpawnToken {
    /// Made only by [`super::mint`] and [`SpawnToken::narrow`].
    pub(crate) fn new(level: SpawnLevel) -> Self {
        Self { level }
    }

    /// The level this token allows.
    pub fn level(&self) -> SpawnLevel {
        self.level
    }

    /// A token at `level`, which must not exceed this token's.
    pub fn narrow(&self, level: SpawnLevel) -> Result<SpawnToken, TokenError> {
        if level <= self.level {
            Ok(Self::new(level))
        } else {
            Err(TokenError::Widening {
                axis: Axis::Spawn,
                asked: format!("{level:?}"),
                held: vec![format!("{:?}", self.level)],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrows_down_never_up() {
        let persist = SpawnToken::new(SpawnLevel::Persist);
        let drive = persist.narrow(SpawnLevel::Drive).unwrap();
        assert_eq!(drive.level(), SpawnLevel::Drive);
        assert!(drive.narrow(SpawnLevel::Drive).is_ok());
        assert!(matches!(
            drive.narrow(SpawnLevel::Persist),
            Err(TokenError::Widening {
                axis: Axis::Spawn,
                ..
            })
        ));
    }
}
