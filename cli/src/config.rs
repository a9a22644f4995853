//! The human's document, `l3m.toml`: who the human is, which hubs they use, and the sequencer's
//! sections, which the CLI keeps as opaque TOML and hands to the sequencer by path.
//!
//! The document lives in the l3m home (`~/.l3m`, or `$L3M_HOME`). Credentials appear only as
//! environment variable *names* (`api_key_env`, `nats_password_env`); the CLI never writes a
//! secret into it. A malformed document is a [`ConfigError`] naming the file, the line and the
//! key; so is a top-level key that neither the CLI nor the sequencer reads (a misspelling is
//! caught, never ignored). `l3m init` adds to the document by appending text, so the human's
//! comments and layout survive.
//!
//! # Layout
//! - [`Document`], [`HubEntry`]: the typed part of the document.
//! - [`Document::load`] / [`Document::parse`]: reading it.
//! - [`add_hub`]: the text `l3m init` appends (pure).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use l3m_core::names::HumanName;
use l3m_wire::subjects::HubId;
use serde::Deserialize;

/// The document's file name inside the l3m home.
pub const DOCUMENT: &str = "l3m.toml";

/// The top-level keys the CLI reads.
const CLI_KEYS: [&str; 3] = ["human", "default_hub", "hubs"];

/// The top-level keys the sequencer reads (and the reviewer: `models`, `review`); the CLI
/// keeps them as they are.
pub const SEQUENCER_KEYS: [&str; 5] = ["models", "agents", "default_model", "sequencer", "review"];

/// A malformed `l3m.toml`: where, which key, and what was wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: `{key}`: {message}")]
pub struct ConfigError {
    /// The document.
    pub path: PathBuf,
    /// The 1-based line of the offending key or value.
    pub line: usize,
    /// The dotted key (`hubs.local.root`), or `(document)` for a syntax error before any key.
    pub key: String,
    /// What was wrong.
    pub message: String,
}

/// One hub the human uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubEntry {
    /// The hub folder (made by `l3m init`).
    pub root: PathBuf,
    /// The hub's id: the second token of every NATS subject.
    pub hub_id: String,
    /// An existing NATS server to use; absent means `l3m up` starts its own.
    pub nats: Option<String>,
    /// The NATS user, when the server requires one.
    pub nats_user: Option<String>,
    /// The name of the environment variable holding the NATS password.
    pub nats_password_env: Option<String>,
    /// The site's CA certificate (PEM, from `l3m site init`): when set, every connection to
    /// `nats` (the CLI's and the services' `l3m up` starts) runs over TLS and trusts only
    /// servers this CA signed.
    pub nats_ca: Option<PathBuf>,
    /// The site's NATS passwords (`passwords.env` from `l3m site init`, mode 0600): with it,
    /// every service `l3m up` starts connects to `nats` as its own user, and the CLI as `cli`.
    pub nats_passwords: Option<PathBuf>,
    /// The human's credential file (mode 0600) [default: the one `l3m init` issued,
    /// `ROOT/.hubd/credentials/human-NAME.key`].
    pub credential: Option<PathBuf>,
    /// Where this hub's postman listens for other hubs (`host:port`, UDP); when set, `l3m up`
    /// starts the postman too.
    pub postman_listen: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Known {
    human: Option<String>,
    default_hub: Option<String>,
    #[serde(default)]
    hubs: BTreeMap<String, HubEntry>,
    #[serde(default)]
    review: Option<l3m_core::review::ReviewConfig>,
}

/// The parsed document.
#[derive(Debug, Clone)]
pub struct Document {
    /// Where it was read from.
    pub path: PathBuf,
    /// The human who owns it.
    pub human: Option<HumanName>,
    /// The hub used when `--hub` is not given.
    pub default_hub: Option<String>,
    /// Every hub, by the name `--hub` selects.
    pub hubs: BTreeMap<String, HubEntry>,
    /// How wild calls are reviewed (`[review]`); when present, `l3m up` starts the reviewer.
    pub review: Option<l3m_core::review::ReviewConfig>,
}

impl Document {
    /// Reads the document at `path`; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Document>, crate::error::CliError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(Document::parse(path, &text)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(crate::error::CliError::io("read", path, e)),
        }
    }

    /// Parses `text` as the document at `path`; every value the CLI uses is checked here.
    pub fn parse(path: &Path, text: &str) -> Result<Document, ConfigError> {
        let known: Known = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            located(path, text, offset, e.message().to_owned())
        })?;
        let at_key = |key: &str, message: String| {
            let (line, found) = find_key(text, key);
            ConfigError {
                path: path.to_owned(),
                line,
                key: found,
                message,
            }
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            located(
                path,
                text,
                e.span().map_or(0, |s| s.start),
                e.message().to_owned(),
            )
        })?;
        if let Some(key) = table
            .keys()
            .find(|k| !CLI_KEYS.contains(&k.as_str()) && !SEQUENCER_KEYS.contains(&k.as_str()))
        {
            let mut all: Vec<&str> = CLI_KEYS.to_vec();
            all.extend(SEQUENCER_KEYS);
            return Err(at_key(
                key,
                format!(
                    "unknown top-level key; the document's keys are {}",
                    all.join(", ")
                ),
            ));
        }
        let human = known
            .human
            .as_deref()
            .map(HumanName::parse)
            .transpose()
            .map_err(|e| at_key("human", e.to_string()))?;
        for (name, hub) in &known.hubs {
            HubId::parse(&hub.hub_id)
                .map_err(|e| at_key(&format!("hubs.{name}.hub_id"), e.to_string()))?;
            if hub.nats_passwords.is_some() && hub.nats_user.is_some() {
                return Err(at_key(
                    &format!("hubs.{name}.nats_passwords"),
                    "give either `nats_passwords` (each duty its own user) or `nats_user`, not both"
                        .into(),
                ));
            }
            if hub.nats_password_env.is_some() && hub.nats_user.is_none() {
                return Err(at_key(
                    &format!("hubs.{name}.nats_password_env"),
                    "a NATS password needs `nats_user` too".into(),
                ));
            }
        }
        if let Some(default) = &known.default_hub
            && !known.hubs.contains_key(default)
        {
            return Err(at_key(
                "default_hub",
                format!("names `{default}`, which has no [hubs.{default}] table"),
            ));
        }
        Ok(Document {
            path: path.to_owned(),
            human,
            default_hub: known.default_hub,
            hubs: known.hubs,
            review: known.review,
        })
    }

    /// The hub `--hub` names, or the default one.
    pub fn hub(&self, name: Option<&str>) -> Result<(String, &HubEntry), crate::error::CliError> {
        let name = name
            .map(str::to_owned)
            .or_else(|| self.default_hub.clone())
            .or_else(|| (self.hubs.len() == 1).then(|| self.hubs.keys().next().cloned())?)
            .unwrap_or_else(|| "local".to_owned());
        match self.hubs.get(&name) {
            Some(hub) => Ok((name, hub)),
            None => Err(crate::error::CliError::UnknownHub {
                document: self.path.clone(),
                known: if self.hubs.is_empty() {
                    " (it lists none)".into()
                } else {
                    let names: Vec<&str> = self.hubs.keys().map(String::as_str).collect();
                    format!(" (it lists {})", names.join(", "))
                },
                name,
            }),
        }
    }
}

/// A [`ConfigError`] at byte `offset` of `text`, naming the key on that line.
fn located(path: &Path, text: &str, offset: usize, message: String) -> ConfigError {
    let line = text[..offset.min(text.len())].matches('\n').count() + 1;
    ConfigError {
        path: path.to_owned(),
        line,
        key: key_at_line(text, line),
        message,
    }
}

/// The dotted key defined on `line` (1-based): the nearest table header above it plus the
/// line's own key; `(document)` when the line holds no key.
pub fn key_at_line(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(this) = lines.get(line.saturating_sub(1)) else {
        return "(document)".into();
    };
    let own = this
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_owned());
    let header = lines[..line.saturating_sub(1)]
        .iter()
        .rev()
        .chain(std::iter::once(this))
        .find_map(|l| table_header(l));
    match (header, own) {
        (_, None) if table_header(this).is_some() => table_header(this).unwrap_or_default(),
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (None, Some(k)) => k,
        (Some(h), None) => h,
        (None, None) => "(document)".into(),
    }
}

fn table_header(line: &str) -> Option<String> {
    let t = line.trim();
    let inner = t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]"));
    let inner = inner.or_else(|| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
    Some(inner.trim().to_owned())
}

/// The line (1-based) where the dotted `key` is defined, and the key as found; line 1 when it
/// cannot be located.
fn find_key(text: &str, key: &str) -> (usize, String) {
    (1..=text.lines().count())
        .find(|&n| key_at_line(text, n) == key)
        .map_or((1, key.to_owned()), |n| (n, key.to_owned()))
}

/// The text `l3m init` appends for a new hub, with the top-level keys the document lacks.
pub fn add_hub(
    existing: Option<&Document>,
    human: &HumanName,
    name: &str,
    root: &Path,
    hub_id: &HubId,
) -> (String, String) {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut head = String::new();
    if existing.and_then(|d| d.human.as_ref()).is_none() {
        head.push_str(&format!("human = {}\n", quote(human.as_str())));
    }
    if existing.and_then(|d| d.default_hub.as_ref()).is_none() {
        head.push_str(&format!("default_hub = {}\n", quote(name)));
    }
    let table = format!(
        "\n[hubs.{name}]\nroot = {}\nhub_id = {}\n# nats = \"nats://127.0.0.1:4222\"  # absent: `l3m up` starts its own nats-server\n",
        quote(&root.display().to_string()),
        quote(hub_id.as_str()),
    );
    (head, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Document, ConfigError> {
        Document::parse(Path::new("/h/l3m.toml"), text)
    }

    #[test]
    fn a_full_document_parses_and_keeps_the_sequencer_sections_out_of_the_way() {
        let doc = parse(
            "human = \"alice\"\ndefault_hub = \"local\"\ndefault_model = \"demo\"\n\
             [hubs.local]\nroot = \"/srv/hub\"\nhub_id = \"local\"\n\
             [models.demo]\ndialect = \"scripted\"\nscript = \"x.toml\"\n\
             [[agents]]\nmatch = \"demo/*\"\nmodel = \"demo\"\n",
        )
        .unwrap();
        assert_eq!(doc.human.unwrap().as_str(), "alice");
        assert_eq!(doc.hubs["local"].root, PathBuf::from("/srv/hub"));
        assert_eq!(doc.hubs["local"].nats, None);
    }

    #[test]
    fn a_review_table_is_kept_and_a_bad_one_is_located() {
        let doc = parse("[review]\nmodel = \"checker\"\n").unwrap();
        let review = doc.review.unwrap();
        assert_eq!((review.model.as_str(), review.rounds), ("checker", 2));
        let e = parse("[review]\nmodel = \"checker\"\nrouns = 3\n").unwrap_err();
        assert!(e.message.contains("rouns"), "{e}");
    }

    #[test]
    fn a_bad_value_names_file_line_and_key() {
        let e = parse("human = \"alice\"\n[hubs.local]\nroot = \"/x\"\nhub_id = 7\n").unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(e.key, "hubs.local.hub_id");
        assert!(
            e.to_string()
                .starts_with("/h/l3m.toml:4: `hubs.local.hub_id`"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_hub_key_is_refused_not_ignored() {
        let e = parse("[hubs.local]\nroot = \"/x\"\nhub_id = \"a\"\nnast = \"n\"\n").unwrap_err();
        assert!(e.message.contains("nast"), "{e}");
    }

    #[test]
    fn a_misspelt_top_level_key_is_refused() {
        let e = parse("human = \"alice\"\ndefualt_hub = \"local\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "defualt_hub"));
        assert!(e.message.contains("unknown top-level key"), "{e}");
    }

    #[test]
    fn a_bad_human_name_is_located() {
        let e = parse("# me\nhuman = \"Alice!\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "human"));
    }

    #[test]
    fn a_default_hub_must_exist() {
        let e = parse("default_hub = \"far\"\n").unwrap_err();
        assert_eq!(e.key, "default_hub");
    }

    #[test]
    fn appended_text_parses_back() {
        let human = HumanName::parse("alice").unwrap();
        let id = HubId::parse("local").unwrap();
        let (head, table) = add_hub(None, &human, "local", Path::new("/srv/h"), &id);
        let doc = parse(&format!("{head}# a comment\n{table}")).unwrap();
        assert_eq!(doc.default_hub.as_deref(), Some("local"));
        assert_eq!(doc.hubs["local"].hub_id, "local");
    }
}
