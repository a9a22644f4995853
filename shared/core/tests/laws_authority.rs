//! Laws of authority and budget: authority and fuel only narrow down the agent tree.
//!
//! Each law is a named property test over small vocabularies (a few agents, roots, refs, hosts),
//! chosen so that every containment case — equal, nested, sibling, look-alike prefix — occurs
//! often. Containment is checked against an oracle that never calls `Grant::within`: a grant `c`
//! lies within `b` exactly when `b` allows every *witness* probe of `c`, where an element's
//! witness is a concrete point it confers that nothing in the vocabularies names (a fresh path
//! component, ref component, host label or child agent `zq`). If `b` allows that fresh point, some
//! element of `b` must contain the whole element.

// This whole crate is test code (clippy.toml allows unwrap in tests, but does not see helper
// functions of an integration-test crate as tests): a failed unwrap here is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use l3m_core::axis::Axis;
use l3m_core::budget::{Account, Fuel, FuelUnit};
use l3m_core::grant::{
    AcrPath, Grant, HostPattern, Lifetime, MailCover, Probe, RefPrefix, RemoteName, SpawnLevel,
    SpawnRefusal, SpawnRequest, WildClass, admit_spawn,
};
use l3m_core::ledger::{Ledger, LedgerRow};
use l3m_core::names::{AgentName, Entity, HumanName, OfficeName};
use l3m_core::refs::{self, AgentRef};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

// ---------------------------------------------------------------------------------------------
// Vocabularies
// ---------------------------------------------------------------------------------------------

/// A fresh name component that no vocabulary uses.
const FRESH: &str = "zq";
/// Child segments the generators use.
const SEGS: [&str; 3] = ["a", "b", "c"];
/// The deepest agent the ledger generators spawn.
const MAX_GEN_DEPTH: usize = 4;

fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

fn agents() -> Vec<AgentName> {
    [
        "alice",
        "alice/a",
        "alice/b",
        "alice/a/a",
        "alice/a/b",
        "alice/b/a",
        "alice/a/a/b",
        "alicex",
        "alicex/a",
    ]
    .into_iter()
    .map(agent)
    .collect()
}

fn roots() -> Vec<AcrPath> {
    [
        "workspace",
        "agent",
        "workspace/src",
        "workspace/srcx",
        "agent/notes",
    ]
    .into_iter()
    .map(|s| AcrPath::parse(s).unwrap())
    .collect()
}

fn ref_prefixes() -> Vec<RefPrefix> {
    let mut all: Vec<String> = [
        "refs/",
        "refs/heads/",
        "refs/heads/main",
        "refs/tags/",
        "refs/heads/l3m/",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for a in agents() {
        all.push(refs::subtree_prefix(&a));
        all.push(refs::branch_prefix(&a));
        all.push(refs::agent_ref(&a, AgentRef::Log));
        all.push(refs::work_branch(&a));
    }
    all.iter().map(|s| RefPrefix::parse(s).unwrap()).collect()
}

fn hosts() -> Vec<HostPattern> {
    [
        "example.com",
        "a.example.com",
        "x.a.example.com",
        "example.org",
        "*.example.com",
        "*.a.example.com",
        "*.example.org",
    ]
    .into_iter()
    .map(|s| HostPattern::parse(s).unwrap())
    .collect()
}

fn mail_covers() -> Vec<MailCover> {
    let mut all: Vec<MailCover> = agents()
        .into_iter()
        .flat_map(|a| [MailCover::Subtree(a.clone()), MailCover::Agent(a)])
        .collect();
    for s in ["human:bob", "human:carol", "svc:postmaster", "office:far"] {
        all.push(MailCover::parse(s).unwrap());
    }
    all
}

fn offices() -> Vec<OfficeName> {
    ["far", "near"]
        .into_iter()
        .map(|s| OfficeName::parse(s).unwrap())
        .collect()
}

fn wild_classes() -> Vec<WildClass> {
    ["shell", "aws"]
        .into_iter()
        .map(|s| WildClass::parse(s).unwrap())
        .collect()
}

fn remotes() -> Vec<RemoteName> {
    ["origin", "upstream"]
        .into_iter()
        .map(|s| RemoteName::parse(s).unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

fn set_of<T: Clone + Ord + std::fmt::Debug + 'static>(
    vocab: Vec<T>,
    max: usize,
) -> impl Strategy<Value = BTreeSet<T>> {
    subsequence(vocab, 0..=max).prop_map(|v| v.into_iter().collect())
}

fn level() -> impl Strategy<Value = SpawnLevel> {
    select(vec![
        SpawnLevel::Off,
        SpawnLevel::Drive,
        SpawnLevel::Persist,
    ])
}

fn lifetime() -> impl Strategy<Value = Lifetime> {
    prop_oneof![
        Just(Lifetime::Unbounded),
        (0u64..4).prop_map(|t| Lifetime::Until(t * 100)),
    ]
}

fn grant() -> impl Strategy<Value = Grant> {
    let git_push =
        proptest::collection::btree_map(select(remotes()), set_of(ref_prefixes(), 2), 0..=2);
    (
        (
            set_of(roots(), 2),
            set_of(ref_prefixes(), 3),
            set_of(ref_prefixes(), 3),
            git_push,
            set_of(hosts(), 2),
            set_of(mail_covers(), 3),
        ),
        (
            level(),
            set_of(offices(), 1),
            any::<bool>(),
            set_of(wild_classes(), 1),
            any::<[bool; 3]>(),
            lifetime(),
        ),
    )
        .prop_map(
            |(
                (files, git_read, git_write, git_push, net, mail),
                (spawn, airmail, postman, wild, [build, run, review], lifetime),
            )| Grant {
                files,
                git_read,
                git_write,
                git_push,
                net,
                mail,
                spawn,
                airmail,
                postman,
                wild,
                build,
                run,
                review,
                lifetime,
            },
        )
}

/// A grant that may spawn: the parent side of spawn laws.
fn spawning_grant() -> impl Strategy<Value = Grant> {
    (
        grant(),
        select(vec![SpawnLevel::Drive, SpawnLevel::Persist]),
    )
        .prop_map(|(mut g, spawn)| {
            g.spawn = spawn;
            g
        })
}

fn fuel(max: u64) -> impl Strategy<Value = Fuel> {
    (0..=max, 0..=max * 10, 0..=max / 2).prop_map(|(model_calls, bytes, wakes)| Fuel {
        model_calls,
        bytes,
        wakes,
    })
}

/// Keep/drop decisions, consumed in turn (cyclically) by [`narrow`].
#[derive(Debug)]
struct Bits<'a> {
    bits: &'a [bool],
    next: usize,
}

impl Bits<'_> {
    fn take(&mut self) -> bool {
        if self.bits.is_empty() {
            return true;
        }
        let bit = self.bits[self.next % self.bits.len()];
        self.next += 1;
        bit
    }
}

fn keep<T: Clone + Ord>(set: &BTreeSet<T>, bits: &mut Bits<'_>) -> BTreeSet<T> {
    set.iter().filter(|_| bits.take()).cloned().collect()
}

/// A grant within `bound` by construction: drops elements, lowers levels, shortens the lifetime;
/// never `build` and `run` together, which no agent may write (`separate_build_and_run`).
fn narrow(bound: &Grant, bits: &[bool]) -> Grant {
    let mut grant = narrow_any(bound, bits);
    if grant.build && grant.run {
        grant.run = false;
    }
    grant
}

fn narrow_any(bound: &Grant, bits: &[bool]) -> Grant {
    let bits = &mut Bits { bits, next: 0 };
    Grant {
        files: keep(&bound.files, bits),
        git_read: keep(&bound.git_read, bits),
        git_write: keep(&bound.git_write, bits),
        git_push: {
            let mut push = bound.git_push.clone();
            push.retain(|_, prefixes| {
                *prefixes = keep(prefixes, bits);
                bits.take()
            });
            push
        },
        net: keep(&bound.net, bits),
        mail: keep(&bound.mail, bits),
        spawn: if bits.take() {
            bound.spawn
        } else {
            SpawnLevel::Drive.min(bound.spawn)
        },
        airmail: keep(&bound.airmail, bits),
        postman: bound.postman && bits.take(),
        wild: keep(&bound.wild, bits),
        build: bound.build && bits.take(),
        run: bound.run && bits.take(),
        review: bound.review && bits.take(),
        lifetime: match (bits.take(), bound.lifetime) {
            (true, l) => l,
            (false, Lifetime::Unbounded) => Lifetime::Until(300),
            (false, Lifetime::Until(t)) => Lifetime::Until(t / 2),
        },
    }
}

/// One element added to a grant, which may or may not widen it.
#[derive(Debug, Clone)]
enum Extra {
    Root(AcrPath),
    Read(RefPrefix),
    Write(RefPrefix),
    Host(HostPattern),
    Mail(MailCover),
    Spawn(SpawnLevel),
    Run,
    Lifetime(Lifetime),
}

fn extra() -> impl Strategy<Value = Extra> {
    prop_oneof![
        select(roots()).prop_map(Extra::Root),
        select(ref_prefixes()).prop_map(Extra::Read),
        select(ref_prefixes()).prop_map(Extra::Write),
        select(hosts()).prop_map(Extra::Host),
        select(mail_covers()).prop_map(Extra::Mail),
        level().prop_map(Extra::Spawn),
        Just(Extra::Run),
        lifetime().prop_map(Extra::Lifetime),
    ]
}

/// Two grants, half the time the first a narrowing of the second with perhaps one element added,
/// so that containment holds, fails by one element, and fails by much, all often.
fn grant_pair() -> impl Strategy<Value = (Grant, Grant)> {
    prop_oneof![
        (grant(), grant()),
        (grant(), bits(), maybe_extra())
            .prop_map(|(b, bits, extra)| { (with_extra(narrow(&b, &bits), &extra), b) }),
    ]
}

fn bits() -> impl Strategy<Value = Vec<bool>> {
    proptest::collection::vec(any::<bool>(), 0..24)
}

fn maybe_extra() -> impl Strategy<Value = Option<Extra>> {
    proptest::option::weighted(0.3, extra())
}

fn with_extra(mut g: Grant, extra: &Option<Extra>) -> Grant {
    match extra.clone() {
        None => {}
        Some(Extra::Root(r)) => {
            g.files.insert(r);
        }
        Some(Extra::Read(r)) => {
            g.git_read.insert(r);
        }
        Some(Extra::Write(r)) => {
            g.git_write.insert(r);
        }
        Some(Extra::Host(h)) => {
            g.net.insert(h);
        }
        Some(Extra::Mail(m)) => {
            g.mail.insert(m);
        }
        Some(Extra::Spawn(l)) => g.spawn = l,
        Some(Extra::Run) => g.run = true,
        Some(Extra::Lifetime(l)) => g.lifetime = l,
    }
    g
}

// ---------------------------------------------------------------------------------------------
// The containment oracle
// ---------------------------------------------------------------------------------------------

fn fresh_ref(p: &RefPrefix) -> RefPrefix {
    if p.is_prefix() {
        RefPrefix::parse(&format!("{p}{FRESH}")).unwrap()
    } else {
        p.clone()
    }
}

/// Concrete points `g` confers, each tagged with its axis, such that `b` contains `g` exactly
/// when `b` allows every one of them.
fn witnesses(g: &Grant) -> Vec<(Axis, Probe)> {
    let mut out = Vec::new();
    for r in &g.files {
        let p = AcrPath::parse(&format!("{r}/{FRESH}")).unwrap();
        out.push((Axis::Files, Probe::File(p)));
    }
    for r in &g.git_read {
        out.push((Axis::GitRead, Probe::GitRead(fresh_ref(r))));
    }
    for r in &g.git_write {
        out.push((Axis::GitWrite, Probe::GitWrite(fresh_ref(r))));
    }
    for (remote, prefixes) in &g.git_push {
        for r in prefixes {
            let refname = fresh_ref(r);
            out.push((
                Axis::GitPush,
                Probe::GitPush {
                    remote: remote.clone(),
                    refname,
                },
            ));
        }
    }
    for h in &g.net {
        let point = match h {
            HostPattern::Exact(_) => h.clone(),
            HostPattern::Subdomains(d) => HostPattern::parse(&format!("{FRESH}.{d}")).unwrap(),
        };
        out.push((Axis::Net, Probe::Net(point)));
    }
    for c in &g.mail {
        let probe = match c {
            MailCover::Subtree(a) => Probe::Mail(Entity::Agent(a.child(FRESH).unwrap())),
            MailCover::Agent(a) => Probe::Mail(Entity::Agent(a.clone())),
            MailCover::Human(h) => Probe::Mail(Entity::Human(h.clone())),
            MailCover::Service(s) => Probe::Mail(Entity::Service(s.clone())),
            MailCover::Office(o) => Probe::MailOffice(o.clone()),
        };
        out.push((Axis::Mail, probe));
    }
    out.push((Axis::Spawn, Probe::Spawn(g.spawn)));
    out.extend(
        g.airmail
            .iter()
            .map(|o| (Axis::Airmail, Probe::Airmail(o.clone()))),
    );
    out.extend(g.wild.iter().map(|w| (Axis::Wild, Probe::Wild(w.clone()))));
    let flags = [
        (g.postman, Axis::Postman, Probe::Postman),
        (g.build, Axis::Build, Probe::Build),
        (g.run, Axis::Run, Probe::Run),
        (g.review, Axis::Review, Probe::Review),
    ];
    out.extend(
        flags
            .into_iter()
            .filter(|(on, ..)| *on)
            .map(|(_, a, p)| (a, p)),
    );
    match g.lifetime {
        Lifetime::Unbounded => out.push((Axis::Lifetime, Probe::AliveAt(u64::MAX))),
        Lifetime::Until(0) => {}
        Lifetime::Until(t) => out.push((Axis::Lifetime, Probe::AliveAt(t - 1))),
    }
    out
}

/// The first axis (in `Axis::ALL` order) on which `child` confers something `bound` does not,
/// computed from probes only.
fn oracle_excess(child: &Grant, bound: &Grant) -> Option<Axis> {
    witnesses(child)
        .into_iter()
        .filter(|(_, p)| !bound.allows(p))
        .map(|(axis, _)| axis)
        .min()
}

/// Half of an amount, unit by unit: a loan that always fits and leaves room for more.
fn half(f: &Fuel) -> Fuel {
    Fuel {
        model_calls: f.model_calls / 2,
        bytes: f.bytes / 2,
        wakes: f.wakes / 2,
    }
}

fn request(child: AgentName, grant: Grant, loan: Fuel, driven: bool) -> SpawnRequest {
    SpawnRequest {
        child,
        grant,
        loan,
        driven,
        persona: None,
        fork: None,
    }
}

fn account_with(loan: Fuel, spent: Fuel) -> Account {
    let mut a = Account::new(loan);
    // A spend that does not fit is simply skipped: the account stays fresh.
    let _ = a.spend(spent);
    a
}

// ---------------------------------------------------------------------------------------------
// Laws of the spawn gate
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `Grant::within` is exactly the containment the probes observe, and it names the first
    /// axis the probes find wider.
    #[test]
    fn within_agrees_with_witness_probes((c, b) in grant_pair()) {
        let expected = oracle_excess(&c, &b);
        prop_assert_eq!(c.within(&b).err().map(|w| w.axis), expected);
    }

    /// Containment is a preorder, and expanding at an agent is inflationary and monotone: the
    /// lemmas that make spawn-by-spawn checks compose into the tree-wide bound.
    #[test]
    fn within_is_a_preorder_and_expansion_is_monotone(
        a in grant(), bits_b in bits(),
        bits_c in bits(), at in select(agents()),
    ) {
        let b = narrow(&a, &bits_b);
        let c = narrow(&b, &bits_c);
        prop_assert!(a.within(&a).is_ok());
        prop_assert!(b.within(&a).is_ok() && c.within(&b).is_ok());
        prop_assert!(c.within(&a).is_ok(), "transitive");
        prop_assert!(a.within(&a.expand_own(&at)).is_ok(), "inflationary");
        prop_assert!(b.expand_own(&at).within(&a.expand_own(&at)).is_ok(), "monotone");
    }

    /// The spawn gate admits a request iff the child is a direct child of the parent, the parent
    /// may spawn (and the child is driven if the parent only drives), the child's grant lies
    /// within the parent's grant expanded at the parent, and the loan fits what the parent has
    /// left; a refusal reports the first condition that fails.
    #[test]
    fn spawn_admitted_only_within_parent(
        parent in select(agents()),
        parent_grant in prop_oneof![1 => grant(), 3 => spawning_grant()],
        loan_total in fuel(20),
        spent in fuel(20),
        child in prop_oneof![4 => select(SEGS.to_vec()).prop_map(Some), 1 => Just(None)],
        other in select(agents()),
        narrowed in proptest::bool::weighted(0.8),
        bits in bits(),
        extra in maybe_extra(),
        wild_grant in grant(),
        loan in prop_oneof![Just(None), fuel(12).prop_map(Some)],
        driven in proptest::bool::weighted(0.7),
    ) {
        let account = account_with(loan_total, spent);
        let child = match child {
            Some(seg) => parent.child(seg).unwrap(),
            None => other,
        };
        let expanded = parent_grant.expand_own(&parent);
        let child_grant = if narrowed {
            with_extra(narrow(&expanded, &bits), &extra)
        } else {
            wild_grant
        };
        let loan = loan.unwrap_or_else(|| half(&account.left()));
        let req = request(child.clone(), child_grant.clone(), loan, driven);
        let decision = admit_spawn(&parent, &parent_grant, &account, &req);

        let name_ok = child.parent().as_ref() == Some(&parent);
        let level_ok = match parent_grant.spawn {
            SpawnLevel::Off => false,
            SpawnLevel::Drive => driven,
            SpawnLevel::Persist => true,
        };
        let excess = oracle_excess(&child_grant, &expanded);
        let loan_ok = loan.fits_in(&account.left());
        // An agent never writes both `build` and `run` (separate_build_and_run).
        let separated = !(child_grant.build && child_grant.run);
        prop_assert_eq!(decision.is_ok(), name_ok && level_ok && excess.is_none() && separated && loan_ok);
        match decision {
            Ok(admission) => {
                let parent_after = admission.parent_account.unwrap();
                prop_assert_eq!(Some(parent_after.left()), account.left().checked_sub(&loan));
                prop_assert_eq!(admission.child_account, Account::new(loan));
            }
            Err(refusal) if !name_ok => {
                prop_assert!(matches!(refusal, SpawnRefusal::NotAChild { .. }), "{}", refusal);
            }
            Err(refusal) if !level_ok => prop_assert_eq!(refusal.axis(), Some(Axis::Spawn)),
            Err(refusal) if excess.is_some() => {
                prop_assert!(matches!(refusal, SpawnRefusal::Widening(_)), "{}", refusal);
                prop_assert_eq!(refusal.axis(), excess);
            }
            Err(refusal) if !separated => prop_assert_eq!(refusal.axis(), Some(Axis::Run)),
            Err(refusal) => prop_assert_eq!(refusal.axis(), Some(Axis::Budget)),
        }
    }

    /// Widening any single axis of an admitted request makes it refused, with exactly that axis
    /// named — never clamped, never reported on another axis.
    #[test]
    fn axis_gain_refused(
        parent in select(agents()),
        parent_grant in spawning_grant(),
        seg in select(SEGS.to_vec()),
        bits in bits(),
        loan_total in fuel(20),
    ) {
        let account = Account::new(loan_total);
        let child = parent.child(seg).unwrap();
        let admitted = request(
            child,
            narrow(&parent_grant.expand_own(&parent), &bits),
            loan_total,
            true,
        );
        prop_assert!(admit_spawn(&parent, &parent_grant, &account, &admitted).is_ok());
        for axis in Axis::ALL {
            let Some(widened) = widen(&admitted, &parent_grant, axis) else { continue };
            let decision = admit_spawn(&parent, &parent_grant, &account, &widened);
            prop_assert_eq!(decision.as_ref().err().and_then(SpawnRefusal::axis), Some(axis), "{:?}", decision);
        }
    }

    /// A loan larger than what the parent has left is refused, naming the first unit that is
    /// short and both amounts; a loan that fits is lent exactly.
    #[test]
    fn spawn_refuses_overdraft(loan_total in fuel(20), spent in fuel(20), loan in fuel(20)) {
        let parent = agent("alice");
        let parent_grant = Grant { spawn: SpawnLevel::Persist, ..Grant::default() };
        let account = account_with(loan_total, spent);
        let req = request(agent("alice/a"), Grant::default(), loan, false);
        let left = account.left();
        match admit_spawn(&parent, &parent_grant, &account, &req) {
            Ok(admission) => {
                prop_assert!(loan.fits_in(&left));
                prop_assert_eq!(admission.parent_account.unwrap().left(), left.checked_sub(&loan).unwrap());
            }
            Err(SpawnRefusal::Overdraft { error, .. }) => {
                let unit = FuelUnit::ALL.into_iter().find(|&u| loan.get(u) > left.get(u));
                prop_assert_eq!(Some(error.unit()), unit);
                let text = error.to_string();
                let unit = error.unit();
                prop_assert!(text.contains(&format!("{} {}", loan.get(unit), unit)), "{}", text);
                prop_assert!(text.contains(&format!("only {} are left", left.get(unit))), "{}", text);
            }
            Err(other) => prop_assert!(false, "unexpected refusal {}", other),
        }
    }

    /// Every admitted child's name is its parent's plus one segment, so its refs lie under the
    /// parent's subtree prefix, its branches under the parent's branch prefix, and its ACR under
    /// the parent's folder of the forest.
    #[test]
    fn descendant_name_under_parent(parent in select(agents()), child in select(agents()), seg in select(SEGS.to_vec()), direct in any::<bool>()) {
        let child = if direct { parent.child(seg).unwrap() } else { child };
        let parent_grant = Grant { spawn: SpawnLevel::Persist, ..Grant::default() };
        let req = request(child.clone(), Grant::default(), Fuel::ZERO, false);
        let admitted = admit_spawn(&parent, &parent_grant, &Account::default(), &req).is_ok();
        prop_assert_eq!(admitted, child.parent().as_ref() == Some(&parent));
        if admitted {
            prop_assert!(child.is_descendant_of(&parent));
            for which in AgentRef::ALL {
                prop_assert!(refs::agent_ref(&child, which).starts_with(&refs::subtree_prefix(&parent)));
            }
            prop_assert!(refs::work_branch(&child).starts_with(&refs::branch_prefix(&parent)));
            let parent_folder = refs::paths::acr(&parent);
            let parent_folder = parent_folder.parent().unwrap_or(Path::new(""));
            prop_assert!(refs::paths::acr(&child).starts_with(parent_folder));
        }
    }
}

/// The request with one axis widened past the parent's expanded grant, or `None` when the
/// parent already holds the top of that axis (e.g. `refs/` on git-read), as the probes observe.
fn widen(req: &SpawnRequest, parent_grant: &Grant, axis: Axis) -> Option<SpawnRequest> {
    let out = widen_blindly(req, parent_grant, axis)?;
    let expanded = parent_grant.expand_own(&req.child.parent()?);
    let widens = axis == Axis::Budget || oracle_excess(&out.grant, &expanded) == Some(axis);
    widens.then_some(out)
}

/// The request with one element or level added on `axis`, whether or not the bound has it.
fn widen_blindly(req: &SpawnRequest, parent_grant: &Grant, axis: Axis) -> Option<SpawnRequest> {
    let mut out = req.clone();
    let g = &mut out.grant;
    match axis {
        Axis::Files => {
            g.files.insert(AcrPath::parse("gained").unwrap());
        }
        Axis::GitRead => {
            g.git_read.insert(RefPrefix::parse("refs/gained/").unwrap());
        }
        Axis::GitWrite => {
            g.git_write
                .insert(RefPrefix::parse("refs/gained/").unwrap());
        }
        Axis::GitPush => {
            g.git_push.insert(
                RemoteName::parse("gained").unwrap(),
                [RefPrefix::parse("refs/heads/").unwrap()].into(),
            );
        }
        Axis::Net => {
            g.net
                .insert(HostPattern::parse("gained.example.net").unwrap());
        }
        Axis::Mail => {
            g.mail.insert(MailCover::parse("human:gained").unwrap());
        }
        Axis::Spawn if parent_grant.spawn < SpawnLevel::Persist => g.spawn = SpawnLevel::Persist,
        Axis::Airmail => {
            g.airmail.insert(OfficeName::parse("gained").unwrap());
        }
        Axis::Postman if !parent_grant.postman => g.postman = true,
        Axis::Wild => {
            g.wild.insert(WildClass::parse("gained").unwrap());
        }
        Axis::Build if !parent_grant.build => g.build = true,
        Axis::Run if !parent_grant.run => g.run = true,
        Axis::Review if !parent_grant.review => g.review = true,
        Axis::Lifetime if parent_grant.lifetime != Lifetime::Unbounded => {
            g.lifetime = Lifetime::Unbounded;
        }
        Axis::Budget => {
            out.loan.wakes += 1;
        }
        Axis::Spawn | Axis::Postman | Axis::Build | Axis::Run | Axis::Review | Axis::Lifetime => {
            return None;
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Laws over whole ledgers
// ---------------------------------------------------------------------------------------------

fn human(s: &str) -> HumanName {
    HumanName::parse(s).unwrap()
}

/// A hub with humans `root` and `bob`, and root agent `alice` spawned by `human:root`.
fn founded(human_grant: &Grant, root_grant: &Grant, root_loan: Fuel) -> Ledger {
    let mut rows = vec![
        LedgerRow::RegisterHuman {
            human: human("root"),
            grant: human_grant.clone(),
            at_ms: 0,
        },
        LedgerRow::RegisterHuman {
            human: human("bob"),
            grant: Grant::default(),
            at_ms: 0,
        },
    ];
    rows.push(LedgerRow::Spawn {
        parent: Entity::Human(human("root")),
        child: agent("alice"),
        grant: root_grant.clone(),
        loan: root_loan,
        driven: false,
        persona: None,
        at_ms: 1,
    });
    Ledger::replay(&rows).unwrap()
}

/// What an agent-written row does, before it is turned into a row against the current state.
#[derive(Debug, Clone)]
enum Op {
    /// A live agent (by index) spawns a child under a narrowing of its expanded grant, perhaps
    /// with one element added.
    Spawn {
        parent: usize,
        seg: &'static str,
        bits: Vec<bool>,
        extra: Option<Extra>,
        driven: bool,
        /// Lend half of what the parent has left, or this fixed loan (which may overdraw).
        loan: Option<Fuel>,
    },
    /// A live agent regrants a live agent — one of its descendants when `below` and it has
    /// some — with a narrowing of its own expanded grant.
    Regrant {
        issuer: usize,
        subject: usize,
        below: bool,
        bits: Vec<bool>,
        extra: Option<Extra>,
    },
    /// A live agent's subtree retires.
    Retire { agent: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let loan = prop_oneof![4 => Just(None), 1 => fuel(8).prop_map(Some)];
    prop_oneof![
        4 => (any::<usize>(), select(SEGS.to_vec()), bits(), maybe_extra(), proptest::bool::weighted(0.8), loan)
            .prop_map(|(parent, seg, bits, extra, driven, loan)| Op::Spawn {
                parent, seg, bits, extra, driven, loan,
            }),
        3 => (any::<usize>(), any::<usize>(), proptest::bool::weighted(0.8), bits(), maybe_extra())
            .prop_map(|(issuer, subject, below, bits, extra)| Op::Regrant {
                issuer, subject, below, bits, extra,
            }),
        1 => any::<usize>().prop_map(|agent| Op::Retire { agent }),
    ]
}

fn pick(ledger: &Ledger, index: usize) -> AgentName {
    let live: Vec<&AgentName> = ledger.live_agents().collect();
    live[index % live.len()].clone()
}

/// The rows an op stands for against the current state (an empty list when it cannot apply).
fn rows_for(ledger: &Ledger, op: &Op) -> Vec<LedgerRow> {
    if ledger.live_agents().next().is_none() {
        return Vec::new();
    }
    match op {
        Op::Spawn {
            parent,
            seg,
            bits,
            extra,
            driven,
            loan,
        } => {
            let parent = pick(ledger, *parent);
            if parent.depth() >= MAX_GEN_DEPTH {
                return Vec::new();
            }
            let bound = ledger.grant(&parent).unwrap().expand_own(&parent);
            let loan = loan.unwrap_or_else(|| half(&ledger.account(&parent).unwrap().left()));
            vec![LedgerRow::Spawn {
                parent: Entity::Agent(parent.clone()),
                child: parent.child(seg).unwrap(),
                grant: with_extra(narrow(&bound, bits), extra),
                loan,
                driven: *driven,
                persona: None,
                at_ms: 2,
            }]
        }
        Op::Regrant {
            issuer,
            subject,
            below,
            bits,
            extra,
        } => {
            let issuer = pick(ledger, *issuer);
            let descendants: Vec<AgentName> = ledger
                .live_agents()
                .filter(|a| a.is_descendant_of(&issuer))
                .cloned()
                .collect();
            let subject = if *below && !descendants.is_empty() {
                descendants[*subject % descendants.len()].clone()
            } else {
                pick(ledger, *subject)
            };
            let bound = ledger.grant(&issuer).unwrap().expand_own(&issuer);
            vec![LedgerRow::Regrant {
                issuer: Entity::Agent(issuer),
                subject,
                grant: with_extra(narrow(&bound, bits), extra),
                at_ms: 3,
            }]
        }
        Op::Retire { agent } => {
            let agent = pick(ledger, *agent);
            if agent.depth() == 1 {
                return Vec::new();
            }
            ledger.retire_subtree(&agent, 4).unwrap()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Over every ledger the agents' own rows can build (spawns, agent regrants and retirements,
    /// each kept only if its gate admits it; no human regrants), every live agent's grant lies
    /// within its root agent's grant expanded at each of its strict ancestors.
    #[test]
    fn descendant_bounded_by_root_grant(
        human_grant in spawning_grant(),
        bits in bits(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let mut root_grant = narrow(&human_grant, &bits);
        root_grant.spawn = human_grant.spawn;
        let mut ledger = founded(&human_grant, &root_grant, Fuel { model_calls: 40, bytes: 400, wakes: 20 });
        for op in &ops {
            for row in rows_for(&ledger, op) {
                prop_assert!(!row.is_human_only());
                let _refused_or_not = ledger.apply(&row);
            }
        }
        let live: Vec<AgentName> = ledger.live_agents().cloned().collect();
        for a in live {
            let root_grant = ledger.grant(&a.root()).unwrap();
            let chain: Vec<AgentName> = a.ancestors().collect();
            let bound = root_grant.expand_own_all(&chain);
            let grant = ledger.grant(&a).unwrap();
            prop_assert!(grant.within(&bound).is_ok(), "{}: {:?}", a, grant.within(&bound));
        }
    }

    /// No sequence of agent-issued rows (spawns by agents, agent regrants of anyone with any
    /// grant, retirements, collections) changes a human's grant or the issuing agent's own
    /// grant, and a refused row changes nothing at all.
    #[test]
    fn human_grant_is_a_root(
        human_grant in spawning_grant(),
        honest in proptest::collection::vec(op(), 0..12),
        attacks in proptest::collection::vec(attack(), 1..24),
    ) {
        let mut ledger = founded(&human_grant, &human_grant, Fuel { model_calls: 40, bytes: 400, wakes: 20 });
        for op in &honest {
            for row in rows_for(&ledger, op) {
                let _refused_or_not = ledger.apply(&row);
            }
        }
        let humans_before = [human("root"), human("bob")].map(|h| ledger.human_grant(&h).cloned());
        for row in &attacks {
            prop_assert!(!row.is_human_only());
            let before = ledger.clone();
            let issuer = match row {
                LedgerRow::Spawn { parent: Entity::Agent(a), .. }
                | LedgerRow::Regrant { issuer: Entity::Agent(a), .. } => Some(a.clone()),
                _ => None,
            };
            let applied = ledger.apply(row);
            if applied.is_err() {
                prop_assert_eq!(&ledger, &before);
            }
            if let Some(issuer) = issuer {
                prop_assert_eq!(ledger.grant(&issuer), before.grant(&issuer), "{:?}", row);
            }
            let humans_now = [human("root"), human("bob")].map(|h| ledger.human_grant(&h).cloned());
            prop_assert_eq!(&humans_now, &humans_before);
        }
    }
}

/// An agent-written row with no regard for the gates: any agent of the vocabulary as parent or
/// issuer (itself included), any subject, any grant, any spend.
fn attack() -> impl Strategy<Value = LedgerRow> {
    prop_oneof![
        (
            select(agents()),
            select(agents()),
            grant(),
            fuel(10),
            any::<bool>()
        )
            .prop_map(|(parent, child, grant, loan, driven)| LedgerRow::Spawn {
                parent: Entity::Agent(parent),
                child,
                grant,
                loan,
                driven,
                persona: None,
                at_ms: 5,
            }),
        (select(agents()), select(agents()), grant(), any::<bool>()).prop_map(
            |(issuer, subject, grant, itself)| LedgerRow::Regrant {
                subject: if itself { issuer.clone() } else { subject },
                issuer: Entity::Agent(issuer),
                grant,
                at_ms: 5,
            }
        ),
        (select(agents()), fuel(10)).prop_map(|(agent, spent)| LedgerRow::Retire {
            agent,
            spent,
            at_ms: 5
        }),
        select(agents()).prop_map(|agent| LedgerRow::Collect { agent, at_ms: 5 }),
    ]
}

/// Where the plain bound fails: a child legitimately granted its parent's own refs is admitted
/// and lies within the root's grant expanded at the parent, but not within the root's stored
/// grant. This is why `descendant_bounded_by_root_grant` states the expanded bound.
#[test]
fn plain_root_bound_is_false_at_depth_one() {
    let root_grant = Grant {
        files: [AcrPath::parse("workspace").unwrap()].into(),
        spawn: SpawnLevel::Persist,
        ..Grant::default()
    };
    let mut ledger = founded(&root_grant, &root_grant, Fuel::ZERO);
    let alice = agent("alice");
    let child_grant = Grant {
        files: root_grant.files.clone(),
        git_read: [RefPrefix::parse(&refs::subtree_prefix(&alice)).unwrap()].into(),
        ..Grant::default()
    };
    ledger
        .apply(&LedgerRow::Spawn {
            parent: Entity::Agent(alice.clone()),
            child: agent("alice/a"),
            grant: child_grant.clone(),
            loan: Fuel::ZERO,
            driven: false,
            persona: None,
            at_ms: 2,
        })
        .unwrap();
    let stored = ledger.grant(&agent("alice/a")).unwrap();
    assert_eq!(stored, &child_grant);
    assert!(stored.within(&root_grant.expand_own_all([&alice])).is_ok());
    let plain = stored.within(&root_grant).unwrap_err();
    assert_eq!(plain.axis, Axis::GitRead);
    assert!(
        plain.detail.contains("refs/l3m/a/alice/"),
        "{}",
        plain.detail
    );
}

// ---------------------------------------------------------------------------------------------
// Budget conservation
// ---------------------------------------------------------------------------------------------

/// A budget operation on the tree under `alice`.
#[derive(Debug, Clone)]
enum BudgetOp {
    Spawn {
        parent: usize,
        seg: &'static str,
        loan: Fuel,
    },
    Charge {
        agent: usize,
        amount: Fuel,
    },
    Retire {
        agent: usize,
    },
}

fn budget_op() -> impl Strategy<Value = BudgetOp> {
    prop_oneof![
        2 => (any::<usize>(), select(SEGS.to_vec()), fuel(8))
            .prop_map(|(parent, seg, loan)| BudgetOp::Spawn { parent, seg, loan }),
        3 => (any::<usize>(), fuel(5)).prop_map(|(agent, amount)| BudgetOp::Charge { agent, amount }),
        1 => any::<usize>().prop_map(|agent| BudgetOp::Retire { agent }),
    ]
}

fn sum(amounts: impl IntoIterator<Item = Fuel>) -> Fuel {
    amounts
        .into_iter()
        .fold(Fuel::ZERO, |acc, f| acc.checked_add(&f).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Over random loans, spends and retirements on a tree: the root's loan equals what every
    /// live account has left plus everything consumed; everything consumed is exactly what was
    /// charged and never exceeds the root's fuel; every live account is its rebuild from its live
    /// children; and a refused operation changes nothing (so no account is ever overdrawn).
    #[test]
    fn budget_conservation(ops in proptest::collection::vec(budget_op(), 1..40)) {
        let root_loan = Fuel { model_calls: 60, bytes: 600, wakes: 30 };
        let persist = Grant { spawn: SpawnLevel::Persist, ..Grant::default() };
        let mut ledger = founded(&persist, &persist, root_loan);
        let mut charged = Fuel::ZERO;
        for op in &ops {
            let before = ledger.clone();
            let outcome = match op {
                BudgetOp::Spawn { parent, seg, loan } => {
                    let parent = pick(&ledger, *parent);
                    if parent.depth() >= MAX_GEN_DEPTH {
                        continue;
                    }
                    ledger.apply(&LedgerRow::Spawn {
                        parent: Entity::Agent(parent.clone()),
                        child: parent.child(seg).unwrap(),
                        grant: persist.clone(),
                        loan: *loan,
                        driven: false,
                        persona: None,
                        at_ms: 2,
                    })
                }
                BudgetOp::Charge { agent, amount } => {
                    let outcome = ledger.charge(&pick(&ledger, *agent), *amount);
                    if outcome.is_ok() {
                        charged = charged.checked_add(amount).unwrap();
                    }
                    outcome
                }
                BudgetOp::Retire { agent } => {
                    let agent = pick(&ledger, *agent);
                    if agent.depth() == 1 {
                        continue;
                    }
                    for row in ledger.retire_subtree(&agent, 3).unwrap() {
                        ledger.apply(&row).unwrap();
                    }
                    Ok(())
                }
            };
            if outcome.is_err() {
                prop_assert_eq!(&ledger, &before);
            }
            let live: Vec<AgentName> = ledger.live_agents().cloned().collect();
            let accounts: Vec<&Account> = live.iter().map(|a| ledger.account(a).unwrap()).collect();
            let consumed = sum(accounts.iter().map(|a| a.consumed()));
            let left = sum(accounts.iter().map(|a| a.left()));
            prop_assert_eq!(consumed, charged);
            prop_assert_eq!(consumed.checked_add(&left).unwrap(), root_loan);
            prop_assert!(charged.fits_in(&root_loan));
            for (name, account) in live.iter().zip(&accounts) {
                let children: Vec<Fuel> = ledger
                    .children(name)
                    .iter()
                    .map(|c| ledger.account(c).unwrap().loan())
                    .collect();
                let rebuilt = Account::rebuild(
                    account.loan(),
                    account.spent(),
                    &children,
                    account.retired_consumed(),
                );
                prop_assert_eq!(rebuilt, Ok((*account).clone()));
            }
        }
    }
}
