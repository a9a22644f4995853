//! Tame make: a restricted Makefile the harness lowers to commands it writes itself.
//!
//! A blessed Makefile needs a human because make hands each recipe line to a shell. Tame make
//! needs none: its Makefile is a restricted dialect that [`lower`] turns into [`TameStep`]s —
//! argument vectors the harness runs directly, never through a shell — in dependency order.
//! Every target is a path under `build/`, every program is one of [`TAME_TOOLS`], and no
//! argument carries shell syntax, a variable, an absolute path or `..`; so whatever a tame
//! build writes lands under `build/` (the only writable mount of the build stage it runs in),
//! and undoing it is removing `build/`. This is the paper's `lower_recipes_closed`.
//!
//! A build stage runs the steps from a script the harness writes, each word quoted by
//! [`command_line`], so no byte of the Makefile is ever read as shell syntax.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The programs a tame recipe may run.
pub const TAME_TOOLS: &[&str] = &[
    "cc", "gcc", "c++", "g++", "clang", "ar", "ld", "as", "cp", "cat", "mkdir", "touch", "strip",
];

/// Characters that would mean something to a shell or to make; a tame line holds none.
const SHELL_SYNTAX: &[char] = &[
    '$', ';', '|', '&', '>', '<', '`', '\'', '"', '(', ')', '*', '?', '[', ']', '~', '\\', '{',
    '}', '=', '#', '!', '%',
];

/// One command the harness runs: its argument vector, and the target it makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TameStep {
    /// The target, under `build/`.
    pub target: String,
    /// The program and its arguments, passed to no shell.
    pub argv: Vec<String>,
}

/// Why a Makefile is not tame, naming the line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "kebab-case")]
pub enum TameError {
    /// A target is not a plain path under `build/`.
    #[error("line {line}: target {target:?} is not a plain path under build/")]
    TargetOutsideBuild {
        /// 1-based line.
        line: usize,
        /// The target.
        target: String,
    },
    /// A line holds shell or make syntax (`$`, `;`, quotes, globs, `=`...).
    #[error("line {line}: {found:?} is shell or make syntax, which tame make does not pass on")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// The character found.
        found: char,
    },
    /// A recipe runs a program outside [`TAME_TOOLS`].
    #[error("line {line}: {program:?} is not a tame tool ({TAME_TOOLS:?})")]
    UnknownTool {
        /// 1-based line.
        line: usize,
        /// The program.
        program: String,
    },
    /// An argument is an absolute path or climbs with `..`.
    #[error("line {line}: argument {arg:?} leaves the repository")]
    Escapes {
        /// 1-based line.
        line: usize,
        /// The argument.
        arg: String,
    },
    /// A recipe line comes before any rule, or a line is neither rule, recipe nor comment.
    #[error("line {line}: not a rule, a tab-indented recipe or a comment")]
    Unsupported {
        /// 1-based line.
        line: usize,
    },
    /// The goal has no rule.
    #[error("no rule makes {goal:?}")]
    NoRule {
        /// The goal.
        goal: String,
    },
    /// Targets depend on each other in a circle.
    #[error("{target} depends on itself")]
    Cycle {
        /// A target on the circle.
        target: String,
    },
}

struct Rule {
    deps: Vec<String>,
    recipe: Vec<(usize, Vec<String>)>,
}

fn plain(path: &str) -> bool {
    !path.starts_with('/') && !path.split('/').any(|c| c == ".." || c.is_empty())
}

fn check_syntax(line: usize, text: &str) -> Result<(), TameError> {
    match text.chars().find(|c| SHELL_SYNTAX.contains(c)) {
        Some(found) => Err(TameError::Syntax { line, found }),
        None => Ok(()),
    }
}

/// Lowers `text` to the steps that make `goal`, prerequisites first, each target once.
pub fn lower(text: &str, goal: &str) -> Result<Vec<TameStep>, TameError> {
    let mut rules: BTreeMap<String, Rule> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        if let Some(recipe) = raw.strip_prefix('\t') {
            check_syntax(line, recipe)?;
            let rule = current
                .as_ref()
                .and_then(|t| rules.get_mut(t))
                .ok_or(TameError::Unsupported { line })?;
            let argv: Vec<String> = recipe.split_whitespace().map(str::to_owned).collect();
            let Some(program) = argv.first() else {
                continue;
            };
            if !TAME_TOOLS.contains(&program.as_str()) {
                return Err(TameError::UnknownTool {
                    line,
                    program: program.clone(),
                });
            }
            if let Some(arg) = argv
                .iter()
                .skip(1)
                .find(|a| !a.starts_with('-') && !plain(a))
            {
                return Err(TameError::Escapes {
                    line,
                    arg: arg.clone(),
                });
            }
            rule.recipe.push((line, argv));
            continue;
        }
        check_syntax(line, raw)?;
        let (target, deps) = raw.split_once(':').ok_or(TameError::Unsupported { line })?;
        let target = target.trim();
        if !target.starts_with("build/") || !plain(target) || target.contains(char::is_whitespace) {
            return Err(TameError::TargetOutsideBuild {
                line,
                target: target.to_owned(),
            });
        }
        let deps: Vec<String> = deps.split_whitespace().map(str::to_owned).collect();
        if let Some(arg) = deps.iter().find(|d| !plain(d)) {
            return Err(TameError::Escapes {
                line,
                arg: arg.clone(),
            });
        }
        rules.insert(
            target.to_owned(),
            Rule {
                deps,
                recipe: Vec::new(),
            },
        );
        current = Some(target.to_owned());
    }
    if !rules.contains_key(goal) {
        return Err(TameError::NoRule {
            goal: goal.to_owned(),
        });
    }
    let mut steps = Vec::new();
    let mut done = BTreeSet::new();
    visit(goal, &rules, &mut BTreeSet::new(), &mut done, &mut steps)?;
    Ok(steps)
}

/// `argv` as one line of POSIX shell that runs exactly that argument vector: every word
/// single-quoted, a quote inside closed, escaped and reopened (`'\''`). Tame words hold no quote
/// or shell syntax at all, so for them this only adds the quotes; it is total so that a
/// [`TameStep`] made some other way can still never inject a command.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Depth-first, prerequisites first; `open` holds the targets on the current path.
fn visit(
    target: &str,
    rules: &BTreeMap<String, Rule>,
    open: &mut BTreeSet<String>,
    done: &mut BTreeSet<String>,
    steps: &mut Vec<TameStep>,
) -> Result<(), TameError> {
    let Some(rule) = rules.get(target) else {
        return Ok(());
    };
    if done.contains(target) {
        return Ok(());
    }
    if !open.insert(target.to_owned()) {
        return Err(TameError::Cycle {
            target: target.to_owned(),
        });
    }
    for dep in &rule.deps {
        visit(dep, rules, open, done, steps)?;
    }
    open.remove(target);
    done.insert(target.to_owned());
    steps.extend(rule.recipe.iter().map(|(_, argv)| TameStep {
        target: target.to_owned(),
        argv: argv.clone(),
    }));
    Ok(())
}
