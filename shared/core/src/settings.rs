//! The hub's settings: `settings.toml` on `refs/l3m/settings`, written by humans only (DESIGN §3).
//!
//! hubd keeps the file as its human wrote it (comments and all) and reads from it only what it
//! serves; so parsing checks the whole file is well-formed TOML with a known schema, and types
//! the parts l3m uses: `[remotes]`, where each push remote a grant may name points; and
//! `offices`, the other hubs airmail reaches, each pinned by its certificate's fingerprint:
//! `offices = [{ name = "south", addr = "south.example:4433", cert-sha256 = "<64 hex>" }]`; and
//! `[builds] images = ["sha256:<64 hex>", ...]`, the engine ids of the only images the builder
//! and the runner may start (what `deploy/images/build` prints).
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

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::grant::RemoteName;
use crate::names::OfficeName;

/// The only settings schema there is.
pub const SCHEMA: u32 = 1;

/// What l3m reads from a hub's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Push remotes by name, each with its URL.
    pub remotes: BTreeMap<RemoteName, String>,
    /// The other hubs airmail reaches, by name.
    pub offices: BTreeMap<OfficeName, Office>,
    /// The engine ids (`sha256:` and 64 hex digits) of the images build stages may use; empty
    /// when the settings pin none.
    pub images: BTreeSet<String>,
}

/// Another hub, as a human pinned it: where its postman listens and the SHA-256 of its
/// certificate (no CA, no trust on first use: a peer showing another certificate is refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Office {
    /// `host:port` of its postman.
    pub addr: String,
    /// The certificate's SHA-256 as 64 lowercase hex digits.
    pub cert_sha256: String,
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
    /// An image id under `[builds] images` is not an engine id.
    #[error(
        "settings.toml's [builds] images names {id:?}, which is not an engine id (`sha256:` and \
         64 hex digits, as deploy/images/build prints it)"
    )]
    Image {
        /// The id as written.
        id: String,
    },
    /// An office entry is not usable; the reason says which field and what to write.
    #[error("settings.toml's office {name:?}: {reason}")]
    Office {
        /// The office's name as written.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The file's shape; every other key is kept in the text and not read.
#[derive(Deserialize)]
struct Raw {
    schema: Option<u32>,
    #[serde(default)]
    remotes: BTreeMap<String, String>,
    #[serde(default)]
    offices: Vec<RawOffice>,
    #[serde(default)]
    builds: RawBuilds,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBuilds {
    #[serde(default)]
    images: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawOffice {
    name: String,
    addr: String,
    cert_sha256: String,
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
        let mut offices = BTreeMap::new();
        for raw in raw.offices {
            let bad = |reason: String| SettingsError::Office {
                name: raw.name.clone(),
                reason,
            };
            let name = OfficeName::parse(&raw.name).map_err(|e| bad(e.to_string()))?;
            check_office_addr(&raw.addr).map_err(|r| bad(format!("addr {:?}: {r}", raw.addr)))?;
            let cert_sha256 = normalize_fingerprint(&raw.cert_sha256).ok_or_else(|| {
                bad(format!(
                    "cert-sha256 {:?} is not 64 hex digits (give what `l3m office show-identity` prints on that hub)",
                    raw.cert_sha256
                ))
            })?;
            let office = Office {
                addr: raw.addr.clone(),
                cert_sha256,
            };
            if offices.insert(name, office).is_some() {
                return Err(bad("is named twice".into()));
            }
        }
        let images = raw
            .builds
            .images
            .into_iter()
            .map(|id| {
                if is_image_id(&id) {
                    Ok(id)
                } else {
                    Err(SettingsError::Image { id })
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings {
            remotes,
            offices,
            images,
        })
    }

    /// The URL of the push remote `name`, if the settings give one.
    pub fn remote_url(&self, name: &str) -> Option<&str> {
        self.remotes
            .iter()
            .find(|(remote, _)| remote.as_str() == name)
            .map(|(_, url)| url.as_str())
    }
}

/// Whether `id` is an engine image id: `sha256:` and 64 lowercase hex digits.
pub fn is_image_id(id: &str) -> bool {
    id.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Checks an office's `host:port`: a host (a name or an IP literal, `[...]` for IPv6) and a
/// port from 1 to 65535.
pub fn check_office_addr(addr: &str) -> Result<(), &'static str> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err("write it as host:port");
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
    {
        return Err("the host must be a name or an IP address");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err("the port must be a number from 1 to 65535"),
    }
}

/// A certificate fingerprint as 64 lowercase hex digits, from the forms people paste: with or
/// without `sha256:`, with or without `:` between bytes, in either case.
pub fn normalize_fingerprint(text: &str) -> Option<String> {
    let hex: String = text
        .trim()
        .trim_start_matches("sha256:")
        .chars()
        .filter(|c| *c != ':')
        .collect::<String>()
        .to_ascii_lowercase();
    (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())).then_some(hex)
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
    fn build_images_are_pinned_by_engine_id() {
        let id = format!("sha256:{}", "ab".repeat(32));
        let text = format!("schema = 1\n[builds]\nimages = [\"{id}\"]\n");
        let settings = Settings::parse(&text).unwrap();
        assert_eq!(settings.images, BTreeSet::from([id.clone()]));
        let upper = text.replace("ab", "AB");
        assert!(Settings::parse(&upper).is_err(), "ids are lowercase");
        assert!(!is_image_id(&id[..70]));
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
            (
                "schema = 1\n[builds]\nimages = [\"l3m/busybox\"]\n",
                "\"l3m/busybox\", which is not an engine id",
            ),
            ("schema = 1\n[builds]\nimage = []\n", "not valid"),
        ];
        for (text, needle) in cases {
            let error = Settings::parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
    }

    #[test]
    fn offices_parse_pinned_and_bad_ones_are_refused_naming_the_field() {
        let fp = "AB".repeat(32);
        let text = format!(
            "schema = 1\noffices = [{{ name = \"south\", addr = \"127.0.0.1:4433\", cert-sha256 = \"sha256:{fp}\" }}]\n"
        );
        let settings = Settings::parse(&text).unwrap();
        let south = &settings.offices[&OfficeName::parse("south").unwrap()];
        assert_eq!(south.addr, "127.0.0.1:4433");
        assert_eq!(south.cert_sha256, "ab".repeat(32));
        let office = |name: &str, addr: &str, cert: &str| {
            format!(
                "schema = 1\noffices = [{{ name = \"{name}\", addr = \"{addr}\", cert-sha256 = \"{cert}\" }}]\n"
            )
        };
        for (text, needle) in [
            (office("South!", "h:1", &fp), "\"South!\""),
            (office("south", "h", &fp), "host:port"),
            (office("south", "h:0", &fp), "port"),
            (office("south", "[::1]:99999", &fp), "port"),
            (office("south", "h:1", "12"), "64 hex"),
            (
                "schema = 1\noffices = [{ name = \"s\", addr = \"h:1\", cert-sha256 = \"x\", extra = 1 }]\n".into(),
                "not valid",
            ),
        ] {
            let error = Settings::parse(&text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
        let twice = format!(
            "schema = 1\noffices = [{{ name = \"s\", addr = \"h:1\", cert-sha256 = \"{fp}\" }}, {{ name = \"s\", addr = \"h:2\", cert-sha256 = \"{fp}\" }}]\n"
        );
        assert!(
            Settings::parse(&twice)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(check_office_addr("[::1]:4433").is_ok());
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
