//! The spawn token: how an agent may spawn children.

use l3m_core::axis::Axis;
use l3m_core::grant::SpawnLevel;

use super::TokenError;

/// The right to ask hubd to admit children, at a level of the grant's own [`SpawnLevel`]. Minting
/// makes none for `off`; a token narrowed to `off` allows nothing, and the spawn provider refuses
/// every request through it.
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
                asked: level.to_string(),
                held: vec![self.level.to_string()],
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
        assert_eq!(
            drive.narrow(SpawnLevel::Off).unwrap().level(),
            SpawnLevel::Off
        );
        assert!(matches!(
            drive.narrow(SpawnLevel::Persist),
            Err(TokenError::Widening {
                axis: Axis::Spawn,
                ..
            })
        ));
    }
}
