//! Adversarial tests of the capability ring: files, net, the shell, git, mail, spawn and the tool
//! table. Each test is named after the boundary that stops the attack, and checks the world is
//! unchanged afterwards. The fixtures are the ring's own (`l3m_ring::test_support`).

use l3m_ring::test_support::files_hub as support;
use l3m_ring::test_support::{git_hub, net_server, shell_acr};

mod files;
mod git;
mod hub;
mod net;
mod session;
mod shell;
mod table;
