//! hubd's store tests, one binary: each module was once a test binary of its own.

mod common;

mod cas;
mod chains;
mod cli_init;
mod crash;
mod delete;
mod layout;
mod wal;
