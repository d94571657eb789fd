//! What augur learns: page ranges, launch profiles, usage traces and the predictors built on them.
//!
//! Everything here is pure and deterministic: no system calls, no clocks, no randomness that is
//! not seeded by the caller. It is tested without root on recorded or generated traces.

pub mod access_pattern;
pub mod app;
pub mod boot;
pub mod file_context;
pub mod launch_chain;
pub mod launcher;
pub mod learn;
pub mod predict;
pub mod profile;
pub mod range;
pub mod read_through;
pub mod record;
pub mod usage_trace;
pub mod user;
