//! `l3m program check PATH`: the three checks of a sealed program, or of every program of a
//! plugin folder (all or nothing), offline, and what the tools would look like to the model.
//!
//! The seal and type checks are exactly the ones the sequencer's evaluator makes at boot
//! (`l3m_programs::evaluate::check`); the surface check runs against the axes given with
//! `--axis` (the agent's grant), or, without any, only checks that every class is admitted for
//! programs and says which axes an agent needs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use l3m_core::axis::Axis;
use l3m_core::effects::Tier;
use l3m_programs::decl::surface;
use l3m_programs::vocabulary::{Class, functions_of};
use l3m_programs::{LoadError, ProgramDecl};
use serde_json::json;

use crate::context::Context;
use crate::error::CliError;

/// Write and check the agent's own tools.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check a program file, or a plugin folder, as the sequencer would at boot: exit 0
    /// admitted, 1 refused, 2 usage.
    Check(CheckArgs),
}

/// Runs the seal, type and surface checks of a `<name>.star` program and prints the tool the
/// model would be offered, or the refusal (file, line, rule).
///
/// Given a plugin folder (`agent/plugins/<plugin>/`), checks every program in it and prints
/// every tool, `program_<plugin>-<name>`, only if all pass; one refusal refuses the plugin, and
/// is printed naming the plugin, the failing file, its line and rule. A plugin folder holds only
/// `<name>.star` programs: any other file, a folder or a link in it is refused (rule `plugin`).
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The program, e.g. `agent/programs/todos.star`, or a plugin folder, e.g.
    /// `agent/plugins/notes`.
    pub file: PathBuf,
    /// An axis the agent's grant confers (repeatable); with none, the surface check only
    /// checks that every class is admitted for programs.
    #[arg(long = "axis", value_name = "AXIS")]
    pub axes: Vec<String>,
    /// Print JSON: `{admitted: true, tool: {name, description, input_schema, tier},
    /// footprint, needs_axes}` or `{admitted: false, refusal: {file, line, rule, stage, detail}}`;
    /// for a plugin folder `{admitted: true, plugin, programs: [{tool, footprint, needs_axes}]}`
    /// or `{admitted: false, plugin, refusal: {…}}`.
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
    // Without --axis, assume the agent holds what the footprint needs: only admission.
    let check = |file: &str, source: &str| {
        let decl = l3m_programs::evaluate::check(file, source)?;
        let axes = if conferred.is_empty() {
            decl.footprint.required_axes()
        } else {
            conferred.clone()
        };
        let tier = surface(file, source, &decl, &axes)?;
        Ok((decl, tier))
    };
    let file = args.file.display().to_string();
    if args.file.is_dir() {
        return check_plugin(&args, &file, check);
    }
    let source = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", args.file.display())))?;
    match check(&file, &source) {
        Ok((decl, tier)) => {
            let name = decl.tool_name();
            if args.json {
                let mut out = admitted_json(&name, &decl, tier);
                out["admitted"] = json!(true);
                outln!("{out}");
            } else {
                print_admitted(&name, &decl, tier);
            }
            Ok(())
        }
        Err(refusal) => refused(&refusal, None, args.json),
    }
}

/// `l3m program check` of the plugin folder `folder`: every program with `check`, all or
/// nothing.
fn check_plugin(
    args: &CheckArgs,
    folder: &str,
    check: impl Fn(&str, &str) -> Result<(ProgramDecl, Tier), LoadError>,
) -> Result<(), CliError> {
    let dir = args
        .file
        .canonicalize()
        .map_err(|e| CliError::usage(format!("cannot read {folder}: {e}")))?;
    let plugin = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let folder = folder.trim_end_matches('/');
    let checked = l3m_programs::plugin::read(&dir, folder, |plugin, file, source| {
        let (decl, tier) = check(file, source)?;
        Ok((
            l3m_programs::plugin::tool_name(plugin, &decl.name),
            decl,
            tier,
        ))
    });
    let tools = match checked {
        Ok(tools) => tools,
        Err(refusal) => return refused(&refusal, Some(&plugin), args.json),
    };
    if args.json {
        let programs: Vec<serde_json::Value> = tools
            .iter()
            .map(|(name, decl, tier)| admitted_json(name, decl, *tier))
            .collect();
        let out = json!({"admitted": true, "plugin": plugin, "programs": programs});
        outln!("{out}");
        return Ok(());
    }
    outln!(
        "plugin `{plugin}` admitted whole: its {} programs are all offered",
        tools.len()
    );
    for (name, decl, tier) in &tools {
        outln!();
        print_admitted(name, decl, *tier);
    }
    Ok(())
}

/// A refusal as the command reports it (JSON on stdout with `--json`), and exit 1. `plugin`
/// names the plugin the refusal refused whole.
fn refused(refusal: &LoadError, plugin: Option<&str>, as_json: bool) -> Result<(), CliError> {
    if as_json {
        let mut out = refusal_json(refusal);
        if let Some(plugin) = plugin {
            out["plugin"] = json!(plugin);
        }
        outln!("{out}");
    }
    Err(CliError::Runtime(refusal.to_string()))
}

/// The tool `name` a checked program becomes, as the model is offered it, with its footprint
/// and the axes it needs.
fn admitted_json(name: &str, decl: &ProgramDecl, tier: Tier) -> serde_json::Value {
    json!({
        "tool": {
            "name": name,
            "description": decl.description,
            "input_schema": match tier {
                Tier::Wild => l3m_core::review::with_justification(&decl.input_schema),
                Tier::Tame => decl.input_schema.clone(),
            },
            "tier": tier,
        },
        "footprint": decl.footprint,
        "needs_axes": needs_axes(decl),
    })
}

/// The grant axes `decl`'s footprint needs.
fn needs_axes(decl: &ProgramDecl) -> Vec<String> {
    decl.footprint
        .required_axes()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The tool `name` as text: its tier, footprint and axes, what the model is offered, and the
/// functions it may call.
fn print_admitted(name: &str, decl: &ProgramDecl, tier: Tier) {
    let tool = admitted_json(name, decl, tier)["tool"].clone();
    let needs = needs_axes(decl);
    let classes: Vec<&str> = decl.footprint.0.iter().map(|c| c.name()).collect();
    outln!(
        "admitted: {name} ({tier}; footprint [{}]; needs {})",
        classes.join(", "),
        if needs.is_empty() {
            "no grant axis".to_owned()
        } else {
            format!("the {} axis", needs.join(", "))
        }
    );
    outln!("the model is offered:");
    outln!(
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
        outln!("it may call: {}", calls.join(", "));
    }
    if tier == Tier::Wild {
        outln!(
            "each call is reviewed before it runs: the reviewer reads this source, the input \
             and the model's justification"
        );
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
