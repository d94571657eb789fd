//! augur's pure core: what is learned (page ranges, launch profiles, application identity,
//! predictors), what is decided from it (the memory budget and the plan) and the simulator that
//! replays usage traces through both.
//!
//! Nothing here makes a system call, reads a clock or touches a file: callers hand in what the
//! kernel and the disk said. It is tested without root on recorded and generated inputs.
#![forbid(unsafe_code)]

pub mod error;
pub mod model;
pub mod plan;
pub mod proc_text;
pub mod sim;

pub use error::{FormatError, IoContext, IoFailure};
