//! `l3m program check FILE`: the three checks of a sealed program, offline, and what the tool
//! would look like to the model.
//!
//! The seal and type checks are exactly the ones the sequencer's evaluator makes at boot
//! (`l3m_programs::evaluate::check`); the surface check runs against the axes given with
//! `--axis` (the agent's grant), or, without any, only checks that every class is admitted for
//! programs and says which axes an agent needs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use l3m_core::axis::Axis;
use l3m_programs::decl::surface;
use l3m_programs::vocabulary::{Class, functions_of};
use l3m_programs::{LoadError, ProgramDecl};
use serde_json::json;

use crate::context::Context;
use crate::error::CliError;

/// Write and check the agent's own tools.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check a program file as the sequencer would at boot: exit 0 admitted, 1 refused, 2 usage.
    Check(CheckArgs),
}

/// Runs the seal, type and surface checks of a `<name>.star` program and prints the tool the
/// model would be offered, or the refusal (file, line, rule).
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The program, e.g. `agent/programs/todos.star`.
    pub file: PathBuf,
    /// An axis the agent's grant confers (repeatable); with none, the surface check only
    /// checks that every class is admitted for programs.
    #[arg(long = "axis", value_name = "AXIS")]
    pub axes: Vec<String>,
    /// Print JSON: `{admitted: true, tool: {name, description, input_schema, tier},
    /// footprint, needs_axes}` or `{admitted: false, refusal: {file, line, rule, stage, detail}}`.
    #[arg(long)]
    pub json: bool,
}

/// Dispatches `l3m program …`.
pub async fn dispatch(command: Command, _cx: Context) -> Result<(), CliError> {
    match command {
        Command::Check(args) => cmd_check(args),
    }
}

/// Runs `l3m program check`.
fn cmd_check(args: CheckArgs) -> Result<(), CliError> {
    let conferred = args
        .axes
        .iter()
        .map(|a| {
            serde_json::from_value::<Axis>(json!(a)).map_err(|_| {
                let known: Vec<&str> = Axis::ALL.iter().map(|a| a.as_str()).collect();
                CliError::usage(format!("unknown axis `{a}`; axes: {}", known.join(", ")))
            })
        })
        .collect::<Result<BTreeSet<Axis>, CliError>>()?;
    let source = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", args.file.display())))?;
    let file = args.file.display().to_string();
    let checked = l3m_programs::evaluate::check(&file, &source).and_then(|decl| {
        // Without --axis, assume the agent holds what the footprint needs: only admission.
        let axes = if args.axes.is_empty() {
            decl.footprint.required_axes()
        } else {
            conferred
        };
        let tier = surface(&file, &decl, &axes)?;
        Ok((decl, tier))
    });
    match checked {
        Ok((decl, tier)) => {
            print_admitted(&decl, tier, args.json);
            Ok(())
        }
        Err(refusal) => {
            if args.json {
                println!("{}", refusal_json(&refusal));
            }
            Err(CliError::Runtime(refusal.to_string()))
        }
    }
}

fn print_admitted(decl: &ProgramDecl, tier: l3m_core::effects::Tier, as_json: bool) {
    let tool = json!({
        "name": decl.tool_name(),
        "description": decl.description,
        "input_schema": decl.input_schema,
        "tier": tier,
    });
    let needs: Vec<String> = decl
        .footprint
        .required_axes()
        .iter()
        .map(ToString::to_string)
        .collect();
    if as_json {
        let out = json!({
            "admitted": true,
            "tool": tool,
            "footprint": decl.footprint,
            "needs_axes": needs,
        });
        println!("{out}");
        return;
    }
    let classes: Vec<&str> = decl.footprint.0.iter().map(|c| c.name()).collect();
    println!(
        "admitted: {} ({tier}; footprint [{}]; needs {})",
        decl.tool_name(),
        classes.join(", "),
        if needs.is_empty() {
            "no grant axis".to_owned()
        } else {
            format!("the {} axis", needs.join(", "))
        }
    );
    println!("the model is offered:");
    println!(
        "{}",
        serde_json::to_string_pretty(&tool).unwrap_or_else(|_| tool.to_string())
    );
    let calls: Vec<String> = decl
        .footprint
        .0
        .iter()
        .filter_map(Class::of)
        .flat_map(functions_of)
        .map(|f| format!("{}({})", f.name, f.params.join(", ")))
        .collect();
    if !calls.is_empty() {
        println!("it may call: {}", calls.join(", "));
    }
}

fn refusal_json(refusal: &LoadError) -> serde_json::Value {
    json!({
        "admitted": false,
        "refusal": {
            "file": refusal.file,
            "line": refusal.line,
            "rule": refusal.rule,
            "stage": refusal.rule.stage(),
            "detail": refusal.detail,
        }
    })
}
