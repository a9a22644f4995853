//! The TOML a hub and its humans write and l3m reads: a hub's `settings.toml`
//! (`Settings::parse`), grant files (`GrantFile`, then its examples' check), and the CLI's
//! `l3m.toml` (`Document::parse`, whose errors point at a line and key of the text).

use std::path::Path;

use l3m::config::Document;
use l3m_core::grant::GrantFile;
use l3m_core::settings::Settings;

use crate::harness::{self, Src};

/// Valid files, the seeds the mutations start from.
const SETTINGS: &[&str] = &[
    hubd::store::INITIAL_SETTINGS,
    "schema = 1\noffices = [{ name = \"south\", addr = \"127.0.0.1:4433\", cert-sha256 = \"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" }]\nknown_repos = []\n[remotes]\norigin = \"https://git.example/app.git\"\n",
];
const GRANTS: &[&str] = &[
    include_str!("../../cli/src/commands/demo/lead-grant.toml"),
    include_str!("../../cli/src/commands/default-root-grant.toml"),
    include_str!("../../deploy/root-grant.toml"),
];
const CONFIG: &str = "human = \"alice\"\ndefault_hub = \"main\"\n\n[hubs.main]\nroot = \"/home/alice/.l3m/hub\"\nhub_id = \"h-1\"\nnats = \"nats://127.0.0.1:4222\"\n";

/// TOML's own syntax and the files' words.
const TOKENS: &[&str] = &[
    "\n",
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "\"",
    "'''",
    "\"\"\"",
    ",",
    ".",
    "#",
    "\\u0000",
    "\\",
    "1979-05-27T07:32:00Z",
    "inf",
    "nan",
    "-0",
    "0x7fffffffffffffff",
    "99999999999999999999",
    "schema",
    "offices",
    "files",
    "spawn",
    "net",
    "git-write",
    "allow",
    "deny",
    "hubs",
    "review",
    "\u{202e}",
    "../",
    "/",
];

/// `fuzz_settings_grant_and_config_toml`: any text, and mutations of valid settings, grants and
/// CLI configurations, parse or give a typed error; a config error points at a line of the
/// text.
#[test]
fn fuzz_settings_grant_and_config_toml() {
    harness::run("toml", 10_000, 2048, |input| {
        let mut src = Src::new(input);
        let which = src.below(3);
        let seed = match which {
            0 => *src.pick(SETTINGS),
            1 => *src.pick(GRANTS),
            _ => CONFIG,
        };
        let bytes = match src.below(6) {
            0 => input.to_vec(),
            _ => harness::mutate(seed.as_bytes(), &mut src, TOKENS),
        };
        let text = String::from_utf8_lossy(&bytes);
        match Settings::parse(&text) {
            Ok(_) => {}
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        match toml::from_str::<GrantFile>(&text) {
            Ok(file) => {
                if let Err(e) = file.check() {
                    assert!(!e.to_string().is_empty());
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        match Document::parse(Path::new("l3m.toml"), &text) {
            Ok(_) => {}
            Err(e) => assert!(
                e.line <= text.lines().count() + 1,
                "line {} of a {}-line text",
                e.line,
                text.lines().count()
            ),
        }
    });
}
