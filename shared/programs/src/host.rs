//! The parent's side: finding an agent's programs, having the evaluator check them, and running
//! an admitted one as an ordinary tool.
//!
//! A [`ProgramTool`] is a [`Tool`] like any built-in: the tool table offers it only when the
//! tokens cover its footprint, and hands its [`Tool::call`] a [`Granted`] holding exactly its
//! footprint's classes. The call starts the evaluator ([`Evaluator`]), answers each effect the
//! program asks for through that `Granted` (`answer`), and kills the evaluator when its
//! deadline passes. The evaluator gets the program's source and input, never a token.

use std::io::{BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use l3m_core::axis::Axis;
use l3m_core::effects::{Tier, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_tools::{Tool, ToolError, ToolOutput};
use serde_json::Value;

use crate::answer;
use crate::decl::{MAX_SOURCE, ProgramDecl, surface};
use crate::limits::Limits;
use crate::protocol::{
    Answer, CheckRequest, FromChild, LineError, RunRequest, read_line, write_line,
};
use crate::rule::{LoadError, Rule, RunError};

/// Where the agent's programs live, relative to its ACR.
pub const PROGRAMS_DIR: &str = "agent/programs";

/// The most stderr kept from a failed evaluator, for its error.
const STDERR_TAIL: usize = 2048;

/// The evaluator binary and the limits each evaluation runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluator {
    /// The `l3m-program` binary.
    pub program: PathBuf,
    /// Its address-space and CPU limits.
    pub limits: Limits,
    /// Wall-clock time a check or a run may take, effects included.
    pub deadline: Duration,
    /// Statements a run may execute.
    pub steps: u64,
}

impl Evaluator {
    /// The binary at `program` with the default limits: 192 MiB of address space, 10 s of CPU
    /// and wall time, a million statements.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            limits: Limits {
                memory_mib: 192,
                cpu_secs: 10,
            },
            deadline: Duration::from_secs(10),
            steps: 1_000_000,
        }
    }

    /// `l3m-program` next to `exe` (the running binary), where `cargo build` and the install
    /// script put it.
    pub fn beside(exe: &Path) -> Option<Self> {
        let dir = exe.parent()?;
        let up = (dir.file_name()? == "deps").then(|| dir.parent()).flatten();
        [Some(dir), up]
            .into_iter()
            .flatten()
            .map(|d| d.join("l3m-program"))
            .find(|p| p.is_file())
            .map(Self::new)
    }

    /// Starts the evaluator in `mode` with an empty environment, at `/`, all three pipes
    /// captured.
    fn spawn(&self, mode: &str) -> std::io::Result<Child> {
        Command::new(&self.program)
            .arg(mode)
            .arg("--memory-mib")
            .arg(self.limits.memory_mib.to_string())
            .arg("--cpu-secs")
            .arg(self.limits.cpu_secs.to_string())
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    }
}

/// A child process that is killed and reaped when dropped, however the call ends.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Result<FromChild, LineError>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Running {
    fn start(evaluator: &Evaluator, mode: &str) -> Result<Self, String> {
        let mut child = evaluator
            .spawn(mode)
            .map_err(|e| format!("starting {}: {e}", evaluator.program.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the evaluator's pipes were not captured".into());
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            loop {
                let line = read_line::<FromChild>(&mut out);
                let last = !matches!(line, Ok(FromChild::Call { .. }));
                if tx.send(line).is_err() || last {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut tail = Vec::new();
            let _ = stderr.take(64 * 1024).read_to_end(&mut tail);
            let cut = tail.len().saturating_sub(STDERR_TAIL);
            tail.split_off(cut)
        });
        Ok(Self {
            child,
            stdin: Some(stdin),
            lines,
            stderr: Some(stderr),
        })
    }

    fn send(&mut self, message: &impl serde::Serialize) -> std::io::Result<()> {
        match self.stdin.as_mut() {
            Some(stdin) => write_line(stdin, message),
            None => Err(std::io::Error::other("stdin closed")),
        }
    }

    /// Kills the child (if still running) and says how it ended, with its stderr's tail.
    fn end(mut self) -> (Option<ExitStatus>, String) {
        self.stdin = None;
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let tail = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&tail).trim().to_owned())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why an evaluator ended without a final line: its deadline, a limit the kernel enforced, or
/// something else, named.
fn ended(file: &str, status: Option<ExitStatus>, stderr: &str, killed: bool) -> RunError {
    let (rule, detail) = match status.and_then(|s| s.signal()) {
        _ if killed => (
            Rule::Deadline,
            "it ran past its deadline and was killed".to_owned(),
        ),
        Some(9) | Some(24) => (
            Rule::Deadline,
            "it used up its CPU time and the kernel stopped it".to_owned(),
        ),
        Some(6) => (
            Rule::Memory,
            "it ran out of memory under its address-space limit and aborted".to_owned(),
        ),
        Some(signal) => (
            Rule::Evaluator,
            format!("the evaluator died of signal {signal}"),
        ),
        None => (
            Rule::Evaluator,
            match status.and_then(|s| s.code()) {
                Some(code) => format!("the evaluator exited with code {code} without answering"),
                None => "the evaluator ended without answering".to_owned(),
            },
        ),
    };
    let detail = if stderr.is_empty() || rule != Rule::Evaluator {
        detail
    } else {
        format!("{detail}: {stderr}")
    };
    RunError {
        file: file.to_owned(),
        line: None,
        rule,
        detail,
    }
}

/// The seal and type checks of `source` (named `file`), made by the evaluator under its limits.
pub fn check_source(
    evaluator: &Evaluator,
    file: &str,
    source: &str,
) -> Result<ProgramDecl, LoadError> {
    let refuse = |e: RunError| LoadError::new(file, e.line.unwrap_or(1), e.rule, e.detail);
    let mut running = Running::start(evaluator, "check")
        .map_err(|detail| LoadError::new(file, 1, Rule::Evaluator, detail))?;
    let request = CheckRequest {
        file: file.to_owned(),
        source: source.to_owned(),
    };
    if let Err(e) = running.send(&request) {
        let (status, stderr) = running.end();
        let mut stop = ended(file, status, &stderr, false);
        stop.detail = format!("{}; sending the program failed: {e}", stop.detail);
        return Err(refuse(stop));
    }
    match running.lines.recv_timeout(evaluator.deadline) {
        Ok(Ok(FromChild::Checked { result })) => result,
        Ok(Ok(other)) => Err(LoadError::new(
            file,
            1,
            Rule::Evaluator,
            format!("the evaluator answered a check with {other:?}"),
        )),
        Ok(Err(LineError::Closed)) | Err(RecvTimeoutError::Disconnected) => {
            let (status, stderr) = running.end();
            Err(refuse(ended(file, status, &stderr, false)))
        }
        Ok(Err(e)) => Err(LoadError::new(file, 1, Rule::Evaluator, e.to_string())),
        Err(RecvTimeoutError::Timeout) => {
            let (status, stderr) = running.end();
            Err(refuse(ended(file, status, &stderr, true)))
        }
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
    let tier = surface(file, &decl, conferred)?;
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

/// Reads and checks every `*.star` file in `<acr>/agent/programs/`. A missing folder is no
/// programs; links are never followed (a link is refused, naming the file).
pub fn load(
    evaluator: &Evaluator,
    acr: &Path,
    conferred: &std::collections::BTreeSet<Axis>,
) -> Loaded {
    let mut loaded = Loaded::default();
    let dir = acr.join(PROGRAMS_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            loaded.refused.push(LoadError::new(
                PROGRAMS_DIR,
                1,
                Rule::FileName,
                "is not a directory (links are not followed)",
            ));
            return loaded;
        }
        Err(_) => return loaded,
    }
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".star"))
            .collect(),
        Err(e) => {
            loaded.refused.push(LoadError::new(
                PROGRAMS_DIR,
                1,
                Rule::FileName,
                format!("cannot be listed: {e}"),
            ));
            return loaded;
        }
    };
    names.sort();
    for name in names {
        let file = format!("{PROGRAMS_DIR}/{name}");
        let checked = read_source(&dir.join(&name), &file)
            .and_then(|source| Ok((check(evaluator, &file, &source, conferred)?, source)));
        match checked {
            Ok(((decl, _tier), source)) => loaded.tools.push(ProgramTool {
                decl,
                file,
                source: source.into(),
                evaluator: evaluator.clone(),
            }),
            Err(e) => loaded.refused.push(e),
        }
    }
    loaded
}

/// The text of the regular file at `path`, at most [`MAX_SOURCE`] bytes, opened without
/// following a link.
fn read_source(path: &Path, file: &str) -> Result<String, LoadError> {
    use rustix::fs::{Mode, OFlags, open};
    let refuse = |rule, detail: String| LoadError::new(file, 1, rule, detail);
    let fd = open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| {
        refuse(
            Rule::FileName,
            format!("cannot be opened (links are refused): {e}"),
        )
    })?;
    let mut handle = std::fs::File::from(fd);
    let is_file = handle.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !is_file {
        return Err(refuse(Rule::FileName, "is not a regular file".into()));
    }
    let mut bytes = Vec::new();
    (&mut handle)
        .take(u64::try_from(MAX_SOURCE).unwrap_or(u64::MAX) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(Rule::FileName, format!("cannot be read: {e}")))?;
    if bytes.len() > MAX_SOURCE {
        return Err(refuse(
            Rule::TooLarge,
            format!("more than {MAX_SOURCE} bytes; a program is at most that"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| refuse(Rule::Syntax, "is not UTF-8 text".into()))
}

/// An admitted program as a tool: `program_<name>`, over exactly its footprint.
#[derive(Debug, Clone)]
pub struct ProgramTool {
    decl: ProgramDecl,
    file: String,
    source: Arc<str>,
    evaluator: Evaluator,
}

impl ProgramTool {
    /// A tool of a program already checked (by [`check`]): `decl` is what the check returned
    /// for `source`, named `file`.
    pub fn new(decl: ProgramDecl, file: String, source: &str, evaluator: Evaluator) -> Self {
        Self {
            decl,
            file,
            source: source.into(),
            evaluator,
        }
    }

    /// What the program declares.
    pub fn program(&self) -> &ProgramDecl {
        &self.decl
    }

    /// Runs the program on `input`, answering its calls from `fx`.
    fn run(&self, input: Value, fx: &Granted<'_>) -> Result<Value, ToolError> {
        let stop = |e: RunError| ToolError::Program {
            limit: matches!(e.rule, Rule::StepBudget | Rule::Deadline | Rule::Memory),
            rule: e.rule.name().to_owned(),
            detail: e.to_string(),
        };
        let started = Instant::now();
        let mut running = Running::start(&self.evaluator, "run")
            .map_err(|detail| stop(parent_stop(&self.file, Rule::Evaluator, detail)))?;
        let request = RunRequest {
            file: self.file.clone(),
            source: self.source.to_string(),
            input,
            steps: self.evaluator.steps,
        };
        // A failed send means the child is gone; its end is read below.
        let _ = running.send(&request);
        // The first effect the ring refused: if the program then fails, that refusal is the
        // reason, with its boundary and axis.
        let mut refused: Option<ToolError> = None;
        loop {
            let left = self.evaluator.deadline.saturating_sub(started.elapsed());
            match running.lines.recv_timeout(left) {
                Ok(Ok(FromChild::Call { function, args })) => {
                    let answer = match answer::call(&function, &args, fx) {
                        Ok(value) => Answer::Ok { value },
                        Err(e) => {
                            let message = e.to_string();
                            if refused.is_none() && e.refusal().is_some() {
                                refused = Some(e);
                            }
                            Answer::Err { message }
                        }
                    };
                    let _ = running.send(&answer);
                }
                Ok(Ok(FromChild::Done { result })) => {
                    drop(running);
                    return result.map_err(|e| refused.take().unwrap_or_else(|| stop(e)));
                }
                Ok(Ok(FromChild::Checked { .. })) => {
                    return Err(stop(parent_stop(
                        &self.file,
                        Rule::Evaluator,
                        "the evaluator answered a run with a check".into(),
                    )));
                }
                Ok(Err(LineError::Closed)) | Err(RecvTimeoutError::Disconnected) => {
                    let (status, stderr) = running.end();
                    return Err(stop(ended(&self.file, status, &stderr, false)));
                }
                Ok(Err(e)) => {
                    return Err(stop(parent_stop(
                        &self.file,
                        Rule::Evaluator,
                        e.to_string(),
                    )));
                }
                Err(RecvTimeoutError::Timeout) => {
                    let (status, stderr) = running.end();
                    return Err(stop(ended(&self.file, status, &stderr, true)));
                }
            }
        }
    }
}

/// A stop of `file` by `rule` that the parent decided (the child never said).
fn parent_stop(file: &str, rule: Rule, detail: String) -> RunError {
    RunError {
        file: file.to_owned(),
        line: None,
        rule,
        detail,
    }
}

impl Tool for ProgramTool {
    fn decl(&self) -> ToolDecl {
        ToolDecl {
            name: self.decl.tool_name(),
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

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        if !input.is_object() {
            return Err(ToolError::BadInput {
                field: "input".into(),
                reason: "a program's input is a JSON object".into(),
            });
        }
        let out = self.run(input, fx)?;
        Ok(ToolOutput::text(match out {
            Value::String(text) => text,
            other => other.to_string(),
        }))
    }
}
