//! Unit tests of grant elements, containment and the gates.

use super::*;
use crate::budget::FuelUnit;

fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

fn path(s: &str) -> AcrPath {
    AcrPath::parse(s).unwrap()
}

fn prefix(s: &str) -> RefPrefix {
    RefPrefix::parse(s).unwrap()
}

fn host(s: &str) -> HostPattern {
    HostPattern::parse(s).unwrap()
}

fn reason_of(e: GrantError) -> String {
    e.to_string()
}

#[test]
fn bad_paths_are_refused_with_the_rule() {
    for (bad, rule) in [
        ("", "empty"),
        ("/workspace", "absolute"),
        ("workspace/../x", "`..`"),
        ("..", "`..`"),
        ("./workspace", "`.` component"),
        ("workspace//src", "empty component"),
        ("workspace/", "empty component"),
        (".l3m", "harness"),
        (".l3m/tokens", "harness"),
        (".L3M/tokens", "harness"),
        ("workspace\\x", "'\\\\'"),
        ("work\nspace", "'\\n'"),
    ] {
        let err = AcrPath::parse(bad).unwrap_err();
        assert!(
            matches!(&err, GrantError::BadPath { path, .. } if path == bad),
            "{bad:?}: {err}"
        );
        assert!(
            reason_of(err).contains(rule),
            "{bad:?} should mention {rule}"
        );
    }
    assert!(AcrPath::parse(&"a/".repeat(2100)).is_err());
    // `.l3m` is the harness's only at the ACR root.
    assert!(AcrPath::parse("workspace/.l3m").is_ok());
    assert!(AcrPath::parse(".l3mx").is_ok());
}

#[test]
fn roots_contain_component_wise() {
    assert!(path("workspace/src").is_at_or_under(&path("workspace")));
    assert!(path("workspace/src").is_at_or_under(&path("workspace/src")));
    assert!(!path("workspace/srcx").is_at_or_under(&path("workspace/src")));
    assert!(!path("workspace").is_at_or_under(&path("workspace/src")));
    assert!(!path("agent").is_at_or_under(&path("workspace")));
}

#[test]
fn bad_ref_prefixes_are_refused_with_the_rule() {
    for (bad, rule) in [
        ("heads/main", "start with `refs/`"),
        ("refs/heads/../x", "`..`"),
        ("refs/heads/a b", "' '"),
        ("refs/heads/a\tb", "'\\t'"),
        ("refs/heads/a\u{7f}", "'\\u{7f}'"),
        ("refs/heads/a~1", "'~'"),
        ("refs/heads/a^", "'^'"),
        ("refs/heads/a:b", "':'"),
        ("refs/heads/*", "'*'"),
        ("refs/heads/x@{1}", "`@{`"),
        ("refs//heads", "empty component"),
        ("refs/heads/.hidden", "starts with `.`"),
        ("refs/heads/main.lock", "`.lock`"),
        ("refs/heads/main.", "ends with `.`"),
    ] {
        let err = RefPrefix::parse(bad).unwrap_err();
        assert!(
            matches!(&err, GrantError::BadRefPrefix { prefix, .. } if prefix == bad),
            "{bad:?}: {err}"
        );
        assert!(
            reason_of(err).contains(rule),
            "{bad:?} should mention {rule}"
        );
    }
    assert!(RefPrefix::parse("refs/").is_ok());
    assert!(RefPrefix::parse("refs/heads/main").is_ok());
}

#[test]
fn ref_prefixes_contain_at_slash_boundaries() {
    let heads = prefix("refs/heads/");
    assert!(prefix("refs/heads/main").within(&heads));
    assert!(prefix("refs/heads/l3m/").within(&heads));
    assert!(!prefix("refs/headsx/main").within(&heads));
    assert!(!prefix("refs/heads").within(&heads));
    // An exact ref confers only itself.
    let main = prefix("refs/heads/main");
    assert!(main.within(&main));
    assert!(!prefix("refs/heads/main/x").within(&main));
    assert!(!prefix("refs/heads/mainline").within(&main));
    assert!(heads.matches("refs/heads/x") && !main.matches("refs/heads/mainx"));
}

#[test]
fn layout_prefixes_are_valid_ref_prefixes() {
    for name in ["alice", "alice/main/worker-2"] {
        let a = agent(name);
        for p in [refs::subtree_prefix(&a), refs::branch_prefix(&a)] {
            assert_eq!(RefPrefix::parse(&p).unwrap(), RefPrefix::from_layout(p));
        }
    }
}

#[test]
fn bad_remotes_are_refused() {
    for bad in ["", "-x", ".x", "a b", "a/b", "a..b", "origin.lock"] {
        assert!(
            matches!(RemoteName::parse(bad), Err(GrantError::BadRemote { remote, .. }) if remote == bad),
            "{bad:?}"
        );
    }
    assert!(RemoteName::parse(&"o".repeat(101)).is_err());
    assert!(RemoteName::parse("my_Remote-2.x").is_ok());
}

#[test]
fn bad_hosts_are_refused_with_the_rule() {
    for (bad, rule) in [
        ("", "empty"),
        ("*", "bare `*`"),
        ("example.com.", "trailing dot"),
        ("user@example.com", "userinfo"),
        ("https://example.com", "URL"),
        ("example.com:443", "ports"),
        ("[::1]", "ports"),
        ("GitHub.com", "\"github.com\""),
        ("a.*.example.com", "whole first label"),
        ("*example.com", "whole first label"),
        ("*.*.example.com", "whole first label"),
        ("a..example.com", "empty label"),
        (".example.com", "empty label"),
        ("-a.example.com", "'-'"),
        ("a_b.example.com", "'_'"),
        ("*.", "empty"),
    ] {
        let err = HostPattern::parse(bad).unwrap_err();
        assert!(
            matches!(&err, GrantError::BadHost { host, .. } if host == bad),
            "{bad:?}: {err}"
        );
        assert!(
            reason_of(err).contains(rule),
            "{bad:?} should mention {rule}"
        );
    }
    assert!(HostPattern::parse(&format!("{}.com", "a".repeat(64))).is_err());
    assert!(HostPattern::parse(&["a"; 130].join(".")).is_err());
    assert!(HostPattern::parse("localhost").is_ok());
    assert!(HostPattern::parse("127.0.0.1").is_ok());
}

#[test]
fn host_patterns_match_and_contain() {
    let any = host("*.example.com");
    assert!(any.matches("a.example.com") && any.matches("a.b.example.com"));
    assert!(
        any.matches("A.Example.COM"),
        "requests compare case-insensitively"
    );
    assert!(!any.matches("example.com") && !any.matches("aexample.com"));
    assert!(host("a.example.com").within(&any));
    assert!(host("*.x.example.com").within(&any));
    assert!(any.within(&any));
    assert!(!any.within(&host("a.example.com")));
    assert!(!host("*.example.com").within(&host("*.x.example.com")));
    assert!(!host("example.com").within(&any));
    assert!(!host("a.example.org").within(&host("a.example.com")));
}

#[test]
fn mail_covers_parse_cover_and_contain() {
    let sub = MailCover::parse("subtree:alice/main").unwrap();
    assert!(sub.covers(&Entity::parse("alice/main").unwrap()));
    assert!(sub.covers(&Entity::parse("alice/main/w").unwrap()));
    assert!(!sub.covers(&Entity::parse("alice/mainx").unwrap()));
    assert!(!sub.covers(&Entity::parse("alice").unwrap()));
    let bob = MailCover::parse("human:bob").unwrap();
    assert!(bob.covers(&Entity::parse("human:bob").unwrap()));
    assert!(!bob.covers(&Entity::parse("svc:bob").unwrap()));
    let office = MailCover::parse("office:far").unwrap();
    assert!(office.covers_office(&OfficeName::parse("far").unwrap()));
    assert!(!office.covers(&Entity::parse("far").unwrap()));

    let leaf = MailCover::parse("agent:alice/main/w").unwrap();
    assert!(leaf.within(&sub));
    assert!(
        MailCover::parse("subtree:alice/main/w")
            .unwrap()
            .within(&sub)
    );
    assert!(!sub.within(&MailCover::parse("agent:alice/main").unwrap()));
    assert!(!sub.within(&MailCover::parse("subtree:alice/main/w").unwrap()));

    for bad in ["alice", "robot:x", "agent:Alice", "subtree:", "office:a/b"] {
        assert!(
            matches!(MailCover::parse(bad), Err(GrantError::BadMailCover { cover, .. }) if cover == bad),
            "{bad:?}"
        );
    }
    for s in ["subtree:a/b", "agent:a", "human:h", "svc:s", "office:o"] {
        assert_eq!(MailCover::parse(s).unwrap().to_string(), s);
    }
}

#[test]
fn default_mail_is_own_subtree_and_ancestor_inboxes() {
    let mail = default_mail(&agent("alice/main/w"));
    let want: BTreeSet<MailCover> = ["subtree:alice/main/w", "agent:alice/main", "agent:alice"]
        .into_iter()
        .map(|s| MailCover::parse(s).unwrap())
        .collect();
    assert_eq!(mail, want);
    let sibling = Entity::parse("alice/main/v").unwrap();
    assert!(
        !mail.iter().any(|c| c.covers(&sibling)),
        "siblings cannot mail each other"
    );
}

#[test]
fn bad_wild_classes_are_refused() {
    for bad in ["", "Shell", "1x", "a b"] {
        assert!(
            matches!(WildClass::parse(bad), Err(GrantError::BadWildClass { class, .. }) if class == bad),
            "{bad:?}"
        );
    }
    assert!(WildClass::parse("aws").is_ok());
}

#[test]
fn lifetimes_order_by_deadline() {
    assert!(Lifetime::Until(5).within(&Lifetime::Until(5)));
    assert!(Lifetime::Until(4).within(&Lifetime::Until(5)));
    assert!(!Lifetime::Until(6).within(&Lifetime::Until(5)));
    assert!(Lifetime::Until(6).within(&Lifetime::Unbounded));
    assert!(!Lifetime::Unbounded.within(&Lifetime::Until(5)));
    assert!(Lifetime::Until(5).is_alive_at(4) && !Lifetime::Until(5).is_alive_at(5));
}

fn sample_grant() -> Grant {
    let mut g = Grant {
        files: [path("workspace")].into(),
        git_read: [prefix("refs/heads/")].into(),
        git_write: [prefix("refs/heads/l3m/alice/")].into(),
        net: [host("*.github.com")].into(),
        mail: [MailCover::parse("human:bob").unwrap()].into(),
        spawn: SpawnLevel::Drive,
        airmail: [OfficeName::parse("far").unwrap()].into(),
        wild: [WildClass::parse("shell").unwrap()].into(),
        build: true,
        lifetime: Lifetime::Until(1_000),
        ..Grant::default()
    };
    g.git_push.insert(
        RemoteName::parse("origin").unwrap(),
        [prefix("refs/heads/l3m/alice/")].into(),
    );
    g
}

#[test]
fn within_names_the_first_wider_axis_and_the_element() {
    let bound = sample_grant();
    assert_eq!(bound.within(&bound), Ok(()));
    assert_eq!(Grant::default().within(&Grant::default()), Ok(()));

    let mut g = bound.clone();
    g.net.insert(host("evil.example"));
    g.run = true;
    let w = g.within(&bound).unwrap_err();
    assert_eq!(w.axis, Axis::Net, "net comes before run in Axis::ALL");
    assert!(w.detail.contains("evil.example"), "{}", w.detail);
    assert!(w.to_string().contains("`net`"), "{w}");

    let mut g = bound.clone();
    g.files.insert(path("workspacex"));
    let w = g.within(&bound).unwrap_err();
    assert_eq!(w.axis, Axis::Files);
    assert!(w.detail.contains("workspacex"), "{}", w.detail);

    let mut g = bound.clone();
    g.git_push.insert(
        RemoteName::parse("upstream").unwrap(),
        [prefix("refs/heads/main")].into(),
    );
    let w = g.within(&bound).unwrap_err();
    assert_eq!(w.axis, Axis::GitPush);
    assert!(w.detail.contains("upstream") && w.detail.contains("refs/heads/main"));

    let mut g = bound.clone();
    g.spawn = SpawnLevel::Persist;
    let w = g.within(&bound).unwrap_err();
    assert_eq!(w.axis, Axis::Spawn);
    assert!(
        w.detail.contains("persist") && w.detail.contains("drive"),
        "{}",
        w.detail
    );

    let mut g = bound.clone();
    g.lifetime = Lifetime::Unbounded;
    assert_eq!(g.within(&bound).unwrap_err().axis, Axis::Lifetime);
}

#[test]
fn expand_own_adds_own_refs_and_mail() {
    let a = agent("alice/main");
    let g = Grant::default().expand_own(&a);
    assert!(g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/main/_/log"))));
    assert!(g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/main/w/_/log"))));
    assert!(!g.allows(&Probe::GitWrite(prefix("refs/l3m/a/alice/main/_/log"))));
    assert!(g.allows(&Probe::GitWrite(prefix("refs/heads/l3m/alice/main/_/work"))));
    assert!(!g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/_/log"))));
    assert!(g.allows(&Probe::Mail(Entity::parse("alice").unwrap())));
    assert!(g.allows(&Probe::Mail(Entity::parse("alice/main/w").unwrap())));
    assert!(!g.allows(&Probe::Mail(Entity::parse("alice/other").unwrap())));
    let chain = [agent("alice/main"), agent("alice")];
    let all = Grant::default().expand_own_all(&chain);
    assert!(all.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/x/_/log"))));
}

#[test]
fn grants_serialise_with_axis_names_and_refuse_unknown_keys() {
    let g = sample_grant();
    let json = serde_json::to_value(&g).unwrap();
    for axis in Axis::ALL.into_iter().filter(|a| *a != Axis::Budget) {
        assert!(json.get(axis.as_str()).is_some(), "missing key {axis}");
    }
    assert_eq!(json["net"][0], "*.github.com");
    assert_eq!(json["lifetime"]["until"], 1_000);
    let back: Grant = serde_json::from_value(json).unwrap();
    assert_eq!(back, g);

    let sparse: Grant = serde_json::from_str(r#"{"files":["workspace"]}"#).unwrap();
    assert_eq!(sparse.spawn, SpawnLevel::Off);
    assert_eq!(sparse.lifetime, Lifetime::Unbounded);
    let err = serde_json::from_str::<Grant>(r#"{"fiels":["workspace"]}"#).unwrap_err();
    assert!(err.to_string().contains("fiels"), "{err}");
    let err = serde_json::from_str::<Grant>(r#"{"net":["GitHub.com"]}"#).unwrap_err();
    assert!(err.to_string().contains("github.com"), "{err}");
}

#[test]
fn grant_file_examples_are_checked() {
    let file: GrantFile = serde_json::from_str(
        r#"{
            "grant": {"files": ["workspace"], "net": ["*.github.com"], "build": true,
                      "git-push": {"origin": ["refs/heads/l3m/alice/"]}},
            "examples": {
                "allow": [{"net": "api.github.com"}, {"file": "workspace/src/lib.rs"}, "build",
                          {"git-push": {"remote": "origin", "refname": "refs/heads/l3m/alice/x"}}],
                "deny": [{"net": "github.com"}, {"file": "agent/persona.md"}, "run",
                         {"mail": "human:bob"}, {"spawn": "drive"}]
            }
        }"#,
    )
    .unwrap();
    assert_eq!(file.check(), Ok(()));

    let mut wrong = file.clone();
    wrong.examples.allow.push(Probe::Net(host("github.com")));
    let err = wrong.check().unwrap_err();
    assert!(
        matches!(
            &err,
            GrantError::ExampleFails {
                list: ExampleList::Allow,
                index: 4,
                verdict: "refuses",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("reach github.com"), "{err}");

    let mut wrong = file;
    wrong.examples.deny.push(Probe::Build);
    let err = wrong.check().unwrap_err();
    assert!(matches!(
        err,
        GrantError::ExampleFails {
            list: ExampleList::Deny,
            index: 5,
            verdict: "allows",
            ..
        }
    ));
    assert!(serde_json::from_str::<GrantFile>(r#"{"grant": {}, "exmaples": {}}"#).is_err());
}

/// Confers nothing, with the same deadline as [`sample_grant`] (an omitted lifetime is
/// unbounded, which no grant with a deadline contains).
fn nothing() -> Grant {
    Grant {
        lifetime: Lifetime::Until(1_000),
        ..Grant::default()
    }
}

fn request(child: &str, grant: Grant, loan: Fuel, driven: bool) -> SpawnRequest {
    SpawnRequest {
        child: agent(child),
        grant,
        loan,
        driven,
        persona: None,
        fork: None,
    }
}

fn fuel(model_calls: u64, bytes: u64, wakes: u64) -> Fuel {
    Fuel {
        model_calls,
        bytes,
        wakes,
    }
}

#[test]
fn spawn_refusals_name_the_problem_and_the_fix() {
    let parent = agent("alice");
    let mut pg = sample_grant();
    pg.spawn = SpawnLevel::Persist;
    let account = Account::new(fuel(10, 100, 1));
    let ok = request("alice/w", nothing(), fuel(5, 50, 1), false);
    let admitted = admit_spawn(&parent, &pg, &account, &ok).unwrap();
    assert_eq!(admitted.child_account, Account::new(fuel(5, 50, 1)));
    assert_eq!(admitted.parent_account.unwrap().left(), fuel(5, 50, 0));

    let grandchild = request("alice/w/x", nothing(), Fuel::ZERO, false);
    let err = admit_spawn(&parent, &pg, &account, &grandchild).unwrap_err();
    assert!(matches!(err, SpawnRefusal::NotAChild { .. }) && err.axis().is_none());
    assert!(err.to_string().contains("alice/<segment>"), "{err}");

    let mut off = pg.clone();
    off.spawn = SpawnLevel::Off;
    let err = admit_spawn(&parent, &off, &account, &ok).unwrap_err();
    assert_eq!(err.axis(), Some(Axis::Spawn));
    assert!(err.to_string().contains("`drive` or `persist`"), "{err}");

    let mut drive = pg.clone();
    drive.spawn = SpawnLevel::Drive;
    let err = admit_spawn(&parent, &drive, &account, &ok).unwrap_err();
    assert!(matches!(err, SpawnRefusal::DriveOnly { .. }), "{err}");
    assert!(err.to_string().contains("set `driven`"), "{err}");
    let driven = request("alice/w", nothing(), Fuel::ZERO, true);
    assert!(admit_spawn(&parent, &drive, &account, &driven).is_ok());

    let mut wide = ok.clone();
    wide.grant.net.insert(host("evil.example"));
    let err = admit_spawn(&parent, &pg, &account, &wide).unwrap_err();
    assert_eq!(err.axis(), Some(Axis::Net));
    assert!(err.to_string().contains("evil.example"), "{err}");

    let greedy = request("alice/w", nothing(), fuel(5, 101, 9), false);
    let err = admit_spawn(&parent, &pg, &account, &greedy).unwrap_err();
    assert_eq!(err.axis(), Some(Axis::Budget));
    match &err {
        SpawnRefusal::Overdraft { error, .. } => {
            assert_eq!(
                error.unit(),
                FuelUnit::Bytes,
                "bytes is the first unit short"
            );
        }
        other => panic!("expected an overdraft, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains("101 bytes") && text.contains("100"), "{text}");
}

#[test]
fn root_spawns_are_roots_within_the_human_grant() {
    let human = sample_grant();
    let root = request("alice", nothing(), fuel(1_000, 0, 0), false);
    let admitted = admit_root_spawn(&human, &root).unwrap();
    assert_eq!(admitted.parent_account, None);
    assert_eq!(admitted.child_account.left(), fuel(1_000, 0, 0));
    let deep = request("alice/w", nothing(), Fuel::ZERO, false);
    let err = admit_root_spawn(&human, &deep).unwrap_err();
    assert!(matches!(err, SpawnRefusal::NotARoot { .. }), "{err}");
    let mut wide = root;
    wide.grant.run = true;
    assert_eq!(
        admit_root_spawn(&human, &wide).unwrap_err().axis(),
        Some(Axis::Run)
    );
}

#[test]
fn regrant_refusals_name_the_problem() {
    let issuer = Entity::parse("alice").unwrap();
    let g = sample_grant();
    let child = agent("alice/w");
    assert_eq!(admit_regrant(&issuer, Some(&g), &child, &g), Ok(()));
    let own = nothing().expand_own(&agent("alice"));
    assert_eq!(admit_regrant(&issuer, Some(&g), &child, &own), Ok(()));

    let err = admit_regrant(&issuer, Some(&g), &agent("alice"), &g).unwrap_err();
    assert!(matches!(err, RegrantRefusal::OwnGrant { .. }), "{err}");
    assert!(err.to_string().contains("never by the entity"), "{err}");
    let err = admit_regrant(&issuer, Some(&g), &agent("bob/w"), &g).unwrap_err();
    assert!(matches!(err, RegrantRefusal::NotAnAncestor { .. }), "{err}");
    let err = admit_regrant(
        &Entity::parse("alice/w").unwrap(),
        Some(&g),
        &agent("alice"),
        &g,
    )
    .unwrap_err();
    assert!(matches!(err, RegrantRefusal::NotAnAncestor { .. }), "{err}");
    let err = admit_regrant(&issuer, None, &child, &g).unwrap_err();
    assert!(
        matches!(err, RegrantRefusal::IssuerWithoutGrant { .. }),
        "{err}"
    );
    let err = admit_regrant(
        &Entity::parse("svc:postmaster").unwrap(),
        Some(&g),
        &child,
        &g,
    )
    .unwrap_err();
    assert!(matches!(err, RegrantRefusal::ServiceIssuer { .. }), "{err}");

    let mut wide = g.clone();
    wide.review = true;
    let err = admit_regrant(&issuer, Some(&g), &child, &wide).unwrap_err();
    assert!(
        matches!(&err, RegrantRefusal::Widening(w) if w.axis == Axis::Review),
        "{err}"
    );

    let human = Entity::parse("human:alice").unwrap();
    assert_eq!(admit_regrant(&human, None, &agent("alice"), &wide), Ok(()));
}
