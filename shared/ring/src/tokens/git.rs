//! The git token: the ref prefixes an agent may read and write, the remotes it may push to, and
//! the worktrees (under the ACR's write roots) the git provider may open.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use l3m_core::axis::Axis;
use l3m_core::grant::{GrantError, RefPrefix, RemoteName, Within as _};
use l3m_core::names::AgentName;

use super::{GitInput, PushInput, TokenError, narrow_set};
use crate::path::RelPath;

/// The right to read refs under some prefixes, write refs under others, and push listed refs to
/// listed remotes, in worktrees under the ACR's write roots. The git provider checks every ref
/// name, remote and worktree against it.
#[derive(Debug)]
pub struct GitToken {
    /// The agent: author and committer of every commit made through this token.
    author: AgentName,
    /// Readable prefixes (`refs/l3m/a/alice/`); one not ending in `/` names a single ref.
    read_prefixes: BTreeSet<RefPrefix>,
    /// Writable prefixes, same form: a commit may move only a branch under one of them.
    write_prefixes: BTreeSet<RefPrefix>,
    /// Remotes the agent may push to, by name.
    push: BTreeMap<RemoteName, PushTarget>,
    /// The ACR the worktrees live in (as the files token opened it).
    acr: PathBuf,
    /// Where a worktree may lie: the files token's write roots (none if files is not conferred).
    worktree_roots: BTreeSet<RelPath>,
}

/// Where pushes to one granted remote go, and what may be pushed there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushTarget {
    /// The one URL, exactly as the hub's settings give it; pushes go here and nowhere else.
    url: String,
    /// The refs that may be pushed to it.
    prefixes: BTreeSet<RefPrefix>,
}

impl PushTarget {
    /// The URL pushes go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The ref prefixes that may be pushed there.
    pub fn prefixes(&self) -> &BTreeSet<RefPrefix> {
        &self.prefixes
    }

    /// Whether the full ref name `refname` may be pushed there.
    pub fn may_push(&self, refname: &str) -> bool {
        self.prefixes.iter().any(|p| p.matches(refname))
    }
}

impl GitToken {
    /// Validates a [`GitInput`] into a token whose worktrees lie under `worktree_roots` of `acr`.
    pub(super) fn parse(
        input: &GitInput,
        acr: &Path,
        worktree_roots: BTreeSet<RelPath>,
    ) -> Result<Self, TokenError> {
        Ok(Self {
            author: input.author.clone(),
            read_prefixes: parse_prefixes(&input.read_prefixes)?,
            write_prefixes: parse_prefixes(&input.write_prefixes)?,
            push: parse_push(&input.push)?,
            acr: acr.to_path_buf(),
            worktree_roots,
        })
    }

    /// The agent commits are made as.
    pub fn author(&self) -> &AgentName {
        &self.author
    }

    /// The readable prefixes.
    pub fn read_prefixes(&self) -> &BTreeSet<RefPrefix> {
        &self.read_prefixes
    }

    /// The writable prefixes.
    pub fn write_prefixes(&self) -> &BTreeSet<RefPrefix> {
        &self.write_prefixes
    }

    /// The remotes this token pushes to, with their URLs and prefixes.
    pub fn push_targets(&self) -> &BTreeMap<RemoteName, PushTarget> {
        &self.push
    }

    /// The ACR the worktrees live in.
    pub fn acr_path(&self) -> &Path {
        &self.acr
    }

    /// The directories (relative to the ACR) under which a worktree may be opened.
    pub fn worktree_roots(&self) -> &BTreeSet<RelPath> {
        &self.worktree_roots
    }

    /// Whether the full ref name `refname` may be read.
    pub fn may_read(&self, refname: &str) -> bool {
        self.read_prefixes.iter().any(|p| p.matches(refname))
    }

    /// Whether the full ref name `refname` may be written.
    pub fn may_write(&self, refname: &str) -> bool {
        self.write_prefixes.iter().any(|p| p.matches(refname))
    }

    /// The granted remote `remote` names: matched exactly against a granted remote's name or
    /// its URL as granted (no normalisation, so `file:///a/../b` never matches `file:///b`).
    pub fn push_target(&self, remote: &str) -> Option<(&RemoteName, &PushTarget)> {
        self.push
            .iter()
            .find(|(name, target)| name.as_str() == remote || target.url == remote)
    }

    /// A token holding only what `narrower` lists: each prefix inside a held prefix of the same
    /// kind, each remote held with the same URL and narrower prefixes. Worktrees stay as held.
    pub fn narrow(&self, narrower: &GitInput) -> Result<GitToken, TokenError> {
        let asked = Self::parse(narrower, &self.acr, self.worktree_roots.clone())?;
        let prefix = |held: &RefPrefix, asked: &RefPrefix| asked.within(held);
        let mut push = BTreeMap::new();
        for (remote, target) in asked.push {
            let held_prefixes = self
                .push
                .get(&remote)
                .filter(|held| held.url == target.url)
                .map(|held| held.prefixes.clone())
                .ok_or_else(|| TokenError::Widening {
                    axis: Axis::GitPush,
                    asked: format!("{remote} ({})", target.url),
                    held: self
                        .push
                        .iter()
                        .map(|(r, t)| format!("{r} ({})", t.url))
                        .collect(),
                })?;
            let prefixes = narrow_set(Axis::GitPush, &held_prefixes, target.prefixes, prefix)?;
            push.insert(
                remote,
                PushTarget {
                    url: target.url,
                    prefixes,
                },
            );
        }
        Ok(Self {
            author: self.author.clone(),
            read_prefixes: narrow_set(
                Axis::GitRead,
                &self.read_prefixes,
                asked.read_prefixes,
                prefix,
            )?,
            write_prefixes: narrow_set(
                Axis::GitWrite,
                &self.write_prefixes,
                asked.write_prefixes,
                prefix,
            )?,
            push,
            acr: self.acr.clone(),
            worktree_roots: self.worktree_roots.clone(),
        })
    }
}

/// Validates ref prefixes with the grant's own rules, so there is one definition of a prefix.
fn parse_prefixes(prefixes: &[String]) -> Result<BTreeSet<RefPrefix>, TokenError> {
    prefixes
        .iter()
        .map(|p| {
            RefPrefix::parse(p).map_err(|e| TokenError::RefPrefix {
                prefix: p.clone(),
                reason: reason_of(e),
            })
        })
        .collect()
}

fn parse_push(push: &[PushInput]) -> Result<BTreeMap<RemoteName, PushTarget>, TokenError> {
    push.iter()
        .map(|p| {
            let remote = RemoteName::parse(&p.remote).map_err(|e| TokenError::Remote {
                remote: p.remote.clone(),
                reason: reason_of(e),
            })?;
            check_url(&p.remote, &p.url)?;
            Ok((
                remote,
                PushTarget {
                    url: p.url.clone(),
                    prefixes: parse_prefixes(&p.prefixes)?,
                },
            ))
        })
        .collect()
}

/// Refuses a URL git could read as an option, or whose transport runs a command (the one
/// check hub settings pass too: [`l3m_core::settings::check_remote_url`]).
fn check_url(remote: &str, url: &str) -> Result<(), TokenError> {
    l3m_core::settings::check_remote_url(url).map_err(|reason| TokenError::RemoteUrl {
        remote: remote.to_owned(),
        url: url.to_owned(),
        reason,
    })
}

fn reason_of(error: GrantError) -> String {
    match error {
        GrantError::BadRefPrefix { reason, .. } | GrantError::BadRemote { reason, .. } => reason,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn input(read: &[&str], write: &[&str], push: &[(&str, &str, &[&str])]) -> GitInput {
        GitInput {
            author: AgentName::parse("alice").unwrap(),
            read_prefixes: own(read),
            write_prefixes: own(write),
            push: push
                .iter()
                .map(|(remote, url, prefixes)| PushInput {
                    remote: remote.to_string(),
                    url: url.to_string(),
                    prefixes: own(prefixes),
                })
                .collect(),
        }
    }

    fn parse(input: &GitInput) -> Result<GitToken, TokenError> {
        GitToken::parse(input, Path::new("/acr"), BTreeSet::new())
    }

    #[test]
    fn prefixes_cover_below_a_slash_and_exactly_otherwise() {
        let t = parse(&input(
            &["refs/l3m/a/alice/", "refs/heads/main"],
            &["refs/heads/l3m/alice/"],
            &[("origin", "file:///srv/up.git", &["refs/heads/l3m/alice/"])],
        ))
        .unwrap();
        assert!(t.may_read("refs/l3m/a/alice/main/_/log"));
        assert!(t.may_read("refs/heads/main") && !t.may_read("refs/heads/mainx"));
        assert!(!t.may_read("refs/l3m/a/bob/_/log"));
        assert!(t.may_write("refs/heads/l3m/alice/_/work") && !t.may_write("refs/heads/main"));
        let (_, target) = t.push_target("origin").unwrap();
        assert!(target.may_push("refs/heads/l3m/alice/_/work"));
        assert!(!target.may_push("refs/heads/main"));
        assert!(t.push_target("file:///srv/up.git").is_some());
        assert!(t.push_target("file:///srv/x/../up.git").is_none());
        assert!(t.push_target("evil").is_none());
    }

    #[test]
    fn refuses_malformed_prefixes_remotes_and_urls() {
        for bad in ["heads/x", "refs/../x", "refs/a b", "refs/a*", "refs//x"] {
            assert!(parse(&input(&[bad], &[], &[])).is_err(), "{bad}");
        }
        for bad in ["", "-x", "a/b", "ssh://h"] {
            assert!(
                matches!(
                    parse(&input(&[], &[], &[(bad, "file:///x", &[])])),
                    Err(TokenError::Remote { .. })
                ),
                "{bad}"
            );
        }
        for bad in [
            "",
            "--upload-pack=x",
            "ext::sh -c x",
            "ext::sh",
            "fd::3",
            "a\nb",
        ] {
            assert!(
                matches!(
                    parse(&input(&[], &[], &[("o", bad, &[])])),
                    Err(TokenError::RemoteUrl { .. })
                ),
                "{bad:?}"
            );
        }
        for good in [
            "file:///srv/up.git",
            "https://h.org/r.git",
            "git@h.org:r.git",
        ] {
            assert!(
                parse(&input(&[], &[], &[("o", good, &[])])).is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn narrows_within_and_refuses_widening_per_axis() {
        let url = "file:///srv/up.git";
        let t = parse(&input(
            &["refs/l3m/a/alice/"],
            &[],
            &[("origin", url, &["refs/heads/l3m/alice/"])],
        ))
        .unwrap();
        let n = t
            .narrow(&input(&["refs/l3m/a/alice/main/"], &[], &[]))
            .unwrap();
        assert!(n.may_read("refs/l3m/a/alice/main/_/log") && n.push_target("origin").is_none());
        let axis_of = |r: Result<GitToken, TokenError>| match r {
            Err(TokenError::Widening { axis, .. }) => Some(axis),
            _ => None,
        };
        assert_eq!(
            axis_of(t.narrow(&input(&["refs/l3m/a/"], &[], &[]))),
            Some(Axis::GitRead)
        );
        assert_eq!(
            axis_of(t.narrow(&input(&[], &["refs/l3m/a/alice/"], &[]))),
            Some(Axis::GitWrite)
        );
        for push in [
            ("other", url, &["refs/heads/l3m/alice/"][..]),
            (
                "origin",
                "file:///srv/other.git",
                &["refs/heads/l3m/alice/"][..],
            ),
            ("origin", url, &["refs/heads/"][..]),
        ] {
            assert_eq!(
                axis_of(t.narrow(&input(&[], &[], &[push]))),
                Some(Axis::GitPush)
            );
        }
        let n = t
            .narrow(&input(
                &[],
                &[],
                &[("origin", url, &["refs/heads/l3m/alice/_/"])],
            ))
            .unwrap();
        assert!(
            n.push_target(url)
                .unwrap()
                .1
                .may_push("refs/heads/l3m/alice/_/work")
        );
    }
}
