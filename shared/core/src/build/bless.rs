//! Blessings: a human's pin of the exact bytes a Makefile target runs.
//!
//! Editing a Makefile is writing; running it is executing. A blessing keeps the two apart: a
//! human (`l3m bless`) pins the content hash of the Makefile, every file it literally includes,
//! and every script the recipes of the target (and of its prerequisites in the same file) call.
//! A blessed run executes only while every pinned file still hashes the same and the inputs
//! read from the Makefile now are exactly the pinned ones; after an edit it refuses until a
//! human blesses again. It takes no argument from the model: the target is the whole request,
//! and a target that make would read as a variable assignment or an option is refused.
//!
//! [`blessed_inputs`] reads the inputs from the Makefile's text; [`check_blessing`] compares a
//! blessing with the files' hashes now. Hashing the files is the caller's IO.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::digest::ArtifactDigest;

/// Why a Makefile's inputs could not be read, or a blessed run is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "kebab-case")]
pub enum BlessError {
    /// The target name is not a plain make target (make would read `X=1` as an assignment and
    /// `-j` as an option: both are arguments, which a blessed run never takes).
    #[error(
        "target {target:?} is not a plain make target ([A-Za-z0-9_./-], not starting with `-`, no `=`)"
    )]
    BadTarget {
        /// As given.
        target: String,
    },
    /// The Makefile has no rule for the target.
    #[error("the Makefile has no rule for {target:?}")]
    NoTarget {
        /// The target.
        target: String,
    },
    /// An include names a file through a variable or a wildcard, so its bytes cannot be pinned.
    #[error("line {line}: include {text:?} is not literal (no `$`, `*`, `?` or `[`)")]
    NonLiteralInclude {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// An input path is absolute or climbs out of the repository.
    #[error("input {path:?} is outside the repository (absolute or with `..`)")]
    OutsideRepo {
        /// The path.
        path: String,
    },
    /// A pinned file's bytes changed since the blessing.
    #[error(
        "{path} changed since it was blessed (pinned {pinned}, now {now}); a human must bless again"
    )]
    Changed {
        /// The file.
        path: String,
        /// Its pinned hash.
        pinned: ArtifactDigest,
        /// Its hash now.
        now: ArtifactDigest,
    },
    /// A pinned file is gone.
    #[error("{path} was blessed and is gone; a human must bless again")]
    Missing {
        /// The file.
        path: String,
    },
    /// The Makefile now reads a file the blessing does not pin (an added include or script).
    #[error("{path} is an input now and was not blessed; a human must bless again")]
    Unpinned {
        /// The file.
        path: String,
    },
}

/// A human's pin: the target and the hash of each of its inputs (repository-relative paths).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blessing {
    /// The Makefile, repository-relative.
    pub makefile: String,
    /// The target blessed.
    pub target: String,
    /// Each input's blake3 at blessing time.
    pub files: BTreeMap<String, ArtifactDigest>,
}

/// Checks a target name: it must be what a plain `make TARGET` would treat as a goal, and fit
/// in a ref name (no empty, dot-led or `.lock` component).
pub fn check_target(target: &str) -> Result<(), BlessError> {
    let plain = !target.starts_with('-')
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        && target
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"));
    if plain {
        Ok(())
    } else {
        Err(BlessError::BadTarget {
            target: target.to_owned(),
        })
    }
}

/// The inputs a run of `target` reads from the Makefile at `makefile` (repository-relative)
/// with text `text`: the Makefile itself, its literal includes, and the scripts called by the
/// recipes of the target and its prerequisites defined in the same file (less what the file
/// itself makes). Sorted, no repeats.
pub fn blessed_inputs(makefile: &str, text: &str, target: &str) -> Result<Vec<String>, BlessError> {
    check_target(target)?;
    let dir = makefile.rsplit_once('/').map_or("", |(d, _)| d);
    let mut inputs = BTreeSet::from([repo_path(
        dir,
        makefile.rsplit('/').next().unwrap_or(makefile),
    )?]);
    let mut rules: BTreeMap<&str, (Vec<&str>, Vec<&str>)> = BTreeMap::new();
    let mut current: Vec<&str> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(recipe) = line.strip_prefix('\t') {
            for t in &current {
                rules.entry(t).or_default().1.push(recipe);
            }
            continue;
        }
        current.clear();
        let trimmed = line.trim_start();
        if let Some(rest) = ["include ", "-include ", "sinclude "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p))
        {
            if rest.contains(['$', '*', '?', '[']) {
                return Err(BlessError::NonLiteralInclude {
                    line: i + 1,
                    text: line.to_owned(),
                });
            }
            for name in rest.split_whitespace() {
                inputs.insert(repo_path(dir, name)?);
            }
            continue;
        }
        if let Some((targets, prereqs)) = rule_line(trimmed) {
            current = targets.split_whitespace().collect();
            let prereqs: Vec<&str> = prereqs.split_whitespace().collect();
            for t in &current {
                rules
                    .entry(t)
                    .or_default()
                    .0
                    .extend(prereqs.iter().copied());
            }
        }
    }
    if !rules.contains_key(target) {
        return Err(BlessError::NoTarget {
            target: target.to_owned(),
        });
    }
    let mut pending = vec![target];
    let mut seen = BTreeSet::new();
    while let Some(t) = pending.pop() {
        if !seen.insert(t) {
            continue;
        }
        let Some((prereqs, recipe)) = rules.get(t) else {
            continue;
        };
        pending.extend(prereqs.iter().copied());
        for line in recipe {
            for token in line.split(|c: char| c.is_whitespace() || ";|&()<>".contains(c)) {
                let token = token.trim_start_matches(['@', '-', '+']);
                // A program the Makefile itself makes (`./app` after `app:`) is an output, not
                // an input: its bytes come from pinned sources.
                let made = rules.contains_key(token.strip_prefix("./").unwrap_or(token));
                if is_script(token) && !made {
                    inputs.insert(repo_path(dir, token)?);
                }
            }
        }
    }
    Ok(inputs.into_iter().collect())
}

/// `targets: prereqs` (not `:=`, `::=` or `?=`-style assignments, which are not rules).
fn rule_line(line: &str) -> Option<(&str, &str)> {
    let (targets, rest) = line.split_once(':')?;
    let assignment = rest.starts_with('=') || rest.starts_with(":=") || targets.contains('=');
    let prereqs = rest.split_once(';').map_or(rest, |(p, _)| p);
    (!assignment && !targets.trim().is_empty()).then_some((targets, prereqs))
}

fn is_script(token: &str) -> bool {
    !token.contains('$')
        && (token.starts_with("./")
            || [".sh", ".py", ".pl", ".bash"]
                .iter()
                .any(|ext| token.len() > ext.len() && token.ends_with(ext)))
}

/// `name` seen from the Makefile's folder `dir`, as a repository-relative path.
fn repo_path(dir: &str, name: &str) -> Result<String, BlessError> {
    let name = name.strip_prefix("./").unwrap_or(name);
    let outside = name.starts_with('/') || name.split('/').any(|c| c == "..");
    if outside || name.is_empty() {
        return Err(BlessError::OutsideRepo {
            path: name.to_owned(),
        });
    }
    Ok(if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    })
}

impl Blessing {
    /// Checks what a blessing names before it is stored: a plain target and
    /// repository-relative paths, the Makefile among them.
    pub fn check_shape(&self) -> Result<(), BlessError> {
        check_target(&self.target)?;
        for path in std::iter::once(&self.makefile).chain(self.files.keys()) {
            repo_path("", path)?;
        }
        if !self.files.contains_key(&self.makefile) {
            return Err(BlessError::Unpinned {
                path: self.makefile.clone(),
            });
        }
        Ok(())
    }
}

/// Whether a blessed run may go ahead: `inputs_now` are the inputs read from the Makefile as it
/// is now, and `hashes_now` each file's hash now (`None` if it is gone).
pub fn check_blessing(
    blessing: &Blessing,
    inputs_now: &[String],
    hashes_now: &BTreeMap<String, Option<ArtifactDigest>>,
) -> Result<(), BlessError> {
    if let Some(path) = inputs_now.iter().find(|p| !blessing.files.contains_key(*p)) {
        return Err(BlessError::Unpinned { path: path.clone() });
    }
    for (path, pinned) in &blessing.files {
        match hashes_now.get(path) {
            Some(Some(now)) if now == pinned => {}
            Some(Some(now)) => {
                return Err(BlessError::Changed {
                    path: path.clone(),
                    pinned: pinned.clone(),
                    now: now.clone(),
                });
            }
            _ => return Err(BlessError::Missing { path: path.clone() }),
        }
    }
    Ok(())
}
