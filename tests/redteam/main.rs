//! Adversarial tests of the capability ring's newer surfaces (git, mail, spawn, the tool table).
//! Each test is named after the boundary that stops the attack, and checks the world is
//! unchanged afterwards. The ring's own redteam tests for files, net and the shell live beside
//! their fixtures in `shared/ring/tests/redteam_*.rs`.

#[path = "../../shared/ring/tests/git_hub/mod.rs"]
mod git_hub;
mod session;

mod git;
mod hub;
mod table;
