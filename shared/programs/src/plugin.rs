//! Plugins: a bundle of sealed programs admitted all-or-nothing.
//!
//! A plugin is a folder `agent/plugins/<plugin>/` on the persona holding one or more
//! `<name>.star` programs and nothing else: no other file (not even a manifest; each program's
//! `DESCRIPTION` is what the model reads), no folder, no link. Each program gets the same seal,
//! type and surface checks as a single program; the plugin is admitted exactly when every one
//! passes, and then each becomes the tool `program_<plugin>-<name>`. One refusal refuses the
//! whole plugin, naming the plugin, the failing file, its line and its rule.
//!
//! The `-` in the tool name is what keeps plugins and single programs apart: neither a program
//! name nor a plugin name may hold one, so `program_<plugin>-<name>` can never be the name of
//! a single program's tool (`program_<name>`), and the one `-` splits it back unambiguously.
//! (Two tools of one name would fail the whole tool table.) A hook defers to a plugin's
//! program by `<plugin>-<name>`, as it defers to a single one by `<name>`.
//!
//! [`bundle`] (what the folder holds) and [`admit`] (all or nothing) are pure; [`read`] is the
//! IO between them, with the checks passed in, so the sequencer (through the evaluator) and
//! `l3m program check` (in process) share one path.

use std::path::Path;

use crate::decl::{TOOL_PREFIX, program_name};
use crate::process::read_source;
use crate::rule::{LoadError, Rule};

/// Where the agent's plugins live, relative to its ACR: one folder per plugin.
pub const PLUGINS_DIR: &str = "agent/plugins";

/// The longest plugin name, so that `program_<plugin>-<name>` fits the 64 characters model
/// APIs allow a tool name.
pub const MAX_PLUGIN_NAME: usize = 15;

/// The most programs one plugin may bundle, so no plugin floods the tool surface.
pub const MAX_PLUGIN_PROGRAMS: usize = 32;

/// The tool a plugin's program becomes: `program_<plugin>-<name>`.
pub fn tool_name(plugin: &str, program: &str) -> String {
    format!("{TOOL_PREFIX}{plugin}-{program}")
}

/// The plugin name of a folder called `folder_name` (`folder` as refusals name it), or the
/// `plugin` refusal: a lowercase letter then up to 14 lowercase letters, digits or `_`.
pub fn plugin_name(folder: &str, folder_name: &str) -> Result<String, LoadError> {
    let mut chars = folder_name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && folder_name.len() <= MAX_PLUGIN_NAME {
        Ok(folder_name.to_owned())
    } else {
        Err(LoadError::new(
            folder,
            1,
            Rule::Plugin,
            format!(
                "`{folder_name}` is not a plugin name: a lowercase letter then up to {} \
                 lowercase letters, digits or `_`",
                MAX_PLUGIN_NAME - 1
            ),
        ))
    }
}

/// What one entry of a plugin folder is, as listed without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// A symbolic link (never followed).
    Link,
    /// Anything else (a socket, a device, a fifo).
    Other,
}

/// The programs a plugin folder `folder` holds, as `(file name, program name)` sorted by name,
/// from its `entries`; or the `plugin` refusal naming the first entry that is not a
/// `<name>.star` regular file (or the `file-name` refusal of a bad program name), an empty
/// folder, or more than [`MAX_PLUGIN_PROGRAMS`] programs.
pub fn bundle(
    folder: &str,
    mut entries: Vec<(String, Kind)>,
) -> Result<Vec<(String, String)>, LoadError> {
    entries.sort();
    if entries.is_empty() {
        return Err(LoadError::new(
            folder,
            1,
            Rule::Plugin,
            "is empty: a plugin holds one or more `<name>.star` programs",
        ));
    }
    if entries.len() > MAX_PLUGIN_PROGRAMS {
        return Err(LoadError::new(
            folder,
            1,
            Rule::Plugin,
            format!(
                "holds {} entries; a plugin bundles at most {MAX_PLUGIN_PROGRAMS} programs",
                entries.len()
            ),
        ));
    }
    let mut programs = Vec::with_capacity(entries.len());
    for (name, kind) in entries {
        let file = format!("{folder}/{name}");
        let what = match kind {
            Kind::File if name.ends_with(".star") => {
                programs.push((name.clone(), program_name(&file, &name)?));
                continue;
            }
            Kind::File => "a file that is not a `.star` program",
            Kind::Folder => "a folder (plugins do not nest)",
            Kind::Link => "a link (links are never followed)",
            Kind::Other => "not a regular file",
        };
        return Err(LoadError::new(
            &file,
            1,
            Rule::Plugin,
            format!("is {what}: a plugin holds only `<name>.star` programs"),
        ));
    }
    Ok(programs)
}

/// All or nothing: the plugin `plugin`'s programs, each checked (`(program name, result)`),
/// admitted exactly when every one passed. Otherwise the first refusal, its file, line and
/// rule kept, says the whole plugin is refused and how many of its programs failed.
pub fn admit<T>(
    plugin: &str,
    checked: Vec<(String, Result<T, LoadError>)>,
) -> Result<Vec<T>, LoadError> {
    let total = checked.len();
    let mut admitted = Vec::with_capacity(total);
    let mut failed: Vec<LoadError> = Vec::new();
    for (_, result) in checked {
        match result {
            Ok(t) => admitted.push(t),
            Err(e) => failed.push(e),
        }
    }
    let count = failed.len();
    match failed.into_iter().next() {
        None => Ok(admitted),
        Some(first) => Err(refused_whole(plugin, total, count, first)),
    }
}

/// `first`, reworded to say it refused the plugin `plugin` as a whole (`failed` of `total`
/// programs failed).
fn refused_whole(plugin: &str, total: usize, failed: usize, first: LoadError) -> LoadError {
    let others = match failed {
        1 => String::new(),
        n => format!(" ({} more of its programs failed too)", n - 1),
    };
    LoadError {
        detail: format!(
            "plugin `{plugin}` refused whole, none of its {total} programs is offered{others}: {}",
            first.detail
        ),
        ..first
    }
}

/// Reads the plugin folder `dir` (named `folder` in refusals, its last part the plugin's name),
/// checks each program with `check(plugin, file, source)` and admits all or nothing. Nothing in the
/// folder is followed through a link.
pub fn read<T>(
    dir: &Path,
    folder: &str,
    mut check: impl FnMut(&str, &str, &str) -> Result<T, LoadError>,
) -> Result<Vec<T>, LoadError> {
    let folder_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let plugin = plugin_name(folder, &folder_name)?;
    let listed = std::fs::read_dir(dir)
        .map_err(|e| LoadError::new(folder, 1, Rule::Plugin, format!("cannot be listed: {e}")))?;
    let mut entries = Vec::new();
    // One past the most a plugin may hold is enough to refuse it; a huge folder is not read.
    for entry in listed.take(MAX_PLUGIN_PROGRAMS + 1) {
        let entry = entry.map_err(|e| {
            LoadError::new(folder, 1, Rule::Plugin, format!("cannot be listed: {e}"))
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => Kind::Link,
            Ok(t) if t.is_dir() => Kind::Folder,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        entries.push((name, kind));
    }
    let checked = bundle(folder, entries)?
        .into_iter()
        .map(|(file_name, program)| {
            let file = format!("{folder}/{file_name}");
            let result = read_source(&dir.join(&file_name), &file)
                .and_then(|source| check(&plugin, &file, &source));
            (program, result)
        })
        .collect();
    admit(&plugin, checked)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const FOLDER: &str = "agent/plugins/notes";

    fn files(names: &[&str]) -> Vec<(String, Kind)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), Kind::File))
            .collect()
    }

    #[test]
    fn a_bundle_is_exactly_its_star_programs_sorted() {
        let got = bundle(FOLDER, files(&["tidy.star", "count.star"])).unwrap();
        assert_eq!(
            got,
            vec![
                ("count.star".to_owned(), "count".to_owned()),
                ("tidy.star".to_owned(), "tidy".to_owned())
            ]
        );
    }

    #[test]
    fn anything_but_star_programs_is_a_named_refusal() {
        // (the folder's entries, the entry refused, its rule, what the refusal says)
        type Case = (Vec<(String, Kind)>, &'static str, Rule, &'static str);
        let cases: Vec<Case> = vec![
            (vec![], FOLDER, Rule::Plugin, "is empty"),
            (
                files(&["a.star", "plugin.toml"]),
                "plugin.toml",
                Rule::Plugin,
                "not a `.star`",
            ),
            (
                vec![("a.star".into(), Kind::File), ("sub".into(), Kind::Folder)],
                "sub",
                Rule::Plugin,
                "do not nest",
            ),
            (
                vec![("a.star".into(), Kind::File), ("b.star".into(), Kind::Link)],
                "b.star",
                Rule::Plugin,
                "link",
            ),
            (
                vec![("p.star".into(), Kind::Other)],
                "p.star",
                Rule::Plugin,
                "not a regular",
            ),
            (files(&["Bad.star"]), "Bad.star", Rule::FileName, "Bad.star"),
            (files(&["a-b.star"]), "a-b.star", Rule::FileName, "a-b.star"),
        ];
        for (entries, names, rule, says) in cases {
            let e = bundle(FOLDER, entries).unwrap_err();
            assert!(e.file.ends_with(names), "{e}");
            assert!(e.file.starts_with(FOLDER), "{e}");
            assert_eq!(e.rule, rule, "{e}");
            assert!(e.detail.contains(says), "{e}");
        }
        let many: Vec<String> = (0..=MAX_PLUGIN_PROGRAMS)
            .map(|i| format!("p{i}.star"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = bundle(FOLDER, files(&many)).unwrap_err();
        assert_eq!((e.rule, e.file.as_str()), (Rule::Plugin, FOLDER));
    }

    #[test]
    fn plugin_names_hold_no_dash_and_fit_a_tool_name() {
        for good in ["notes", "a", "todo_2", "abcdefghijklmno"] {
            assert_eq!(plugin_name(FOLDER, good).unwrap(), good);
            assert!(tool_name(good, &"x".repeat(40)).len() <= 64);
        }
        for bad in ["", "Notes", "2x", "a-b", "_a", "abcdefghijklmnop", "a.b"] {
            let e = plugin_name(FOLDER, bad).unwrap_err();
            assert_eq!(e.rule, Rule::Plugin, "{bad}");
        }
    }

    #[test]
    fn a_refusal_names_the_plugin_file_line_and_rule() {
        let bad = LoadError::new(&format!("{FOLDER}/b.star"), 4, Rule::NoWhile, "no while");
        let e = admit(
            "notes",
            vec![
                ("a".into(), Ok(())),
                ("b".into(), Err(bad)),
                ("c".into(), Ok(())),
            ],
        )
        .unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.rule),
            ("agent/plugins/notes/b.star", 4, Rule::NoWhile)
        );
        assert_eq!(
            e.to_string(),
            "agent/plugins/notes/b.star:4: refused by the seal check, rule no-while: plugin \
             `notes` refused whole, none of its 3 programs is offered: no while"
        );
    }

    proptest! {
        /// A plugin is admitted exactly when every program is, then with all of them in order;
        /// refused, it names the first failing program's file, line and rule.
        #[test]
        fn a_plugin_is_admitted_iff_every_program_is(
            outcomes in proptest::collection::vec(proptest::option::of(1u32..100), 0..12),
        ) {
            let checked: Vec<(String, Result<usize, LoadError>)> = outcomes
                .iter()
                .enumerate()
                .map(|(i, bad_line)| {
                    let file = format!("{FOLDER}/p{i}.star");
                    let result = match bad_line {
                        None => Ok(i),
                        Some(line) => Err(LoadError::new(&file, *line, Rule::NoLoad, "x")),
                    };
                    (format!("p{i}"), result)
                })
                .collect();
            let first_bad = outcomes.iter().position(Option::is_some);
            match (admit("notes", checked), first_bad) {
                (Ok(all), None) => prop_assert_eq!(all, (0..outcomes.len()).collect::<Vec<_>>()),
                (Err(e), Some(i)) => {
                    prop_assert_eq!(e.file, format!("{FOLDER}/p{i}.star"));
                    prop_assert_eq!(Some(e.line), outcomes[i]);
                    prop_assert_eq!(e.rule, Rule::NoLoad);
                    prop_assert!(e.detail.contains("plugin `notes` refused whole"));
                }
                (got, want) => prop_assert!(false, "{got:?} for first bad {want:?}"),
            }
        }

        /// No plugin tool can be named like a single program's tool, or like another plugin's.
        #[test]
        fn plugin_tools_never_collide(
            plugin in "[a-z][a-z0-9_]{0,14}",
            program in "[a-z][a-z0-9_]{0,39}",
            single in "[a-z][a-z0-9_]{0,39}",
            other in "[a-z][a-z0-9_]{0,14}",
            its in "[a-z][a-z0-9_]{0,39}",
        ) {
            let name = tool_name(&plugin, &program);
            prop_assert_ne!(&name, &format!("{TOOL_PREFIX}{single}"));
            if (other.as_str(), its.as_str()) != (plugin.as_str(), program.as_str()) {
                prop_assert_ne!(&name, &tool_name(&other, &its));
            }
            prop_assert!(name.len() <= 64);
        }
    }
}
