//! What sealed programs cost, against references measured in the same run.
//!
//! Run with `cargo bench -p l3m-programs --bench program`. Each figure is the median of several
//! rounds:
//! - load: the seal, type and load checks of a 200-line program in this process
//!   (`evaluate::check`), against parsing it alone (goal: checks ≤ 5 ms);
//! - boot: the same checks as the sequencer makes them, in a fresh evaluator process
//!   (`host::check_source`), against the in-process checks;
//! - call: `program_read` (a program returning `fs_read(path)`) against the built-in
//!   `read_file` tool reading the same file through the same granted effects (the goal
//!   for a call's harness overhead: ≤ 2×), in the steady state of repeated calls, which one
//!   warm evaluator serves;
//! - cold call: the same call on a fresh tool each time (a process started, the program
//!   checked and loaded, then the call), against the warm call: what the warm evaluator saves.
//! - no-effect call: a warm call of a program that returns a constant, against `read_file`:
//!   the harness's own cost per call (a request line and a `Done` line), without the round
//!   trip each effect adds (a `Call` line and its answer).

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use l3m_core::clock::FixedClock;
use l3m_core::effects::{EffectClass, Footprint};
use l3m_programs::host::{Evaluator, ProgramTool, check_source};
use l3m_programs::{evaluate, seal};
use l3m_ring::effects::Effects;
use l3m_ring::tokens::{MintInput, mint};
use l3m_ring::undo::MemoryUndo;
use l3m_tools::Tool;
use l3m_tools::files::ReadFile;
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const ROUNDS: usize = 31;

/// A 200-line program: the declarations, 32 helpers calling down a chain, and `main`.
fn program_200() -> String {
    let mut s = String::from(
        "\"\"\"Bench: a long program.\"\"\"\nFOOTPRINT = [\"fs-read\"]\nDESCRIPTION = \"bench\"\n\
         INPUT = {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}\n\n",
    );
    for i in 0..32 {
        s.push_str(&format!("def step{i}(xs):\n    out = []\n"));
        s.push_str("    for x in xs:\n        if x % 2 == 0:\n            out.append(x // 2)\n");
        if i < 31 {
            s.push_str(&format!("    return step{}(out)\n", i + 1));
        } else {
            s.push_str("    return out\n");
        }
    }
    s.push_str("def main(input):\n    text = fs_read(input[\"path\"])\n    return step0([len(l) for l in text.split(\"\\n\")])\n");
    s
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(mut f: impl FnMut() -> Result<T>) -> Result<Duration> {
    let mut samples = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed());
    }
    Ok(median(samples))
}

fn row(case: &str, measured: Duration, reference: Duration, goal: &str) {
    println!(
        "{case:<34} {:>10.3} ms {:>10.3} ms {:>8.2}  {goal}",
        measured.as_secs_f64() * 1e3,
        reference.as_secs_f64() * 1e3,
        measured.as_secs_f64() / reference.as_secs_f64()
    );
}

fn main() -> Result<()> {
    let source = program_200();
    let lines = source.lines().count();
    let file = "agent/programs/bench.star";
    println!(
        "{:<34} {:>13} {:>13} {:>8}  goal",
        "case", "measured", "reference", "ratio"
    );

    let parse = time(|| Ok(seal::parse(file, &source)?))?;
    let checks = time(|| Ok(evaluate::check(file, &source)?))?;
    row(
        &format!("load+checks, {lines} lines"),
        checks,
        parse,
        "checks ≤ 5 ms",
    );

    let evaluator = Evaluator::new(PathBuf::from(env!("CARGO_BIN_EXE_l3m-program")));
    let boot = time(|| Ok(check_source(&evaluator, file, &source)?))?;
    row("checks in the evaluator process", boot, checks, "-");

    let acr = tempfile::tempdir()?;
    std::fs::create_dir(acr.path().join("workspace"))?;
    std::fs::write(
        acr.path().join("workspace/notes.md"),
        "TODO one\nline\n".repeat(200),
    )?;
    let input = MintInput {
        acr: acr.path().into(),
        files: Some(vec!["workspace".into()]),
        ..MintInput::default()
    };
    let effects = Effects::new(
        mint(&input, l3m_ring::ambient_authority())?,
        Arc::new(MemoryUndo::default()),
        Arc::new(FixedClock(0)),
        None,
    );
    let granted = effects.for_footprint(&Footprint::of([EffectClass::FsRead]))?;
    let reader = "FOOTPRINT = [\"fs-read\"]\nDESCRIPTION = \"read\"\nINPUT = {\"type\": \"object\"}\n\
                  def main(input):\n    return fs_read(input[\"path\"])\n";
    let read_file = "agent/programs/read.star";
    let tool = |file: &str, source: &str| -> Result<ProgramTool> {
        let decl = check_source(&evaluator, file, source)?;
        Ok(ProgramTool::new(
            decl,
            file.into(),
            source,
            evaluator.clone(),
        ))
    };
    let program = tool(read_file, reader)?;
    let input = json!({"path": "workspace/notes.md"});
    let expected = std::fs::read_to_string(acr.path().join("workspace/notes.md"))?;
    let via_program = time(|| {
        let out = program.call(input.clone(), &granted)?;
        if out.text != expected {
            return Err("program_read returned something else".into());
        }
        Ok(())
    })?;
    let via_builtin = time(|| {
        let out = ReadFile.call(input.clone(), &granted)?;
        if out.text != expected {
            return Err("read_file returned something else".into());
        }
        Ok(())
    })?;
    row(
        "call: program_read vs read_file",
        via_program,
        via_builtin,
        "≤ 2×",
    );
    let cold = time(|| {
        let decl = program.program().clone();
        let fresh = ProgramTool::new(decl, read_file.into(), reader, evaluator.clone());
        let out = fresh.call(input.clone(), &granted)?;
        if out.text != expected {
            return Err("a cold program_read returned something else".into());
        }
        Ok(())
    })?;
    row("cold call vs warm call", cold, via_program, "-");
    let constant = "FOOTPRINT = [\"fs-read\"]\nDESCRIPTION = \"constant\"\n\
                    INPUT = {\"type\": \"object\"}\ndef main(input):\n    return \"done\"\n";
    let constant = tool("agent/programs/constant.star", constant)?;
    let via_constant = time(|| {
        constant.call(input.clone(), &granted)?;
        Ok(())
    })?;
    row(
        "call: no-effect vs read_file",
        via_constant,
        via_builtin,
        "-",
    );
    Ok(())
}
