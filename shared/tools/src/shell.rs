//! `shell`: one listed program in the bubblewrap sandbox. Wild: every call is reviewed first.
//!
//! The sandbox has no network, sees the ACR read-only but for the write roots, and kills the run
//! at its deadline or once its output passes the limit. Refusals come back as
//! [`ToolError::Shell`].

use std::time::Duration;

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_ring::shell::{PROGRAMS, ShellRequest};
use serde_json::{Value, json};

use crate::args::Args;
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The longest a run may be given, in seconds, and the default.
pub const MAX_SHELL_SECONDS: usize = 300;

/// The most bytes kept of stdout and of stderr.
const MAX_OUTPUT: usize = 256 << 10;

/// Runs a listed program in the sandbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunShell;

impl RunShell {
    fn request(args: &Args<'_>) -> Result<ShellRequest, ToolError> {
        Ok(ShellRequest {
            program: args.string("program")?.to_owned(),
            args: args
                .opt_strings("args")?
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            cwd: args.opt_string("cwd")?.unwrap_or("workspace").to_owned(),
            stdin: args.opt_string("stdin")?.unwrap_or("").as_bytes().to_vec(),
            timeout: Duration::from_secs(
                args.opt_count("timeout_s", MAX_SHELL_SECONDS)?
                    .unwrap_or(60) as u64,
            ),
            max_output: MAX_OUTPUT,
        })
    }
}

impl Tool for RunShell {
    fn decl(&self) -> ToolDecl {
        declare("shell", [EffectClass::Shell], Reversibility::Wild)
    }

    fn description(&self) -> &str {
        "Run one program from a fixed list (e.g. grep, sed, sh) in a sandbox with no network, which may write only under your write roots. Every call is reviewed before it runs."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "program": {"type": "string", "enum": PROGRAMS, "description": "the program, by name"},
                "args": {"type": "array", "items": {"type": "string"}, "description": "its arguments, passed as they are"},
                "cwd": {"type": "string", "description": "the working directory, relative to your context root (default `workspace`)"},
                "stdin": {"type": "string", "description": "text given on standard input"},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": MAX_SHELL_SECONDS, "description": "seconds before the run is killed (default 60)"}
            },
            "required": ["program"],
            "additionalProperties": false
        })
    }

    fn effect(&self, input: &Value) -> String {
        let described =
            Args::parse(input, &self.input_schema()).and_then(|args| Self::request(&args));
        match described {
            Ok(r) => format!(
                "runs `{}` with arguments {:?} in `{}`, sandboxed: no network, writes only under the write roots, killed after {} s",
                r.program,
                r.args,
                r.cwd,
                r.timeout.as_secs()
            ),
            Err(e) => format!("a malformed shell call ({e}); it would be refused before running"),
        }
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let outcome = fx.shell()?.run(&Self::request(&args)?)?;
        let status = match (outcome.status, outcome.timed_out, outcome.truncated) {
            (_, true, _) => "killed at its deadline".to_owned(),
            (_, _, true) => "killed: output passed its limit".to_owned(),
            (Some(code), _, _) => format!("exit {code}"),
            (None, _, _) => "killed by a signal".to_owned(),
        };
        Ok(ToolOutput::text(format!(
            "{status}\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&outcome.stdout),
            String::from_utf8_lossy(&outcome.stderr)
        )))
    }
}
