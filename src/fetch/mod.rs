//! What loads pages: residency checks (mincore, cachestat), chunked readahead and synchronous
//! population, I/O priority, physical ordering, and the identity checks that keep a changed file
//! from being read by a stale profile.
//!
//! A thin OS layer: it does what the plan says and reports what happened; it does not choose.
