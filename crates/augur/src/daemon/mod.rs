//! The daemon's event loop: process events in, page events in, profiles learned, plans made and
//! fetched, state saved, status served over a Unix socket.
//!
//! It wires `augur-os` (events, fetching), `augur-engine` (decisions), `augur-core` (models,
//! plans) and `augur-store` (state) together and owns no policy of its own.

pub mod ahead;
pub mod control;
mod exec_step;
pub mod prediction;
pub mod resident;
pub mod run;
