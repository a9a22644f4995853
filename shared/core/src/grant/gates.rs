//! The spawn and regrant gates: where authority is checked before it is conferred.

use super::*;

/// A parent's request to start a child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SpawnRequest {
    /// The child's name: the parent's name plus one segment.
    pub child: AgentName,
    /// The grant asked for the child.
    pub grant: Grant,
    /// The fuel lent to the child out of the parent's account.
    pub loan: Fuel,
    /// Whether the child is driven: retired when the call that started it returns.
    pub driven: bool,
    /// The persona the child wears, if any.
    pub persona: Option<PersonaName>,
    /// Whose Log the child's begins with, up to which record: a fork. hubd seeds the new Log
    /// itself, so no process poses as the child's sequencer to write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkFrom>,
}

impl SpawnRequest {
    /// The common request: a child with `grant`, no loan, not driven, no persona, not a fork.
    pub fn new(child: AgentName, grant: Grant) -> Self {
        Self {
            child,
            grant,
            loan: Fuel::default(),
            driven: false,
            persona: None,
            fork: None,
        }
    }
}

/// Where a fork starts: another agent's Log, up to and including one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ForkFrom {
    /// The agent forked from; the spawner must be allowed to read its Log, and the child's
    /// grant must be within its grant.
    pub source: AgentName,
    /// The last record the fork carries.
    pub at: u64,
}

/// An admitted spawn: the accounts to record for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The parent's account after lending the loan; `None` when a human spawned a root agent
    /// (humans lend from outside the tree).
    pub parent_account: Option<Account>,
    /// The child's fresh account: the whole loan left.
    pub child_account: Account,
}

/// Why a spawn was refused. Each message says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefusal {
    /// The child's name is not the parent's name plus one segment.
    #[error(
        "{child} is not a direct child of {parent}: a child's name is its parent's plus one \
         segment; name it `{parent}/<segment>`"
    )]
    NotAChild {
        /// The parent.
        parent: AgentName,
        /// The name asked for.
        child: AgentName,
    },
    /// A human may spawn only root agents (one segment).
    #[error(
        "{child} is not a root agent, so a human cannot spawn it directly; spawn its root first \
         and have its parent spawn it"
    )]
    NotARoot {
        /// The name asked for.
        child: AgentName,
    },
    /// The parent's spawn axis is off.
    #[error(
        "{parent} may not spawn (its spawn axis is `off`); ask its issuer for `drive` or `persist`"
    )]
    SpawnOff {
        /// The parent.
        parent: AgentName,
    },
    /// A drive parent asked for a child that would outlive the call.
    #[error(
        "{parent} has spawn level `drive`, so it may start only driven children (retired when \
         the call that started them returns); set `driven`, or ask its issuer for `persist`"
    )]
    DriveOnly {
        /// The parent.
        parent: AgentName,
    },
    /// The child's grant is wider than the parent's expanded grant.
    #[error("{0}")]
    Widening(#[from] Widening),
    /// The loan is larger than what the parent has left; `error` names the unit.
    #[error("{parent} cannot lend this loan: {error}")]
    Overdraft {
        /// The parent.
        parent: AgentName,
        /// The account's refusal ([`BudgetError::Overdraft`]), naming the unit that ran short.
        #[source]
        error: BudgetError,
    },
}

impl SpawnRefusal {
    /// The axis the spawn was refused on, if it was refused on one (a bad name is not an axis).
    pub fn axis(&self) -> Option<Axis> {
        match self {
            SpawnRefusal::NotAChild { .. } | SpawnRefusal::NotARoot { .. } => None,
            SpawnRefusal::SpawnOff { .. } | SpawnRefusal::DriveOnly { .. } => Some(Axis::Spawn),
            SpawnRefusal::Widening(w) => Some(w.axis),
            SpawnRefusal::Overdraft { .. } => Some(Axis::Budget),
        }
    }
}

/// The spawn gate for an agent parent: admits `req` only if the child's name is the parent's
/// plus one segment, the parent may spawn at all (and only driven children if its level is
/// `drive`), every axis of the child's grant lies within `parent_grant.expand_own(parent)`, it
/// does not hold both `build` and `run` ([`separate_build_and_run`]), and the loan fits in what
/// `parent_account` has left. Nothing is clamped.
pub fn admit_spawn(
    parent: &AgentName,
    parent_grant: &Grant,
    parent_account: &Account,
    req: &SpawnRequest,
) -> Result<Admission, SpawnRefusal> {
    if req.child.parent().as_ref() != Some(parent) {
        return Err(SpawnRefusal::NotAChild {
            parent: parent.clone(),
            child: req.child.clone(),
        });
    }
    match parent_grant.spawn {
        SpawnLevel::Off => {
            return Err(SpawnRefusal::SpawnOff {
                parent: parent.clone(),
            });
        }
        SpawnLevel::Drive if !req.driven => {
            return Err(SpawnRefusal::DriveOnly {
                parent: parent.clone(),
            });
        }
        SpawnLevel::Drive | SpawnLevel::Persist => {}
    }
    req.grant.within(&parent_grant.expand_own(parent))?;
    separate_build_and_run(&req.grant)?;
    let mut account = parent_account.clone();
    account
        .lend(req.loan)
        .map_err(|error| SpawnRefusal::Overdraft {
            parent: parent.clone(),
            error,
        })?;
    Ok(Admission {
        parent_account: Some(account),
        child_account: Account::new(req.loan),
    })
}

/// The spawn gate for a human starting a root agent: the child must be a root (one segment) and
/// its grant within the human's registered grant. The human's grant is not expanded (a human has
/// no agent refs) and the loan is not checked: humans lend fuel from outside the tree.
pub fn admit_root_spawn(
    human_grant: &Grant,
    req: &SpawnRequest,
) -> Result<Admission, SpawnRefusal> {
    if req.child.depth() != 1 {
        return Err(SpawnRefusal::NotARoot {
            child: req.child.clone(),
        });
    }
    req.grant.within(human_grant)?;
    Ok(Admission {
        parent_account: None,
        child_account: Account::new(req.loan),
    })
}

/// Why a regrant was refused. Each message says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegrantRefusal {
    /// An agent tried to write its own grant.
    #[error(
        "{agent} cannot change its own grant: a grant is written by its issuer, never by the \
         entity; ask its parent or a human"
    )]
    OwnGrant {
        /// The agent.
        agent: AgentName,
    },
    /// An agent tried to regrant an agent that is not its strict descendant.
    #[error(
        "{issuer} may regrant only its own descendants, and {subject} is not one; ask an \
         ancestor of {subject} or a human"
    )]
    NotAnAncestor {
        /// The issuer.
        issuer: AgentName,
        /// The subject.
        subject: AgentName,
    },
    /// The issuing agent's grant is unknown (it is not live in the ledger).
    #[error("{issuer} holds no grant (it is not a live agent), so it cannot issue one")]
    IssuerWithoutGrant {
        /// The issuer.
        issuer: AgentName,
    },
    /// Services issue no grants.
    #[error("svc:{service} is a service; services never issue grants (ask a human)")]
    ServiceIssuer {
        /// The service.
        service: ServiceName,
    },
    /// The new grant is wider than the issuer's expanded grant.
    #[error("{0}")]
    Widening(#[from] Widening),
}

/// The regrant gate: an agent issuer must be a strict ancestor of `subject` and `new` must lie
/// within the issuer's grant expanded at the issuer (the same bound a child spawned by the issuer
/// meets). A human issuer is unbounded: humans are the root of trust (see the module docs).
/// `issuer_grant` is the issuer's current grant; it is ignored for a human.
pub fn admit_regrant(
    issuer: &Entity,
    issuer_grant: Option<&Grant>,
    subject: &AgentName,
    new: &Grant,
) -> Result<(), RegrantRefusal> {
    let issuer = match issuer {
        Entity::Human(_) => return Ok(()),
        Entity::Service(service) => {
            return Err(RegrantRefusal::ServiceIssuer {
                service: service.clone(),
            });
        }
        Entity::Agent(agent) => agent,
    };
    if issuer == subject {
        return Err(RegrantRefusal::OwnGrant {
            agent: issuer.clone(),
        });
    }
    if !subject.is_descendant_of(issuer) {
        return Err(RegrantRefusal::NotAnAncestor {
            issuer: issuer.clone(),
            subject: subject.clone(),
        });
    }
    let Some(issuer_grant) = issuer_grant else {
        return Err(RegrantRefusal::IssuerWithoutGrant {
            issuer: issuer.clone(),
        });
    };
    new.within(&issuer_grant.expand_own(issuer))?;
    separate_build_and_run(new)?;
    Ok(())
}

/// W^X for authority (DESIGN §4, §8): a grant an agent writes never holds both `build` and
/// `run`, so no agent can both build from a source and run what it built; only a human may
/// write a grant holding both. Refused on the `run` axis.
pub fn separate_build_and_run(grant: &Grant) -> Result<(), Widening> {
    if grant.build && grant.run {
        return Err(Widening {
            axis: Axis::Run,
            detail: "a grant written by an agent cannot hold both `build` and `run` (whoever \
                     builds must not run what it built); grant one, or ask a human for both"
                .into(),
        });
    }
    Ok(())
}
