//! The git token: the ref prefixes an agent may read and write, and the remotes it may push to.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;

use super::{GitInput, TokenError, narrow_set};

/// The right to read refs under some prefixes, write refs under others, and push to listed
/// remotes. The git provider checks every ref name and remote against it.
#[derive(Debug)]
pub struct GitToken {
    /// Readable prefixes (`refs/l3m/a/alice/`); one not ending in `/` names a single ref.
    read_prefixes: BTreeSet<String>,
    /// Writable prefixes, same form.
    write_prefixes: BTreeSet<String>,
    /// Remotes the agent may push to.
    push_remotes: BTreeSet<String>,
}

impl GitToken {
    /// Made only by [`super::mint`] and [`GitToken::narrow`].
    pub(crate) fn new(
        read_prefixes: BTreeSet<String>,
        write_prefixes: BTreeSet<String>,
        push_remotes: BTreeSet<String>,
    ) -> Self {
        Self {
            read_prefixes,
            write_prefixes,
            push_remotes,
        }
    }

    /// Validates a [`GitInput`] into a token.
    pub(super) fn parse(input: &GitInput) -> Result<Self, TokenError> {
        Ok(Self::new(
            parse_prefixes(&input.read_prefixes)?,
            parse_prefixes(&input.write_prefixes)?,
            parse_remotes(&input.push_remotes)?,
        ))
    }

    /// The readable prefixes.
    pub fn read_prefixes(&self) -> &BTreeSet<String> {
        &self.read_prefixes
    }

    /// The writable prefixes.
    pub fn write_prefixes(&self) -> &BTreeSet<String> {
        &self.write_prefixes
    }

    /// The remotes this token pushes to.
    pub fn push_remotes(&self) -> &BTreeSet<String> {
        &self.push_remotes
    }

    /// Whether the full ref name `refname` may be read.
    pub fn may_read(&self, refname: &str) -> bool {
        self.read_prefixes.iter().any(|p| covers(p, refname))
    }

    /// Whether the full ref name `refname` may be written.
    pub fn may_write(&self, refname: &str) -> bool {
        self.write_prefixes.iter().any(|p| covers(p, refname))
    }

    /// Whether pushing to `remote` is allowed.
    pub fn may_push(&self, remote: &str) -> bool {
        self.push_remotes.contains(remote)
    }

    /// A token holding only what `narrower` lists, each prefix inside a held prefix of the same
    /// kind and each remote already held.
    pub fn narrow(&self, narrower: &GitInput) -> Result<GitToken, TokenError> {
        let asked = Self::parse(narrower)?;
        let prefix = |held: &String, asked: &String| covers(held, asked);
        Ok(Self::new(
            narrow_set(
                Axis::GitRead,
                &self.read_prefixes,
                asked.read_prefixes,
                prefix,
            )?,
            narrow_set(
                Axis::GitWrite,
                &self.write_prefixes,
                asked.write_prefixes,
                prefix,
            )?,
            narrow_set(
                Axis::GitPush,
                &self.push_remotes,
                asked.push_remotes,
                |h, a| h == a,
            )?,
        ))
    }
}

/// Whether `prefix` covers `name`: a prefix ending in `/` covers everything below it; any other
/// prefix covers exactly itself (so `refs/heads/ma` never covers `refs/heads/main`).
fn covers(prefix: &str, name: &str) -> bool {
    if prefix.ends_with('/') {
        name.starts_with(prefix)
    } else {
        name == prefix
    }
}

fn parse_prefixes(prefixes: &[String]) -> Result<BTreeSet<String>, TokenError> {
    prefixes
        .iter()
        .map(|p| {
            let refuse = |reason| TokenError::RefPrefix {
                prefix: p.clone(),
                reason,
            };
            if !p.starts_with("refs/") {
                Err(refuse("ref prefixes start with `refs/`"))
            } else if p.contains("..") || p.contains("//") || p.contains("@{") {
                Err(refuse("`..`, `//` and `@{` are not allowed in ref names"))
            } else if p
                .chars()
                .any(|c| c.is_control() || c == ' ' || "~^:?*[\\".contains(c))
            {
                Err(refuse(
                    "control characters, spaces and ~^:?*[\\ are not allowed in ref names",
                ))
            } else {
                Ok(p.clone())
            }
        })
        .collect()
}

fn parse_remotes(remotes: &[String]) -> Result<BTreeSet<String>, TokenError> {
    remotes
        .iter()
        .map(|r| {
            let plain = !r.is_empty()
                && !r.starts_with('-')
                && r.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if plain {
                Ok(r.clone())
            } else {
                Err(TokenError::Remote { remote: r.clone() })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(read: &[&str], write: &[&str], push: &[&str]) -> GitInput {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        GitInput {
            read_prefixes: own(read),
            write_prefixes: own(write),
            push_remotes: own(push),
        }
    }

    #[test]
    fn prefixes_cover_below_a_slash_and_exactly_otherwise() {
        let t = GitToken::parse(&input(
            &["refs/l3m/a/alice/", "refs/heads/main"],
            &["refs/heads/l3m/alice/"],
            &["origin"],
        ))
        .unwrap();
        assert!(t.may_read("refs/l3m/a/alice/main/_/log"));
        assert!(t.may_read("refs/heads/main") && !t.may_read("refs/heads/mainx"));
        assert!(!t.may_read("refs/l3m/a/bob/_/log"));
        assert!(t.may_write("refs/heads/l3m/alice/_/work") && !t.may_write("refs/heads/main"));
        assert!(t.may_push("origin") && !t.may_push("evil"));
    }

    #[test]
    fn refuses_malformed_prefixes_and_remotes() {
        for bad in ["heads/x", "refs/../x", "refs/a b", "refs/a*", "refs//x"] {
            assert!(GitToken::parse(&input(&[bad], &[], &[])).is_err(), "{bad}");
        }
        for bad in ["", "-x", "a/b", "ssh://h"] {
            assert!(GitToken::parse(&input(&[], &[], &[bad])).is_err(), "{bad}");
        }
    }

    #[test]
    fn narrows_within_and_refuses_widening_per_axis() {
        let t = GitToken::parse(&input(&["refs/l3m/a/alice/"], &[], &["origin"])).unwrap();
        let n = t
            .narrow(&input(&["refs/l3m/a/alice/main/"], &[], &[]))
            .unwrap();
        assert!(n.may_read("refs/l3m/a/alice/main/_/log") && !n.may_push("origin"));
        assert!(matches!(
            t.narrow(&input(&["refs/l3m/a/"], &[], &[])),
            Err(TokenError::Widening {
                axis: Axis::GitRead,
                ..
            })
        ));
        assert!(matches!(
            t.narrow(&input(&[], &["refs/l3m/a/alice/"], &[])),
            Err(TokenError::Widening {
                axis: Axis::GitWrite,
                ..
            })
        ));
        assert!(matches!(
            t.narrow(&input(&[], &[], &["other"])),
            Err(TokenError::Widening {
                axis: Axis::GitPush,
                ..
            })
        ));
    }
}
