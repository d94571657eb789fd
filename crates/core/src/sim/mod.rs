//! The simulator: replays usage traces through the predictors and the planner over a simulated
//! page cache, and generates seeded traces for its scenarios.
//!
//! Pure like `model` and `plan`: no system calls, no clocks, randomness only from a caller's seed.
//! It exists to show, reproducibly, which predictor prefetches best (`BENCHMARKS.md`).

pub mod file_context;
pub mod page_cache;
pub mod replay;
pub mod scenario;
pub mod seeded;

pub use replay::{SimConfig, SimPredictor, SimReport, SimResult, default_budget, predictors_named, simulate};
pub use scenario::{Scenario, generate};
