//! `l3m office`: the other hubs airmail reaches, pinned in the hub's settings by the SHA-256 of
//! their certificates, and this hub's own identity to give them.

use std::time::Duration;

use l3m_wire::postman::{LinkState, OfficeStatus, PostmanStatus, Probe};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use toml_edit::{DocumentMut, InlineTable, Value};

use l3m_core::refs::paths::{IDENTITY_CERT, IDENTITY_DIR};
use l3m_core::settings::Settings;

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;
use crate::render::time::utc;

/// The office subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Pin another hub as an office: its postman's address and its certificate's SHA-256
    /// (what `l3m office show-identity` prints on that hub). No CA, no trust on first use: a
    /// peer showing another certificate is refused. Humans only; written into settings.toml.
    Add(AddArgs),
    /// List the offices this hub's settings pin.
    Ls(LsArgs),
    /// Remove an office from the settings; letters staged for it stay on the outboxes.
    Rm(RmArgs),
    /// Print this hub's certificate fingerprint, which a peer pins with `office add`.
    ShowIdentity(ShowArgs),
}

/// `l3m office add`.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The office's name, as this hub's letters address it (`office:NAME`).
    pub name: String,
    /// `host:port` where its postman listens.
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: String,
    /// The SHA-256 of its certificate (64 hex digits; `sha256:` and colons are accepted).
    #[arg(long, value_name = "HEX")]
    pub cert_sha256: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `l3m office ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Also dial every office now (handshake and hello) and say whether it answered.
    #[arg(long)]
    pub probe: bool,
    /// Print JSON: `{"postman": bool, "offices": [{"name", "addr", "cert_sha256", "status":
    /// {"link", "since_ms", "last_delivery_ms", "delivered", "backlog", "error", "probe"}}]}`;
    /// `status` is null when no postman answers.
    #[arg(long)]
    pub json: bool,
}

/// `l3m office rm`.
#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// The office.
    pub name: String,
}

/// `l3m office show-identity`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Print JSON: `{"fingerprint", "certificate"}`.
    #[arg(long)]
    pub json: bool,
}

/// One office as listed: as pinned, and as the postman sees its link.
#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    addr: String,
    cert_sha256: String,
    status: Option<OfficeStatus>,
}

/// How long `office ls` waits for the postman; a probe may take the hello timeout.
fn status_timeout(probe: bool) -> Duration {
    Duration::from_secs(if probe { 15 } else { 3 })
}

/// The postman's view of its links, or `None` when no postman answers.
pub async fn link_status(
    client: &l3m_wire::client::HubClient,
    probe: bool,
) -> Result<Option<PostmanStatus>, CliError> {
    match l3m_wire::postman::status(client, probe, status_timeout(probe)).await {
        Ok(Ok(status)) => Ok(Some(status)),
        Ok(Err(refused)) => Err(CliError::Runtime(format!(
            "the postman answered with an error: {}",
            refused.message
        ))),
        Err(_) => Ok(None),
    }
}

/// One line for a link, for people.
pub(crate) fn describe(link: &OfficeStatus) -> String {
    let mut out = match link.link {
        LinkState::Idle => "idle (nothing carried yet)".to_owned(),
        LinkState::Up => format!("up since {}", since(link.since_ms)),
        LinkState::Down => format!("DOWN since {}", since(link.since_ms)),
    };
    if let Some(at) = link.last_delivery_ms {
        out.push_str(&format!(", last delivery {}", utc(at)));
    }
    out.push_str(&format!(
        ", {} carried, backlog {}",
        link.delivered, link.backlog
    ));
    if let Some(error) = &link.error {
        out.push_str(&format!(": {}", Foreign(error)));
    }
    match &link.probe {
        Some(Probe::Welcomed) => out.push_str("; probe: welcomed"),
        Some(Probe::Failed { reason }) => {
            out.push_str(&format!("; probe FAILED: {}", Foreign(reason)))
        }
        None => {}
    }
    out
}

fn since(ms: Option<u64>) -> String {
    ms.map_or_else(|| "start".to_owned(), utc)
}

/// Runs one office subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Add(args) => {
            edit(cx, |doc| add(doc, &args)).await?;
            if args.json {
                return output::json(&serde_json::json!({ "added": args.name }));
            }
            outln!("office {} pinned at {}", args.name, args.addr);
            Ok(())
        }
        Command::Rm(args) => {
            edit(cx, |doc| remove(doc, &args.name)).await?;
            outln!("office {} removed", args.name);
            Ok(())
        }
        Command::Ls(args) => {
            let session = cx.connect().await?;
            let text = session.client.read_settings().await?.text;
            let settings = Settings::parse(&text).map_err(|e| CliError::Runtime(e.to_string()))?;
            let status = link_status(&session.client, args.probe).await?;
            let offices: Vec<Listed> = settings
                .offices
                .iter()
                .map(|(name, office)| Listed {
                    name: name.to_string(),
                    addr: office.addr.clone(),
                    cert_sha256: office.cert_sha256.clone(),
                    status: status
                        .as_ref()
                        .and_then(|s| s.offices.iter().find(|o| o.name == name.as_str()).cloned()),
                })
                .collect();
            if args.json {
                return output::json(&serde_json::json!({
                    "postman": status.is_some(),
                    "offices": offices,
                }));
            }
            if offices.is_empty() {
                outln!(
                    "no offices: pin one with `l3m office add NAME --addr HOST:PORT --cert-sha256 HEX`"
                );
            }
            for o in &offices {
                outln!(
                    "{:<16} {:<28} sha256:{}",
                    Foreign(&o.name),
                    Foreign(&o.addr),
                    Foreign(&o.cert_sha256)
                );
                match (&status, &o.status) {
                    (None, _) => outln!("  link: no postman answers (start it with `l3m up`)"),
                    (Some(_), None) => outln!(
                        "  link: the postman does not carry to it yet (restart it: it reads \
                         offices at start)"
                    ),
                    (Some(_), Some(link)) => outln!("  link: {}", describe(link)),
                }
            }
            Ok(())
        }
        Command::ShowIdentity(args) => {
            let hub = cx.hub()?;
            let cert = hub.root().join(IDENTITY_DIR).join(IDENTITY_CERT);
            let der = std::fs::read(&cert).map_err(|e| CliError::Runtime(format!(
                "cannot read this hub's certificate {}: {e}; make it with `postman identity --hub {}`",
                cert.display(),
                hub.root().display()
            )))?;
            let fingerprint: String = Sha256::digest(&der)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if args.json {
                return output::json(&serde_json::json!({
                    "fingerprint": format!("sha256:{fingerprint}"),
                    "certificate": cert.display().to_string(),
                }));
            }
            outln!("sha256:{fingerprint}");
            Ok(())
        }
    }
}

/// Reads the settings, edits them with `change` (keeping every comment and key it does not
/// touch), checks the result as hubd will, and writes it back only if no one changed the
/// settings since they were read.
async fn edit(
    cx: Context,
    change: impl FnOnce(&mut DocumentMut) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let session = cx.connect().await?;
    edit_with(&session.client, change).await
}

/// [`edit`] through an open session.
async fn edit_with(
    client: &l3m_wire::client::HubClient,
    change: impl FnOnce(&mut DocumentMut) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let view = client.read_settings().await?;
    let mut doc: DocumentMut = view
        .text
        .parse()
        .map_err(|e| CliError::Runtime(format!("the hub's settings.toml does not parse: {e}")))?;
    change(&mut doc)?;
    let text = doc.to_string();
    Settings::parse(&text).map_err(|e| CliError::usage(e.to_string()))?;
    client.update_settings(&text, &view.tip).await?;
    Ok(())
}

/// Pins office `name` (its postman at `addr`, its certificate `cert_sha256`) in the settings
/// of `client`'s hub, as `l3m office add` does; `l3m demo` pairs its two hubs with it.
pub async fn pin(
    client: &l3m_wire::client::HubClient,
    name: &str,
    addr: &str,
    cert_sha256: &str,
) -> Result<(), CliError> {
    let args = AddArgs {
        name: name.to_owned(),
        addr: addr.to_owned(),
        cert_sha256: cert_sha256.to_owned(),
        json: false,
    };
    edit_with(client, |doc| add(doc, &args)).await
}

/// The `offices` array, made if absent; an `offices` that is not an inline array is refused.
fn offices(doc: &mut DocumentMut) -> Result<&mut toml_edit::Array, CliError> {
    let item = doc
        .entry("offices")
        .or_insert(toml_edit::value(toml_edit::Array::new()));
    item.as_array_mut().ok_or_else(|| {
        CliError::usage(
            "settings.toml's `offices` is not an inline array (`offices = [...]`); edit it with `l3m settings apply`",
        )
    })
}

fn name_of(value: &Value) -> Option<&str> {
    value.as_inline_table()?.get("name")?.as_str()
}

fn add(doc: &mut DocumentMut, args: &AddArgs) -> Result<(), CliError> {
    let offices = offices(doc)?;
    if offices
        .iter()
        .any(|v| name_of(v) == Some(args.name.as_str()))
    {
        return Err(CliError::Refused {
            message: format!(
                "office {} is already pinned; `l3m office rm {}` first to change it",
                args.name, args.name
            ),
        });
    }
    let mut office = InlineTable::new();
    office.insert("name", args.name.as_str().into());
    office.insert("addr", args.addr.as_str().into());
    office.insert("cert-sha256", args.cert_sha256.as_str().into());
    offices.push(office);
    Ok(())
}

fn remove(doc: &mut DocumentMut, name: &str) -> Result<(), CliError> {
    let offices = offices(doc)?;
    let at = offices
        .iter()
        .position(|v| name_of(v) == Some(name))
        .ok_or_else(|| CliError::NotFound {
            message: format!("no office {name} in this hub's settings; `l3m office ls` lists them"),
        })?;
    offices.remove(at);
    Ok(())
}
