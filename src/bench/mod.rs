//! Measurement: start-up time of a command cold, warm and prefetched, with the statistics the
//! reference papers report.
//!
//! It drives other modules and the system (drop caches, run commands); it contains no learning.
