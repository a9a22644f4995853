//! `l3m spawn`: a root agent, spawned by the human, optionally with a task letter.

use std::path::PathBuf;

use l3m_core::budget::Fuel;
use l3m_core::grant::{Grant, GrantFile, SpawnRequest};
use l3m_core::names::{AgentName, PersonaName};
use serde::Serialize;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Spawn a root agent as you. Its grant must lie within your root grant: a widening is refused
/// naming the axis (exit 4), never clamped.
///
/// The grant comes from flags (an axis not given confers nothing) or from `--grant-file` (a
/// grant file, checked with its examples). `--task` is sent to the new agent as a letter from
/// you, which wakes it. The loan defaults to 100 model calls, 10 MB, 100 wakes.
///
/// `--json` prints `{"child", "grants_tip", "work_branch", "acr", "task_letter"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The new agent's name (one segment for a root, e.g. `demo`).
    pub name: String,
    /// A persona to wear (forked from `refs/l3m/personas/P`).
    #[arg(long, value_name = "P")]
    pub persona: Option<String>,
    /// A first task, sent as a letter from you.
    #[arg(long, value_name = "TEXT")]
    pub task: Option<String>,
    /// Write roots, relative to the agent's ACR (e.g. `workspace`).
    #[arg(long, value_name = "ROOT", num_args = 1.., conflicts_with = "grant_file")]
    pub files: Vec<String>,
    /// Hosts the agent may reach (e.g. `crates.io`, `*.debian.org`).
    #[arg(long, value_name = "HOST", num_args = 1.., conflicts_with = "grant_file")]
    pub net: Vec<String>,
    /// Whether the agent may spawn children.
    #[arg(long, value_enum, conflicts_with = "grant_file")]
    pub spawn: Option<SpawnFlag>,
    /// Whom the agent may write to beyond its own subtree and ancestors (e.g. `human:alice`).
    #[arg(long, value_name = "ADDR", num_args = 1.., conflicts_with = "grant_file")]
    pub mail: Vec<String>,
    /// A grant file instead of the grant flags.
    #[arg(long, value_name = "F")]
    pub grant_file: Option<PathBuf>,
    /// The loan's model calls.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub model_calls: u64,
    /// The loan's bytes.
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub bytes: u64,
    /// The loan's wakes.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub wakes: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The spawn axis's levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SpawnFlag {
    /// No children.
    Off,
    /// Children retire when the call that started them returns.
    Drive,
    /// Children persist.
    Persist,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
pub struct SpawnOutput {
    /// The child.
    pub child: String,
    /// The commit of its grants ref.
    pub grants_tip: String,
    /// Its work branch.
    pub work_branch: String,
    /// Its ACR, relative to the hub folder.
    pub acr: String,
    /// The task letter's id, when `--task` was given.
    pub task_letter: Option<String>,
    /// Why the child may not run as expected (no model configured for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Why `child` will not run once woken, if no model is configured for it: a sequencer that
/// finds none leaves the agent asleep with its letters unread, and the user should hear it here
/// rather than in a log file.
fn no_model(document: &std::path::Path, child: &AgentName) -> Option<String> {
    crate::models::gap(document, child).map(|e| {
        format!(
            "{e}: {child} will sleep with its letters unread. Add `default_model = \"NAME\"` \
             and a [models.NAME] table (or an [[agents]] rule) to {}; `l3m doctor` checks it",
            document.display()
        )
    })
}

/// The grant of a TOML grant file, after its allow/deny examples are checked.
pub fn read_grant_file(path: &std::path::Path) -> Result<Grant, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::io("read the grant file", path, e))?;
    let file: GrantFile = toml::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{} is not a valid grant: {}",
            path.display(),
            e.message()
        ))
    })?;
    file.check()
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    Ok(file.grant)
}

/// The grant the flags describe, parsed by the grant's own rules.
pub fn grant_from_flags(args: &Args) -> Result<Grant, CliError> {
    if let Some(path) = &args.grant_file {
        return read_grant_file(path);
    }
    let mut table = toml::Table::new();
    let list = |items: &[String]| {
        toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect())
    };
    table.insert("files".into(), list(&args.files));
    table.insert("net".into(), list(&args.net));
    table.insert("mail".into(), list(&args.mail));
    if let Some(level) = args.spawn {
        let level = match level {
            SpawnFlag::Off => "off",
            SpawnFlag::Drive => "drive",
            SpawnFlag::Persist => "persist",
        };
        table.insert("spawn".into(), toml::Value::String(level.into()));
    }
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| CliError::usage(format!("a grant flag: {}", e.message())))
}

/// Runs `l3m spawn`.
pub async fn cmd_spawn(args: Args, cx: Context) -> Result<(), CliError> {
    let child = agent(&args.name)?;
    let persona = args
        .persona
        .as_deref()
        .map(PersonaName::parse)
        .transpose()
        .map_err(|e| CliError::usage(format!("--persona: {e}")))?;
    let grant = grant_from_flags(&args)?;
    let session = cx.connect().await?;
    let spawned = session
        .client
        .spawn(SpawnRequest {
            child: child.clone(),
            grant,
            loan: Fuel {
                model_calls: args.model_calls,
                bytes: args.bytes,
                wakes: args.wakes,
            },
            driven: false,
            persona,
            fork: None,
        })
        .await?;
    let task_letter = match &args.task {
        Some(task) => Some(
            session
                .client
                .send_letter(child.as_str(), Some("task"), task)
                .await?
                .letter,
        ),
        None => None,
    };
    let out = SpawnOutput {
        child: spawned.child,
        grants_tip: spawned.grants_tip,
        work_branch: spawned.work_branch,
        acr: spawned.acr,
        task_letter,
        warning: no_model(&session.hub.document, &child),
    };
    if args.json {
        return output::json(&out);
    }
    if let Some(warning) = &out.warning {
        errln!("warning: {warning}");
    }
    outln!(
        "spawned {} (work branch {}, ACR {})",
        out.child,
        out.work_branch,
        out.acr
    );
    if let Some(letter) = &out.task_letter {
        outln!("task sent as letter {letter}");
    }
    Ok(())
}
