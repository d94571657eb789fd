//! The daemon's decisions: which launch to follow, when a launch window closes, what is learned,
//! when to plan, and the configuration they follow. Events and the time come in; what to do goes
//! out. No system calls and no `unsafe`: the `augur` binary's event loop turns file descriptors
//! into these events and carries out the actions, so everything here is tested without root.
#![forbid(unsafe_code)]

pub mod ahead;
pub mod behind;
pub mod boot;
pub mod config;
pub mod daemon;
pub mod looping;
pub mod random_read;
pub mod read_cost;
pub mod refollow;
pub mod running;
pub mod usage_log;
pub mod window;
pub mod workload_run;
