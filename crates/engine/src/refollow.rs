//! Whether an application whose launch read from disk what its profile lacks is followed again
//! now: it is, unless its last refollows taught nothing. A refollow is fruitless when every
//! launch learned after it was stable (it added almost no page to the profile): the disk reads
//! that caused it were not pages a profile can hold (a reader streaming a file larger than its
//! profile may keep, data a program reads once). Such an application's next refollow is held for
//! [`FIRST_HOLD_MS`], doubling with each fruitless one in a row up to [`MAX_HOLD_MS`]; a refollow
//! that taught something clears the count. The periodic sample ([`crate::window::FollowPolicy`])
//! still follows a held application now and then.
//!
//! It owns the decision only, a pure function of the application's [`RefollowHold`] (kept in the
//! state by the world, so that a restart does not refollow what is known to teach nothing) and
//! its learning history; it must not read the state or decide anything else of following.

use augur_core::model::learn::{LearningHistory, RefollowHold};

/// How long a refollow after a first fruitless one is held (ten minutes).
pub const FIRST_HOLD_MS: u64 = 10 * 60 * 1000;

/// The longest hold (a day).
pub const MAX_HOLD_MS: u64 = 24 * 60 * 60 * 1000;

/// What became of an application's refollow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefollowVerdict {
    /// Follow it again now.
    Refollow,
    /// Not before `until_ms` (Unix ms): its last `fruitless` refollows in a row taught nothing.
    Held { until_ms: u64, fruitless: u32 },
}

/// A launch of an application whose refollows stand at `hold` (`None`: never refollowed) and
/// whose learning history is `history` read pages its profile lacks at `now_ms` (Unix ms):
/// whether it is followed again now, and where its refollows stand after.
pub fn judge(hold: Option<RefollowHold>, history: &LearningHistory, now_ms: u64) -> (RefollowVerdict, RefollowHold) {
    let Some(mut hold) = hold else {
        return (RefollowVerdict::Refollow, RefollowHold { learned_at: history.learned, fruitless: 0, until_ms: 0 });
    };
    if now_ms < hold.until_ms {
        return (RefollowVerdict::Held { until_ms: hold.until_ms, fruitless: hold.fruitless }, hold);
    }
    // Launches learned since the last refollow: all stable, and it taught nothing.
    let since = history.learned.saturating_sub(hold.learned_at);
    if since > 0 {
        let fruitless = history.unstable_streak == 0 && u64::from(history.stable_streak) >= since;
        hold.fruitless = if fruitless { hold.fruitless.saturating_add(1) } else { 0 };
        hold.learned_at = history.learned;
        if fruitless {
            let shift = (hold.fruitless - 1).min(16);
            hold.until_ms = now_ms.saturating_add(FIRST_HOLD_MS.saturating_mul(1 << shift).min(MAX_HOLD_MS));
            return (RefollowVerdict::Held { until_ms: hold.until_ms, fruitless: hold.fruitless }, hold);
        }
    }
    hold.learned_at = history.learned;
    (RefollowVerdict::Refollow, hold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The holds of several applications, as the world keeps them.
    #[derive(Default)]
    struct Holds(HashMap<String, RefollowHold>);

    impl Holds {
        fn judge(&mut self, app: &str, history: &LearningHistory, now_ms: u64) -> RefollowVerdict {
            let (verdict, hold) = judge(self.0.get(app).copied(), history, now_ms);
            self.0.insert(app.to_string(), hold);
            verdict
        }
    }

    fn history(learned: u64, stable_streak: u32, unstable_streak: u32) -> LearningHistory {
        LearningHistory { learned, last_learned_ms: 0, stable_streak, unstable_streak }
    }

    #[test]
    fn a_first_refollow_is_granted() {
        let mut h = Holds::default();
        assert_eq!(h.judge("/bin/a", &history(3, 2, 0), 0), RefollowVerdict::Refollow);
    }

    #[test]
    fn a_refollow_that_taught_nothing_holds_the_next_for_longer_each_time() {
        let mut h = Holds::default();
        let mut now = 1_000;
        assert_eq!(h.judge("/bin/reader", &history(3, 2, 0), now), RefollowVerdict::Refollow);
        // One launch followed after it, stable: fruitless.
        now += 1000;
        assert_eq!(
            h.judge("/bin/reader", &history(4, 3, 0), now),
            RefollowVerdict::Held { until_ms: now + FIRST_HOLD_MS, fruitless: 1 }
        );
        assert!(matches!(h.judge("/bin/reader", &history(4, 3, 0), now + FIRST_HOLD_MS - 1), RefollowVerdict::Held { .. }));
        // Once the hold passed it is refollowed; fruitless again, it is held twice as long.
        now += FIRST_HOLD_MS;
        assert_eq!(h.judge("/bin/reader", &history(4, 3, 0), now), RefollowVerdict::Refollow);
        now += 1000;
        assert_eq!(
            h.judge("/bin/reader", &history(5, 4, 0), now),
            RefollowVerdict::Held { until_ms: now + 2 * FIRST_HOLD_MS, fruitless: 2 }
        );
        // The hold never passes a day.
        let mut learned = 5;
        for _ in 0..20 {
            now += MAX_HOLD_MS + 1;
            assert_eq!(h.judge("/bin/reader", &history(learned, 4, 0), now), RefollowVerdict::Refollow);
            learned += 1;
            match h.judge("/bin/reader", &history(learned, 4, 0), now + 1) {
                RefollowVerdict::Held { until_ms, .. } => assert!(until_ms - (now + 1) <= MAX_HOLD_MS),
                v => panic!("{v:?}"),
            }
        }
    }

    #[test]
    fn a_refollow_that_taught_something_clears_the_count() {
        let mut h = Holds::default();
        assert_eq!(h.judge("/bin/a", &history(3, 2, 0), 0), RefollowVerdict::Refollow);
        assert!(matches!(h.judge("/bin/a", &history(4, 3, 0), 10), RefollowVerdict::Held { fruitless: 1, .. }));
        let later = 10 + FIRST_HOLD_MS;
        assert_eq!(h.judge("/bin/a", &history(4, 3, 0), later), RefollowVerdict::Refollow);
        // The launch followed then added pages (unstable), and the next one was stable again.
        assert_eq!(h.judge("/bin/a", &history(6, 1, 0), later + 10), RefollowVerdict::Refollow);
        assert_eq!(h.judge("/bin/a", &history(7, 0, 1), later + 20), RefollowVerdict::Refollow);
    }

    #[test]
    fn nothing_learned_since_a_refollow_decides_nothing() {
        let mut h = Holds::default();
        assert_eq!(h.judge("/bin/a", &history(3, 2, 0), 0), RefollowVerdict::Refollow);
        // Its next launch was not followed yet (no learning since): refollowed again.
        assert_eq!(h.judge("/bin/a", &history(3, 2, 0), 5), RefollowVerdict::Refollow);
    }

    #[test]
    fn applications_are_held_each_on_its_own() {
        let mut h = Holds::default();
        h.judge("/bin/a", &history(3, 2, 0), 0);
        assert!(matches!(h.judge("/bin/a", &history(4, 3, 0), 1), RefollowVerdict::Held { .. }));
        assert_eq!(h.judge("/bin/b", &history(3, 2, 0), 1), RefollowVerdict::Refollow);
    }
}
