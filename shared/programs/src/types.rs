//! The type check: every name a program uses resolves against exactly the builtins it keeps and
//! the functions of the classes its footprint declares.
//!
//! Pure, over the names the seal gathered. A program that calls `net_fetch` without declaring
//! `net` is refused here, naming the class; the evaluator then builds its globals from the same
//! footprint ([`crate::globals`]), so the name would not resolve at load either.

use l3m_core::effects::Footprint;

use crate::rule::{LoadError, Rule};
use crate::vocabulary::{BUILTINS, Function, function};

/// A name a function uses without binding it, and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The name.
    pub name: String,
    /// Its line, from 1.
    pub line: u32,
}

/// Refuses the first name that is neither a kept builtin nor a function of a declared class.
pub fn resolve(file: &str, footprint: &Footprint, free: &[Reference]) -> Result<(), LoadError> {
    resolve_with(file, free, |name, f| {
        (!footprint.0.contains(&f.class.effect())).then(|| {
            (
                Rule::UndeclaredClass,
                format!(
                    "`{name}` belongs to class `{}`, which FOOTPRINT does not declare",
                    f.class.effect()
                ),
            )
        })
    })
}

/// The type check of a hook: only kept builtins; any effect function is refused by
/// [`Rule::NoEffect`], naming its class.
pub fn resolve_hook(file: &str, free: &[Reference]) -> Result<(), LoadError> {
    resolve_with(file, free, |name, f| {
        Some((
            Rule::NoEffect,
            format!(
                "`{name}` is a function of class `{}`; a hook has no effect class at all \
                 (defer the work to a sealed program instead)",
                f.class.effect()
            ),
        ))
    })
}

/// Refuses the first name that is not a kept builtin, nor a class function `refuse` lets
/// through (it names the rule and the detail of one it refuses).
fn resolve_with(
    file: &str,
    free: &[Reference],
    refuse: impl Fn(&str, &Function) -> Option<(Rule, String)>,
) -> Result<(), LoadError> {
    for reference in free {
        let name = reference.name.as_str();
        if BUILTINS.contains(&name) {
            continue;
        }
        match function(name) {
            Some(f) => {
                if let Some((rule, detail)) = refuse(name, f) {
                    return Err(LoadError::new(file, reference.line, rule, detail));
                }
            }
            None => {
                return Err(LoadError::new(
                    file,
                    reference.line,
                    Rule::UnknownName,
                    format!(
                        "`{name}` is not defined: it is neither the program's own, a kept \
                         builtin, nor a function of any class"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::{Class, FUNCTIONS};
    use l3m_core::effects::EffectClass;
    use proptest::prelude::*;

    fn at(name: &str) -> Reference {
        Reference {
            name: name.into(),
            line: 4,
        }
    }

    #[test]
    fn an_undeclared_class_and_reflection_are_named() {
        let fp = Footprint::of([EffectClass::FsRead]);
        assert!(resolve("f", &fp, &[at("fs_read"), at("len"), at("True")]).is_ok());
        let e = resolve("f", &fp, &[at("net_fetch")]).unwrap_err();
        assert_eq!((e.rule, e.line), (Rule::UndeclaredClass, 4));
        assert!(e.detail.contains("`net`"), "{e}");
        for name in ["getattr", "hasattr", "dir", "print", "load", "eval"] {
            assert_eq!(
                resolve("f", &fp, &[at(name)]).unwrap_err().rule,
                Rule::UnknownName
            );
        }
    }

    proptest! {
        /// `type_admits_only_declared`: a program's names resolve exactly when each is a kept
        /// builtin or a function of a class its footprint declares.
        #[test]
        fn type_admits_only_declared(
            declared in proptest::collection::btree_set(proptest::sample::select(Class::ALL.to_vec()), 0..5),
            used in proptest::collection::vec(proptest::sample::select(FUNCTIONS.to_vec()), 0..6),
        ) {
            let fp = Footprint::of(declared.iter().map(|c| c.effect()));
            let refs: Vec<Reference> = used.iter().map(|f| at(f.name)).collect();
            let ok = used.iter().all(|f| declared.contains(&f.class));
            prop_assert_eq!(resolve("f", &fp, &refs).is_ok(), ok);
        }
    }
}
