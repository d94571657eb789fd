//! What augur decides: given predicted launch probabilities, learned profiles and a memory budget,
//! which page ranges to keep resident and in what order to fetch them; `round` is the whole
//! decision of one planning round, shared by the daemon and the simulator.
//!
//! Pure: no system calls; the budget's inputs (MemAvailable, pressure) are passed in by the daemon.

pub mod budget;
pub mod cost;
pub mod fill;
pub mod ledger;
pub mod planner;
pub mod quiet_wait;
pub mod round;

pub use budget::{BudgetConfig, CgroupHeadroom, MemoryBudget, MemoryPressure, MemorySnapshot};
pub use cost::{EvictionCounters, MemoryHeadroom, RefaultMeter};
pub use fill::{
    FILL_REFRESH_MS, FREQUENCY_HALF_LIFE_MS, FillCandidate, FillConfig, FillPlanner, FillReason, FillRoom, LaunchFrequency,
    MAX_FILL_APPS, fill_order, plan_fill,
};
pub use ledger::{LedgerTotals, PrefetchLedger};
pub use planner::{AppFootprint, Plan, PlannedRange, PlannerConfig, PlannerWork, RangeUse, ResidentPages, plan, plan_within};
pub use quiet_wait::{QuietWait, WaitingLooks};
pub use round::{
    DEFAULT_EVICT_COST, DEFAULT_READ_COST, KEEP_GAP_MS, LearnedFootprint, MAX_CANDIDATES, PlanningRound, RoundConfig,
    RoundOutcome, RoundPlan,
};
