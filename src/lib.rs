//! augur: an adaptive page-cache prefetcher for Linux.
//!
//! The crate is laid out by responsibility:
//! - [`sense`] observes the kernel (tracefs page events, process events, path resolution);
//! - [`model`] learns (page ranges, launch profiles, usage traces, predictors) and is pure;
//! - [`plan`] decides what to keep resident within a memory budget, and is pure;
//! - [`fetch`] loads pages into the page cache and verifies residency;
//! - [`store`] persists profiles and the daemon's state;
//! - [`daemon`] is the event loop tying them together;
//! - [`sim`] replays usage traces through the predictors and planner, and generates traces;
//! - [`bench`] measures start-up cold, warm and prefetched;
//! - [`cli`] parses arguments and renders results and errors.
//!
//! Only `sense`, `fetch`, `store`, `daemon` and `bench` make system calls; `unsafe` lives only in
//! the thin OS wrappers of `sense` and `fetch`, each block with a `// SAFETY:` line.

pub mod bench;
pub mod cli;
pub mod daemon;
pub mod error;
pub mod fetch;
pub mod model;
pub mod plan;
pub mod sense;
pub mod sim;
pub mod store;

pub use error::{Error, Result};
