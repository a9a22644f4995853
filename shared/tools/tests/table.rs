//! The tool table: build-time refusals, what each grant is offered, and what each call becomes.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, EffectError, Footprint, Reversibility, Tier, ToolDecl};
use l3m_ring::effects::{EffectsError, Granted};
use l3m_tools::{Dispatch, TableError, Tool, ToolError, ToolOutput, ToolTable, builtin};
use serde_json::{Value, json};
use support::{Acr, run};

const BUILTIN: [&str; 11] = [
    "edit_file",
    "list_dir",
    "make_dir",
    "now",
    "read_file",
    "read_letter",
    "remove_file",
    "search_files",
    "unwatch",
    "watch",
    "write_file",
];

/// A test tool with a given declaration whose body records that it ran and, if it may, writes
/// a file: so a test can prove it did not run.
struct Probe {
    name: &'static str,
    classes: Vec<EffectClass>,
    claims: Reversibility,
    ran: Arc<AtomicBool>,
}

impl Probe {
    /// `probe_fetch`: a bounded net tool.
    fn fetch(ran: &Arc<AtomicBool>) -> Self {
        Self::new(
            "probe_fetch",
            vec![EffectClass::Net],
            Reversibility::Bounded,
            ran,
        )
    }

    /// `probe_shell`: a wild tool whose body would write into the workspace.
    fn shell(ran: &Arc<AtomicBool>) -> Self {
        let classes = vec![EffectClass::FsWrite, EffectClass::Shell];
        Self::new("probe_shell", classes, Reversibility::Wild, ran)
    }

    /// `probe_airmail`: a bounded airmail tool (no airmail provider exists in the ring).
    fn airmail(ran: &Arc<AtomicBool>) -> Self {
        Self::new(
            "probe_airmail",
            vec![EffectClass::Airmail],
            Reversibility::Bounded,
            ran,
        )
    }

    fn new(
        name: &'static str,
        classes: Vec<EffectClass>,
        claims: Reversibility,
        ran: &Arc<AtomicBool>,
    ) -> Self {
        Self {
            name,
            classes,
            claims,
            ran: Arc::clone(ran),
        }
    }
}

impl Tool for Probe {
    fn decl(&self) -> ToolDecl {
        ToolDecl {
            name: self.name.into(),
            footprint: Footprint::of(self.classes.clone()),
            claims: self.claims,
        }
    }

    fn description(&self) -> &str {
        "a probe"
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"command": {"type": "string"}}})
    }

    fn effect(&self, input: &Value) -> String {
        format!(
            "runs {} in a shell: may change anything the process can reach",
            input["command"]
        )
    }

    fn call(&self, _input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        self.ran.store(true, Ordering::SeqCst);
        fx.fs_write()?.write("workspace/pwned", b"ran")?;
        Ok(ToolOutput::text("ran"))
    }
}

fn tools(ran: &Arc<AtomicBool>) -> Vec<Box<dyn Tool>> {
    let mut all = builtin();
    all.push(Box::new(Probe::fetch(ran)));
    all.push(Box::new(Probe::shell(ran)));
    all.push(Box::new(Probe::airmail(ran)));
    all
}

fn axes(list: &[Axis]) -> BTreeSet<Axis> {
    list.iter().copied().collect()
}

fn offered(table: &ToolTable) -> Vec<(String, Tier)> {
    table.offered().map(|o| (o.name.clone(), o.tier)).collect()
}

#[test]
fn offers_exactly_the_tools_the_grant_covers() {
    let ran = Arc::new(AtomicBool::new(false));
    let cases: [(&[Axis], &[&str]); 10] = [
        (&[], &[]),
        (&[Axis::Files, Axis::Mail], &["send_letter"]),
        (&[Axis::Net], &["fetch_url", "probe_fetch"]),
        (&[Axis::Wild], &["probe_shell", "shell"]),
        (
            &[Axis::Net, Axis::Wild],
            &["fetch_url", "probe_fetch", "probe_shell", "shell"],
        ),
        (&[Axis::GitRead], &["git_diff", "git_log", "git_status"]),
        (&[Axis::GitWrite], &["git_commit"]),
        (&[Axis::GitPush], &["git_push"]),
        (
            &[Axis::Spawn, Axis::Airmail],
            &["probe_airmail", "spawn_agent"],
        ),
        (&[Axis::Build, Axis::Run], &["build", "make", "run"]),
    ];
    for (grant, extra) in cases {
        let table = ToolTable::build(tools(&ran), &axes(grant)).unwrap();
        let mut want: Vec<(String, Tier)> = BUILTIN
            .iter()
            .map(|n| (n.to_string(), Tier::Tame))
            .collect();
        for name in extra {
            let tier = if ["probe_shell", "shell"].contains(name) {
                Tier::Wild
            } else {
                Tier::Tame
            };
            want.push((name.to_string(), tier));
        }
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(offered(&table), want, "grant {grant:?}");
    }
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn a_tool_the_grant_does_not_cover_is_absent_like_an_unknown_one() {
    let acr = Acr::new();
    let fx = acr.effects(true);
    let ran = Arc::new(AtomicBool::new(false));
    let table = ToolTable::build(tools(&ran), &axes(&[])).unwrap();
    for name in [
        "probe_fetch",
        "probe_shell",
        "fetch_url",
        "shell",
        "no_such_tool",
    ] {
        match table.dispatch(name, json!({"command": "curl x"}), &fx) {
            Dispatch::Absent { name: got } => assert_eq!(got, name),
            other => panic!("`{name}` should be absent, got {other:?}"),
        }
    }
    assert!(!ran.load(Ordering::SeqCst), "an absent tool never runs");
    assert!(!acr.exists("workspace/pwned"));
}

#[test]
fn an_over_claiming_tool_is_refused_at_build_naming_the_class() {
    let ran = Arc::new(AtomicBool::new(false));
    let liar = Probe::new(
        "fetch_and_forget",
        vec![EffectClass::FsRead, EffectClass::Net],
        Reversibility::RoundTrip,
        &ran,
    );
    let mut all = builtin();
    all.push(Box::new(liar));
    // Refused even though the grant would not offer it: a bad declaration is a bug, not a gap.
    let err = ToolTable::build(all, &axes(&[])).unwrap_err();
    match &err {
        TableError::OverClaim(EffectError::OverClaim {
            tool,
            claimed,
            allowed,
            class,
        }) => {
            assert_eq!(tool, "fetch_and_forget");
            assert_eq!(*claimed, Reversibility::RoundTrip);
            assert_eq!(*allowed, Reversibility::Bounded);
            assert_eq!(class, "net");
        }
        other => panic!("expected an over-claim, got {other}"),
    }
    assert!(err.to_string().contains("net"), "{err}");

    let shell_as_tame = Probe::new("sh", vec![EffectClass::Shell], Reversibility::Bounded, &ran);
    let err = ToolTable::build(vec![Box::new(shell_as_tame)], &axes(&[Axis::Wild])).unwrap_err();
    assert!(err.to_string().contains("shell"), "{err}");
}

#[test]
fn two_tools_with_one_name_are_refused() {
    let mut all = builtin();
    all.push(Box::new(l3m_tools::files::ReadFile));
    let err = ToolTable::build(all, &axes(&[])).unwrap_err();
    assert!(
        matches!(&err, TableError::DuplicateName { name } if name == "read_file"),
        "{err}"
    );
}

#[test]
fn a_wild_call_becomes_a_card_and_nothing_runs() {
    let acr = Acr::new();
    let fx = acr.effects(true);
    let ran = Arc::new(AtomicBool::new(false));
    let table = ToolTable::build(tools(&ran), &axes(&[Axis::Wild])).unwrap();
    let before = acr.snapshot();
    let input = json!({"command": "rm -rf workspace"});
    let card = match table.dispatch("probe_shell", input.clone(), &fx) {
        Dispatch::NeedsReview(card) => card,
        other => panic!("a wild call must wait for review, got {other:?}"),
    };
    assert_eq!(card.tool, "probe_shell");
    assert_eq!(card.input, input);
    assert_eq!(
        card.footprint,
        Footprint::of([EffectClass::FsWrite, EffectClass::Shell])
    );
    assert_eq!(
        card.effect,
        "runs \"rm -rf workspace\" in a shell: may change anything the process can reach"
    );
    assert!(!ran.load(Ordering::SeqCst), "the wild body never ran");
    assert_eq!(
        acr.snapshot(),
        before,
        "the file system, journal included, is unchanged"
    );
    assert!(acr.entries().is_empty());
}

#[test]
fn a_covered_class_with_no_provider_fails_without_running() {
    let acr = Acr::new();
    let fx = acr.effects(true);
    let ran = Arc::new(AtomicBool::new(false));
    let table = ToolTable::build(tools(&ran), &axes(&[Axis::Airmail, Axis::Net])).unwrap();
    let err = run(&table, &fx, "probe_airmail", json!({})).unwrap_err();
    assert!(
        matches!(
            err,
            ToolError::Effects(EffectsError::NoProvider {
                class: EffectClass::Airmail
            })
        ),
        "{err}"
    );
    // Net has a provider, but this session was minted no net token.
    let err = run(&table, &fx, "probe_fetch", json!({})).unwrap_err();
    assert!(
        matches!(
            err,
            ToolError::Effects(EffectsError::MissingAxis {
                class: EffectClass::Net,
                axis: Axis::Net
            })
        ),
        "{err}"
    );
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn file_tools_without_a_files_token_fail_naming_the_axis() {
    let acr = Acr::new();
    let fx = acr.effects(false);
    let table = ToolTable::build(builtin(), &axes(&[])).unwrap();
    let before = acr.snapshot();
    for (name, input) in [
        ("read_file", json!({"path": "workspace/README.md"})),
        ("write_file", json!({"path": "workspace/x", "content": "x"})),
    ] {
        let err = run(&table, &fx, name, input).unwrap_err();
        assert!(
            matches!(
                err,
                ToolError::Effects(EffectsError::MissingAxis {
                    axis: Axis::Files,
                    ..
                })
            ),
            "{name}: {err}"
        );
    }
    assert_eq!(acr.snapshot(), before);
    assert!(
        run(&table, &fx, "now", json!({})).is_ok(),
        "the clock needs no axis"
    );
}

#[test]
fn offered_tools_show_a_schema_and_their_computed_tier() {
    let table = ToolTable::build(builtin(), &axes(&[])).unwrap();
    for tool in table.offered() {
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
        assert_eq!(
            tool.input_schema["additionalProperties"], false,
            "{}",
            tool.name
        );
        assert!(!tool.description.is_empty());
        let shown = serde_json::to_value(tool).unwrap();
        assert_eq!(shown["tier"], "tame");
    }
}

#[test]
fn an_approved_wild_call_gets_no_effect_the_session_was_not_given() {
    // The table offers the wild tool, but the session's effects hold no wild token: an approval
    // adds no authority, so the reviewed call is refused before its body runs.
    let acr = Acr::new();
    let fx = acr.effects(true);
    let ran = Arc::new(AtomicBool::new(false));
    let table = ToolTable::build(tools(&ran), &axes(&[Axis::Wild])).unwrap();
    let before = acr.snapshot();
    match table.dispatch_reviewed("probe_shell", json!({"command": "true"}), &fx) {
        Dispatch::Ran(Err(ToolError::Effects(_))) => {}
        other => panic!("an approved call must still need its effects, got {other:?}"),
    }
    assert!(!ran.load(Ordering::SeqCst), "the wild body never ran");
    assert_eq!(acr.snapshot(), before);
    assert!(matches!(
        table.dispatch_reviewed("nope", json!({}), &fx),
        Dispatch::Absent { .. }
    ));
    assert_eq!(
        table
            .effect("probe_shell", &json!({"command": "ls"}))
            .as_deref(),
        Some("runs \"ls\" in a shell: may change anything the process can reach")
    );
}
