//! `l3m credential`: which processes may open sessions with the hub, decided by a human.
//!
//! `issue` makes a key pair here, registers only its public half with hubd, and writes the
//! private half to a new file (mode 0600) that you hand to the one process it is for; the
//! private key never crosses the bus. `ls` shows every credential ever issued; `revoke` ends
//! one and every session it opened. All three are for humans only.

use std::path::PathBuf;

use l3m_core::credential::{Credential, Scope};
use l3m_core::names::{AgentName, HumanName, ServiceName};
use l3m_wire::credential::KeyFile;

use crate::context::Context;
use crate::error::CliError;
use crate::render::escape::Foreign;
use crate::render::time::{now_ms, utc};

/// The credential subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Issue a credential for one process and write its private key to FILE.
    ///
    /// Say what it is for with exactly one of `--host`, `--human` or `--postman`. A host
    /// credential runs and wakes the agents of one subtree (`--host alice/main`) or of the whole
    /// hub (`--host '*'`); pass it to `sequencer run|supervise --credential FILE` on that host.
    ///
    /// Example: `l3m credential issue --host alice/main --out host-b.key --expires 30d
    /// --label "host B"`.
    Issue(IssueArgs),
    /// List every credential of the hub: id, scope, expiry, revoked or not.
    Ls(LsArgs),
    /// Revoke a credential: it opens nothing from now on and its open sessions end.
    Revoke(RevokeArgs),
}

/// `l3m credential issue`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["host", "human", "postman"])))]
pub struct IssueArgs {
    /// A sequencer host for this subtree of agents (`*` for every agent).
    #[arg(long, value_name = "SUBTREE")]
    pub host: Option<String>,
    /// The CLI of this registered human.
    #[arg(long, value_name = "NAME")]
    pub human: Option<String>,
    /// The postman, carrying airmail as this service.
    #[arg(long, value_name = "SERVICE")]
    pub postman: Option<String>,
    /// Where to write the private key (a new file; never overwritten).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How long it is valid: a number and `d`, `h` or `m` (days, hours, minutes).
    #[arg(long, default_value = "90d")]
    pub expires: String,
    /// Where it is used, shown by `ls`.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `l3m credential ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Revoked and expired credentials too (by default only those that still open sessions).
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `l3m credential revoke`.
#[derive(Debug, clap::Args)]
pub struct RevokeArgs {
    /// The credential's id (`c-` and 16 hex digits, from `ls`).
    pub id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs one credential subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Issue(args) => issue(args, cx).await,
        Command::Ls(args) => {
            let session = cx.connect().await?;
            let credentials = session.client.list_credentials(args.all).await?;
            if args.json {
                return crate::output::json(&credentials);
            }
            let now = now_ms();
            for credential in &credentials {
                outln!("{}", line(credential, now));
            }
            Ok(())
        }
        Command::Revoke(args) => {
            let session = cx.connect().await?;
            let revoked = session.client.revoke_credential(&args.id).await?;
            if args.json {
                return crate::output::json(&revoked);
            }
            outln!(
                "revoked {}; {} open session(s) ended",
                revoked.id,
                revoked.sessions
            );
            Ok(())
        }
    }
}

async fn issue(args: IssueArgs, cx: Context) -> Result<(), CliError> {
    let scope = scope(&args)?;
    let valid_ms = duration_ms(&args.expires)?;
    if args.out.exists() {
        return Err(CliError::usage(format!(
            "{} exists; a credential is written to a new file only",
            args.out.display()
        )));
    }
    let session = cx.connect().await?;
    let key = KeyFile::generate(
        KeyFile::random_id().map_err(|e| CliError::Runtime(e.to_string()))?,
        scope,
    )
    .map_err(|e| CliError::Runtime(e.to_string()))?
    .pinning(session.client.hub_key());
    let issued = session
        .client
        .issue_credential(&key, now_ms().saturating_add(valid_ms), &args.label)
        .await?;
    key.write(&args.out).map_err(|e| {
        CliError::Runtime(format!(
            "{e}; credential {} is registered but its key is lost: revoke it (l3m credential \
             revoke {}) and issue another",
            issued.id, issued.id
        ))
    })?;
    if args.json {
        return crate::output::json(&issued);
    }
    outln!(
        "issued {} for the {}, valid until {}; its private key is {} (mode 0600): give it to \
         that process only",
        issued.id,
        issued.scope,
        utc(issued.expires_ms),
        args.out.display()
    );
    Ok(())
}

fn scope(args: &IssueArgs) -> Result<Scope, CliError> {
    let bad = |e: l3m_core::names::NameError| CliError::usage(e.to_string());
    Ok(match (&args.host, &args.human, &args.postman) {
        (Some(root), _, _) if root == "*" => Scope::Host { subtree: None },
        (Some(root), _, _) => Scope::Host {
            subtree: Some(AgentName::parse(root).map_err(bad)?),
        },
        (_, Some(human), _) => Scope::Human {
            human: HumanName::parse(human).map_err(bad)?,
        },
        (_, _, Some(service)) => Scope::Postman {
            service: ServiceName::parse(service).map_err(bad)?,
        },
        (None, None, None) => {
            return Err(CliError::usage(
                "say what the credential is for: --host, --human or --postman",
            ));
        }
    })
}

/// Parses `90d`, `12h` or `30m` as milliseconds.
fn duration_ms(text: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError::usage(format!(
            "--expires {text:?} is not a duration: a positive number and d, h or m (e.g. 30d)"
        ))
    };
    // The unit is the last character, whatever its width: a split inside one would panic.
    let (number, unit) = match text.char_indices().last() {
        Some((at, _)) => text.split_at(at),
        None => return Err(bad()),
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit_ms) {
        Some(ms) if ms > 0 => Ok(ms),
        _ => Err(bad()),
    }
}

fn line(credential: &Credential, now: u64) -> String {
    let state = match credential.revoked_ms {
        Some(at) => format!("revoked {}", utc(at)),
        None if now >= credential.expires_ms => format!("expired {}", utc(credential.expires_ms)),
        None => format!("valid until {}", utc(credential.expires_ms)),
    };
    let label = if credential.label.is_empty() {
        String::new()
    } else {
        format!("  ({})", Foreign(&credential.label))
    };
    format!(
        "{}  {}  {state}  by {}{label}",
        credential.id, credential.scope, credential.by
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_writes_them() {
        assert_eq!(duration_ms("30d").unwrap(), 30 * 86_400_000);
        assert_eq!(duration_ms("2h").unwrap(), 7_200_000);
        for bad in ["", "d", "0d", "3w", "-1d", "99999999999999999d", "5é", "é"] {
            assert!(duration_ms(bad).is_err(), "{bad}");
        }
    }
}
