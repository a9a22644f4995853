//! Adversarial tests of the capability ring: files, net, the shell, git, mail, spawn and the tool
//! table. Each test is named after the boundary that stops the attack, and checks the world is
//! unchanged afterwards. The fixtures are the ring's own test fixtures, included by path.

#[path = "../../shared/ring/tests/git_hub/mod.rs"]
mod git_hub;
#[path = "../../shared/ring/tests/net_server/mod.rs"]
mod net_server;
mod session;
#[path = "../../shared/ring/tests/shell_acr/mod.rs"]
mod shell_acr;
#[path = "../../shared/ring/tests/support/mod.rs"]
mod support;

mod files;
mod git;
mod hub;
mod net;
mod shell;
mod table;
