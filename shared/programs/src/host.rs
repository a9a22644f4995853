//! The parent's side: finding an agent's programs, having the evaluator check them, and running
//! an admitted one as an ordinary tool.
//!
//! A [`ProgramTool`] is a [`Tool`] like any built-in: the tool table offers it only when the
//! tokens cover its footprint, and hands its [`Tool::call`] a [`Granted`] holding exactly its
//! footprint's classes. The call sends its input to the program's warm evaluator (`warm`: one
//! `l3m-program serve` process per tool, started at its first call, which checked and loaded
//! the program once), answers each effect the program asks for through that `Granted`
//! (`answer`; the spawn class through the call's `drive`, which retires every child the call
//! spawned when the call ends), and kills the evaluator when its deadline passes; a call that did not end
//! cleanly leaves no evaluator behind, and the next starts a fresh one. The evaluator gets the
//! program's source and input, never a token.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use l3m_core::axis::Axis;
use l3m_core::effects::{Tier, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_tools::{Tool, ToolError, ToolOutput};
use serde_json::Value;

use crate::answer;
use crate::decl::{ProgramDecl, surface};
use crate::drive::Drive;
use crate::plugin::{self, PLUGINS_DIR};
pub use crate::process::Evaluator;
use crate::process::{exchange, read_source};
use crate::protocol::{Answer, CallRequest, CheckRequest, FromChild};
use crate::rule::{LoadError, Rule, RunError};
use crate::warm::Warm;

pub use crate::decl::PROGRAMS_DIR;

/// The seal and type checks of `source` (named `file`), made by the evaluator under its limits.
pub fn check_source(
    evaluator: &Evaluator,
    file: &str,
    source: &str,
) -> Result<ProgramDecl, LoadError> {
    let request = CheckRequest {
        file: file.to_owned(),
        source: source.to_owned(),
    };
    match exchange(evaluator, "check", file, &request) {
        Ok(FromChild::Checked { result }) => result,
        Ok(other) => Err(LoadError::new(
            file,
            1,
            Rule::Evaluator,
            format!("the evaluator answered a check with {other:?}"),
        )),
        Err(e) => Err(LoadError::new(file, e.line.unwrap_or(1), e.rule, e.detail)),
    }
}

/// All three checks of one program: seal and type by the evaluator, then the surface against
/// the axes `conferred`.
pub fn check(
    evaluator: &Evaluator,
    file: &str,
    source: &str,
    conferred: &std::collections::BTreeSet<Axis>,
) -> Result<(ProgramDecl, Tier), LoadError> {
    let decl = check_source(evaluator, file, source)?;
    let tier = surface(file, source, &decl, conferred)?;
    Ok((decl, tier))
}

/// What loading an agent's programs came to.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The programs that passed all three checks, as tools.
    pub tools: Vec<ProgramTool>,
    /// The programs refused, each naming its file, line and rule.
    pub refused: Vec<LoadError>,
}

/// Reads and checks every `*.star` file in `<acr>/agent/programs/`, then every plugin folder in
/// `<acr>/agent/plugins/` (all or nothing, [`crate::plugin`]). A missing folder is no programs;
/// links are never followed (a link is refused, naming the file).
pub fn load(
    evaluator: &Evaluator,
    acr: &Path,
    conferred: &std::collections::BTreeSet<Axis>,
) -> Loaded {
    let mut loaded = Loaded::default();
    let tool = |plugin: Option<&str>, file: &str, source: &str| {
        let (decl, _tier) = check(evaluator, file, source, conferred)?;
        let name = match plugin {
            Some(plugin) => plugin::tool_name(plugin, &decl.name),
            None => decl.tool_name(),
        };
        Ok(ProgramTool {
            name,
            decl,
            file: file.to_owned(),
            source: source.into(),
            evaluator: evaluator.clone(),
            warm: Arc::default(),
        })
    };
    let dir = acr.join(PROGRAMS_DIR);
    let programs = listed(&dir, PROGRAMS_DIR, Rule::FileName, &mut loaded.refused);
    for name in programs.into_iter().filter(|n| n.ends_with(".star")) {
        let file = format!("{PROGRAMS_DIR}/{name}");
        match read_source(&dir.join(&name), &file).and_then(|source| tool(None, &file, &source)) {
            Ok(t) => loaded.tools.push(t),
            Err(e) => loaded.refused.push(e),
        }
    }
    let dir = acr.join(PLUGINS_DIR);
    for name in listed(&dir, PLUGINS_DIR, Rule::Plugin, &mut loaded.refused) {
        let folder = format!("{PLUGINS_DIR}/{name}");
        let path = dir.join(&name);
        let is_folder = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        let admitted = plugin::plugin_name(&folder, &name).and_then(|_| {
            if !is_folder {
                return Err(LoadError::new(
                    &folder,
                    1,
                    Rule::Plugin,
                    "is not a folder (links are not followed): a plugin is a folder of programs",
                ));
            }
            plugin::read(&path, &folder, |plugin, file, source| {
                tool(Some(plugin), file, source)
            })
        });
        match admitted {
            Ok(tools) => loaded.tools.extend(tools),
            Err(e) => loaded.refused.push(e),
        }
    }
    loaded
}

/// The sorted names in the folder `dir` (named `named` in refusals; a name that is not UTF-8
/// is kept lossily, so it is refused by name, never skipped); a missing folder is none, a
/// folder that is a link or cannot be listed is a refusal by `rule` pushed to `refused`.
fn listed(dir: &Path, named: &str, rule: Rule, refused: &mut Vec<LoadError>) -> Vec<String> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            refused.push(LoadError::new(
                named,
                1,
                rule,
                "is not a directory (links are not followed)",
            ));
            return Vec::new();
        }
        Err(_) => return Vec::new(),
    }
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
        Err(e) => {
            refused.push(LoadError::new(
                named,
                1,
                rule,
                format!("cannot be listed: {e}"),
            ));
            Vec::new()
        }
    }
}

/// An admitted program as a tool: `program_<name>` (`program_<plugin>-<name>` in a plugin),
/// over exactly its footprint.
#[derive(Debug, Clone)]
pub struct ProgramTool {
    name: String,
    decl: ProgramDecl,
    file: String,
    source: Arc<str>,
    evaluator: Evaluator,
    /// The evaluator serving this program between calls, when the last call ended cleanly.
    /// The lock makes one program's calls serial; clones of the tool share it.
    warm: Arc<Mutex<Option<Warm>>>,
}

impl ProgramTool {
    /// A tool of a program already checked (by [`check`]): `decl` is what the check returned
    /// for `source`, named `file`.
    pub fn new(decl: ProgramDecl, file: String, source: &str, evaluator: Evaluator) -> Self {
        Self {
            name: decl.tool_name(),
            decl,
            file,
            source: source.into(),
            evaluator,
            warm: Arc::default(),
        }
    }

    /// What the program declares.
    pub fn program(&self) -> &ProgramDecl {
        &self.decl
    }

    /// The process id of the evaluator kept warm for this program's next call, if there is
    /// one: it shows (to tests and diagnostics) that calls share one process and that a call
    /// which did not end cleanly left none behind.
    pub fn evaluator_pid(&self) -> Option<u32> {
        self.slot().as_ref().map(Warm::pid)
    }

    /// The warm evaluator's slot, locked. A call that panicked holding it may have left its
    /// evaluator anywhere, so a poisoned slot is emptied (the evaluator is killed and reaped).
    fn slot(&self) -> MutexGuard<'_, Option<Warm>> {
        self.warm.lock().unwrap_or_else(|poisoned| {
            let mut slot = poisoned.into_inner();
            *slot = None;
            slot
        })
    }

    /// Runs the program on `input` in its warm evaluator (a fresh one when none is kept),
    /// answering its calls from `fx`.
    fn run(&self, input: Value, fx: &Granted<'_>) -> Result<Value, ToolError> {
        let stop = |e: RunError| ToolError::Program {
            limit: matches!(e.rule, Rule::StepBudget | Rule::Deadline | Rule::Memory),
            rule: e.rule.name().to_owned(),
            detail: e.to_string(),
        };
        let mut slot = self.slot();
        let until = Instant::now() + self.evaluator.deadline;
        let kept = slot
            .take()
            .and_then(|mut warm| warm.alive().then_some(warm));
        let warm = match kept {
            Some(warm) => warm,
            None => Warm::start(&self.evaluator, &self.file, &self.source).map_err(stop)?,
        };
        let request = CallRequest {
            input,
            steps: self.evaluator.steps,
        };
        // The first effect the ring refused: if the program then fails, that refusal is the
        // reason, with its boundary and axis.
        let mut refused: Option<ToolError> = None;
        // The children this call drives: retired when it is dropped, however the call ends.
        let mut drive = Drive::new(fx, until);
        let (result, kept) =
            warm.call(
                &self.file,
                &request,
                until,
                |function, args| match answer::call(function, args, fx, &mut drive) {
                    Ok(value) => Answer::Ok { value },
                    Err(e) => {
                        let message = e.to_string();
                        if refused.is_none() && e.refusal().is_some() {
                            refused = Some(e);
                        }
                        Answer::Err { message }
                    }
                },
            );
        drop(drive);
        *slot = kept;
        drop(slot);
        result.map_err(|e| refused.take().unwrap_or_else(|| stop(e)))
    }
}

impl Tool for ProgramTool {
    fn decl(&self) -> ToolDecl {
        ToolDecl {
            name: self.name.clone(),
            footprint: self.decl.footprint.clone(),
            claims: self.decl.claims(),
        }
    }

    fn description(&self) -> &str {
        &self.decl.description
    }

    fn input_schema(&self) -> Value {
        self.decl.input_schema.clone()
    }

    /// What a reviewer of a call is shown: the program's footprint, its limits and its whole
    /// source (a wild program's is short, [`crate::decl::MAX_REVIEWED_SOURCE`]), since the
    /// source is everything the call can do; the input is shown beside it by the review.
    fn effect(&self, input: &Value) -> String {
        let _ = input;
        let classes: Vec<String> = (self.decl.footprint.0.iter())
            .map(|c| format!("{c} ({})", c.ceiling()))
            .collect();
        format!(
            "runs the agent's own program `{}` ({}) on the input shown, in its evaluator (no \
             network, no files of its own; {} steps, killed after {} s); it uses {}, each effect \
             through the agent's tokens, and a shell run is sandboxed (no network, writes only \
             under the write roots). Its source, which is all it can do:\n{}",
            self.name,
            self.file,
            self.evaluator.steps,
            self.evaluator.deadline.as_secs(),
            classes.join(", "),
            self.source
        )
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        // The schema the model was shown is the one enforced (the seal kept it to what
        // `input::check` enforces), before any evaluator starts.
        crate::input::check(&self.decl.input_schema, &input).map_err(|e| ToolError::BadInput {
            field: e.path,
            reason: e.reason,
        })?;
        let out = self.run(input, fx)?;
        Ok(ToolOutput::text(match out {
            Value::String(text) => text,
            other => other.to_string(),
        }))
    }
}
