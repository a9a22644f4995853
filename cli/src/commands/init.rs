//! `l3m init`: a hub, recorded in the human's document.

use std::path::{Path, PathBuf};

use hubd::init::init_hub;
use hubd::store::HubOptions;
use l3m_core::grant::GrantFile;
use l3m_core::names::HumanName;
use l3m_wire::subjects::HubId;

use crate::config::{Document, add_hub};
use crate::context::Context;
use crate::error::CliError;

/// The default root grant (with `{human}` to fill in).
pub const DEFAULT_ROOT_GRANT: &str = include_str!("default-root-grant.toml");

/// Make a hub and record it in l3m.toml (created if absent; otherwise text is appended, so
/// your comments stay).
///
/// The hub is registered under the global `--hub` name (default `local`), with its human as
/// the root of its ledger. Without `--grant`, the human's grant is the default root grant:
/// write roots `workspace` and `agent`, git read of `refs/heads/` and `refs/l3m/a/`, git write
/// of `refs/heads/l3m/`, mail to the human, spawn `persist`; no network, wild classes, builds
/// or runs (docs/cli.md shows it in full).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The hub folder to create (default: `L3M_HOME/hub`, or `L3M_HOME/hubs/NAME` for a hub
    /// not named `local`).
    #[arg(long, value_name = "DIR")]
    pub hub_root: Option<PathBuf>,
    /// Your name, one lowercase segment (default: the document's `human`).
    #[arg(long)]
    pub human: Option<String>,
    /// A grant file (TOML, checked with its examples; see deploy/root-grant.toml).
    #[arg(long, value_name = "FILE")]
    pub grant: Option<PathBuf>,
    /// The hub id on NATS subjects (default: the hub's name).
    #[arg(long)]
    pub hub_id: Option<String>,
}

/// Reads and checks a grant file, or fills in the default one.
pub fn root_grant(path: Option<&Path>, human: &HumanName) -> Result<GrantFile, CliError> {
    let (text, from) = match path {
        Some(p) => (
            std::fs::read_to_string(p).map_err(|e| CliError::io("read the grant file", p, e))?,
            p.display().to_string(),
        ),
        None => (
            DEFAULT_ROOT_GRANT.replace("{human}", human.as_str()),
            "the default root grant".to_owned(),
        ),
    };
    let file: GrantFile = toml::from_str(&text)
        .map_err(|e| CliError::usage(format!("{from} is not a valid grant: {e}")))?;
    file.check()
        .map_err(|e| CliError::usage(format!("{from}: {e}")))?;
    Ok(file)
}

/// Runs `l3m init`.
pub async fn cmd_init(args: Args, cx: Context) -> Result<(), CliError> {
    let path = cx.document_path();
    let existing = Document::load(&path)?;
    let name = cx.hub.clone().unwrap_or_else(|| "local".to_owned());
    if let Some(hub) = existing.as_ref().and_then(|d| d.hubs.get(&name)) {
        return Err(CliError::Runtime(format!(
            "{} already names a hub `{name}` at {}: pick another name with --hub, or remove its table",
            path.display(),
            hub.root.display()
        )));
    }
    let known = existing.as_ref().and_then(|d| d.human.clone());
    let human = match (&args.human, &known) {
        (Some(given), Some(known)) if given != known.as_str() => {
            return Err(CliError::usage(format!(
                "{} says you are `{known}`, not `{given}`: drop --human or edit the document",
                path.display()
            )));
        }
        (Some(given), _) => {
            HumanName::parse(given).map_err(|e| CliError::usage(format!("--human {given}: {e}")))?
        }
        (None, Some(known)) => known.clone(),
        (None, None) => {
            return Err(CliError::usage(
                "who are you? give --human NAME (one lowercase segment, e.g. alice)",
            ));
        }
    };
    let hub_id = HubId::parse(args.hub_id.as_deref().unwrap_or(&name))
        .map_err(|e| CliError::usage(format!("hub id: {e}")))?;
    let root = args.hub_root.clone().unwrap_or_else(|| {
        if name == "local" {
            cx.home.join("hub")
        } else {
            cx.home.join("hubs").join(&name)
        }
    });
    let root = std::path::absolute(&root).map_err(|e| CliError::io("resolve", &root, e))?;
    let grant = root_grant(args.grant.as_deref(), &human)?;
    std::fs::create_dir_all(&cx.home).map_err(|e| CliError::io("create", &cx.home, e))?;
    let now_ms = crate::render::time::now_ms();
    init_hub(
        &root,
        HubOptions::default(),
        human.clone(),
        grant.grant,
        now_ms,
    )
    .map_err(|e| CliError::Runtime(format!("cannot create the hub at {}: {e}", root.display())))?;
    let identity = postman::identity::Identity::load_or_create(
        &root.join(l3m_core::refs::paths::IDENTITY_DIR),
        &name,
    )
    .map_err(|e| CliError::Runtime(format!("cannot make the hub's identity: {e}")))?;
    let (head, table) = add_hub(existing.as_ref(), &human, &name, &root, &hub_id);
    let old = match &existing {
        Some(_) => std::fs::read_to_string(&path).map_err(|e| CliError::io("read", &path, e))?,
        None => {
            "# The human's own document: hubs, models (credentials by env var name only).\n".into()
        }
    };
    let text = format!("{head}{old}{table}");
    Document::parse(&path, &text)?;
    std::fs::write(&path, text).map_err(|e| CliError::io("write", &path, e))?;
    outln!(
        "created hub `{name}` at {} with human:{human} as its root",
        root.display()
    );
    outln!("recorded it in {}", path.display());
    outln!(
        "its identity for other hubs: {} (`l3m office show-identity`)",
        identity.fingerprint()
    );
    outln!("next: l3m up");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_root_grant_loads_with_its_examples() {
        let human = HumanName::parse("alice").unwrap();
        let file = root_grant(None, &human).unwrap();
        assert_eq!(file.grant.spawn, l3m_core::grant::SpawnLevel::Persist);
        assert!(file.grant.net.is_empty());
    }
}
