//! The NATS users of a local stack: one per duty, as in deploy/nats.conf, even on one machine.
//!
//! Without users, any local process that reaches the server could subscribe to `>`, read every
//! request and reply, and answer requests in hubd's place. So `l3m up`
//! generates a password per user (hubd, sequencer, cli, postman, builder, runner, reviewer) at
//! every start, writes them to
//! `HUB/.l3m-run/nats-users.toml` with mode 0600 (readable by the hub's owner alone), and starts
//! nats-server with deploy/nats.conf's permissions, each password passed in the server's
//! environment. Each service gets its own password in its environment and only the variable's
//! name in its arguments; the CLI's later commands read theirs from the file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use l3m_wire::bus::NatsAuth;
use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The file the passwords are kept in, inside the run folder.
pub const USERS_FILE: &str = "nats-users.toml";

/// The environment variable a service started by `l3m up` reads its NATS password from.
pub const PASSWORD_ENV: &str = "L3M_NATS_PASSWORD";

/// One password per user of deploy/nats.conf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Users {
    /// hubd's password.
    pub hubd: String,
    /// The sequencers' password.
    pub sequencer: String,
    /// The CLI's password.
    pub cli: String,
    /// The postman's password.
    pub postman: String,
    /// The builder's password.
    pub builder: String,
    /// The runner's password.
    pub runner: String,
    /// The reviewer's password (a file from before the reviewer existed gets one at next `up`).
    #[serde(default)]
    pub reviewer: String,
}

impl Users {
    /// Fresh passwords from the OS's random source. Each starts with a letter: nats-server
    /// parses an environment value as a config token, and one starting with a digit would be
    /// read as a number.
    pub fn generate() -> Result<Users, CliError> {
        let fresh = || {
            l3m_wire::credential::random_hex()
                .map(|hex| format!("pw{hex}"))
                .map_err(|e| CliError::Runtime(format!("the OS random source failed: {e}")))
        };
        Ok(Users {
            hubd: fresh()?,
            sequencer: fresh()?,
            cli: fresh()?,
            postman: fresh()?,
            builder: fresh()?,
            runner: fresh()?,
            reviewer: fresh()?,
        })
    }

    /// The file's path in the run folder `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(USERS_FILE)
    }

    /// Writes the passwords to `dir`, readable by this user alone (mode 0600 from creation on).
    pub fn write(&self, dir: &Path) -> Result<(), CliError> {
        let path = Users::path(dir);
        let text = toml::to_string(self)
            .map_err(|e| CliError::Runtime(format!("encoding the NATS users: {e}")))?;
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| CliError::io("create", &path, e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| CliError::io("write", &path, e))
    }

    /// The passwords a running local stack uses, if it wrote any.
    pub fn read(dir: &Path) -> Result<Option<Users>, CliError> {
        let path = Users::path(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map(Some).map_err(|e| {
                CliError::Runtime(format!(
                    "{} is damaged ({e}); run `l3m down` and `l3m up`",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CliError::io("read", &path, e)),
        }
    }

    /// The environment nats-server resolves deploy/nats.conf's `$<USER>_NATS_PASSWORD` from.
    pub fn server_env(&self) -> Vec<(String, String)> {
        [
            ("HUBD", &self.hubd),
            ("SEQUENCER", &self.sequencer),
            ("CLI", &self.cli),
            ("POSTMAN", &self.postman),
            ("BUILDER", &self.builder),
            ("RUNNER", &self.runner),
            ("REVIEWER", &self.reviewer),
        ]
        .into_iter()
        .map(|(user, password)| (format!("{user}_NATS_PASSWORD"), password.clone()))
        .collect()
    }

    /// The passwords of a site's file (`passwords.env` from `l3m site init`: `VAR=value`
    /// lines, as [`Users::server_env`] names them), which must be its owner's alone.
    pub fn read_env_file(path: &Path) -> Result<Users, CliError> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| CliError::io("read", path, e))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(CliError::usage(format!(
                "{} holds passwords but others may read it: chmod 600 it",
                path.display()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| CliError::io("read", path, e))?;
        let mut vars = std::collections::BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (var, value) = line.split_once('=').ok_or_else(|| {
                CliError::usage(format!("{}:{}: not VAR=value", path.display(), n + 1))
            })?;
            vars.insert(var.trim().to_owned(), value.trim().to_owned());
        }
        let mut take = |user: &str| {
            let var = format!("{}_NATS_PASSWORD", user.to_uppercase());
            vars.remove(&var)
                .ok_or_else(|| CliError::usage(format!("{} has no {var}", path.display())))
        };
        Ok(Users {
            hubd: take("hubd")?,
            sequencer: take("sequencer")?,
            cli: take("cli")?,
            postman: take("postman")?,
            builder: take("builder")?,
            runner: take("runner")?,
            reviewer: take("reviewer")?,
        })
    }

    /// `user`'s password, if it is one of the stack's users.
    pub fn password(&self, user: &str) -> Option<&str> {
        match user {
            "hubd" => Some(&self.hubd),
            "sequencer" => Some(&self.sequencer),
            "cli" => Some(&self.cli),
            "postman" => Some(&self.postman),
            "builder" => Some(&self.builder),
            "runner" => Some(&self.runner),
            "reviewer" => Some(&self.reviewer),
            _ => None,
        }
    }

    /// How `user` connects.
    pub fn auth(&self, user: &str) -> Option<NatsAuth> {
        Some(NatsAuth::UserPassword {
            user: user.to_owned(),
            password: self.password(user)?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_sites_passwords_file_reads_back_and_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::generate().unwrap();
        let path = dir.path().join("passwords.env");
        let text: String = users
            .server_env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(&path, format!("# a comment\n\n{text}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let open = Users::read_env_file(&path).unwrap_err().to_string();
        assert!(open.contains("chmod 600"), "{open}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Users::read_env_file(&path).unwrap(), users);
        std::fs::write(&path, "HUBD_NATS_PASSWORD=x\n").unwrap();
        let short = Users::read_env_file(&path).unwrap_err().to_string();
        assert!(short.contains("SEQUENCER_NATS_PASSWORD"), "{short}");
        std::fs::write(&path, "garbage\n").unwrap();
        let garbage = Users::read_env_file(&path).unwrap_err().to_string();
        assert!(garbage.contains(":1: not VAR=value"), "{garbage}");
    }

    #[test]
    fn the_file_is_the_owners_alone_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::generate().unwrap();
        users.write(dir.path()).unwrap();
        let mode = std::fs::metadata(Users::path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Users::read(dir.path()).unwrap(), Some(users.clone()));
        assert_ne!(users.hubd, users.cli, "each user its own password");
        assert!(
            users
                .server_env()
                .iter()
                .all(|(_, pw)| pw.starts_with("pw"))
        );
        // Written again at the next start: replaced, still 0600.
        Users::generate().unwrap().write(dir.path()).unwrap();
        assert_ne!(Users::read(dir.path()).unwrap(), Some(users));
    }
}
