//! The argument tree and the dispatcher: one file per subcommand, groups as folders. Each
//! file's `Args` doc comment is that command's help; its `cmd_*` handler calls library APIs.

pub mod bless;
pub mod cards;
pub mod cards_serve;
pub mod collect;
pub mod credential;
// demo, doctor and up still print setup text of the CLI's own with `println!` (not yet moved
// to `crate::output`: a known gap); every other command prints only through it.
#[allow(clippy::disallowed_macros, clippy::disallowed_methods)]
#[cfg(feature = "embedded")]
pub mod demo;
#[allow(clippy::disallowed_macros, clippy::disallowed_methods)]
pub mod doctor;
pub mod down;
pub mod fork;
pub mod grant;
pub mod hooks;
#[cfg(feature = "embedded")]
pub mod init;
pub mod log;
pub mod ls;
pub mod mail;
pub mod office;
pub mod persona;
pub mod program;
pub mod retire;
pub mod rewind;
pub mod say;
pub mod settings;
pub mod site;
pub mod spawn;
pub mod stats;
pub mod status;
pub mod tree;
#[allow(clippy::disallowed_macros, clippy::disallowed_methods)]
pub mod up;
pub mod view;
pub mod vigil;

use clap::{Parser, Subcommand};

use crate::context::Context;
use crate::error::CliError;

/// The human's command line for l3m.
///
/// l3m initialises hubs, starts the local stack, spawns and inspects agents, and shows exactly
/// what each model sees. Start with `l3m init`, then `l3m up`.
///
/// Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 not found, 4 refused by hubd, 5 the
/// stack is not running.
#[derive(Debug, Parser)]
#[command(name = "l3m", version, arg_required_else_help = true)]
pub struct Cli {
    /// The hub to work on, by its name in l3m.toml (default: `default_hub`).
    #[arg(long, global = true, value_name = "NAME")]
    pub hub: Option<String>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make a hub and record it in l3m.toml.
    #[cfg(feature = "embedded")]
    Init(init::Args),
    /// Start the local stack.
    Up(up::Args),
    /// Stop the local stack.
    Down(down::Args),
    /// Spawn a root agent.
    Spawn(spawn::Args),
    /// List agents.
    Ls(ls::Args),
    /// Draw the agent tree.
    Tree(tree::Args),
    /// Send an agent a letter from you.
    Say(say::Args),
    /// Show an agent's Log.
    Log(log::Args),
    /// Show exactly what an agent's model would see.
    View(view::Args),
    /// Retire an agent and its subtree.
    Retire(retire::Args),
    /// Rewind an agent's conversation, restoring the files its tools changed.
    Rewind(rewind::Args),
    /// Start a new agent from any point of another's Log.
    Fork(fork::Args),
    /// Collect a retired agent's memory.
    Collect(collect::Args),
    /// Send and list letters.
    #[command(subcommand)]
    Mail(mail::Command),
    /// Show grants.
    #[command(subcommand)]
    Grant(grant::Command),
    /// Model calls, tokens and tool latency per agent.
    Stats(stats::Args),
    /// The whole site: hubd's health, which host runs which agents, the postman's links.
    Status(status::Args),
    /// List the review cards (wild calls at a stalemate) waiting for you.
    Cards(cards::Args),
    /// Approve or deny a waiting review card (humans only).
    #[command(subcommand)]
    Card(cards::CardCommand),
    /// List an agent's vigils, pin one on it, or cancel one.
    #[command(subcommand)]
    Vigil(vigil::Command),
    /// Check this machine and the configuration.
    Doctor(doctor::Args),
    /// Run the demo: a fresh hub and a real agent scenario (scripted model).
    #[cfg(feature = "embedded")]
    Demo(demo::Args),
    /// Make, publish and pull personas.
    #[command(subcommand)]
    Persona(persona::Command),
    /// Pin other hubs as offices for airmail, and show this hub's identity.
    #[command(subcommand)]
    Office(office::Command),
    /// Show and replace the hub's settings (push remotes and more).
    #[command(subcommand)]
    Settings(settings::Command),
    /// Issue, list and revoke the credentials processes open sessions with.
    #[command(subcommand)]
    Credential(credential::Command),
    /// Set up a site across hosts: a NATS cluster over TLS with the site's own CA.
    #[command(subcommand)]
    Site(site::Command),
    /// Pin the exact bytes an agent's runs of a Makefile target may execute (humans only).
    Bless(bless::Args),
    /// Check the sealed programs agents write for themselves.
    #[command(subcommand)]
    Program(program::Command),
    /// Try out an agent's hook, which decides each event before the model sees it.
    #[command(subcommand)]
    Hooks(hooks::Command),
}

/// Runs one command.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        #[cfg(feature = "embedded")]
        Command::Init(args) => init::cmd_init(args, cx).await,
        Command::Up(args) => up::cmd_up(args, cx).await,
        Command::Down(args) => down::cmd_down(args, cx).await,
        Command::Spawn(args) => spawn::cmd_spawn(args, cx).await,
        Command::Ls(args) => ls::cmd_ls(args, cx).await,
        Command::Tree(args) => tree::cmd_tree(args, cx).await,
        Command::Say(args) => say::cmd_say(args, cx).await,
        Command::Log(args) => log::cmd_log(args, cx).await,
        Command::View(args) => view::cmd_view(args, cx).await,
        Command::Retire(args) => retire::cmd_retire(args, cx).await,
        Command::Rewind(args) => rewind::cmd_rewind(args, cx).await,
        Command::Fork(args) => fork::cmd_fork(args, cx).await,
        Command::Collect(args) => collect::cmd_collect(args, cx).await,
        Command::Cards(args) => cards::cmd_cards(args, cx).await,
        Command::Card(command) => cards::cmd_card(command, cx).await,
        Command::Vigil(command) => vigil::dispatch(command, cx).await,
        Command::Mail(command) => mail::dispatch(command, cx).await,
        Command::Grant(command) => grant::dispatch(command, cx).await,
        Command::Stats(args) => stats::cmd_stats(args, cx).await,
        Command::Status(args) => status::cmd_status(args, cx).await,
        Command::Doctor(args) => doctor::cmd_doctor(args, cx).await,
        #[cfg(feature = "embedded")]
        Command::Demo(args) => demo::cmd_demo(args, cx).await,
        Command::Persona(command) => persona::dispatch(command, cx).await,
        Command::Office(command) => office::dispatch(command, cx).await,
        Command::Settings(command) => settings::dispatch(command, cx).await,
        Command::Credential(command) => credential::dispatch(command, cx).await,
        Command::Site(command) => site::dispatch(command, cx).await,
        Command::Bless(args) => bless::cmd_bless(args, cx).await,
        Command::Program(command) => program::dispatch(command, cx).await,
        Command::Hooks(command) => hooks::dispatch(command, cx).await,
    }
}
