//! [`NatsArgs`]: how every l3m service is told where the site's NATS is and who it is there,
//! on its command line — one set of flags, one meaning, in every binary.

use std::path::PathBuf;

use super::{NatsAuth, NatsBus, NatsTls};
use crate::error::WireError;

/// The NATS flags every service takes: the server (or a cluster's servers), the user and the
/// name of the variable holding its password, and the site's CA.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// The NATS server, or a cluster's servers separated by commas (e.g.
    /// tls://a:4222,tls://b:4222); the service moves to another when one dies.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// The NATS user (see deploy/nats.conf: one per duty).
    #[arg(long, requires = "nats_password_env")]
    pub nats_user: Option<String>,
    /// The name of the environment variable holding the NATS password. The password itself is
    /// never an argument: any local user can read a process's arguments in /proc.
    #[arg(long, requires = "nats_user", value_name = "VAR")]
    pub nats_password_env: Option<String>,
    /// The site's CA certificate (PEM, from `l3m site init`): connect over TLS and trust only
    /// servers it signed. Without it the connection is plain TCP, for a server on loopback.
    #[arg(long, env = "L3M_NATS_CA", value_name = "PEM")]
    pub nats_ca: Option<PathBuf>,
}

/// Why a service could not reach NATS as its flags say.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The variable `--nats-password-env` names is not set.
    #[error("the environment variable {var} (the NATS password) is not set: export it")]
    PasswordUnset {
        /// Its name.
        var: String,
    },
    /// The server could not be reached, its certificate was not the site's, or it refused the
    /// credentials.
    #[error("connecting to NATS at {url}: {source}")]
    Bus {
        /// The URL (list) given.
        url: String,
        /// The cause.
        #[source]
        source: WireError,
    },
}

impl NatsArgs {
    /// The credentials the flags name, the password read from its variable.
    pub fn auth(&self) -> Result<NatsAuth, ConnectError> {
        match (&self.nats_user, &self.nats_password_env) {
            (Some(user), Some(var)) => Ok(NatsAuth::UserPassword {
                user: user.clone(),
                password: std::env::var(var)
                    .map_err(|_| ConnectError::PasswordUnset { var: var.clone() })?,
            }),
            _ => Ok(NatsAuth::Anonymous),
        }
    }

    /// Connects as the flags say.
    pub async fn connect(&self) -> Result<NatsBus, ConnectError> {
        let auth = self.auth()?;
        NatsBus::connect_with(&self.nats, auth, &NatsTls::from_ca(self.nats_ca.clone()))
            .await
            .map_err(|source| ConnectError::Bus {
                url: self.nats.clone(),
                source,
            })
    }

    /// The flags again, for a process this one starts (the password's variable is inherited,
    /// never its value).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec!["--nats".to_owned(), self.nats.clone()];
        if let (Some(user), Some(var)) = (&self.nats_user, &self.nats_password_env) {
            args.extend([
                "--nats-user".to_owned(),
                user.clone(),
                "--nats-password-env".to_owned(),
                var.clone(),
            ]);
        }
        if let Some(ca) = &self.nats_ca {
            args.extend(["--nats-ca".to_owned(), ca.display().to_string()]);
        }
        args
    }
}
