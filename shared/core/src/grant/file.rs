//! Grant files: a grant plus examples that must hold when it loads.

use super::*;

/// The two lists of examples in a grant file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleList {
    /// Examples the grant must allow.
    Allow,
    /// Examples the grant must refuse.
    Deny,
}

impl fmt::Display for ExampleList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExampleList::Allow => "allow",
            ExampleList::Deny => "deny",
        })
    }
}

/// One concrete thing a grant may or may not allow: the vocabulary of a grant file's examples.
///
/// Written in a grant file as a one-key table, e.g. `{ net = "api.github.com" }`,
/// `{ file = "workspace/src/lib.rs" }`, `{ git-push = { remote = "origin", refname =
/// "refs/heads/l3m/alice/x" } }`, `{ mail = "human:bob" }`, or a bare string for the yes/no axes
/// (`"build"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Probe {
    /// Writing this ACR-relative path.
    File(AcrPath),
    /// Reading this ref (or every ref under this prefix).
    GitRead(RefPrefix),
    /// Writing this ref (or every ref under this prefix).
    GitWrite(RefPrefix),
    /// Pushing this ref (or every ref under this prefix) to this remote.
    GitPush {
        /// The remote.
        remote: RemoteName,
        /// The ref or prefix pushed.
        refname: RefPrefix,
    },
    /// Reaching this host (or every host this pattern matches).
    Net(HostPattern),
    /// Writing to this recipient on this hub.
    Mail(Entity),
    /// Writing to recipients at this office.
    MailOffice(OfficeName),
    /// Spawning at this level.
    Spawn(SpawnLevel),
    /// Staging airmail for this office.
    Airmail(OfficeName),
    /// Carrying airmail.
    Postman,
    /// Proposing a call of this wild class.
    Wild(WildClass),
    /// Running build stages.
    Build,
    /// Running built artifacts.
    Run,
    /// Reviewing wild calls.
    Review,
    /// Being alive at this instant (ms since the Unix epoch).
    AliveAt(u64),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::File(p) => write!(f, "write {p}"),
            Probe::GitRead(r) => write!(f, "read {r}"),
            Probe::GitWrite(r) => write!(f, "write {r}"),
            Probe::GitPush { remote, refname } => write!(f, "push {refname} to {remote}"),
            Probe::Net(h) => write!(f, "reach {h}"),
            Probe::Mail(e) => write!(f, "mail {e}"),
            Probe::MailOffice(o) => write!(f, "mail office:{o}"),
            Probe::Spawn(l) => write!(f, "spawn at level {l}"),
            Probe::Airmail(o) => write!(f, "stage airmail for {o}"),
            Probe::Postman => f.write_str("carry airmail"),
            Probe::Wild(c) => write!(f, "propose wild class {c}"),
            Probe::Build => f.write_str("build"),
            Probe::Run => f.write_str("run"),
            Probe::Review => f.write_str("review"),
            Probe::AliveAt(ms) => write!(f, "be alive at {ms} ms"),
        }
    }
}

/// The examples a grant file carries: what it must allow and what it must refuse.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Examples {
    /// Probes the grant must allow.
    pub allow: Vec<Probe>,
    /// Probes the grant must refuse.
    pub deny: Vec<Probe>,
}

/// A grant as a human or parent writes it: the grant and the examples that pin its meaning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GrantFile {
    /// The grant to issue.
    pub grant: Grant,
    /// Examples checked by [`GrantFile::check`] when the file loads.
    #[serde(default)]
    pub examples: Examples,
}

impl GrantFile {
    /// Checks every example; the error names the first that does not hold.
    pub fn check(&self) -> Result<(), GrantError> {
        let lists = [
            (ExampleList::Allow, &self.examples.allow, true),
            (ExampleList::Deny, &self.examples.deny, false),
        ];
        for (list, probes, want) in lists {
            if let Some((index, probe)) = probes
                .iter()
                .enumerate()
                .find(|(_, p)| self.grant.allows(p) != want)
            {
                return Err(GrantError::ExampleFails {
                    list,
                    index,
                    probe: probe.to_string(),
                    verdict: if want { "refuses" } else { "allows" },
                });
            }
        }
        Ok(())
    }
}
