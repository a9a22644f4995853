//! Effect classes, their reversibility ceilings, and the tier of a footprint.
//!
//! A tool never touches the world directly: its body is written over effect classes, and its
//! *footprint* lists the classes it uses. Each class has a reversibility ceiling declared once,
//! here. A tool's tier is computed from its footprint — `tame` when no class is wild — and never
//! labelled by hand; a tool that claims more reversibility than its footprint allows is refused
//! when the tool table is built ([`ToolDecl::check`]).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::axis::Axis;

/// How far the effects of a class can be undone. Ordered from most to least reversible, so the
/// ceiling of a footprint is the maximum of its classes' ceilings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reversibility {
    /// Changes nothing.
    ReadOnly,
    /// Changes something an undo restores exactly (a journaled file edit, a local ref).
    RoundTrip,
    /// Irreversible, but bounded in advance by the token (a push to a listed remote, a fetch from
    /// a listed host, a letter to a covered inbox).
    Bounded,
    /// No bound at all: a shell, cloud credentials, anything unknown.
    Wild,
}

impl fmt::Display for Reversibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReadOnly => "read-only",
            Self::RoundTrip => "round-trip",
            Self::Bounded => "bounded",
            Self::Wild => "wild",
        })
    }
}

/// Whether a call runs on its own or is reviewed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Every class is undoable or bounded by a token: runs without review.
    Tame,
    /// Some class has no bound: reviewed before it runs.
    Wild,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tame => "tame",
            Self::Wild => "wild",
        })
    }
}

/// One way of reaching part of the world. A tool body can only use the classes it declares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectClass {
    /// Reading files under the agent's roots.
    FsRead,
    /// Writing files under the agent's write roots, journaled to the undo ref.
    FsWrite,
    /// The content-addressed blob store.
    Blob,
    /// Reading the agent tree (names, states).
    TreeView,
    /// Reading the clock.
    Clock,
    /// Reading refs under granted prefixes.
    GitRead,
    /// Writing local refs under granted prefixes.
    GitWrite,
    /// Pushing to granted remotes.
    GitPush,
    /// HTTP to granted hosts.
    Net,
    /// Letters to covered inboxes.
    Mail,
    /// Staging letters for other hubs.
    Airmail,
    /// Spawning and driving children through the spawn gate.
    Spawn,
    /// Running build stages in containers.
    Build,
    /// Running a built artifact by digest.
    Run,
    /// A sandboxed shell.
    Shell,
    /// Any other wild class, by name (e.g. `aws`). Unknown classes are wild.
    Other(String),
}

impl EffectClass {
    /// The class's reversibility ceiling, declared once for the whole system.
    pub fn ceiling(&self) -> Reversibility {
        use EffectClass::*;
        match self {
            FsRead | TreeView | Clock | GitRead => Reversibility::ReadOnly,
            FsWrite | Blob | GitWrite => Reversibility::RoundTrip,
            GitPush | Net | Mail | Airmail | Spawn | Build | Run => Reversibility::Bounded,
            Shell | Other(_) => Reversibility::Wild,
        }
    }

    /// The grant axis that confers this class, or `None` for the five classes every agent holds
    /// (file read, file write within its own roots, blob store, tree view, clock).
    pub fn axis(&self) -> Option<Axis> {
        use EffectClass::*;
        match self {
            FsRead | FsWrite | Blob | TreeView | Clock => None,
            GitRead => Some(Axis::GitRead),
            GitWrite => Some(Axis::GitWrite),
            GitPush => Some(Axis::GitPush),
            Net => Some(Axis::Net),
            Mail => Some(Axis::Mail),
            Airmail => Some(Axis::Airmail),
            Spawn => Some(Axis::Spawn),
            Build => Some(Axis::Build),
            Run => Some(Axis::Run),
            Shell | Other(_) => Some(Axis::Wild),
        }
    }

    /// The class's stable name, as written in footprints.
    pub fn name(&self) -> &str {
        use EffectClass::*;
        match self {
            FsRead => "fs-read",
            FsWrite => "fs-write",
            Blob => "blob",
            TreeView => "tree-view",
            Clock => "clock",
            GitRead => "git-read",
            GitWrite => "git-write",
            GitPush => "git-push",
            Net => "net",
            Mail => "mail",
            Airmail => "airmail",
            Spawn => "spawn",
            Build => "build",
            Run => "run",
            Shell => "shell",
            Other(name) => name,
        }
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of classes a tool or program uses. Its tier follows from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Footprint(pub BTreeSet<EffectClass>);

impl Footprint {
    /// A footprint of the given classes.
    pub fn of(classes: impl IntoIterator<Item = EffectClass>) -> Self {
        Self(classes.into_iter().collect())
    }

    /// The least reversible class in the footprint; an empty footprint is read-only.
    pub fn ceiling(&self) -> Reversibility {
        self.0
            .iter()
            .map(EffectClass::ceiling)
            .max()
            .unwrap_or(Reversibility::ReadOnly)
    }

    /// The class that sets the ceiling (the first such, in order), if any.
    pub fn limiting_class(&self) -> Option<&EffectClass> {
        let ceiling = self.ceiling();
        self.0.iter().find(|c| c.ceiling() == ceiling)
    }

    /// `tame` unless some class is wild.
    pub fn tier(&self) -> Tier {
        if self.ceiling() == Reversibility::Wild {
            Tier::Wild
        } else {
            Tier::Tame
        }
    }

    /// The axes a grant must confer before a tool with this footprint may be offered.
    pub fn required_axes(&self) -> BTreeSet<Axis> {
        self.0.iter().filter_map(EffectClass::axis).collect()
    }
}

/// A tool as declared to the tool table: its name, footprint, and the reversibility it claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDecl {
    /// The tool's name as offered to the model.
    pub name: String,
    /// The classes its body uses.
    pub footprint: Footprint,
    /// The reversibility the tool advertises (e.g. to let its calls skip review).
    pub claims: Reversibility,
}

/// A tool declaration the tool table refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectError {
    /// The tool claims to be more reversible than its least reversible class allows.
    #[error(
        "tool {tool:?} claims {claimed} but its footprint allows at most {allowed} \
         (class {class:?} is {allowed}); declare the weaker claim or drop the class"
    )]
    OverClaim {
        /// The tool.
        tool: String,
        /// What it claimed.
        claimed: Reversibility,
        /// The ceiling its footprint allows.
        allowed: Reversibility,
        /// The class that sets that ceiling.
        class: String,
    },
}

impl ToolDecl {
    /// Admits the declaration and returns its tier, or refuses an over-claim.
    pub fn check(&self) -> Result<Tier, EffectError> {
        let allowed = self.footprint.ceiling();
        if self.claims < allowed {
            let class = self.footprint.limiting_class().map(|c| c.name().to_owned());
            return Err(EffectError::OverClaim {
                tool: self.name.clone(),
                claimed: self.claims,
                allowed,
                class: class.unwrap_or_default(),
            });
        }
        Ok(self.footprint.tier())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn class() -> impl Strategy<Value = EffectClass> {
        use EffectClass::*;
        prop_oneof![
            Just(FsRead),
            Just(FsWrite),
            Just(Blob),
            Just(TreeView),
            Just(Clock),
            Just(GitRead),
            Just(GitWrite),
            Just(GitPush),
            Just(Net),
            Just(Mail),
            Just(Airmail),
            Just(Spawn),
            Just(Build),
            Just(Run),
            Just(Shell),
            "[a-z]{1,8}".prop_map(Other),
        ]
    }

    fn reversibility() -> impl Strategy<Value = Reversibility> {
        prop_oneof![
            Just(Reversibility::ReadOnly),
            Just(Reversibility::RoundTrip),
            Just(Reversibility::Bounded),
            Just(Reversibility::Wild),
        ]
    }

    #[test]
    fn read_tool_is_tame_and_shell_is_wild() {
        let read = Footprint::of([EffectClass::FsRead]);
        assert_eq!(read.tier(), Tier::Tame);
        let shell = Footprint::of([EffectClass::FsRead, EffectClass::Shell]);
        assert_eq!(shell.tier(), Tier::Wild);
        assert_eq!(Footprint::default().ceiling(), Reversibility::ReadOnly);
        assert_eq!(
            Footprint::of([EffectClass::Other("aws".into())]).tier(),
            Tier::Wild
        );
    }

    #[test]
    fn over_claim_names_the_limiting_class() {
        let decl = ToolDecl {
            name: "fetch".into(),
            footprint: Footprint::of([EffectClass::FsRead, EffectClass::Net]),
            claims: Reversibility::RoundTrip,
        };
        let err = decl.check().unwrap_err();
        assert_eq!(
            err,
            EffectError::OverClaim {
                tool: "fetch".into(),
                claimed: Reversibility::RoundTrip,
                allowed: Reversibility::Bounded,
                class: "net".into(),
            }
        );
    }

    proptest! {
        /// `over_claim_rejected`: a declaration is admitted exactly when its claim is no stronger
        /// than the footprint's ceiling, and the tier of an admitted tool is wild exactly when
        /// some class in it is wild.
        #[test]
        fn over_claim_rejected(classes in proptest::collection::btree_set(class(), 0..6), claims in reversibility()) {
            let footprint = Footprint(classes.clone());
            let decl = ToolDecl { name: "t".into(), footprint, claims };
            let weakest = classes.iter().map(EffectClass::ceiling).max().unwrap_or(Reversibility::ReadOnly);
            match decl.check() {
                Ok(tier) => {
                    prop_assert!(claims >= weakest);
                    prop_assert_eq!(tier == Tier::Wild, classes.iter().any(|c| c.ceiling() == Reversibility::Wild));
                }
                Err(EffectError::OverClaim { allowed, .. }) => {
                    prop_assert!(claims < weakest);
                    prop_assert_eq!(allowed, weakest);
                }
            }
        }

        /// Adding a class never makes a footprint more reversible (the ceiling is monotone).
        #[test]
        fn ceiling_is_monotone(classes in proptest::collection::btree_set(class(), 0..6), extra in class()) {
            let before = Footprint(classes.clone()).ceiling();
            let mut more = classes;
            more.insert(extra);
            prop_assert!(Footprint(more).ceiling() >= before);
        }
    }
}
