//! The agent's ACR as this host keeps it: a clone of the agent's work and persona branches,
//! fetched from hubd and pushed back through hubd, on whichever host runs the agent.
//!
//! Layout, under the host's forest (`<hub>/forest` on the hub's own host):
//! - `<agent>/self.git/`: a bare repository holding the clone's objects and refs, outside the
//!   ACR, so the agent can write nothing of it (config, hooks, refs);
//! - `<agent>/self/workspace/`: a linked worktree on the work branch, under the hub's own name
//!   for it (so the grant's ref prefixes read the same here as in the hub);
//! - `<agent>/self/agent/`: a linked worktree detached at the persona branch's tip;
//! - `<agent>/self/.l3m/`: the harness's own directory.
//!
//! The clone remembers where hubd last had each branch (`refs/hub/work`, `refs/hub/persona`),
//! so [`Acr::sync`] knows what to push: the commits the work branch gained since (a
//! fast-forward), or a move back to one of its ancestors (a rewind). hubd checks every push
//! (only this agent's sequencer, only its own branches, fast-forward or along its history,
//! objects well-formed and within limits) before it moves a ref; nothing here touches
//! `hub.git`, so the same path serves a sequencer on the hub's host and on any other.
//!
//! [`Acr::ready`] runs at boot: it fetches, pushes what an earlier process committed but did
//! not push, fast-forwards a clone left behind (another host ran the agent meanwhile), keeps a
//! diverged tip under `refs/orphaned/` rather than lose it, and makes the checkouts. A
//! directory already there that is not one of this clone's checkouts (an earlier hubd's
//! worktree of `hub.git`, or files put there before the first boot) is adopted: its files stay
//! as they are, as uncommitted changes against the branch.

use std::path::{Path, PathBuf};

use l3m_core::names::AgentName;
use l3m_core::refs::{self, paths};
use l3m_git::{self as git, Bounds, Ran};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::pack::{MAX_PACK_BYTES, RefUpdate};

/// Where the clone keeps the work branch's tip as hubd last had it.
const HUB_WORK: &str = "refs/hub/work";
/// Where the clone keeps the persona branch's tip as hubd last had it.
const HUB_PERSONA: &str = "refs/hub/persona";
/// The most of git's answer kept for a ref listing or an id.
const ANSWER_BYTES: u64 = 1 << 16;

/// Why the ACR could not be made ready or synced.
#[derive(Debug, thiserror::Error)]
pub enum AcrError {
    /// git failed on the clone.
    #[error("the ACR of {agent}: git {args} failed: {detail}")]
    Git {
        /// Whose ACR.
        agent: AgentName,
        /// The git arguments.
        args: String,
        /// What git said.
        detail: String,
    },
    /// A file operation on the ACR failed.
    #[error("the ACR of {agent}: {action} {}: {source}", path.display())]
    Io {
        /// Whose ACR.
        agent: AgentName,
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// hubd refused or failed a fetch or a push.
    #[error("the ACR of {agent}: {action} through hubd: {source}")]
    Hub {
        /// Whose ACR.
        agent: AgentName,
        /// Fetching or pushing.
        action: &'static str,
        /// hubd's answer.
        #[source]
        source: l3m_wire::client::ClientError,
    },
    /// hubd holds no work branch for the agent (it was collected, or never spawned).
    #[error("the hub holds no work branch for {0}; it cannot be run")]
    NoWorkBranch(AgentName),
    /// The blocking git work was stopped before it finished (the runtime is shutting down).
    #[error("the ACR of {0}: its git work was stopped before it finished")]
    Stopped(AgentName),
}

/// What [`Acr::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// The hub already had the work branch where the clone has it.
    Already,
    /// The hub's work branch moved, from the first commit to the second.
    Moved(String, String),
}

/// One agent's ACR on this host: where it lies and how to keep it in step with the hub.
#[derive(Debug, Clone)]
pub struct Acr {
    agent: AgentName,
    root: PathBuf,
    repo: PathBuf,
}

impl Acr {
    /// The ACR of `agent` in the forest at `forest`.
    pub fn at(forest: &Path, agent: &AgentName) -> Acr {
        Acr {
            agent: agent.clone(),
            root: forest.join(paths::acr_in_forest(agent)),
            repo: forest.join(paths::repository_in_forest(agent)),
        }
    }

    /// The ACR's directory, what the agent's tokens are minted over.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes the ACR and its clone, what this host kept for an agent that is retired: the
    /// hub keeps its branches, so nothing is lost. Returns whether anything was there.
    pub fn forget(&self) -> Result<bool, AcrError> {
        let mut removed = false;
        for dir in [&self.root, &self.repo] {
            match std::fs::remove_dir_all(dir) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(AcrError::Io {
                        agent: self.agent.clone(),
                        action: "removing",
                        path: dir.clone(),
                        source,
                    });
                }
            }
        }
        Ok(removed)
    }

    /// Makes the ACR ready to run the agent: the clone fetched from hubd, commits an earlier
    /// process left unpushed pushed, both checkouts in place. Call it holding the agent's lease.
    pub async fn ready(&self, client: &HubClient) -> Result<(), AcrError> {
        let me = self.clone();
        let have = self
            .blocking(move || {
                me.init()?;
                me.haves()
            })
            .await?;
        let fetched = client
            .fetch_pack(&self.agent, &have)
            .await
            .map_err(|source| self.hub_error("fetching", source))?;
        let me = self.clone();
        self.blocking(move || {
            if !fetched.pack.is_empty() {
                me.git(&["index-pack", "--stdin"], &fetched.pack)?;
            }
            let work = fetched
                .work
                .ok_or_else(|| AcrError::NoWorkBranch(me.agent.clone()))?;
            // Each becomes a git argument: nothing but a commit id is taken.
            let persona = fetched.persona.map(|p| me.commit_id(p)).transpose()?;
            let work = me.commit_id(work)?;
            me.git(&["update-ref", HUB_WORK, &work], &[])?;
            if let Some(persona) = &persona {
                me.git(&["update-ref", HUB_PERSONA, persona], &[])?;
            }
            me.catch_up(&work)?;
            let workspace = me.root.join("workspace");
            let branch = refs::work_branch(&me.agent);
            let short = branch.trim_start_matches("refs/heads/").to_owned();
            me.checkout(&workspace, &["--quiet", &short])?;
            if let Some(persona) = &persona {
                me.checkout(&me.root.join("agent"), &["--quiet", "--detach", persona])?;
            }
            let harness = me.root.join(l3m_ring::path::HARNESS_DIR);
            std::fs::create_dir_all(&harness).map_err(|e| me.io("creating", &harness, e))
        })
        .await?;
        self.sync(client).await.map(drop)
    }

    /// Pushes the work branch to hubd if it moved since hubd last had it: forward (the commits
    /// it gained) or back along its history (a rewind); a branch that did both goes back to
    /// where the two meet, then forward. hubd checks each push before it moves the branch.
    pub async fn sync(&self, client: &HubClient) -> Result<Synced, AcrError> {
        let me = self.clone();
        let (local, hub) = self
            .blocking(move || {
                let local = me.tip(&refs::work_branch(&me.agent))?;
                Ok((local, me.tip(HUB_WORK)?))
            })
            .await?;
        let (Some(local), Some(hub)) = (local, hub) else {
            return Ok(Synced::Already);
        };
        if local == hub {
            return Ok(Synced::Already);
        }
        let me = self.clone();
        let (from, to) = (hub.clone(), local.clone());
        let (meet, pack) = self
            .blocking(move || {
                let meet = me.merge_base(&from, &to)?;
                let pack = match meet.as_deref() == Some(to.as_str()) {
                    true => Vec::new(),
                    false => me.pack(&to, meet.as_deref())?,
                };
                Ok((meet, pack))
            })
            .await?;
        let mut at = hub.clone();
        if let Some(meet) = meet.filter(|m| *m != hub) {
            self.push(client, &at, &meet, true, &[]).await?;
            at = meet;
        }
        if at != local {
            self.push(client, &at, &local, false, &pack).await?;
        }
        Ok(Synced::Moved(hub, local))
    }

    /// One push of the work branch from `old` to `new`, then the clone's record of the hub.
    async fn push(
        &self,
        client: &HubClient,
        old: &str,
        new: &str,
        back: bool,
        pack: &[u8],
    ) -> Result<(), AcrError> {
        let update = RefUpdate {
            refname: refs::work_branch(&self.agent),
            old: old.to_owned(),
            new: new.to_owned(),
            back,
        };
        client
            .push_pack(&self.agent, vec![update], pack)
            .await
            .map_err(|source| self.hub_error("pushing", source))?;
        let me = self.clone();
        let (old, new) = (old.to_owned(), new.to_owned());
        self.blocking(move || me.git(&["update-ref", HUB_WORK, &new, &old], &[]).map(drop))
            .await
    }

    /// `id` if it is a commit id as hubd names them (hex, SHA-1 or SHA-256 long).
    fn commit_id(&self, id: String) -> Result<String, AcrError> {
        let hex = id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        match (hex, id.len()) {
            (true, 40 | 64) => Ok(id),
            _ => Err(self.git_error(
                &["update-ref"],
                format!(
                    "hubd named {:?} as a branch tip, which is no commit id",
                    id.chars().take(80).collect::<String>()
                ),
            )),
        }
    }

    /// Creates the bare repository if there is none.
    fn init(&self) -> Result<(), AcrError> {
        if self.repo.join("HEAD").is_file() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.repo).map_err(|e| self.io("creating", &self.repo, e))?;
        self.git(&["init", "--quiet", "--bare"], &[])?;
        Ok(())
    }

    /// The commits the clone holds that a fetch need not bring again.
    fn haves(&self) -> Result<Vec<String>, AcrError> {
        let mut have = Vec::new();
        for refname in [&refs::work_branch(&self.agent), HUB_WORK, HUB_PERSONA] {
            if let Some(tip) = self.tip(refname)?
                && !have.contains(&tip)
            {
                have.push(tip);
            }
        }
        Ok(have)
    }

    /// Brings the local work branch level with or ahead of hubd's `work`: absent, it starts
    /// there; behind, it fast-forwards (with the checkout, keeping local changes); ahead, it
    /// stays for [`Acr::sync`] to push; diverged, its tip is kept under `refs/orphaned/` and the
    /// branch follows hubd, which is where the agent's Log says its work stands.
    fn catch_up(&self, work: &str) -> Result<(), AcrError> {
        let branch = refs::work_branch(&self.agent);
        let Some(local) = self.tip(&branch)? else {
            return self.git(&["update-ref", &branch, work], &[]).map(drop);
        };
        let meet = self.merge_base(&local, work)?;
        if local == work || meet.as_deref() == Some(work) {
            return Ok(());
        }
        if meet.as_deref() != Some(local.as_str()) {
            let kept = format!("refs/orphaned/work-{local}");
            self.git(&["update-ref", &kept, &local], &[])?;
            tracing::warn!(agent = %self.agent, local, hub = work, kept, "the ACR's work branch left the hub's; kept its tip and followed the hub");
        }
        let workspace = self.root.join("workspace");
        if self.is_ours(&workspace)?
            && let Err(error) = self.git_in(&workspace, &["reset", "--quiet", "--keep", work])
        {
            // Local changes touch what the hub's commits changed: the branch follows the hub
            // and the files stay as they are, shown as changes against it.
            tracing::warn!(agent = %self.agent, %error, "the workspace's changes kept it from following the hub's branch; its files stay as they were");
            self.git(&["update-ref", &branch, work], &[])?;
            return self.git_in(&workspace, &["reset", "--quiet"]);
        }
        self.git(&["update-ref", &branch, work], &[]).map(drop)
    }

    /// Makes `dir` a checkout of the clone (`worktree add` with `what`), adopting the files of a
    /// directory already there.
    fn checkout(&self, dir: &Path, what: &[&str]) -> Result<(), AcrError> {
        let aside = dir.with_extension("adopting");
        if aside.exists() && !dir.exists() {
            // An adoption stopped before its checkout was made: start it again.
            std::fs::rename(&aside, dir).map_err(|e| self.io("renaming", &aside, e))?;
        }
        if !aside.exists() {
            if self.is_ours(dir)? {
                return Ok(());
            }
            if !is_empty_or_absent(dir).map_err(|e| self.io("reading", dir, e))? {
                std::fs::rename(dir, &aside).map_err(|e| self.io("renaming", dir, e))?;
            }
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(|e| self.io("creating", parent, e))?;
            }
            // Forget checkouts whose directories are gone (deleted, or just set aside).
            self.git(&["worktree", "prune"], &[])?;
            let mut args = vec!["worktree", "add", "--no-checkout"];
            let dir_text = dir.to_string_lossy().into_owned();
            let (flags, commit) = what.split_at(what.len() - 1);
            args.extend(flags);
            args.push(&dir_text);
            args.extend(commit);
            self.git(&args, &[])?;
        }
        if aside.exists() {
            self.adopt(&aside, dir)?;
            // The index follows HEAD; the adopted files are the checkout's changes.
            return self.git_in(dir, &["reset", "--quiet"]);
        }
        self.git_in(dir, &["checkout", "--quiet", "--force"])
    }

    /// Moves every entry of `aside` into `dir` but a `.git` file (an earlier checkout's
    /// pointer), then removes `aside`. An agent's own `.git` directory is kept, renamed, never
    /// used: the git provider opens only repositories outside the ACR.
    fn adopt(&self, aside: &Path, dir: &Path) -> Result<(), AcrError> {
        let entries = std::fs::read_dir(aside).map_err(|e| self.io("reading", aside, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| self.io("reading", aside, e))?;
            let from = entry.path();
            let mut name = entry.file_name();
            if name == ".git" {
                if from.is_file() {
                    std::fs::remove_file(&from).map_err(|e| self.io("removing", &from, e))?;
                    continue;
                }
                name = ".git-before-adoption".into();
            }
            let to = dir.join(name);
            std::fs::rename(&from, &to).map_err(|e| self.io("moving", &from, e))?;
        }
        std::fs::remove_dir(aside).map_err(|e| self.io("removing", aside, e))?;
        tracing::info!(agent = %self.agent, dir = %dir.display(), "adopted an ACR checkout's files into the clone");
        Ok(())
    }

    /// Whether `dir` is a checkout of this clone ([`Acr::admin_of`] finds its record).
    fn is_ours(&self, dir: &Path) -> Result<bool, AcrError> {
        Ok(self.admin_of(dir).is_some())
    }

    /// The clone's record of the checkout at `dir` (`self.git/worktrees/<name>`), if `dir` is
    /// one. The `.git` file in `dir` is the agent's to write, so it is believed only when it
    /// names a record directly under the clone's `worktrees/` (resolved, so `..` cannot lead
    /// into another agent's clone) whose own back-link names `dir/.git`, as `git worktree
    /// add` wrote it.
    fn admin_of(&self, dir: &Path) -> Option<PathBuf> {
        let text = std::fs::read_to_string(dir.join(".git")).ok()?;
        let named = Path::new(text.trim().strip_prefix("gitdir: ")?);
        let admin = std::fs::canonicalize(named).ok()?;
        let worktrees = std::fs::canonicalize(self.repo.join("worktrees")).ok()?;
        if admin.parent() != Some(worktrees.as_path()) || !admin.join("HEAD").is_file() {
            return None;
        }
        let back = std::fs::read_to_string(admin.join("gitdir")).ok()?;
        let back = std::fs::canonicalize(back.trim()).ok()?;
        (back == std::fs::canonicalize(dir.join(".git")).ok()?).then_some(admin)
    }

    /// The commit `refname` names in the clone, if it exists.
    fn tip(&self, refname: &str) -> Result<Option<String>, AcrError> {
        let spec = format!("{refname}^{{commit}}");
        let ran = self.run(&["rev-parse", "--verify", "--quiet", &spec], &[])?;
        Ok(ran
            .success
            .then(|| String::from_utf8_lossy(&ran.stdout).trim().to_owned()))
    }

    /// The best common ancestor of `a` and `b`, if they have one.
    fn merge_base(&self, a: &str, b: &str) -> Result<Option<String>, AcrError> {
        let ran = self.run(&["merge-base", a, b], &[])?;
        Ok(ran
            .success
            .then(|| String::from_utf8_lossy(&ran.stdout).trim().to_owned()))
    }

    /// A self-contained pack of what `new` reaches and `old` does not.
    fn pack(&self, new: &str, old: Option<&str>) -> Result<Vec<u8>, AcrError> {
        let input = match old {
            Some(old) => format!("{new}\n^{old}\n"),
            None => format!("{new}\n"),
        };
        let args = ["pack-objects", "--stdout", "--revs", "--threads=1", "-q"];
        let ran = self.run_limited(&args, input.as_bytes(), MAX_PACK_BYTES)?;
        if !ran.success {
            let detail = match ran.over {
                true => format!(
                    "the commits make a pack over the limit of {MAX_PACK_BYTES} bytes; commit less at once"
                ),
                false => ran.stderr,
            };
            return Err(self.git_error(&args, detail));
        }
        Ok(ran.stdout)
    }

    /// Runs git on the clone; a failure is an error naming what git said.
    fn git(&self, args: &[&str], input: &[u8]) -> Result<Ran, AcrError> {
        let ran = self.run(args, input)?;
        match ran.success {
            true => Ok(ran),
            false => Err(self.git_error(args, ran.stderr)),
        }
    }

    /// Runs git in the checkout `dir` (its own record in the clone, so its own `HEAD` and
    /// index); `dir` must be one of the clone's checkouts.
    fn git_in(&self, dir: &Path, args: &[&str]) -> Result<(), AcrError> {
        let admin = self.admin_of(dir).ok_or_else(|| {
            self.git_error(
                args,
                format!("{} is not a checkout of the clone", dir.display()),
            )
        })?;
        let mut all: Vec<&std::ffi::OsStr> = vec!["--work-tree".as_ref(), dir.as_os_str()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let ran = git::run(
            &admin,
            &all,
            &[],
            Bounds {
                input: &[],
                limit: ANSWER_BYTES,
                deadline: None,
            },
        )
        .map_err(|e| self.git_error(args, e.detail))?;
        match ran.success {
            true => Ok(()),
            false => Err(self.git_error(args, ran.stderr)),
        }
    }

    fn run(&self, args: &[&str], input: &[u8]) -> Result<Ran, AcrError> {
        self.run_limited(args, input, ANSWER_BYTES)
    }

    fn run_limited(&self, args: &[&str], input: &[u8], limit: u64) -> Result<Ran, AcrError> {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        git::run(
            &self.repo,
            &args,
            &[],
            Bounds {
                input,
                limit,
                deadline: None,
            },
        )
        .map_err(|e| AcrError::Git {
            agent: self.agent.clone(),
            args: e.args,
            detail: e.detail,
        })
    }

    fn git_error(&self, args: &[&str], detail: String) -> AcrError {
        AcrError::Git {
            agent: self.agent.clone(),
            args: args.join(" "),
            detail,
        }
    }

    fn io(&self, action: &'static str, path: &Path, source: std::io::Error) -> AcrError {
        AcrError::Io {
            agent: self.agent.clone(),
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    fn hub_error(&self, action: &'static str, source: l3m_wire::client::ClientError) -> AcrError {
        AcrError::Hub {
            agent: self.agent.clone(),
            action,
            source,
        }
    }
}

/// Whether `dir` has no entries (or does not exist).
fn is_empty_or_absent(dir: &Path) -> std::io::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}

impl Acr {
    /// Runs blocking git work off the async threads; a panic in it goes on as a panic, a
    /// task the runtime stopped is [`AcrError::Stopped`].
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, AcrError> + Send + 'static,
    ) -> Result<T, AcrError> {
        match tokio::task::spawn_blocking(work).await {
            Ok(done) => done,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(AcrError::Stopped(self.agent.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_commit_id_from_hubd_becomes_a_git_argument() {
        let acr = Acr::at(Path::new("/forest"), &AgentName::parse("demo").unwrap());
        let sha1 = "0123456789abcdef0123456789abcdef01234567".to_owned();
        assert_eq!(acr.commit_id(sha1.clone()).unwrap(), sha1);
        assert!(acr.commit_id("ab".repeat(32)).is_ok());
        for bad in [
            "--stdin",
            "HEAD",
            "",
            "0123456789ABCDEF0123456789ABCDEF01234567",
        ] {
            let error = acr.commit_id(bad.to_owned()).unwrap_err();
            assert!(error.to_string().contains("no commit id"), "{error}");
        }
    }
}
