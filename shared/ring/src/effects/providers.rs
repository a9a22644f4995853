//! The ring's providers bound to their tokens: what the effect-class traits run on.

use std::future::Future;
use std::sync::Arc;

use super::{FsRead, FsWrite, GitPush, GitRead, GitWrite, Net, Shell};
use crate::files::{self, FilesError, Listing};
use crate::git::{self, CommitInfo, Committed, FileDiff, GitError, Pushed, Status};
use crate::net::{self, FetchRequest, FetchResponse, NetError};
use crate::shell::{self, ShellError, ShellOutcome, ShellRequest};
use crate::tokens::{FilesToken, GitToken, NetToken, WildToken};
use crate::undo::UndoStore;

/// The file provider bound to its token and journal.
pub(super) struct FileProvider {
    /// The session's files token (shared with the shell, which binds its roots).
    pub(super) token: Arc<FilesToken>,
    /// Where every edit is journaled first.
    pub(super) journal: Arc<dyn UndoStore>,
}

impl FsRead for FileProvider {
    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError> {
        files::read(&self.token, path)
    }

    fn list(&self, path: &str) -> Result<Listing, FilesError> {
        files::list(&self.token, path)
    }
}

impl FsWrite for FileProvider {
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), FilesError> {
        files::write(&self.token, path, bytes, self.journal.as_ref())
    }

    fn remove(&self, path: &str) -> Result<(), FilesError> {
        files::remove(&self.token, path, self.journal.as_ref())
    }

    fn mkdir(&self, path: &str) -> Result<(), FilesError> {
        files::mkdir(&self.token, path, self.journal.as_ref())
    }
}

/// The git provider bound to its token and the journal its commits' branch moves go to.
pub(super) struct GitProvider {
    /// The session's git token.
    pub(super) token: GitToken,
    /// Where every commit journals its branch move first.
    pub(super) journal: Arc<dyn UndoStore>,
}

impl GitRead for GitProvider {
    fn status(&self, worktree: &str) -> Result<Status, GitError> {
        git::status(&self.token, worktree)
    }

    fn diff(&self, worktree: &str) -> Result<Vec<FileDiff>, GitError> {
        git::diff(&self.token, worktree)
    }

    fn log(&self, worktree: &str, n: usize) -> Result<Vec<CommitInfo>, GitError> {
        git::log(&self.token, worktree, n)
    }
}

impl GitWrite for GitProvider {
    fn commit(&self, worktree: &str, message: &str, time_ms: u64) -> Result<Committed, GitError> {
        git::commit(
            &self.token,
            worktree,
            message,
            time_ms,
            self.journal.as_ref(),
        )
    }
}

impl GitPush for GitProvider {
    fn push(&self, worktree: &str, remote: &str, branch: &str) -> Result<Pushed, GitError> {
        git::push(&self.token, worktree, remote, branch)
    }
}

/// The HTTP provider bound to its token.
pub(super) struct NetProvider(pub(super) NetToken);

impl Net for NetProvider {
    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, NetError> {
        on_own_runtime(|| net::fetch(&self.0, request)).unwrap_or_else(|source| {
            Err(NetError::Runtime {
                url: request.url.clone(),
                source,
            })
        })
    }
}

/// The sandboxed shell bound to the wild token and the files token whose roots it binds.
pub(super) struct ShellProvider {
    /// Must allow `shell`.
    pub(super) wild: WildToken,
    /// The ACR and write roots the sandbox is built from.
    pub(super) files: Arc<FilesToken>,
}

impl Shell for ShellProvider {
    fn run(&self, request: &ShellRequest) -> Result<ShellOutcome, ShellError> {
        on_own_runtime(|| shell::run(&self.wild, &self.files, request))
            .unwrap_or_else(|source| Err(ShellError::Process { source }))
    }
}

/// Runs the future `make` builds to completion on a fresh thread with its own single-threaded
/// runtime, so a synchronous tool body can call an async provider from inside or outside a
/// tokio runtime alike (the calling thread waits).
fn on_own_runtime<F, Fut>(make: F) -> std::io::Result<Fut::Output>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future,
    Fut::Output: Send,
{
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("l3m-ring-io".into())
            .spawn_scoped(scope, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(make()))
            })?;
        worker
            .join()
            .map_err(|_| std::io::Error::other("the provider's thread panicked"))?
    })
}
