//! What an admitted program declares, and the surface check that decides whether it is offered.
//!
//! Pure: the surface check reads the footprint and the axes the agent's tokens confer, the
//! same test the tool table applies to a built-in tool, plus the classes admitted for programs.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;
use l3m_core::effects::{Footprint, Reversibility, Tier};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rule::{LoadError, Rule};
use crate::vocabulary::Class;

/// The largest program source accepted, in bytes.
pub const MAX_SOURCE: usize = 64 * 1024;

/// The largest source of a wild program, in bytes: its reviewer is shown it whole with each
/// call, beside the input and the justification, and a stalemate's card carries all of it.
pub const MAX_REVIEWED_SOURCE: usize = 8 * 1024;

/// Where the agent's programs live, relative to its ACR.
pub const PROGRAMS_DIR: &str = "agent/programs";

/// The longest program name (the file's stem).
const MAX_NAME: usize = 40;

/// The prefix that makes a program's tool name, so no program can pose as a built-in tool.
pub const TOOL_PREFIX: &str = "program_";

/// A program that passed the seal and type checks: what it declares about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramDecl {
    /// The program's name, the file's stem (`todos` for `todos.star`).
    pub name: String,
    /// Its `DESCRIPTION`, as the model is told.
    pub description: String,
    /// Its `FOOTPRINT`: the classes it uses.
    pub footprint: Footprint,
    /// The line of `FOOTPRINT`, for the surface check's refusals.
    pub footprint_line: u32,
    /// Its `INPUT`: the JSON Schema of its input, as the model is shown it.
    pub input_schema: Value,
}

impl ProgramDecl {
    /// The tool it becomes: `program_<name>`.
    pub fn tool_name(&self) -> String {
        format!("{TOOL_PREFIX}{}", self.name)
    }

    /// The reversibility it claims: exactly its footprint's ceiling, never more.
    pub fn claims(&self) -> Reversibility {
        self.footprint.ceiling()
    }
}

/// The program name of a file called `file_name`, or the `file-name` refusal.
pub fn program_name(file: &str, file_name: &str) -> Result<String, LoadError> {
    let refuse = || {
        LoadError::new(
            file,
            1,
            Rule::FileName,
            format!(
                "`{file_name}` is not `<name>.star` with a name of a lowercase letter then up to \
                 {} lowercase letters, digits or `_`",
                MAX_NAME - 1
            ),
        )
    };
    let stem = file_name.strip_suffix(".star").ok_or_else(refuse)?;
    let mut chars = stem.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && stem.len() <= MAX_NAME {
        Ok(stem.to_owned())
    } else {
        Err(refuse())
    }
}

/// The surface check: every class of the footprint is admitted for programs and the tokens
/// `conferred` cover it. Returns the program's tier, computed from its footprint: wild when it
/// declares `shell`, so each call is reviewed (and then its `source` must be short enough to be
/// shown whole), tame otherwise.
pub fn surface(
    file: &str,
    source: &str,
    decl: &ProgramDecl,
    conferred: &BTreeSet<Axis>,
) -> Result<Tier, LoadError> {
    let refuse = |rule, detail: String| LoadError::new(file, decl.footprint_line, rule, detail);
    for class in &decl.footprint.0 {
        if Class::of(class).is_some() {
            continue;
        }
        if class.ceiling() == Reversibility::Wild {
            return Err(refuse(
                Rule::WildClass,
                format!(
                    "class `{class}` is wild and no program function uses it; the one wild \
                     class programs may declare is `shell`"
                ),
            ));
        }
        return Err(refuse(
            Rule::NotAdmitted,
            format!(
                "class `{class}` is not admitted for programs; they may use {}",
                admitted_names()
            ),
        ));
    }
    let missing: Vec<String> = decl
        .footprint
        .required_axes()
        .difference(conferred)
        .map(ToString::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(refuse(
            Rule::NotCovered,
            format!(
                "the agent's grant does not confer the {} axis this footprint needs, so the \
                 program is absent",
                missing.join(", ")
            ),
        ));
    }
    let tier = decl.footprint.tier();
    if tier == Tier::Wild && source.len() > MAX_REVIEWED_SOURCE {
        return Err(refuse(
            Rule::TooLongToReview,
            format!(
                "the program declares `shell`, so each call is reviewed with its source shown \
                 whole; it is {} bytes, and a reviewed program is at most {MAX_REVIEWED_SOURCE}",
                source.len()
            ),
        ));
    }
    Ok(tier)
}

/// The admitted classes' names, for messages.
pub fn admitted_names() -> String {
    Class::ALL
        .iter()
        .map(|c| c.effect().name().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::effects::EffectClass;
    use proptest::prelude::*;

    fn decl(classes: impl IntoIterator<Item = EffectClass>) -> ProgramDecl {
        ProgramDecl {
            name: "p".into(),
            description: "d".into(),
            footprint: Footprint::of(classes),
            footprint_line: 2,
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn file_names_follow_the_tool_name_rule() {
        assert_eq!(program_name("f", "todos.star").unwrap(), "todos");
        assert_eq!(program_name("f", "a_1.star").unwrap(), "a_1");
        for bad in [
            "Todos.star",
            "1x.star",
            "x.py",
            ".star",
            "a-b.star",
            "x.star.star",
        ] {
            assert_eq!(
                program_name("f", bad).unwrap_err().rule,
                Rule::FileName,
                "{bad}"
            );
        }
        let long = format!("{}.star", "a".repeat(41));
        assert!(program_name("f", &long).is_err());
    }

    #[test]
    fn surface_names_the_class_or_the_axis() {
        let none = BTreeSet::new();
        assert_eq!(
            surface("f", "", &decl([EffectClass::FsRead]), &none),
            Ok(Tier::Tame)
        );
        let e = surface("f", "", &decl([EffectClass::Other("aws".into())]), &none).unwrap_err();
        assert_eq!((e.rule, e.line), (Rule::WildClass, 2));
        let e = surface("f", "", &decl([EffectClass::Shell]), &none).unwrap_err();
        assert_eq!(e.rule, Rule::NotCovered);
        let wild = BTreeSet::from([Axis::Wild]);
        assert_eq!(
            surface(
                "f",
                "",
                &decl([EffectClass::Shell, EffectClass::FsRead]),
                &wild
            ),
            Ok(Tier::Wild)
        );
        let e = surface("f", "", &decl([EffectClass::Build]), &none).unwrap_err();
        assert_eq!(e.rule, Rule::NotAdmitted);
        let e = surface("f", "", &decl([EffectClass::Spawn]), &none).unwrap_err();
        assert_eq!(e.rule, Rule::NotCovered);
        let e = surface("f", "", &decl([EffectClass::Net]), &none).unwrap_err();
        assert_eq!(e.rule, Rule::NotCovered);
        assert!(e.detail.contains("net"), "{e}");
        let net = BTreeSet::from([Axis::Net]);
        assert!(surface("f", "", &decl([EffectClass::Net]), &net).is_ok());
        let long = "#".repeat(MAX_REVIEWED_SOURCE + 1);
        let e = surface("f", &long, &decl([EffectClass::Shell]), &wild).unwrap_err();
        assert_eq!(e.rule, Rule::TooLongToReview);
        assert!(surface("f", &long, &decl([EffectClass::FsRead]), &wild).is_ok());
    }

    fn class() -> impl Strategy<Value = EffectClass> {
        use EffectClass::*;
        prop_oneof![
            Just(FsRead),
            Just(FsWrite),
            Just(Blob),
            Just(Clock),
            Just(GitRead),
            Just(GitPush),
            Just(Net),
            Just(Mail),
            Just(Spawn),
            Just(Build),
            Just(Shell),
            "[a-z]{1,6}".prop_map(Other),
        ]
    }

    fn axis() -> impl Strategy<Value = Axis> {
        proptest::sample::select(Axis::ALL.to_vec())
    }

    proptest! {
        /// `surface_admits_only_covered`: an admitted program uses only classes admitted for
        /// programs, its tokens cover every axis its footprint needs, and its tier is its
        /// footprint's: wild exactly when it declares the shell, so its calls are reviewed.
        #[test]
        fn surface_admits_only_covered(
            classes in proptest::collection::btree_set(class(), 0..5),
            conferred in proptest::collection::btree_set(axis(), 0..8),
        ) {
            let d = decl(classes.clone());
            match surface("f", "", &d, &conferred) {
                Ok(tier) => {
                    let wild = classes.contains(&EffectClass::Shell);
                    prop_assert_eq!(tier, if wild { Tier::Wild } else { Tier::Tame });
                    prop_assert!(classes.iter().all(|c| Class::of(c).is_some()));
                    prop_assert!(d.footprint.required_axes().is_subset(&conferred));
                }
                Err(e) => {
                    let admitted = classes.iter().all(|c| Class::of(c).is_some());
                    let covered = d.footprint.required_axes().is_subset(&conferred);
                    prop_assert!(!(admitted && covered), "{e}");
                }
            }
        }
    }
}
