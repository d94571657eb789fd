//! eBPF observation of launches: the kernel follows each launch from its exec through fork and
//! exit, deduplicates its page accesses and page-cache insertions per launch and file, records its
//! path lookups (failed ones included) and sends compact binary records through a BPF ring buffer.
//!
//! This module owns the BPF programs (`observe.bpf.c`, with the hand-written CO-RE kernel types of
//! `kernel_types.h` and the record ABI of `records.h`, compiled by the crate's `build.rs`), their
//! loading, the decoding of their records, and the user-space rules every reader of them must
//! follow ([`PendingLaunches`]: a launch's records can precede its exec record, and a launch that
//! ends without one is dropped). It reports what the kernel says: it must not learn, name
//! applications or resolve inodes to paths (the daemon, `trace_session` and `model` do).
//!
//! [`PatternWatch`] is a second, separate object (`pattern.bpf.c`): the per-(task, file)
//! access-pattern rule of `augur_core::model::access_pattern`, run in the kernel on every
//! page-cache read system-wide, reporting only pattern changes and the progress of readers the
//! daemon follows.

pub mod error;
pub mod feed;
pub mod gate;
pub mod launches;
pub mod lookup_paths;
pub mod observer;
pub mod pattern;
pub mod record;

pub use error::BpfError;
pub use feed::{FedRecord, LaunchFeed};
pub use launches::PendingLaunches;
pub use lookup_paths::LookupPaths;
pub use observer::{Attached, BpfObserver, FollowPolicy, LostCounts, ObserverOptions};
pub use pattern::{PatternRecord, PatternWatch, PatternWatchOptions};
pub use record::{LaunchId, LookupSyscall, ObservedEvent, TaskContext};
