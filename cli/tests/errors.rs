//! Each way a command can be pointed at nothing: a clear message and the documented exit code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use predicates::prelude::*;

#[test]
fn no_document_is_not_found_and_says_to_init() {
    let home = Home::new();
    home.l3m(&["ls"]).assert().code(3).stderr(
        predicate::str::contains("no l3m.toml").and(predicate::str::contains("run `l3m init`")),
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    let home = Home::new();
    home.l3m(&["spawn"]).assert().code(2);
    home.l3m(&["spawn", "x", "--spawn", "sometimes"])
        .assert()
        .code(2);
    home.l3m(&["frobnicate"]).assert().code(2);
    home.l3m(&["init"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--human"));
}

#[test]
fn an_unknown_hub_and_a_missing_hub_folder_are_not_found() {
    let home = Home::new();
    home.init();
    home.l3m(&["--hub", "far", "ls"]).assert().code(3).stderr(
        predicate::str::contains("no hub named `far`").and(predicate::str::contains("local")),
    );
    std::fs::remove_dir_all(home.hub_root()).unwrap();
    home.l3m(&["ls"]).assert().code(3).stderr(
        predicate::str::contains("no hub at").and(predicate::str::contains("run `l3m init`")),
    );
}

#[test]
fn a_stack_that_is_not_up_is_exit_5() {
    let home = Home::new();
    home.init();
    for args in [
        &["ls"][..],
        &["say", "demo", "hi"],
        &["down"],
        &["tree", "--json"],
    ] {
        home.l3m(args).assert().code(5).stderr(
            predicate::str::contains("the stack is not up")
                .and(predicate::str::contains("run `l3m up`")),
        );
    }
    // A run file whose NATS is gone is the stack being down too.
    std::fs::create_dir_all(home.hub_root().join(".l3m-run")).unwrap();
    std::fs::write(
        home.hub_root().join(".l3m-run/stack.toml"),
        "nats = \"nats://127.0.0.1:9\"\nhub_id = \"local\"\nstarted_at_ms = 0\n",
    )
    .unwrap();
    home.l3m(&["ls"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("cannot reach NATS"));
}

#[test]
fn a_malformed_document_names_file_line_and_key() {
    let home = Home::new();
    std::fs::write(
        home.path().join("l3m.toml"),
        "human = \"alice\"\n\n[hubs.local]\nroot = \"/x\"\nhub_id = 7\n",
    )
    .unwrap();
    home.l3m(&["ls"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("l3m.toml:5: `hubs.local.hub_id`"));
}

#[test]
fn init_twice_under_one_name_is_refused_and_keeps_the_document() {
    let home = Home::new();
    home.init();
    let before = std::fs::read_to_string(home.path().join("l3m.toml")).unwrap();
    home.l3m(&["init", "--human", "alice"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already names a hub `local`"));
    home.l3m(&["--hub", "second", "init", "--human", "bob"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("says you are `alice`"));
    assert_eq!(
        std::fs::read_to_string(home.path().join("l3m.toml")).unwrap(),
        before
    );
    home.l3m(&["--hub", "second", "init"]).assert().success();
    let doc = std::fs::read_to_string(home.path().join("l3m.toml")).unwrap();
    assert!(
        doc.starts_with(&before) && doc.contains("[hubs.second]"),
        "{doc}"
    );
}

/// A copy of `l3m` alone in a folder, with only `extra` beside it and an empty PATH.
fn lonely_l3m(dir: &std::path::Path, extra: &[(&str, &str)]) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.join("l3m");
    std::fs::copy(assert_cmd::cargo::cargo_bin("l3m"), &copy).unwrap();
    for (name, script) in extra {
        let path = dir.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

#[test]
fn up_without_a_service_binary_says_how_to_get_it_and_starts_nothing() {
    let home = Home::new();
    home.init();
    let bin = tempfile::tempdir().unwrap();
    let l3m = lonely_l3m(bin.path(), &[]);
    home.l3m_at(&l3m, &["up", "--services", "hubd"])
        .env("PATH", bin.path())
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cannot find the `hubd` binary")
                .and(predicate::str::contains("cargo build -p hubd")),
        );
    assert!(home.run_file().is_none());
}

#[test]
fn a_service_that_dies_at_start_stops_the_rest_and_shows_its_log() {
    build_services();
    let home = Home::new();
    home.init();
    let bin = tempfile::tempdir().unwrap();
    let hubd = assert_cmd::cargo::cargo_bin("l3m").with_file_name("hubd");
    let l3m = lonely_l3m(
        bin.path(),
        &[
            (
                "hubd",
                &format!("#!/bin/sh\nexec {} \"$@\"\n", hubd.display()),
            ),
            (
                "sequencer",
                "#!/bin/sh\necho 'no such subcommand: supervise' >&2\nexit 2\n",
            ),
        ],
    );
    let _guard = StackGuard { home: &home };
    home.l3m_at(&l3m, &["up"])
        .env("PATH", bin.path())
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("sequencer exited")
                .and(predicate::str::contains("no such subcommand: supervise")),
        );
    assert!(
        home.run_file().is_none(),
        "no run file for a stack that did not come up"
    );
    // Nothing of the half-started stack is left listening: a fresh up succeeds.
    let stack = home.up();
    drop(stack);
}
