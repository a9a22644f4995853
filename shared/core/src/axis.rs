//! The axes of a grant, as names.
//!
//! A refusal always says which axis it was refused on, and an effect class says which axis
//! confers it. Both need one shared, stable spelling of each axis; this module is it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One dimension of authority in a grant (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Axis {
    /// Write roots for files, relative to the agent's ACR.
    Files,
    /// Ref prefixes the agent may read.
    GitRead,
    /// Ref prefixes the agent may write.
    GitWrite,
    /// Remotes the agent may push to.
    GitPush,
    /// Network hosts the agent may reach.
    Net,
    /// Addresses the agent may mail.
    Mail,
    /// Whether and how the agent may spawn children.
    Spawn,
    /// Staging letters for other hubs.
    Airmail,
    /// Carrying airmail between hubs (the postmaster's duty).
    Postman,
    /// Wild effect classes (shell, cloud credentials, …) the agent may propose.
    Wild,
    /// Running build stages.
    Build,
    /// Running built artifacts.
    Run,
    /// Deliberating over other agents' wild calls.
    Review,
    /// How long the agent may live.
    Lifetime,
    /// Fuel lent by the parent.
    Budget,
}

impl Axis {
    /// Every axis, in a fixed order (used to report and to check exhaustively).
    pub const ALL: [Axis; 15] = [
        Axis::Files,
        Axis::GitRead,
        Axis::GitWrite,
        Axis::GitPush,
        Axis::Net,
        Axis::Mail,
        Axis::Spawn,
        Axis::Airmail,
        Axis::Postman,
        Axis::Wild,
        Axis::Build,
        Axis::Run,
        Axis::Review,
        Axis::Lifetime,
        Axis::Budget,
    ];

    /// The axis's stable name, as it appears in grant files and refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Axis::Files => "files",
            Axis::GitRead => "git-read",
            Axis::GitWrite => "git-write",
            Axis::GitPush => "git-push",
            Axis::Net => "net",
            Axis::Mail => "mail",
            Axis::Spawn => "spawn",
            Axis::Airmail => "airmail",
            Axis::Postman => "postman",
            Axis::Wild => "wild",
            Axis::Build => "build",
            Axis::Run => "run",
            Axis::Review => "review",
            Axis::Lifetime => "lifetime",
            Axis::Budget => "budget",
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for axis in Axis::ALL {
            let json = serde_json::to_string(&axis).unwrap();
            assert_eq!(json, format!("\"{axis}\""));
        }
    }
}
