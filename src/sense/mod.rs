//! What observes the kernel: tracefs instances and their page events, process exec/exit events,
//! and the resolution of (device, inode) pairs to paths.
//!
//! A thin OS layer: it reports what the kernel says and leaves learning to `model`.

pub mod child_usage;
pub mod event;
pub mod fanotify;
pub mod inode_name;
pub mod lookups;
pub mod mode;
pub mod pid_filter;
pub mod proc_connector;
pub mod procfs;
pub mod resolve;
pub mod trace_session;
pub mod tracefs;
pub mod watch;
