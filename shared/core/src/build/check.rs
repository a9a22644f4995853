//! The rules a plan obeys, each a pure predicate, and the gate that applies them.
//!
//! The two laws the paper names are exported as predicates so property tests and the services
//! can state them directly: [`net_forbidden_after_private_touch`] over a whole plan and
//! [`docker_plan_rw_mount_is_its_out_dir`] over one stage. [`check_plan`] refuses the first
//! stage that breaks any rule, naming the stage and the rule.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::plan::{Limits, MountRole, Plan, Stage, StageKind, StageOwner};

/// A rule a plan broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanRule {
    /// The plan has no stage.
    EmptyPlan,
    /// The stage has no command to run.
    EmptyCommand,
    /// A mount target is not an absolute, `..`-free path below `/`, or two mounts share one.
    MountTarget,
    /// A fetch stage mounts source or something made from it.
    FetchMountsPrivate,
    /// A build or run stage asks for a network (only fetch stages may have one).
    NetworkOutsideFetch,
    /// A stage reaches the network at or after a stage that touched private input.
    NetAfterPrivateTouch,
    /// A writable mount is not the stage's own output (fetch: cache, build: artifact, run: out).
    WritableMountNotOwnOutput,
    /// The stage lacks its one writable output mount, or has two.
    OutputCount,
    /// A run stage mounts source, or a build stage mounts an artifact or out.
    ForeignInput,
    /// A limit is zero (for the engine, zero means unlimited).
    ZeroLimit,
}

impl PlanRule {
    /// The rule's stable name, as refusals spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanRule::EmptyPlan => "empty-plan",
            PlanRule::EmptyCommand => "empty-command",
            PlanRule::MountTarget => "mount-target",
            PlanRule::FetchMountsPrivate => "fetch-mounts-private",
            PlanRule::NetworkOutsideFetch => "network-outside-fetch",
            PlanRule::NetAfterPrivateTouch => "net-forbidden-after-private-touch",
            PlanRule::WritableMountNotOwnOutput => "rw-mount-is-its-out-dir",
            PlanRule::OutputCount => "one-output",
            PlanRule::ForeignInput => "foreign-input",
            PlanRule::ZeroLimit => "zero-limit",
        }
    }
}

impl fmt::Display for PlanRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a plan was refused: the stage (by position and name) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("plan refused at stage {index} ({stage}): rule {rule}: {detail}")]
pub struct PlanRefusal {
    /// Position of the stage in the plan (0 for a plan-wide rule).
    pub index: usize,
    /// The stage's name (empty for a plan-wide rule).
    pub stage: String,
    /// The rule broken.
    pub rule: PlanRule,
    /// What was found, in words.
    pub detail: String,
}

/// The one role a stage of this kind may write.
pub fn output_role(kind: StageKind) -> MountRole {
    match kind {
        StageKind::Fetch => MountRole::Cache,
        StageKind::Build => MountRole::Artifact,
        StageKind::Run => MountRole::Out,
    }
}

/// Whether `owner` may start a stage of `kind`: the builder never runs, the runner never
/// fetches or builds.
pub fn stage_allowed_for(owner: StageOwner, kind: StageKind) -> bool {
    kind.owner() == owner
}

/// The law `net_forbidden_after_private_touch`: once a stage has mounted private input, neither
/// it nor any later stage reaches the network.
pub fn net_forbidden_after_private_touch(plan: &Plan) -> bool {
    first_net_after_private(plan).is_none()
}

/// The law `docker_plan_rw_mount_is_its_out_dir`: every writable mount of a stage is its own
/// output (for a run, its fresh out directory), and there is exactly one.
pub fn docker_plan_rw_mount_is_its_out_dir(stage: &Stage) -> bool {
    let own = output_role(stage.kind);
    let mut writable = stage.mounts.iter().filter(|m| m.writable);
    matches!((writable.next(), writable.next()), (Some(m), None) if m.role == own)
}

fn first_net_after_private(plan: &Plan) -> Option<usize> {
    let mut touched = false;
    for (i, stage) in plan.stages.iter().enumerate() {
        touched |= stage.mounts.iter().any(|m| m.role.is_private());
        if touched && stage.network.reaches_anything() {
            return Some(i);
        }
    }
    None
}

/// The gate: accepts a plan only if every stage obeys every rule; otherwise refuses the first
/// stage that breaks one, checking the rules in the order of [`PlanRule`].
pub fn check_plan(plan: &Plan) -> Result<(), PlanRefusal> {
    if plan.stages.is_empty() {
        return Err(PlanRefusal {
            index: 0,
            stage: String::new(),
            rule: PlanRule::EmptyPlan,
            detail: "a plan needs at least one stage".into(),
        });
    }
    let net_after_private = first_net_after_private(plan);
    for (index, stage) in plan.stages.iter().enumerate() {
        let refuse = |rule, detail: String| PlanRefusal {
            index,
            stage: stage.name.clone(),
            rule,
            detail,
        };
        if let Some((rule, detail)) = stage_violation(stage) {
            return Err(refuse(rule, detail));
        }
        if net_after_private == Some(index) {
            return Err(refuse(
                PlanRule::NetAfterPrivateTouch,
                "this stage reaches the network after private input was mounted".into(),
            ));
        }
    }
    Ok(())
}

/// The first rule one stage breaks on its own, with what was found.
fn stage_violation(stage: &Stage) -> Option<(PlanRule, String)> {
    if stage.command.is_empty() {
        return Some((PlanRule::EmptyCommand, "no command".into()));
    }
    let mut targets = std::collections::BTreeSet::new();
    for m in &stage.mounts {
        if !target_ok(&m.target) || !target_ok(&stage.workdir) || !targets.insert(&m.target) {
            return Some((
                PlanRule::MountTarget,
                format!("bad or repeated target {:?}", m.target),
            ));
        }
    }
    let has = |role: MountRole| stage.mounts.iter().any(|m| m.role == role);
    if stage.kind == StageKind::Fetch
        && let Some(m) = stage.mounts.iter().find(|m| m.role.is_private())
    {
        return Some((
            PlanRule::FetchMountsPrivate,
            format!("fetch mounts {}", m.role),
        ));
    }
    if stage.kind != StageKind::Fetch && stage.network.reaches_anything() {
        return Some((
            PlanRule::NetworkOutsideFetch,
            format!("a {} stage asks for a network", stage.kind),
        ));
    }
    let own = output_role(stage.kind);
    if let Some(m) = stage.mounts.iter().find(|m| m.writable && m.role != own) {
        return Some((
            PlanRule::WritableMountNotOwnOutput,
            format!("{} is writable at {}; only {own} may be", m.role, m.target),
        ));
    }
    if !docker_plan_rw_mount_is_its_out_dir(stage) {
        return Some((
            PlanRule::OutputCount,
            format!("a {} stage writes exactly one {own}", stage.kind),
        ));
    }
    let foreign = match stage.kind {
        StageKind::Fetch => None,
        StageKind::Build => [MountRole::Out].into_iter().find(|r| has(*r)),
        StageKind::Run => [MountRole::Source, MountRole::Cache, MountRole::Lockfile]
            .into_iter()
            .find(|r| has(*r)),
    };
    if let Some(role) = foreign {
        return Some((
            PlanRule::ForeignInput,
            format!("a {} stage mounts {role}", stage.kind),
        ));
    }
    if let Some(which) = zero_limit(&stage.limits) {
        return Some((PlanRule::ZeroLimit, format!("{which} is zero")));
    }
    None
}

fn target_ok(path: &str) -> bool {
    path.starts_with('/')
        && path.len() > 1
        && path
            .split('/')
            .skip(1)
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

fn zero_limit(l: &Limits) -> Option<&'static str> {
    [
        ("memory", l.memory_bytes == 0),
        ("pids", l.pids == 0),
        ("cpus", l.nano_cpus == 0),
        ("tmp", l.tmp_bytes == 0),
        ("deadline", l.deadline_ms == 0),
        ("log", l.log_bytes == 0),
    ]
    .into_iter()
    .find_map(|(n, z)| z.then_some(n))
}
