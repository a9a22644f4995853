//! `l3m-ring`: capability tokens and their providers (being written).
