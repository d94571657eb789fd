//! What persists: launch profile files and the daemon's state.
//!
//! Owns formats, versions and atomicity; it does not decide what is learned.
#![forbid(unsafe_code)]

pub mod app_model_record;
pub mod atomic_file;
pub mod boot_plan_file;
pub mod error;
pub mod profile_file;
pub mod replay_cache;
pub mod state;
pub mod usage_trace_file;
