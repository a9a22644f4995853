//! The file tools: read, write, list, remove and make directories, each over one file class.
//!
//! Paths are ACR-relative (`workspace/src/lib.rs`); the ring's provider refuses `..`, absolute
//! paths, symlinks, `.l3m/` and writes outside the write roots, and its refusal comes back as
//! [`ToolError::Files`]. Every edit is journaled by the provider, so rewind can undo it.

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_ring::files::NodeKind;
use serde_json::{Value, json};

use crate::args::{Args, skip_bytes};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The schema of a tool whose only input is one path.
fn path_schema(what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": what}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// Reads the text of a file anywhere in the ACR (except `.l3m/`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn decl(&self) -> ToolDecl {
        declare("read_file", [EffectClass::FsRead], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "Read a UTF-8 text file, or the lines `from_line`..=`to_line` of it (from 1); `from_byte` skips that many bytes of what is read, to read on past a cut inside a long line. Paths are relative to your context root, e.g. `workspace/README.md`."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file to read, relative to your context root"},
                "from_line": {"type": "integer", "minimum": 1, "description": "the first line to read (default 1)"},
                "to_line": {"type": "integer", "minimum": 1, "description": "the last line to read (default: the end)"},
                "from_byte": {"type": "integer", "minimum": 0, "description": "bytes of the selected text to skip (default 0), as a cut output's note names"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.string("path")?;
        let from = args.opt_count("from_line", usize::MAX)?;
        let to = args.opt_count("to_line", usize::MAX)?;
        let skip = args.skip()?;
        let bytes = fx.fs_read()?.read(path)?;
        let len = bytes.len();
        let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText {
            path: path.to_owned(),
            len,
        })?;
        let text = if from.is_none() && to.is_none() {
            text
        } else {
            let from = from.unwrap_or(1).max(1);
            let to = to.unwrap_or(usize::MAX);
            text.split_inclusive('\n')
                .skip(from - 1)
                .take(to.saturating_sub(from - 1))
                .collect::<String>()
        };
        Ok(ToolOutput::text(skip_bytes(text, skip)))
    }
}

/// Creates or replaces a file under a write root with the given text.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn decl(&self) -> ToolDecl {
        declare(
            "write_file",
            [EffectClass::FsWrite],
            Reversibility::RoundTrip,
        )
    }

    fn description(&self) -> &str {
        "Write the whole content of a text file, creating it or replacing it. Its directory must exist. The edit is journaled and can be undone by rewind."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file to write, under one of your write roots"},
                "content": {"type": "string", "description": "the file's new content, in full"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.string("path")?;
        let content = args.string("content")?;
        fx.fs_write()?.write(path, content.as_bytes())?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to `{path}`",
            content.len()
        )))
    }
}

/// Lists a directory, one entry per line, directories marked with a trailing `/`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl Tool for ListDir {
    fn decl(&self) -> ToolDecl {
        declare("list_dir", [EffectClass::FsRead], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "List a directory's entries, sorted by name; directories end in `/`. Omit `path` for your context root."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the directory, relative to your context root (default: the root)"}
            },
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.opt_string("path")?.unwrap_or("");
        let listing = fx.fs_read()?.list(path)?;
        let mut lines: Vec<String> = listing
            .entries
            .iter()
            .map(|e| match e.kind {
                NodeKind::Dir => format!("{}/", e.name),
                NodeKind::File => e.name.clone(),
                other => format!("{} ({other})", e.name),
            })
            .collect();
        if listing.unaddressable > 0 {
            lines.push(format!(
                "({} entries with names that are not UTF-8 are not shown)",
                listing.unaddressable
            ));
        }
        if lines.is_empty() {
            lines.push("(empty directory)".to_owned());
        }
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// Removes a file or an empty directory under a write root.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveFile;

impl Tool for RemoveFile {
    fn decl(&self) -> ToolDecl {
        declare(
            "remove_file",
            [EffectClass::FsWrite],
            Reversibility::RoundTrip,
        )
    }

    fn description(&self) -> &str {
        "Remove a file, or an empty directory, under one of your write roots. Journaled; rewind restores it."
    }

    fn input_schema(&self) -> Value {
        path_schema("the file or empty directory to remove")
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.string("path")?;
        fx.fs_write()?.remove(path)?;
        Ok(ToolOutput::text(format!("removed `{path}`")))
    }
}

/// Creates one directory under a write root.
#[derive(Debug, Clone, Copy, Default)]
pub struct MakeDir;

impl Tool for MakeDir {
    fn decl(&self) -> ToolDecl {
        declare("make_dir", [EffectClass::FsWrite], Reversibility::RoundTrip)
    }

    fn description(&self) -> &str {
        "Create one directory under one of your write roots; its parent must exist. Journaled; rewind removes it."
    }

    fn input_schema(&self) -> Value {
        path_schema("the directory to create")
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.string("path")?;
        fx.fs_write()?.mkdir(path)?;
        Ok(ToolOutput::text(format!("created directory `{path}`")))
    }
}
