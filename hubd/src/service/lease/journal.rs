//! The lease journal: what lets leases outlive a hubd restart.
//!
//! Every grant and every end of a lease is one JSON line in `hub.git/hubd/leases.jsonl`,
//! written and synced before the sequencer hears of it. A restarted hubd replays the lines: each
//! lease in force when it stopped is in force again for one full TTL, so its holder renews it as
//! if nothing happened, and a holder that died with hubd lets it lapse as before. Renewals are
//! not journaled (a restart grants a whole TTL anyway), so the journal grows only with boots and
//! stops; it is rewritten with just the live leases when it holds four times as many lines.
//!
//! Leases are exclusion, not safety: the Log's compare-and-swap keeps two writers from
//! interleaving whatever the leases say. So a line that does not parse (a write torn by a crash)
//! is skipped with a warning rather than refusing to start; fencing numbers stay above every one
//! ever read and above a floor taken from the clock, so a lost journal never hands out a number
//! an old holder still has.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use l3m_core::names::AgentName;
use serde::{Deserialize, Serialize};

use super::Table;

/// The journal's file name inside hubd's own folder.
pub const FILE: &str = "leases.jsonl";

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Entry {
    /// A lease was granted.
    Grant {
        /// To run this agent.
        agent: String,
        /// To this holder.
        holder: String,
        /// With this fencing number.
        token: u64,
        /// Renewed by this much each time.
        ttl_ms: u64,
    },
    /// A lease ended: released, or its agent retired (`token` absent: whatever lease it had).
    End {
        /// The agent.
        agent: String,
        /// The lease that ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
    },
}

impl Entry {
    /// The line that says `agent`'s lease `token` ended (`None`: whatever lease it had).
    pub fn end(agent: &AgentName, token: Option<u64>) -> Entry {
        Entry::End {
            agent: agent.to_string(),
            token,
        }
    }
}

/// Why the journal could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("the lease journal {path}: {action} failed: {source}")]
pub struct JournalError {
    /// What was being done.
    pub action: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// The open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    lines: usize,
}

/// The lowest fencing number a hubd starting at `now_ms` hands out: above any it handed out
/// before (about a thousand a millisecond), even with its journal lost.
pub fn token_floor(now_ms: u64) -> u64 {
    now_ms.saturating_mul(1 << 10)
}

/// Replays journal `text` into a table at `now`: the leases in force when it was written, each
/// for one more TTL. Returns the table and the numbers (1-based) of the lines skipped.
pub fn replay(text: &str, now: Instant, floor: u64) -> (Table, Vec<usize>) {
    let mut table = Table::starting_at(floor);
    let mut skipped = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let applied = serde_json::from_str::<Entry>(line)
            .ok()
            .and_then(|entry| apply(&mut table, entry, now));
        if applied.is_none() {
            skipped.push(i + 1);
        }
    }
    (table, skipped)
}

fn apply(table: &mut Table, entry: Entry, now: Instant) -> Option<()> {
    match entry {
        Entry::Grant {
            agent,
            holder,
            token,
            ttl_ms,
        } => {
            let agent = AgentName::parse(&agent).ok()?;
            table.restore(agent, holder, token, Duration::from_millis(ttl_ms), now);
        }
        Entry::End { agent, token } => {
            let agent = AgentName::parse(&agent).ok()?;
            match token {
                Some(token) => table.release(&agent, token),
                None => table.forget([&agent]),
            }
        }
    }
    Some(())
}

impl Journal {
    /// Opens (or creates) the journal in `dir` and replays it at `now`.
    pub fn open(dir: &Path, now: Instant) -> Result<(Journal, Table), JournalError> {
        let path = dir.join(FILE);
        let fail = |action| {
            let path = path.clone();
            move |source| JournalError {
                action,
                path,
                source,
            }
        };
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(fail("read")(e)),
        };
        let (table, skipped) = replay(&text, now, token_floor(l3m_core::clock::now_ms()));
        if !skipped.is_empty() {
            tracing::warn!(path = %path.display(), lines = ?skipped, "lease journal lines skipped: they do not parse (a write torn by a crash?)");
        }
        let mut journal = Journal {
            file: open_append(&path).map_err(fail("open"))?,
            path,
            lines: 0,
        };
        journal.rewrite(&table)?;
        Ok((journal, table))
    }

    /// Appends `entry` and syncs it; `table` is the table after it, kept for a rewrite.
    pub fn record(&mut self, entry: &Entry, table: &Table) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(entry).map_err(|e| self.error("encode", e.into()))?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.error("append", e))?;
        self.lines += 1;
        if self.lines > 4 * table.len() + 64 {
            // The line is durable: a failed rewrite leaves a longer journal, not a lost change,
            // so it must not undo what the caller is about to be told happened.
            if let Err(e) = self.rewrite(table) {
                tracing::warn!(error = %e, "the lease journal was not rewritten; it stays longer");
            }
        }
        Ok(())
    }

    /// Replaces the file with one grant line per lease of `table`, atomically.
    fn rewrite(&mut self, table: &Table) -> Result<(), JournalError> {
        let mut text = String::new();
        for entry in table.grants() {
            let line = serde_json::to_string(&entry).map_err(|e| self.error("encode", e.into()))?;
            text.push_str(&line);
            text.push('\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .and_then(|()| match self.path.parent() {
                Some(dir) => File::open(dir).and_then(|d| d.sync_all()),
                None => Ok(()),
            })
            .and_then(|()| open_append(&self.path));
        self.file = written.map_err(|e| self.error("rewrite", e))?;
        self.lines = table.len();
        Ok(())
    }

    fn error(&self, action: &'static str, source: std::io::Error) -> JournalError {
        JournalError {
            action,
            path: self.path.clone(),
            source,
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> AgentName {
        AgentName::parse("alice").unwrap()
    }

    #[test]
    fn a_restart_restores_live_leases_for_a_full_ttl_and_numbers_past_them() {
        let dir = tempfile::tempdir().unwrap();
        let now = Instant::now();
        let (mut journal, mut table) = Journal::open(dir.path(), now).unwrap();
        let lease = table.acquire(&alice(), "host:1", 1_000, now).unwrap();
        journal
            .record(&Table::granted(&alice(), &lease), &table)
            .unwrap();
        drop(journal);

        let later = now + Duration::from_millis(900);
        let (_journal, mut again) = Journal::open(dir.path(), later).unwrap();
        let restored = again.live(&alice(), later).unwrap().clone();
        assert_eq!(
            (restored.holder.as_str(), restored.token),
            ("host:1", lease.token)
        );
        assert!(restored.until >= later + Duration::from_millis(1_000));
        assert!(again.renew(&alice(), lease.token, later).is_ok());
        let err = again
            .acquire(&alice(), "other:2", 1_000, later)
            .unwrap_err();
        assert!(err.to_string().contains("host:1"), "{err}");
    }

    #[test]
    fn an_ended_lease_stays_ended_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let now = Instant::now();
        let (mut journal, mut table) = Journal::open(dir.path(), now).unwrap();
        let lease = table.acquire(&alice(), "host:1", 1_000, now).unwrap();
        journal
            .record(&Table::granted(&alice(), &lease), &table)
            .unwrap();
        table.release(&alice(), lease.token);
        journal
            .record(&Entry::end(&alice(), Some(lease.token)), &table)
            .unwrap();
        drop(journal);
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap();
        file.write_all(b"{\"op\":\"grant\",\"agent\":\"al").unwrap();

        let (_journal, mut again) = Journal::open(dir.path(), now).unwrap();
        assert!(again.live(&alice(), now).is_none());
        let next = again.acquire(&alice(), "host:2", 1_000, now).unwrap();
        assert!(next.token > lease.token);
    }

    #[test]
    fn fencing_numbers_never_repeat_even_when_the_journal_is_lost() {
        let now = Instant::now();
        let mut first = Table::starting_at(token_floor(1_000_000));
        let old = first.acquire(&alice(), "a", 1_000, now).unwrap();
        let mut after_loss = Table::starting_at(token_floor(1_000_001));
        let new = after_loss.acquire(&alice(), "b", 1_000, now).unwrap();
        assert!(new.token > old.token);
        assert!(after_loss.renew(&alice(), old.token, now).is_err());
    }

    #[test]
    fn the_journal_is_rewritten_with_only_live_leases_when_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let now = Instant::now();
        let (mut journal, mut table) = Journal::open(dir.path(), now).unwrap();
        for i in 0..200 {
            let lease = table
                .acquire(&alice(), &format!("h:{i}"), 1_000, now)
                .unwrap();
            journal
                .record(&Table::granted(&alice(), &lease), &table)
                .unwrap();
            table.release(&alice(), lease.token);
            journal
                .record(&Entry::end(&alice(), Some(lease.token)), &table)
                .unwrap();
        }
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(
            text.lines().count() <= 4 * table.len() + 64,
            "{} lines",
            text.lines().count()
        );
    }
}
