//! `search_files`: a bounded substring search over a directory tree, through `fs-read` only.
//!
//! The walk is breadth-first in name order (so results are stable), never follows links, and
//! stops at a result limit and a file limit; the summary line says which bound, if any, cut it.

use std::collections::VecDeque;

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::{FsRead, Granted};
use l3m_ring::files::{FilesError, Listing, NodeKind};
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// Results returned when the call names no `max_results`.
pub const DEFAULT_MAX_RESULTS: usize = 50;
/// The most results one call may ask for.
pub const MAX_RESULTS: usize = 500;
/// The most files one call reads.
pub const MAX_FILES: usize = 2_000;
/// Longer matching lines are cut to this many characters.
pub const MAX_LINE_CHARS: usize = 200;

/// Finds the lines containing a substring, in text files under a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchFiles;

impl Tool for SearchFiles {
    fn decl(&self) -> ToolDecl {
        declare(
            "search_files",
            [EffectClass::FsRead],
            Reversibility::ReadOnly,
        )
    }

    fn description(&self) -> &str {
        "Find lines containing an exact substring in the text files under a directory (default: your context root). Prints `path:line: text`; bounded by `max_results` and a file limit."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "the exact substring to find (case-sensitive)"},
                "path": {"type": "string", "description": "the directory to search under (default: your context root)"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "stop after this many matching lines (default 50)"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let pattern = args.string("pattern")?;
        if pattern.is_empty() {
            return Err(bad("pattern", "must not be empty".into()));
        }
        let root = args.opt_string("path")?.unwrap_or("");
        let max = args
            .opt_count("max_results", MAX_RESULTS)?
            .unwrap_or(DEFAULT_MAX_RESULTS);
        let found = search(fx.fs_read()?, root, pattern, max)?;
        Ok(ToolOutput::text(found.render(root, max)))
    }
}

/// Why a search stopped before covering the whole tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// It found `max_results` lines.
    Results,
    /// It read [`MAX_FILES`] files.
    Files,
}

/// What a search found.
#[derive(Debug, Default)]
struct Found {
    /// `path:line: text`, in walk order.
    lines: Vec<String>,
    /// Files read.
    files: usize,
    /// Entries that could not be listed or read as UTF-8 text.
    skipped: usize,
    /// The bound that stopped the walk, if one did.
    cut: Option<Cut>,
}

/// Walks `root` breadth-first. A root that cannot be listed is the caller's error; a directory
/// below it that cannot be listed is counted as skipped.
fn search(fs: &dyn FsRead, root: &str, pattern: &str, max: usize) -> Result<Found, FilesError> {
    let mut found = Found::default();
    let mut dirs = VecDeque::new();
    let mut listing = fs.list(root)?;
    let mut dir = root.to_owned();
    loop {
        found.skipped += listing.unaddressable;
        for entry in listing.entries {
            let path = join(&dir, &entry.name);
            match entry.kind {
                NodeKind::Dir => dirs.push_back(path),
                NodeKind::File => {
                    if found.files == MAX_FILES {
                        found.cut = Some(Cut::Files);
                        return Ok(found);
                    }
                    found.files += 1;
                    match fs.read(&path).map(String::from_utf8) {
                        Ok(Ok(text)) => {
                            for (n, line) in text.lines().enumerate() {
                                if line.contains(pattern) {
                                    found
                                        .lines
                                        .push(format!("{path}:{}: {}", n + 1, clip(line)));
                                    if found.lines.len() == max {
                                        found.cut = Some(Cut::Results);
                                        return Ok(found);
                                    }
                                }
                            }
                        }
                        _ => found.skipped += 1,
                    }
                }
                // Links are never followed, and special files hold no text.
                _ => {}
            }
        }
        let Some(next) = dirs.pop_front() else {
            return Ok(found);
        };
        match fs.list(&next) {
            Ok(next_listing) => listing = next_listing,
            Err(_) => {
                found.skipped += 1;
                listing = Listing::default();
            }
        }
        dir = next;
    }
}

impl Found {
    fn render(&self, root: &str, max: usize) -> String {
        let under = if root.is_empty() { "." } else { root };
        let mut summary = format!(
            "{} matching lines in {} files searched under `{under}`",
            self.lines.len(),
            self.files
        );
        match self.cut {
            Some(Cut::Results) => summary.push_str(&format!(
                "; stopped at max_results = {max}, there may be more"
            )),
            Some(Cut::Files) => summary.push_str(&format!(
                "; stopped after {MAX_FILES} files, narrow `path` to search the rest"
            )),
            None => {}
        }
        if self.skipped > 0 {
            summary.push_str(&format!(
                "; {} entries skipped (unreadable or not UTF-8 text)",
                self.skipped
            ));
        }
        let mut out = self.lines.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&summary);
        out
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{}/{name}", dir.trim_end_matches('/'))
    }
}

fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_paths_and_clips_long_lines() {
        assert_eq!(join("", "a"), "a");
        assert_eq!(join("workspace/", "a"), "workspace/a");
        assert_eq!(join("workspace", "a"), "workspace/a");
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        assert_eq!(clip(&long).chars().count(), MAX_LINE_CHARS + 1);
        assert_eq!(clip("short"), "short");
    }
}
