//! The git tools: status, diff, log, commit and push on one of the agent's worktrees.
//!
//! Worktrees are ACR-relative (`workspace`, the default). The ring's git provider refuses
//! worktrees outside the write roots or behind a symlink, repositories the agent made itself,
//! commits to a branch outside the writable prefixes, and pushes to a remote or of a branch the
//! grant does not list; its refusal comes back as [`ToolError::Git`].

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_ring::git::MAX_LOG;
use serde_json::{Value, json};

use crate::args::Args;
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The worktree used when a call names none.
const DEFAULT_WORKTREE: &str = "workspace";

/// The most bytes of diff text returned; past it the diff is cut with a note.
pub const MAX_DIFF_BYTES: usize = 64 << 10;

/// The schema property naming the worktree.
fn worktree_property() -> Value {
    json!({"type": "string", "description": "the worktree, relative to your context root (default `workspace`)"})
}

/// A schema of `properties` plus the optional worktree, requiring `required`.
fn schema(mut properties: serde_json::Map<String, Value>, required: &[&str]) -> Value {
    properties.insert("worktree".into(), worktree_property());
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn worktree<'a>(args: &Args<'a>) -> Result<&'a str, ToolError> {
    Ok(args.opt_string("worktree")?.unwrap_or(DEFAULT_WORKTREE))
}

/// Lists what changed in a worktree since its last commit.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitStatus;

impl Tool for GitStatus {
    fn decl(&self) -> ToolDecl {
        declare(
            "git_status",
            [EffectClass::GitRead],
            Reversibility::ReadOnly,
        )
    }

    fn description(&self) -> &str {
        "Show a worktree's branch, its HEAD commit, and every path added, modified, deleted or changed in type since HEAD."
    }

    fn input_schema(&self) -> Value {
        schema(serde_json::Map::new(), &[])
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let status = fx.git_read()?.status(worktree(&args)?)?;
        let mut lines = vec![format!(
            "branch {}, HEAD {}",
            status.branch,
            status.head.as_deref().unwrap_or("(no commits yet)")
        )];
        if status.changes.is_empty() {
            lines.push("nothing changed since HEAD".into());
        }
        lines.extend(
            status
                .changes
                .iter()
                .map(|c| format!("{}: {}", c.kind, c.path)),
        );
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// Shows a worktree's changes since its last commit as a unified diff.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitDiff;

impl Tool for GitDiff {
    fn decl(&self) -> ToolDecl {
        declare("git_diff", [EffectClass::GitRead], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "Show a worktree's changes since HEAD as a unified diff (binary files are named, not shown; long diffs are cut at 64 KiB)."
    }

    fn input_schema(&self) -> Value {
        schema(serde_json::Map::new(), &[])
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let diffs = fx.git_read()?.diff(worktree(&args)?)?;
        if diffs.is_empty() {
            return Ok(ToolOutput::text("no changes since HEAD"));
        }
        let mut text = String::new();
        for d in &diffs {
            match &d.unified {
                Some(unified) => text.push_str(unified),
                None => text.push_str(&format!(
                    "binary file {}: {}\n",
                    d.change.kind, d.change.path
                )),
            }
        }
        Ok(ToolOutput::text(cut(text, MAX_DIFF_BYTES)))
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a note when cut.
fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!("\n(diff cut at {end} of {total} bytes)"));
    text
}

/// Lists a worktree's most recent commits.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitLog;

impl Tool for GitLog {
    fn decl(&self) -> ToolDecl {
        declare("git_log", [EffectClass::GitRead], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "List the most recent commits of a worktree's HEAD, newest first: id, author and summary."
    }

    fn input_schema(&self) -> Value {
        let mut props = serde_json::Map::new();
        props.insert(
            "count".into(),
            json!({"type": "integer", "minimum": 1, "maximum": MAX_LOG, "description": "how many commits (default 10)"}),
        );
        schema(props, &[])
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let n = args.opt_count("count", MAX_LOG)?.unwrap_or(10);
        let log = fx.git_read()?.log(worktree(&args)?, n)?;
        if log.is_empty() {
            return Ok(ToolOutput::text("no commits yet"));
        }
        let lines: Vec<String> = log
            .iter()
            .map(|c| format!("{} {} — {}", c.id, c.author, c.summary))
            .collect();
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// Commits every change in a worktree onto its branch, as the agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitCommit;

impl Tool for GitCommit {
    fn decl(&self) -> ToolDecl {
        declare(
            "git_commit",
            [EffectClass::GitWrite, EffectClass::Clock],
            Reversibility::RoundTrip,
        )
    }

    fn description(&self) -> &str {
        "Commit every change in a worktree (all files; nothing to stage) onto its checked-out branch, which must be one of your own branches. You are the author."
    }

    fn input_schema(&self) -> Value {
        let mut props = serde_json::Map::new();
        props.insert(
            "message".into(),
            json!({"type": "string", "description": "the commit message: a summary line, then optionally a blank line and more"}),
        );
        schema(props, &["message"])
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let message = args.string("message")?;
        let now = fx.clock()?.now_ms();
        let done = fx.git_write()?.commit(worktree(&args)?, message, now)?;
        Ok(ToolOutput::text(format!(
            "committed {} onto {} ({} paths changed)",
            done.id,
            done.branch,
            done.changes.len()
        )))
    }
}

/// Pushes one of the agent's branches to a granted remote.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitPush;

impl Tool for GitPush {
    fn decl(&self) -> ToolDecl {
        declare("git_push", [EffectClass::GitPush], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Push a branch to a remote your grant lists (by its name or its exact URL). Only branches your grant allows there are pushed; pushes are never forced."
    }

    fn input_schema(&self) -> Value {
        let mut props = serde_json::Map::new();
        props.insert(
            "remote".into(),
            json!({"type": "string", "description": "the remote's name as granted, e.g. `origin`"}),
        );
        props.insert(
            "branch".into(),
            json!({"type": "string", "description": "the branch, e.g. `l3m/alice/_/work` or `refs/heads/l3m/alice/_/work`"}),
        );
        schema(props, &["remote", "branch"])
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let pushed = fx.git_push()?.push(
            worktree(&args)?,
            args.string("remote")?,
            args.string("branch")?,
        )?;
        Ok(ToolOutput::text(format!(
            "pushed {} ({}) to {} ({})",
            pushed.branch, pushed.commit, pushed.remote, pushed.url
        ))
        .lasting(
            EffectClass::GitPush,
            format!("{} to {}", pushed.branch, pushed.remote),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_diffs_are_cut_at_a_char_boundary_with_a_note() {
        assert_eq!(cut("short".into(), 10), "short");
        let cut_text = cut("ééééé".into(), 5);
        assert!(
            cut_text.starts_with("éé\n(diff cut at 4 of 10 bytes)"),
            "{cut_text}"
        );
    }
}
