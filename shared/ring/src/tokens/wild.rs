//! The wild token: the wild effect classes an agent may propose for review.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, Reversibility};

use super::{TokenError, narrow_set};

/// The right to propose calls of the listed wild classes (shell, `aws`, …). Holding it does not
/// run anything: every such call is still reviewed first.
#[derive(Debug)]
pub struct WildToken {
    /// Classes whose ceiling is `wild`.
    classes: BTreeSet<EffectClass>,
}

impl WildToken {
    /// Made only by [`super::mint`] and [`WildToken::narrow`].
    pub(crate) fn new(classes: BTreeSet<EffectClass>) -> Self {
        Self { classes }
    }

    /// The classes this token allows proposing.
    pub fn classes(&self) -> &BTreeSet<EffectClass> {
        &self.classes
    }

    /// Whether `class` may be proposed.
    pub fn allows(&self, class: &EffectClass) -> bool {
        self.classes.contains(class)
    }

    /// A token allowing only `classes`, each already allowed.
    pub fn narrow(&self, classes: &[EffectClass]) -> Result<WildToken, TokenError> {
        let asked = parse_classes(classes)?;
        narrow_set(Axis::Wild, &self.classes, asked, |h, a| h == a).map(Self::new)
    }
}

/// The effect class a grant's wild-class name stands for: a built-in class by its name (so a
/// tame one such as `net` is then refused by [`parse_classes`], never passed off as wild), or
/// [`EffectClass::Other`].
pub(super) fn class_of(name: &str) -> EffectClass {
    use EffectClass::*;
    [
        FsRead, FsWrite, Blob, TreeView, Clock, GitRead, GitWrite, GitPush, Net, Mail, Airmail,
        Spawn, Build, Run, Shell,
    ]
    .into_iter()
    .find(|class| class.name() == name)
    .unwrap_or_else(|| Other(name.to_owned()))
}

/// Checks each class is wild: a tame class on the wild axis is a grant error, not a wider token.
pub(super) fn parse_classes(classes: &[EffectClass]) -> Result<BTreeSet<EffectClass>, TokenError> {
    classes
        .iter()
        .map(|class| match class.ceiling() {
            Reversibility::Wild => Ok(class.clone()),
            ceiling => Err(TokenError::NotWild {
                class: class.clone(),
                ceiling,
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wild_classes_are_minted() {
        assert!(parse_classes(&[EffectClass::Shell, EffectClass::Other("aws".into())]).is_ok());
        assert!(matches!(
            parse_classes(&[EffectClass::Net]),
            Err(TokenError::NotWild { .. })
        ));
    }

    #[test]
    fn grant_names_map_to_classes() {
        assert_eq!(class_of("shell"), EffectClass::Shell);
        assert_eq!(class_of("net"), EffectClass::Net);
        assert_eq!(class_of("aws"), EffectClass::Other("aws".into()));
    }

    #[test]
    fn narrows_to_a_subset_only() {
        let t = WildToken::new([EffectClass::Shell, EffectClass::Other("aws".into())].into());
        let n = t.narrow(&[EffectClass::Shell]).unwrap();
        assert!(n.allows(&EffectClass::Shell) && !n.allows(&EffectClass::Other("aws".into())));
        assert_eq!(n.classes().len(), 1);
        let err = n.narrow(&[EffectClass::Other("aws".into())]).unwrap_err();
        assert!(
            matches!(err, TokenError::Widening { axis: Axis::Wild, ref asked, .. } if asked == "aws")
        );
    }
}
