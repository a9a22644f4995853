//! A hub-like layout for git provider tests, built by `make_worktree.sh`: a bare hub
//! repository, alice's ACR with a worktree of it at `workspace`, and two bare "remotes".

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tokens::{GitInput, GitToken, MintInput, PushInput, Tokens, mint};
use crate::undo::MemoryUndo;
use l3m_core::names::AgentName;

/// The fixture script that lays the repositories out.
const MAKE_WORKTREE: &str = include_str!("make_worktree.sh");

/// The branch alice's worktree has checked out.
pub const WORK: &str = "refs/heads/l3m/alice/_/work";

/// The fixture on disk; removed when dropped.
pub struct GitHub {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub acr: PathBuf,
    pub ws: PathBuf,
    pub remote_url: String,
    pub other_url: String,
    /// alice's undo entries, kept in memory.
    pub journal: MemoryUndo,
}

impl GitHub {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let status = Command::new("sh")
            .args(["-c", MAKE_WORKTREE, "make_worktree.sh"])
            .arg(root.path())
            .status()
            .unwrap();
        assert!(status.success(), "make_worktree.sh failed");
        let path = root.path().to_path_buf();
        let journal = MemoryUndo::default();
        Self {
            journal,
            acr: path.join("acr"),
            ws: path.join("acr/workspace"),
            remote_url: format!("file://{}", path.join("remote.git").display()),
            other_url: format!("file://{}", path.join("other.git").display()),
            root: path,
            _root: root,
        }
    }

    /// Tokens with files on `workspace`, git read and write on alice's branches, and push of
    /// them to `origin` (the `remote.git` URL).
    pub fn tokens(&self) -> Tokens {
        let own = "refs/heads/l3m/alice/".to_owned();
        let input = MintInput {
            acr: self.acr.clone(),
            files: Some(vec!["workspace".into()]),
            git: Some(GitInput {
                author: AgentName::parse("alice").unwrap(),
                read_prefixes: vec![own.clone()],
                write_prefixes: vec![own.clone()],
                push: vec![PushInput {
                    remote: "origin".into(),
                    url: self.remote_url.clone(),
                    prefixes: vec![own],
                }],
            }),
            ..MintInput::default()
        };
        mint(&input, crate::ambient_authority()).unwrap()
    }

    pub fn token(&self) -> GitToken {
        self.tokens().git.unwrap()
    }

    /// Runs `git` with no system or global config; returns stdout, asserting success.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = git_cmd(dir, args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The commit `refname` points at in the bare repository `repo` (`None` if absent).
    pub fn tip(&self, repo: &str, refname: &str) -> Option<String> {
        let out = git_cmd(
            &self.root.join(repo),
            &["rev-parse", "--verify", "-q", refname],
        )
        .output()
        .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
    }

    /// Every ref of a bare repository with its target, for "nothing changed" checks.
    pub fn refs(&self, repo: &str) -> String {
        self.git(&self.root.join(repo), &["for-each-ref"])
    }
}

fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = l3m_git::command(dir);
    cmd.args(args);
    cmd
}
