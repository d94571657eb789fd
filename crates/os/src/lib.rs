//! augur's OS layer: every system call and every `unsafe` block of the project, each with a
//! `// SAFETY:` line. It observes the kernel ([`sense`]), loads and checks pages ([`fetch`]), and
//! gives the daemon's loop its file descriptors and clocks ([`loop_io`], [`notify`]).
//!
//! It reports what the kernel says and does what it is told; it decides nothing about what to
//! learn or prefetch (that is `augur-core` and `augur-engine`).

pub mod error;
pub mod fetch;
pub mod init_handoff;
pub mod loop_io;
pub mod machine;
pub mod notify;
pub mod privilege;
pub mod sense;
pub mod service_manager;
pub mod signals;
pub mod untrusted_path;
