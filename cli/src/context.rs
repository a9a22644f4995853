//! Where a command finds what it works on: the l3m home, the human's document, the selected
//! hub, the running stack, and a session with its hubd as the human.
//!
//! Each step fails with the error that says what to do next: no document → `l3m init`; an
//! unknown `--hub` → the names the document lists; a missing hub folder → `l3m init`; no run
//! file or no hubd answering → `l3m up`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use l3m_core::duty::Duty;
use l3m_core::names::{AgentName, HumanName};
use l3m_core::refs::paths;
use l3m_wire::bus::{Bus, NatsAuth, NatsBus, NatsTls};
use l3m_wire::client::HubClient;
use l3m_wire::credential::KeyFile;
use l3m_wire::subjects::HubId;

use crate::config::{DOCUMENT, Document, HubEntry};
use crate::error::CliError;
use crate::stack::runfile::RunFile;

/// How long a command waits for hubd to open a session before it calls the stack down.
const OPEN_WITHIN: Duration = Duration::from_secs(5);

/// What every command is given: the l3m home and the global `--hub`.
#[derive(Debug, Clone)]
pub struct Context {
    /// `~/.l3m` or `$L3M_HOME`.
    pub home: PathBuf,
    /// The `--hub` flag.
    pub hub: Option<String>,
}

/// The hub a command works on, as the document describes it.
#[derive(Debug, Clone)]
pub struct Selected {
    /// Its name in the document.
    pub name: String,
    /// Its entry.
    pub entry: HubEntry,
    /// The human the document names.
    pub human: HumanName,
    /// The document's path (handed to the sequencer as its config).
    pub document: PathBuf,
}

impl Selected {
    /// The hub folder.
    pub fn root(&self) -> &Path {
        &self.entry.root
    }

    /// The hub id, checked when the document was read.
    pub fn hub_id(&self) -> Result<HubId, CliError> {
        HubId::parse(&self.entry.hub_id).map_err(|e| CliError::usage(e.to_string()))
    }

    /// The human's credential: the document's `credential`, else the one `l3m init` issued.
    pub fn human_key(&self) -> Result<KeyFile, CliError> {
        let path = match &self.entry.credential {
            Some(path) => path.clone(),
            None => self.root().join(paths::human_key(&self.human)),
        };
        read_key(&path)
    }
}

/// The whole-hub host credential `l3m init` issued, for what runs agents on this host: only
/// the embedded supervisor reads it, so a CLI built without `embedded` never does.
#[cfg(feature = "embedded")]
pub fn host_key(root: &Path) -> Result<KeyFile, CliError> {
    read_key(&root.join(paths::host_key()))
}

fn read_key(path: &Path) -> Result<KeyFile, CliError> {
    KeyFile::read(path).map_err(|e| CliError::Runtime(e.to_string()))
}

/// A session with the hub's hubd, as the human.
#[derive(Debug)]
pub struct Session {
    /// The client.
    pub client: HubClient,
    /// The hub.
    pub hub: Selected,
}

impl Context {
    /// The document's path.
    pub fn document_path(&self) -> PathBuf {
        self.home.join(DOCUMENT)
    }

    /// The document, which must exist.
    pub fn document(&self) -> Result<Document, CliError> {
        let path = self.document_path();
        Document::load(&path)?.ok_or(CliError::NoDocument { path })
    }

    /// The selected hub, whose folder must hold a hub.
    pub fn hub(&self) -> Result<Selected, CliError> {
        let document = self.document()?;
        let (name, entry) = document.hub(self.hub.as_deref())?;
        let human = document.human.clone().ok_or_else(|| {
            CliError::usage(format!(
                "{} names no `human`: add `human = \"yourname\"` at its top",
                document.path.display()
            ))
        })?;
        if !entry.root.join("hub.git").is_dir() {
            return Err(CliError::NoHub {
                root: entry.root.clone(),
            });
        }
        Ok(Selected {
            name,
            entry: entry.clone(),
            human,
            document: document.path.clone(),
        })
    }

    /// A session with the selected hub's hubd, as the human.
    pub async fn connect(&self) -> Result<Session, CliError> {
        let hub = self.hub()?;
        let bus = bus_for(&hub).await?;
        let credential = hub.human_key()?;
        let duty = Duty::Human {
            human: hub.human.clone(),
        };
        let opened = tokio::time::timeout(
            OPEN_WITHIN,
            HubClient::open(bus, hub.hub_id()?, &credential, duty),
        )
        .await
        .map_err(|_| CliError::StackDown {
            why: format!("hubd did not answer within {OPEN_WITHIN:?}"),
        })?;
        Ok(Session {
            client: opened?,
            hub,
        })
    }
}

/// The NATS URL of the hub's stack: the document's `nats`, else the run file's.
pub fn nats_url(hub: &Selected) -> Result<String, CliError> {
    if let Some(url) = &hub.entry.nats {
        return Ok(url.clone());
    }
    match RunFile::read(hub.root())? {
        Some(run) => Ok(run.nats),
        None => Err(CliError::StackDown {
            why: format!("no run file at {}", RunFile::path(hub.root()).display()),
        }),
    }
}

/// How connections to the hub's NATS server are secured: TLS against the site's CA when the
/// hub's entry names one.
pub fn nats_tls(hub: &Selected) -> NatsTls {
    NatsTls::from_ca(hub.entry.nats_ca.clone())
}

/// The CLI's credentials for the hub's NATS server: the user the document names (the password
/// by env var), or on the local stack's server the `cli` user `l3m up` generated.
pub fn nats_auth(hub: &Selected) -> Result<NatsAuth, CliError> {
    if hub.entry.nats.is_none() && hub.entry.nats_user.is_none() {
        let dir = crate::stack::run_dir(hub.root());
        return Ok(crate::stack::users::Users::read(&dir)?
            .and_then(|users| users.auth("cli"))
            .unwrap_or(NatsAuth::Anonymous));
    }
    if let Some(file) = &hub.entry.nats_passwords {
        let users = crate::stack::users::Users::read_env_file(file)?;
        return users
            .auth("cli")
            .ok_or_else(|| CliError::Runtime("the site has no `cli` user".into()));
    }
    match (&hub.entry.nats_user, &hub.entry.nats_password_env) {
        (Some(user), Some(var)) => {
            let password = std::env::var(var).map_err(|_| {
                CliError::usage(format!(
                    "hub `{}` takes its NATS password from ${var}, which is not set: export it",
                    hub.name
                ))
            })?;
            Ok(NatsAuth::UserPassword {
                user: user.clone(),
                password,
            })
        }
        _ => Ok(NatsAuth::Anonymous),
    }
}

/// A bus to the hub's NATS server.
pub async fn bus_for(hub: &Selected) -> Result<Arc<dyn Bus>, CliError> {
    let url = nats_url(hub)?;
    let bus = tokio::time::timeout(
        OPEN_WITHIN,
        NatsBus::connect_with(&url, nats_auth(hub)?, &nats_tls(hub)),
    )
    .await
    .map_err(|_| CliError::StackDown {
        why: format!("NATS at {url} did not answer within {OPEN_WITHIN:?}"),
    })?
    .map_err(|e| CliError::StackDown {
        why: format!("cannot reach NATS at {url}: {e}"),
    })?;
    Ok(Arc::new(bus))
}

/// Parses an agent name given on the command line.
pub fn agent(name: &str) -> Result<AgentName, CliError> {
    AgentName::parse(name).map_err(|e| {
        CliError::usage(format!(
            "`{name}` is not an agent name ({e}): segments are [a-z][a-z0-9-]*, joined by `/`"
        ))
    })
}
