//! The hub's settings: `settings.toml` on `refs/l3m/settings`, written by humans only (DESIGN §3).
//!
//! hubd keeps the file as its human wrote it (comments and all) and reads from it only what it
//! serves; so parsing checks the whole file is well-formed TOML with a known schema, and types
//! the parts l3m uses. Today that is `[remotes]`: where each push remote a grant may name
//! points.
//!
//! ```
//! use l3m_core::settings::Settings;
//!
//! let settings = Settings::parse(
//!     "schema = 1\noffices = []\nknown_repos = []\n[remotes]\norigin = \"https://git.example/app.git\"\n",
//! )?;
//! assert_eq!(settings.remote_url("origin"), Some("https://git.example/app.git"));
//! assert!(Settings::parse("schema = 1\n[remotes]\norigin = \"ext::sh -c evil\"\n").is_err());
//! # Ok::<(), l3m_core::settings::SettingsError>(())
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::grant::RemoteName;

/// The only settings schema there is.
pub const SCHEMA: u32 = 1;

/// What l3m reads from a hub's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Push remotes by name, each with its URL.
    pub remotes: BTreeMap<RemoteName, String>,
}

/// Why a settings file was refused; each names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The file is not TOML of the expected shape.
    #[error("settings.toml is not valid: {reason}")]
    Toml {
        /// What the parser said.
        reason: String,
    },
    /// `schema` is missing or not the one this l3m knows.
    #[error("settings.toml has schema {found:?}; this l3m reads schema {SCHEMA}")]
    Schema {
        /// What the file says.
        found: Option<u32>,
    },
    /// A remote's name is not a valid remote name.
    #[error("settings.toml names the remote {name:?}: {reason}")]
    RemoteName {
        /// The name as written.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// A remote's URL could be read by git as an option or runs a command.
    #[error("settings.toml gives the remote `{name}` the URL {url:?}: {reason}")]
    RemoteUrl {
        /// The remote.
        name: String,
        /// The URL as written.
        url: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

/// The file's shape; every other key is kept in the text and not read.
#[derive(Deserialize)]
struct Raw {
    schema: Option<u32>,
    #[serde(default)]
    remotes: BTreeMap<String, String>,
}

impl Settings {
    /// Parses and checks a whole `settings.toml`.
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        let raw: Raw = toml::from_str(text).map_err(|e| SettingsError::Toml {
            reason: e.to_string(),
        })?;
        if raw.schema != Some(SCHEMA) {
            return Err(SettingsError::Schema { found: raw.schema });
        }
        let mut remotes = BTreeMap::new();
        for (name, url) in raw.remotes {
            let remote = RemoteName::parse(&name).map_err(|e| SettingsError::RemoteName {
                name: name.clone(),
                reason: e.to_string(),
            })?;
            check_remote_url(&url).map_err(|reason| SettingsError::RemoteUrl {
                name: name.clone(),
                url: url.clone(),
                reason,
            })?;
            remotes.insert(remote, url);
        }
        Ok(Settings { remotes })
    }

    /// The URL of the push remote `name`, if the settings give one.
    pub fn remote_url(&self, name: &str) -> Option<&str> {
        self.remotes
            .iter()
            .find(|(remote, _)| remote.as_str() == name)
            .map(|(_, url)| url.as_str())
    }
}

/// Refuses a URL git could read as an option, or whose transport runs a command (`ext::`,
/// `fd::` and other `<helper>::` forms); the reason says what to give instead.
pub fn check_remote_url(url: &str) -> Result<(), &'static str> {
    if url.is_empty() || url.starts_with('-') {
        Err("a URL must not be empty or start with `-`")
    } else if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Err("a URL must not hold whitespace or control characters")
    } else if url
        .split_once("::")
        .is_some_and(|(helper, _)| !helper.contains('/') && !helper.contains(':'))
    {
        Err("`<helper>::` transports (such as `ext::`) run commands; give a plain URL")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_settings_of_a_hub_parse_with_no_remotes() {
        let text = "# comment\nschema = 1\noffices = []\nknown_repos = []\n";
        assert_eq!(Settings::parse(text).unwrap(), Settings::default());
    }

    #[test]
    fn bad_settings_are_refused_naming_what_is_wrong() {
        let cases = [
            ("schema = 1\nremotes = 3\n", "not valid"),
            ("offices = []\n", "schema None"),
            ("schema = 2\n", "schema Some(2)"),
            ("schema = 1\n[remotes]\n\"-x\" = \"https://a\"\n", "\"-x\""),
            (
                "schema = 1\n[remotes]\no = \"--upload-pack=evil\"\n",
                "start with `-`",
            ),
            ("schema = 1\n[remotes]\no = \"https://a b\"\n", "whitespace"),
            (
                "schema = 1\n[remotes]\no = \"ext::sh -c x\"\n",
                "whitespace",
            ),
            ("schema = 1\n[remotes]\no = \"fd::3\"\n", "`<helper>::`"),
        ];
        for (text, needle) in cases {
            let error = Settings::parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
    }

    #[test]
    fn urls_that_name_a_port_or_a_path_with_colons_are_kept() {
        let text = "schema = 1\n[remotes]\na = \"ssh://git@host:22/x.git\"\nb = \"file:///srv/x::y.git\"\n";
        let settings = Settings::parse(text).unwrap();
        assert_eq!(settings.remote_url("a"), Some("ssh://git@host:22/x.git"));
        assert_eq!(settings.remote_url("b"), Some("file:///srv/x::y.git"));
        assert_eq!(settings.remote_url("c"), None);
    }
}
