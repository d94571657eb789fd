//! The `augur` program: the command line ([`cli`]), and the daemon's event loop, control socket
//! and prediction worker ([`daemon`]).
//!
//! It wires the other crates together: `augur-os` says what the kernel reported and does the
//! I/O, `augur-engine` decides, `augur-core` models and plans, `augur-store` persists. Exit codes
//! are decided here and nowhere else. No `unsafe`.
#![forbid(unsafe_code)]

pub mod cli;
pub mod config_file;
pub mod daemon;
pub mod error;
