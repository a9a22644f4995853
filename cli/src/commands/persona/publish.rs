//! `l3m persona publish`: a wearer's improvements, upstream.

use l3m_wire::hubd::persona::PersonaSource;

use super::{persona_name, report};
use crate::context::{Context, agent};
use crate::error::CliError;

/// Publish the persona files an agent has improved on its persona branch as the next upstream
/// version of NAME. Only `instructions.md`, `personality.md` and `memories.md` are carried;
/// hooks and programs on the agent's branch never are.
///
/// `--json` prints `{"persona", "refname", "commit", "previous"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The persona to publish.
    pub name: String,
    /// The wearer whose persona branch holds the new version.
    #[arg(long, value_name = "AGENT")]
    pub from: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m persona publish`.
pub async fn cmd_publish(args: Args, cx: Context) -> Result<(), CliError> {
    let persona = persona_name(&args.name)?;
    let from = agent(&args.from)?;
    let session = cx.connect().await?;
    let published = session
        .client
        .publish_persona(
            &persona,
            PersonaSource::Agent {
                agent: from.to_string(),
            },
        )
        .await?;
    report(&published, args.json)
}
