//! hubd's service tests, one binary: each module was once a test binary of its own.

mod common;

mod acr;
mod airmail;
mod authority;
mod bad_input;
mod blessing;
mod build_voucher;
mod credentials;
mod health;
mod lease;
mod listing;
mod log;
mod mail;
mod nats_conf;
mod outsider;
mod pack;
mod persona;
mod sealed_replies;
mod settings;
mod undo;
mod vigils;
