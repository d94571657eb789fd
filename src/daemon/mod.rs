//! The daemon's event loop: process events in, page events in, profiles learned, plans made and
//! fetched, state saved, status served over a Unix socket.
//!
//! It wires `sense`, `model`, `plan`, `fetch` and `store` together and owns no policy of its own.

pub mod config;
pub mod control;
pub mod notify;
pub mod os;
pub mod prediction;
pub mod run;
pub mod running;
pub mod usage_log;
pub mod window;
