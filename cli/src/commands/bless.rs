//! `l3m bless`: pin the exact bytes an agent's runs of a Makefile target may execute.

use std::collections::BTreeMap;
use std::path::PathBuf;

use l3m_core::build::{ArtifactDigest, Blessing, blessed_inputs};

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Bless a Makefile target for an agent: pin, by blake3, the Makefile, every file it literally
/// includes, and every script the recipes of the target (and its prerequisites) call.
///
/// Editing a Makefile is writing; running it is executing. An agent's blessed run of TARGET
/// goes ahead only while every pinned file still hashes the same and the Makefile reads no
/// new input, and takes no arguments from the model. After any edit it refuses until you
/// bless again. Only humans can bless (the pin lives on refs/l3m/blessings/AGENT/_/TARGET,
/// which no session may write).
///
/// Refused before anything is sent: a target make would read as an argument (`CC=x`, `-j`),
/// an include through a variable or a wildcard, an input outside the repository.
///
/// `--json` prints `{"tip": ..., "blessing": {"makefile", "target", "files": {path: blake3}}}`.
/// Exit codes: 0 pinned, 2 bad input, 3 refused by hubd, 1 anything else.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent whose runs the blessing lets through.
    pub agent: String,
    /// The Makefile target.
    pub target: String,
    /// The repository the Makefile's paths are relative to.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The Makefile, relative to the repository.
    #[arg(long, default_value = "Makefile")]
    pub makefile: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Reads the Makefile and hashes the inputs of `args.target`.
pub fn blessing_of(args: &Args) -> Result<Blessing, CliError> {
    let path = args.repo.join(&args.makefile);
    let text = std::fs::read_to_string(&path).map_err(|e| CliError::io("read", &path, e))?;
    let inputs = blessed_inputs(&args.makefile, &text, &args.target)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let mut files = BTreeMap::new();
    for input in inputs {
        let file = args.repo.join(&input);
        let bytes = std::fs::read(&file).map_err(|e| CliError::io("read", &file, e))?;
        files.insert(
            input,
            ArtifactDigest::from_bytes(*blake3::hash(&bytes).as_bytes()),
        );
    }
    Ok(Blessing {
        makefile: args.makefile.clone(),
        target: args.target.clone(),
        files,
    })
}

/// Runs `l3m bless`.
pub async fn cmd_bless(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.agent)?;
    let blessing = blessing_of(&args)?;
    let session = cx.connect().await?;
    let blessed = session.client.bless(&name, blessing.clone()).await?;
    if args.json {
        return output::json(&serde_json::json!({ "tip": blessed.tip, "blessing": blessing }));
    }
    for (path, digest) in &blessing.files {
        outln!("{digest}  {path}");
    }
    outln!(
        "blessed {} of {} for {name}",
        blessing.target,
        blessing.makefile
    );
    Ok(())
}
