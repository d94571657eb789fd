//! What loads pages: residency checks (mincore, cachestat), chunked readahead and synchronous
//! population, I/O priority, physical ordering, and the identity checks that keep a changed file
//! from being read by a stale profile.
//!
//! A thin OS layer: it does what the plan says and reports what happened; it does not choose.
//! The pure parts (merging profiles into a [`FetchPlan`], ordering, chunking, pacing) live in
//! [`request`] and [`schedule`] and are tested without root.
//!
//! Use: build a [`FetchPlan`] (from profiles, or file by file), then
//! `Prefetcher::new(options).fetch(&plan, &cancel)` returns a verified [`FetchReport`].

pub mod ahead;
pub mod device;
pub mod foreground;
pub mod load;
pub mod lookup;
pub mod open;
pub mod prefetcher;
pub mod priority;
pub mod request;
pub mod residency;
pub mod schedule;

pub use prefetcher::{CancelFlag, FetchOptions, FetchReport, FileCounts, FileProblem, PageCounts, Prefetcher, ProblemKind};
pub use priority::IoPriority;
pub use request::{FetchPlan, Order, OrderPolicy, PlannedFile};
pub use residency::{ResidencyProbe, drop_all_caches, evict_file, page_size};
