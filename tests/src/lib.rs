//! Shared helpers for l3m's cross-process integration tests.
