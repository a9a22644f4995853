//! Laws of build plans: the W^X gate refuses every plan that would let private bytes reach the
//! network or let a stage write anything but its own output, and names the stage and the rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use l3m_core::build::{
    ArtifactDigest, Limits, Mount, MountRole, Network, Plan, PlanRule, Stage, StageKind,
    StageOwner, TreeEntry, check_plan, docker_plan_rw_mount_is_its_out_dir,
    net_forbidden_after_private_touch, stage_allowed_for, tree_manifest,
};
use l3m_core::grant::HostPattern;
use proptest::prelude::*;
use proptest::sample::select;

const ROLES: [MountRole; 5] = [
    MountRole::Lockfile,
    MountRole::Cache,
    MountRole::Source,
    MountRole::Artifact,
    MountRole::Out,
];
const KINDS: [StageKind; 3] = [StageKind::Fetch, StageKind::Build, StageKind::Run];

fn mount(role: MountRole, writable: bool) -> Mount {
    Mount {
        role,
        target: format!("/{role}"),
        writable,
    }
}

fn hosts() -> Network {
    Network::Hosts(vec![HostPattern::parse("deb.example").unwrap()])
}

fn stage(name: &str, kind: StageKind, mounts: Vec<Mount>, network: Network) -> Stage {
    Stage {
        name: name.into(),
        kind,
        image: "l3m/busybox".into(),
        command: vec!["true".into()],
        workdir: "/tmp".into(),
        mounts,
        network,
        limits: Limits::default(),
    }
}

/// The pipeline every build follows: fetch warms the cache, build writes the artifact, run
/// writes out.
fn good_plan() -> Plan {
    Plan {
        stages: vec![
            stage(
                "fetch",
                StageKind::Fetch,
                vec![
                    mount(MountRole::Lockfile, false),
                    mount(MountRole::Cache, true),
                ],
                hosts(),
            ),
            stage(
                "build",
                StageKind::Build,
                vec![
                    mount(MountRole::Source, false),
                    mount(MountRole::Cache, false),
                    mount(MountRole::Artifact, true),
                ],
                Network::None,
            ),
            stage(
                "run",
                StageKind::Run,
                vec![
                    mount(MountRole::Artifact, false),
                    mount(MountRole::Out, true),
                ],
                Network::None,
            ),
        ],
    }
}

fn arb_stage() -> impl Strategy<Value = Stage> {
    (
        select(KINDS.to_vec()),
        proptest::collection::btree_map(select(ROLES.to_vec()), any::<bool>(), 0..5),
        any::<bool>(),
        0usize..1000,
    )
        .prop_map(|(kind, mounts, net, n)| {
            let mounts = mounts.into_iter().map(|(r, w)| mount(r, w)).collect();
            let network = if net { hosts() } else { Network::None };
            stage(&format!("s{n}"), kind, mounts, network)
        })
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    proptest::collection::vec(arb_stage(), 1..5).prop_map(|stages| Plan { stages })
}

#[test]
fn the_standard_pipeline_is_admitted() {
    check_plan(&good_plan()).unwrap();
}

#[test]
fn a_fetch_that_mounts_source_is_refused_naming_it() {
    let mut plan = good_plan();
    plan.stages[0].mounts.push(mount(MountRole::Source, false));
    let r = check_plan(&plan).unwrap_err();
    assert_eq!(
        (r.index, r.stage.as_str(), r.rule),
        (0, "fetch", PlanRule::FetchMountsPrivate)
    );
}

#[test]
fn a_run_writing_its_artifact_is_refused_naming_the_rule() {
    let mut plan = good_plan();
    plan.stages[2].mounts[0].writable = true;
    let r = check_plan(&plan).unwrap_err();
    assert_eq!((r.index, r.rule), (2, PlanRule::WritableMountNotOwnOutput));
    assert!(r.to_string().contains("rw-mount-is-its-out-dir"), "{r}");
}

#[test]
fn a_second_fetch_after_the_build_is_refused_as_net_after_private_touch() {
    let mut plan = good_plan();
    let again = plan.stages[0].clone();
    plan.stages.insert(
        2,
        Stage {
            name: "refetch".into(),
            ..again
        },
    );
    let r = check_plan(&plan).unwrap_err();
    assert_eq!(
        (r.index, r.stage.as_str(), r.rule),
        (2, "refetch", PlanRule::NetAfterPrivateTouch)
    );
}

#[test]
fn zero_pids_is_refused_because_the_engine_reads_it_as_unlimited() {
    let mut plan = good_plan();
    plan.stages[1].limits.pids = 0;
    assert_eq!(check_plan(&plan).unwrap_err().rule, PlanRule::ZeroLimit);
}

#[test]
fn mount_targets_must_be_absolute_and_plain() {
    for bad in ["relative", "/", "/a/../etc", "/a//b"] {
        let mut plan = good_plan();
        plan.stages[2].mounts[1].target = bad.into();
        assert_eq!(
            check_plan(&plan).unwrap_err().rule,
            PlanRule::MountTarget,
            "{bad}"
        );
    }
}

#[test]
fn each_kind_of_stage_has_exactly_one_owner() {
    for kind in KINDS {
        let owners = [StageOwner::Builder, StageOwner::Runner]
            .into_iter()
            .filter(|o| stage_allowed_for(*o, kind))
            .count();
        assert_eq!(owners, 1, "{kind}");
    }
    assert!(!stage_allowed_for(StageOwner::Builder, StageKind::Run));
    assert!(!stage_allowed_for(StageOwner::Runner, StageKind::Build));
    assert!(!stage_allowed_for(StageOwner::Runner, StageKind::Fetch));
}

proptest! {
    /// Law `net_forbidden_after_private_touch`, and `docker_plan_rw_mount_is_its_out_dir` for
    /// every stage: the gate admits no plan that breaks either, and no fetch that sees source.
    #[test]
    fn admitted_plans_obey_both_laws(plan in arb_plan()) {
        if check_plan(&plan).is_ok() {
            prop_assert!(net_forbidden_after_private_touch(&plan));
            for s in &plan.stages {
                prop_assert!(docker_plan_rw_mount_is_its_out_dir(s));
                if s.kind == StageKind::Fetch {
                    prop_assert!(!s.mounts.iter().any(|m| m.role == MountRole::Source));
                }
                if s.kind != StageKind::Fetch {
                    prop_assert_eq!(&s.network, &Network::None);
                }
            }
        }
    }

    /// A refusal names a real stage of the plan, at its position, no later than the first stage
    /// that touches the network after private input.
    #[test]
    fn refusals_name_the_stage(plan in arb_plan()) {
        if let Err(r) = check_plan(&plan) {
            prop_assert_eq!(&plan.stages[r.index].name, &r.stage);
        }
        if !net_forbidden_after_private_touch(&plan) {
            let r = check_plan(&plan).unwrap_err();
            let first_bad = (0..plan.stages.len())
                .find(|i| !net_forbidden_after_private_touch(&Plan { stages: plan.stages[..=*i].to_vec() }))
                .unwrap();
            prop_assert!(r.index <= first_bad);
        }
    }

    /// Giving any build or run stage of a good plan a network, or any writable mount but its
    /// output, is refused at exactly that stage.
    #[test]
    fn widening_one_stage_is_refused_at_that_stage(i in 1usize..3, role in select(ROLES.to_vec()), net in any::<bool>()) {
        let mut plan = good_plan();
        if net {
            plan.stages[i].network = hosts();
        } else {
            let own = if i == 1 { MountRole::Artifact } else { MountRole::Out };
            prop_assume!(role != own);
            plan.stages[i].mounts.retain(|m| m.role != role);
            plan.stages[i].mounts.push(mount(role, true));
        }
        let r = check_plan(&plan).unwrap_err();
        prop_assert_eq!(r.index, i);
    }

    /// The manifest does not depend on the order a walk found the entries in, and any changed
    /// content hash changes it.
    #[test]
    fn manifest_is_order_free_and_content_bound(
        files in proptest::collection::btree_map("[a-z]{1,6}", any::<[u8; 32]>(), 1..6),
        flip in any::<prop::sample::Index>(),
    ) {
        let entries: Vec<TreeEntry> = files.iter().map(|(p, h)| TreeEntry::File {
            path: p.clone(), executable: false, len: 1, hash: ArtifactDigest::from_bytes(*h),
        }).collect();
        let mut reversed = entries.clone();
        reversed.reverse();
        prop_assert_eq!(tree_manifest(&entries), tree_manifest(&reversed));
        let k = flip.index(entries.len());
        let mut changed = entries.clone();
        if let TreeEntry::File { hash, .. } = &mut changed[k] {
            let mut b = [0u8; 32];
            b[0] = u8::from(hash.as_str().as_bytes()[0] == b'0');
            *hash = ArtifactDigest::from_bytes(b);
        }
        prop_assert_ne!(tree_manifest(&entries), tree_manifest(&changed));
    }

    /// Digests round-trip through their hex form and nothing else parses.
    #[test]
    fn digests_parse_only_their_own_form(bytes in any::<[u8; 32]>(), junk in ".{0,70}") {
        let d = ArtifactDigest::from_bytes(bytes);
        prop_assert_eq!(ArtifactDigest::parse(d.as_str()).unwrap(), d);
        if junk.len() != 64 {
            prop_assert!(ArtifactDigest::parse(&junk).is_err());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Blessings
// ---------------------------------------------------------------------------------------------

use l3m_core::build::{BlessError, Blessing, blessed_inputs, check_blessing, check_target};
use std::collections::BTreeMap;

const MAKEFILE: &str = "\
CC := cc
include common.mk rules/extra.mk
all: app test
\t@echo building
app: main.c
\t./scripts/gen.sh > gen.c && $(CC) -o app main.c gen.c
test: app
\tsh tools/check.sh app; ./app
unrelated:
\t./scripts/unrelated.sh
";

fn pinned(files: &[String]) -> Blessing {
    Blessing {
        makefile: "proj/Makefile".into(),
        target: "all".into(),
        files: files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), ArtifactDigest::from_bytes([i as u8; 32])))
            .collect(),
    }
}

fn hashes(b: &Blessing) -> BTreeMap<String, Option<ArtifactDigest>> {
    b.files
        .iter()
        .map(|(p, d)| (p.clone(), Some(d.clone())))
        .collect()
}

#[test]
fn a_targets_inputs_are_the_makefile_its_literal_includes_and_the_scripts_its_recipes_call() {
    let inputs = blessed_inputs("proj/Makefile", MAKEFILE, "all").unwrap();
    assert_eq!(
        inputs,
        [
            "proj/Makefile",
            "proj/common.mk",
            "proj/rules/extra.mk",
            "proj/scripts/gen.sh",
            "proj/tools/check.sh",
        ]
    );
    let only_app = blessed_inputs("proj/Makefile", MAKEFILE, "app").unwrap();
    assert!(
        !only_app.contains(&"proj/tools/check.sh".to_owned()),
        "{only_app:?}"
    );
}

#[test]
fn an_include_through_a_variable_or_a_script_outside_the_repo_cannot_be_pinned() {
    let err = blessed_inputs("Makefile", "include $(EXTRA)\nall:\n\ttrue\n", "all").unwrap_err();
    assert!(
        matches!(err, BlessError::NonLiteralInclude { line: 1, .. }),
        "{err}"
    );
    let err = blessed_inputs("Makefile", "all:\n\t../evil.sh\n", "all").unwrap_err();
    assert!(matches!(err, BlessError::OutsideRepo { .. }), "{err}");
    let err = blessed_inputs("Makefile", "all:\n\ttrue\n", "install").unwrap_err();
    assert!(matches!(err, BlessError::NoTarget { .. }), "{err}");
}

#[test]
fn a_model_argument_smuggled_as_a_target_is_refused() {
    for smuggled in [
        "CC=evil",
        "all CC=evil",
        "-j64",
        "--eval=x",
        "all;rm",
        "",
        "a\nb",
    ] {
        assert!(
            matches!(check_target(smuggled), Err(BlessError::BadTarget { .. })),
            "{smuggled:?}"
        );
        assert!(blessed_inputs("Makefile", MAKEFILE, smuggled).is_err());
    }
    check_target("build/app.o").unwrap();
}

#[test]
fn an_added_include_makes_the_blessing_refuse_until_blessed_again() {
    let inputs = blessed_inputs("proj/Makefile", MAKEFILE, "all").unwrap();
    let b = pinned(&inputs);
    check_blessing(&b, &inputs, &hashes(&b)).unwrap();
    let edited = format!("include sneaky.mk\n{MAKEFILE}");
    let now = blessed_inputs("proj/Makefile", &edited, "all").unwrap();
    let err = check_blessing(&b, &now, &hashes(&b)).unwrap_err();
    assert_eq!(
        err,
        BlessError::Unpinned {
            path: "proj/sneaky.mk".into()
        }
    );
}

proptest! {
    /// A blessed run goes ahead exactly while every pinned byte is unchanged: changing or
    /// removing any one input is refused naming that input.
    #[test]
    fn any_changed_or_missing_input_is_refused_naming_it(k in any::<prop::sample::Index>(), remove in any::<bool>()) {
        let inputs = blessed_inputs("proj/Makefile", MAKEFILE, "all").unwrap();
        let b = pinned(&inputs);
        let mut now = hashes(&b);
        prop_assert!(check_blessing(&b, &inputs, &now).is_ok());
        let path = inputs[k.index(inputs.len())].clone();
        if remove {
            now.insert(path.clone(), None);
            prop_assert_eq!(check_blessing(&b, &inputs, &now), Err(BlessError::Missing { path }));
        } else {
            let other = ArtifactDigest::from_bytes([0xee; 32]);
            now.insert(path.clone(), Some(other.clone()));
            let err = check_blessing(&b, &inputs, &now).unwrap_err();
            let named = matches!(&err, BlessError::Changed { path: p, now: n, .. } if *p == path && *n == other);
            prop_assert!(named, "{}", err);
        }
    }

    /// Whatever the Makefile says, every input is repository-relative and the Makefile itself
    /// is always pinned.
    #[test]
    fn inputs_are_relative_and_include_the_makefile(
        lines in proptest::collection::vec(prop_oneof![
            "[a-z]{1,5}: [a-z ]{0,10}",
            "\t\\./[a-z]{1,5}\\.sh [a-z./]{0,10}",
            "\t[a-z]{1,5}/[a-z]{1,5}\\.py",
            "include [a-z]{1,5}\\.mk",
            "[A-Z]{1,3} := [a-z]{0,5}",
        ], 0..10),
    ) {
        let text = format!("all: {}\n\ttrue\n{}\n", "x", lines.join("\n"));
        if let Ok(inputs) = blessed_inputs("m/Makefile", &text, "all") {
            prop_assert!(inputs.contains(&"m/Makefile".to_owned()));
            for p in &inputs {
                prop_assert!(p.starts_with("m/") && !p.split('/').any(|c| c == ".."), "{}", p);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tame make
// ---------------------------------------------------------------------------------------------

use l3m_core::build::{TAME_TOOLS, TameError, command_line, lower};

const TAME: &str = "\
# a tame Makefile
build/app: build/main.o build/util.o
\tcc -o build/app build/main.o build/util.o
build/main.o: src/main.c
\tcc -c -O2 -o build/main.o src/main.c
build/util.o: src/util.c
\tcc -c -o build/util.o src/util.c
";

#[test]
fn a_tame_makefile_lowers_to_argument_vectors_prerequisites_first() {
    let steps = lower(TAME, "build/app").unwrap();
    let targets: Vec<&str> = steps.iter().map(|s| s.target.as_str()).collect();
    assert_eq!(targets, ["build/main.o", "build/util.o", "build/app"]);
    assert_eq!(
        steps[0].argv,
        ["cc", "-c", "-O2", "-o", "build/main.o", "src/main.c"]
    );
}

#[test]
fn shell_syntax_foreign_programs_and_outputs_outside_build_are_refused_naming_the_line() {
    type Expect = fn(&TameError) -> bool;
    let cases: [(&str, Expect); 6] = [
        ("build/a: x\n\tcc -o build/a x; rm -rf /\n", |e| {
            matches!(
                e,
                TameError::Syntax {
                    line: 2,
                    found: ';'
                }
            )
        }),
        ("build/a: x\n\tcc -o build/a $(EVIL)\n", |e| {
            matches!(
                e,
                TameError::Syntax {
                    line: 2,
                    found: '$'
                }
            )
        }),
        ("build/a: x\n\tsh -c true\n", |e| {
            matches!(e, TameError::UnknownTool { line: 2, .. })
        }),
        ("out/a: x\n\tcc -o out/a x\n", |e| {
            matches!(e, TameError::TargetOutsideBuild { line: 1, .. })
        }),
        ("build/a: x\n\tcp x /etc/passwd\n", |e| {
            matches!(e, TameError::Escapes { line: 2, .. })
        }),
        (
            "build/a: build/b\n\tcp x build/a\nbuild/b: build/a\n\tcp x build/b\n",
            |e| matches!(e, TameError::Cycle { .. }),
        ),
    ];
    for (text, expected) in cases {
        let err = lower(text, "build/a").unwrap_err();
        assert!(expected(&err), "{text:?}: {err}");
    }
}

proptest! {
    /// Law `lower_recipes_closed`: whatever the Makefile says, a lowered build writes every
    /// command itself — a tame tool with plain arguments, no shell syntax, nothing absolute or
    /// climbing — and every target lies under `build/`.
    #[test]
    fn lower_recipes_closed(
        lines in proptest::collection::vec(prop_oneof![
            "build/[a-c]: (build/[a-c] |src/[a-c] ){0,3}",
            "[a-z/.]{1,8}: [a-z/. ]{0,10}",
            "\t(cc|cp|sh|cat|rm) (-o |-c )?[a-z/.$;|>~ ]{0,16}",
            "\t(cc|cp) -o build/[a-c] (src|build)/[a-c]",
            "# [a-z ]{0,8}",
        ], 0..12),
        goal in "build/[a-c]",
    ) {
        let text = lines.join("\n");
        if let Ok(steps) = lower(&text, &goal) {
            for step in &steps {
                prop_assert!(step.target.starts_with("build/") && !step.target.contains(".."));
                prop_assert!(TAME_TOOLS.contains(&step.argv[0].as_str()), "{:?}", step.argv);
                for arg in &step.argv {
                    prop_assert!(!arg.starts_with('/') && !arg.split('/').any(|c| c == ".."), "{}", arg);
                    prop_assert!(!arg.contains(['$', ';', '|', '>', '<', '&', '~', '`']), "{}", arg);
                }
            }
        }
    }
}

/// The words a real `/bin/sh` runs `command_line(argv)` with, printed NUL-separated by printf.
fn words_sh_sees(argv: &[String]) -> Vec<String> {
    let mut line = vec!["printf".to_owned(), "%s\\0".to_owned()];
    line.extend(argv.iter().cloned());
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command_line(&line))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_terminator('\0').map(str::to_owned).collect()
}

#[test]
fn a_command_line_passes_hostile_words_to_the_shell_as_data() {
    let argv: Vec<String> = [
        "it's",
        "$(touch /tmp/pwned)",
        "a b",
        "`id`",
        "\\n",
        "'",
        "''",
        "x\ny",
        ";",
        "*",
    ]
    .map(str::to_owned)
    .to_vec();
    assert_eq!(words_sh_sees(&argv), argv);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the words, the shell the build stage runs sees exactly them, one argument each.
    #[test]
    fn a_command_line_is_read_back_as_the_same_words(
        argv in proptest::collection::vec("[^\\x00]{1,12}", 1..5),
    ) {
        prop_assert_eq!(words_sh_sees(&argv), argv);
    }
}

// ---------------------------------------------------------------------------------------------
// Separation of build and run in grants
// ---------------------------------------------------------------------------------------------

use l3m_core::axis::Axis;
use l3m_core::budget::{Account, Fuel};
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest, admit_root_spawn, admit_spawn};
use l3m_core::names::AgentName;

fn spawn_req(child: &str, build: bool, run: bool) -> SpawnRequest {
    SpawnRequest {
        child: AgentName::parse(child).unwrap(),
        grant: Grant {
            build,
            run,
            ..Grant::default()
        },
        loan: Fuel::ZERO,
        driven: false,
        persona: None,
        fork: None,
    }
}

proptest! {
    /// An agent never writes a grant holding both `build` and `run`, even when it holds both
    /// itself (a human gave them): it may pass on either, and the refusal names `run`. A human
    /// may grant both.
    #[test]
    fn an_agent_cannot_grant_both_build_and_run(build in any::<bool>(), run in any::<bool>()) {
        let parent = AgentName::parse("alice").unwrap();
        let parent_grant = Grant { spawn: SpawnLevel::Persist, build: true, run: true, ..Grant::default() };
        let req = spawn_req("alice/kid", build, run);
        let decision = admit_spawn(&parent, &parent_grant, &Account::default(), &req);
        if build && run {
            prop_assert_eq!(decision.err().and_then(|e| e.axis()), Some(Axis::Run));
        } else {
            prop_assert!(decision.is_ok());
        }
        prop_assert!(admit_root_spawn(&parent_grant, &spawn_req("bob", build, run)).is_ok());
    }
}

// Vouchers: hubd signs only what the agent's own grant covers; the builder and the runner take
// only requests within what was signed.

use l3m_core::build::{Cover, Uncovered, build_within, grant_covers, run_within};
use l3m_core::grant::AcrPath;
use std::collections::BTreeSet;

fn build_cover(source: &str, hosts: &[&str]) -> Cover {
    Cover::Build {
        source: AcrPath::parse(source).unwrap(),
        lockfile: None,
        hosts: hosts
            .iter()
            .map(|h| HostPattern::parse(h).unwrap())
            .collect(),
    }
}

#[test]
fn hubd_vouches_only_for_what_the_grant_covers_naming_what_it_does_not() {
    let agent = AgentName::parse("alice").unwrap();
    let grant = Grant {
        files: BTreeSet::from([AcrPath::parse("workspace").unwrap()]),
        net: BTreeSet::from([HostPattern::parse("*.debian.org").unwrap()]),
        build: true,
        ..Grant::default()
    };
    let cover = build_cover("workspace/app", &["deb.debian.org"]);
    assert_eq!(grant_covers(&grant, &agent, &cover), Ok(()));
    let refusal = |cover: &Cover| grant_covers(&grant, &agent, cover).unwrap_err().to_string();
    assert!(refusal(&build_cover("agent/app", &[])).contains("`agent/app` lies outside"));
    assert!(refusal(&build_cover("workspace", &["evil.test"])).contains("`evil.test`"));
    let run = Cover::Run {
        artifact: ArtifactDigest::from_bytes([1; 32]),
    };
    assert!(refusal(&run).contains("does not confer `run`"));
    let no_build = Grant {
        build: false,
        run: true,
        ..grant.clone()
    };
    assert!(grant_covers(&no_build, &agent, &run).is_ok());
    let err = grant_covers(&no_build, &agent, &cover).unwrap_err();
    assert_eq!(
        err,
        Uncovered::Axis {
            agent: "alice".into(),
            axis: Axis::Build
        }
    );
}

proptest! {
    /// A request within its voucher is exactly the vouched source, lockfile and artifact, with
    /// every host a fetch reaches within a vouched one; changing any of them refuses it, and a
    /// voucher of one axis never buys the other.
    #[test]
    fn a_request_is_taken_only_within_its_voucher(
        other_source in any::<bool>(),
        other_lockfile in any::<bool>(),
        other_host in any::<bool>(),
        byte in 1u8..255,
    ) {
        let cover = build_cover("workspace/app", &["deb.example"]);
        let mut plan = good_plan();
        plan.stages.truncate(2);
        if other_host {
            plan.stages[0].network = Network::Hosts(vec![HostPattern::parse("evil.example").unwrap()]);
        }
        let source = if other_source { "workspace/other" } else { "workspace/app" };
        let lockfile = other_lockfile.then_some("workspace/app/lock");
        let decision = build_within(&cover, source, lockfile, &plan);
        prop_assert_eq!(decision.is_ok(), !(other_source || other_lockfile || other_host));
        if let Err(e) = decision {
            prop_assert!(e.to_string().contains("the voucher covers a build of workspace/app"), "{}", e);
        }
        let artifact = ArtifactDigest::from_bytes([byte; 32]);
        let run = Cover::Run { artifact: artifact.clone() };
        prop_assert!(run_within(&run, &artifact).is_ok());
        prop_assert!(run_within(&run, &ArtifactDigest::from_bytes([0; 32])).is_err());
        prop_assert!(run_within(&cover, &artifact).is_err());
        prop_assert!(build_within(&run, "workspace/app", None, &plan).is_err());
    }
}
