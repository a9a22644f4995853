//! ACR-relative paths, checked once at the edge.
//!
//! Every path a tool hands the ring is a string from a model. Before anything touches the disk it
//! becomes a [`RelPath`]: relative, UTF-8, free of `..` and NUL, free of control characters and
//! of the invisible format characters that reorder or hide text (a right-to-left override makes
//! `exe.txt` of `txt.exe` in every listing), normalised (`.` and empty components dropped). Whether the path is *allowed* (the harness's `.l3m/`, the write roots) is
//! decided separately, by the token; this module only decides whether the text is a path at all.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The harness's own directory at the top of every ACR; agents can read or write nothing in it.
pub const HARNESS_DIR: &str = ".l3m";

/// A path relative to an ACR, normalised and free of `..`: the only path type the ring's
/// providers accept, so that a climbing or absolute path cannot reach them at all.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath {
    /// Components joined by `/`; empty for the ACR root itself.
    text: String,
}

/// Why a string is not an ACR-relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path starts with `/`; ring paths are relative to the ACR.
    #[error("`{path}` is absolute; give a path relative to the agent's ACR (e.g. `workspace/x`)")]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path has a `..` component, which could climb out of the ACR.
    #[error("`{path}` has a `..` component; paths may not climb, name the file from the ACR down")]
    DotDot {
        /// The path as given.
        path: String,
    },
    /// The path contains a NUL byte, which no file name can hold.
    #[error("`{path}` contains a NUL byte")]
    Nul {
        /// The path as given, NUL escaped.
        path: String,
    },
    /// The path holds a control character or an invisible format character (a bidi override
    /// or isolate, a zero-width character, a line separator), which would make a listing show
    /// another name than the file has.
    #[error(
        "`{path}` holds the invisible or control character {character}; name the file with \
         visible characters only"
    )]
    Unprintable {
        /// The path as given, escaped.
        path: String,
        /// The first such character, as `U+XXXX`.
        character: String,
    },
}

/// Whether `c` may not appear in a path: core's unprintable characters (controls, and format
/// characters that reorder or hide text).
pub use l3m_core::unprintable::is_unprintable;

impl RelPath {
    /// The ACR root itself (the empty path).
    pub fn root() -> Self {
        Self {
            text: String::new(),
        }
    }

    /// Parses and normalises a path given by a tool or a grant.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        if text.contains('\0') {
            return Err(PathError::Nul {
                path: text.escape_default().to_string(),
            });
        }
        if let Some(c) = text.chars().find(|c| is_unprintable(*c)) {
            return Err(PathError::Unprintable {
                path: text.escape_debug().to_string(),
                character: format!("U+{:04X}", u32::from(c)),
            });
        }
        if text.starts_with('/') {
            return Err(PathError::Absolute { path: text.into() });
        }
        let mut parts = Vec::new();
        for part in text.split('/') {
            match part {
                "" | "." => {}
                ".." => return Err(PathError::DotDot { path: text.into() }),
                name => parts.push(name),
            }
        }
        Ok(Self {
            text: parts.join("/"),
        })
    }

    /// The path as `a/b/c` (empty for the root).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is the ACR root itself.
    pub fn is_root(&self) -> bool {
        self.text.is_empty()
    }

    /// The components, top first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.text.split('/').filter(|c| !c.is_empty())
    }

    /// Whether the path lies inside the harness's `.l3m/` (or is it).
    pub fn is_harness(&self) -> bool {
        self.components().next() == Some(HARNESS_DIR)
    }

    /// Whether `self` is `root` or lies below it, component-wise (`ab` is not within `a`).
    pub fn is_within(&self, root: &RelPath) -> bool {
        let mut mine = self.components();
        root.components().all(|r| mine.next() == Some(r))
    }

    /// Splits into the parent directory and the last component; `None` for the root.
    pub fn split_leaf(&self) -> Option<(RelPath, &str)> {
        if self.is_root() {
            return None;
        }
        Some(match self.text.rsplit_once('/') {
            Some((parent, leaf)) => (
                RelPath {
                    text: parent.into(),
                },
                leaf,
            ),
            None => (RelPath::root(), self.text.as_str()),
        })
    }

    /// The path of a child entry of this directory.
    pub fn join(&self, leaf: &str) -> Result<RelPath, PathError> {
        RelPath::parse(&format!("{}/{leaf}", self.text))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            f.write_str(".")
        } else {
            f.write_str(&self.text)
        }
    }
}

impl TryFrom<String> for RelPath {
    type Error = PathError;
    fn try_from(s: String) -> Result<Self, PathError> {
        RelPath::parse(&s)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> String {
        p.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalises_dots_and_slashes() {
        let p = RelPath::parse("./workspace//src/./lib.rs/").unwrap();
        assert_eq!(p.as_str(), "workspace/src/lib.rs");
        assert!(RelPath::parse("").unwrap().is_root());
        assert!(RelPath::parse("./").unwrap().is_root());
        assert_eq!(RelPath::root().to_string(), ".");
    }

    #[test]
    fn refuses_climbing_absolute_and_nul() {
        assert!(matches!(
            RelPath::parse("a/../../x"),
            Err(PathError::DotDot { .. })
        ));
        assert!(matches!(
            RelPath::parse("../x"),
            Err(PathError::DotDot { .. })
        ));
        assert!(matches!(
            RelPath::parse("/etc/passwd"),
            Err(PathError::Absolute { .. })
        ));
        assert!(matches!(RelPath::parse("a\0b"), Err(PathError::Nul { .. })));
    }

    #[test]
    fn refuses_bidi_overrides_and_control_characters() {
        for bad in [
            "workspace/report\u{202E}fdp.exe",
            "workspace/a\u{2066}b",
            "zero\u{200B}width",
            "line\u{2028}sep",
            "esc\x1b[2J",
            "cr\rlf",
            "c1\u{9b}",
            "del\u{7f}",
        ] {
            let refused = RelPath::parse(bad).unwrap_err();
            assert!(matches!(refused, PathError::Unprintable { .. }), "{bad:?}");
            let said = refused.to_string();
            assert!(said.contains("U+"), "{said}");
            assert!(!said.chars().any(is_unprintable), "{said:?}");
        }
        let err = RelPath::parse("a\u{202E}b").unwrap_err();
        assert!(err.to_string().contains("U+202E"), "{err}");
        assert!(RelPath::parse("workspace/ünïcode — ok ✓.md").is_ok());
    }

    #[test]
    fn harness_is_only_the_top_level_dir() {
        assert!(RelPath::parse(".l3m").unwrap().is_harness());
        assert!(RelPath::parse("./.l3m/undo.journal").unwrap().is_harness());
        assert!(!RelPath::parse("workspace/.l3m").unwrap().is_harness());
        assert!(!RelPath::parse(".l3mx").unwrap().is_harness());
    }

    #[test]
    fn within_is_component_wise() {
        let ws = RelPath::parse("workspace").unwrap();
        assert!(RelPath::parse("workspace/a").unwrap().is_within(&ws));
        assert!(ws.is_within(&ws));
        assert!(!RelPath::parse("workspace2/a").unwrap().is_within(&ws));
        assert!(!RelPath::root().is_within(&ws));
    }

    #[test]
    fn split_leaf_and_join_invert() {
        let p = RelPath::parse("a/b/c").unwrap();
        let (parent, leaf) = p.split_leaf().unwrap();
        assert_eq!((parent.as_str(), leaf), ("a/b", "c"));
        assert_eq!(parent.join(leaf).unwrap(), p);
        let top = RelPath::parse("a").unwrap();
        assert_eq!(top.split_leaf().unwrap(), (RelPath::root(), "a"));
        assert!(RelPath::root().split_leaf().is_none());
    }

    #[test]
    fn deserialising_checks_the_path() {
        let bad: Result<RelPath, _> = serde_json::from_str("\"../etc\"");
        assert!(bad.is_err());
        let good: RelPath = serde_json::from_str("\"a//b\"").unwrap();
        assert_eq!(good.as_str(), "a/b");
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(".".to_string()),
            Just(String::new()),
            "[a-z.]{1,4}".prop_filter("not dotdot", |s| s != ".."),
        ]
    }

    proptest! {
        #[test]
        fn parse_is_idempotent(segs in proptest::collection::vec(segment(), 0..6)) {
            let text = segs.join("/");
            prop_assume!(!text.starts_with('/'));
            let p = RelPath::parse(&text).unwrap();
            prop_assert_eq!(RelPath::parse(p.as_str()).unwrap(), p.clone());
            prop_assert!(p.components().all(|c| c != "." && c != ".." && !c.is_empty()));
        }

        #[test]
        fn every_path_is_within_each_of_its_prefixes(segs in proptest::collection::vec("[a-z]{1,3}", 0..6), cut in 0usize..6) {
            let p = RelPath::parse(&segs.join("/")).unwrap();
            let prefix = RelPath::parse(&segs[..cut.min(segs.len())].join("/")).unwrap();
            prop_assert!(p.is_within(&prefix));
        }
    }
}
