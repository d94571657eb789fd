//! What prediction bought over the last day, for `augur status`: launches it predicted and had
//! loaded in time, bytes it prefetched, bytes of those a launch used, and bytes wasted (pushed out
//! before any launch used them).
//!
//! Owns the rolling-day bookkeeping only: 24 hourly buckets, the oldest dropped as time moves on.
//! The caller says what happened and when (the simulator from its simulated cache; the daemon
//! from its fetch reports and launches); nothing here decides or measures. Pure: time is the
//! caller's milliseconds.

/// Milliseconds per bucket.
const HOUR_MS: u64 = 3_600_000;

/// Buckets kept: one day.
const BUCKETS: usize = 24;

/// The counts of one period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerTotals {
    /// Launches seen.
    pub launches: u64,
    /// Of those, launches prediction had planned pages for before they started.
    pub predicted: u64,
    /// Of the predicted, launches whose planned pages were all resident when they started.
    pub loaded_in_time: u64,
    /// Bytes read by prefetching.
    pub prefetched_bytes: u64,
    /// Prefetched bytes a launch used.
    pub used_bytes: u64,
    /// Prefetched bytes pushed out before any launch used them.
    pub wasted_bytes: u64,
}

impl LedgerTotals {
    fn add(&mut self, o: &LedgerTotals) {
        self.launches += o.launches;
        self.predicted += o.predicted;
        self.loaded_in_time += o.loaded_in_time;
        self.prefetched_bytes += o.prefetched_bytes;
        self.used_bytes += o.used_bytes;
        self.wasted_bytes += o.wasted_bytes;
    }

    /// Wasted / prefetched bytes (0 when nothing was prefetched).
    pub fn wasted_share(&self) -> f64 {
        if self.prefetched_bytes == 0 { 0.0 } else { self.wasted_bytes as f64 / self.prefetched_bytes as f64 }
    }
}

/// The rolling day.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrefetchLedger {
    /// (hour number, counts), at most [`BUCKETS`], oldest first.
    buckets: std::collections::VecDeque<(u64, LedgerTotals)>,
}

impl PrefetchLedger {
    /// The bucket of `at_ms`, dropping those more than a day older. Times going backwards are
    /// counted in the newest bucket.
    fn at(&mut self, at_ms: u64) -> &mut LedgerTotals {
        let hour = at_ms / HOUR_MS;
        let newest = self.buckets.back().map(|b| b.0);
        if newest.is_none_or(|n| hour > n) {
            self.buckets.push_back((hour, LedgerTotals::default()));
        }
        let newest = self.buckets.back().map_or(hour, |b| b.0);
        while self.buckets.front().is_some_and(|b| b.0 + BUCKETS as u64 <= newest) {
            self.buckets.pop_front();
        }
        &mut self.buckets.back_mut().expect("a bucket was just ensured").1
    }

    /// A launch: whether prediction had planned pages for it, and whether they were all resident.
    pub fn launch(&mut self, at_ms: u64, predicted: bool, loaded_in_time: bool) {
        let b = self.at(at_ms);
        b.launches += 1;
        if predicted {
            b.predicted += 1;
            if loaded_in_time {
                b.loaded_in_time += 1;
            }
        }
    }

    /// Bytes read by prefetching.
    pub fn prefetched(&mut self, at_ms: u64, bytes: u64) {
        self.at(at_ms).prefetched_bytes += bytes;
    }

    /// Prefetched bytes a launch used.
    pub fn used(&mut self, at_ms: u64, bytes: u64) {
        self.at(at_ms).used_bytes += bytes;
    }

    /// Prefetched bytes pushed out unused.
    pub fn wasted(&mut self, at_ms: u64, bytes: u64) {
        self.at(at_ms).wasted_bytes += bytes;
    }

    /// The counts of the last 24 hours up to `now_ms` (the current hour included).
    pub fn last_day(&self, now_ms: u64) -> LedgerTotals {
        let hour = now_ms / HOUR_MS;
        let mut t = LedgerTotals::default();
        for (h, b) in &self.buckets {
            if *h + (BUCKETS as u64) > hour && *h <= hour {
                t.add(b);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_rolls_by_the_hour() {
        let mut l = PrefetchLedger::default();
        l.launch(0, true, true);
        l.launch(10, true, false);
        l.launch(20, false, false);
        l.prefetched(30, 100);
        l.used(40, 60);
        l.wasted(50, 25);
        let t = l.last_day(HOUR_MS);
        assert_eq!(
            t,
            LedgerTotals {
                launches: 3,
                predicted: 2,
                loaded_in_time: 1,
                prefetched_bytes: 100,
                used_bytes: 60,
                wasted_bytes: 25
            }
        );
        assert!((t.wasted_share() - 0.25).abs() < 1e-12);
        // 23 hours later the first hour still counts; 24 hours later it is gone.
        l.prefetched(23 * HOUR_MS, 1);
        assert_eq!(l.last_day(23 * HOUR_MS).launches, 3);
        l.prefetched(24 * HOUR_MS, 1);
        assert_eq!(l.last_day(24 * HOUR_MS), LedgerTotals { prefetched_bytes: 2, ..LedgerTotals::default() });
        assert!(l.buckets.len() <= BUCKETS);
        assert_eq!(LedgerTotals::default().wasted_share(), 0.0);
    }
}
