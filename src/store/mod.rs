//! What persists: launch profile files and the daemon's state.
//!
//! Owns formats, versions and atomicity; it does not decide what is learned.

pub mod profile_file;
pub mod state;
