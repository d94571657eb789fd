//! How one task reads one file: the rule that classifies a stream of page accesses as forward,
//! backward, strided (either direction, any stride), looping over a range, or random, and says
//! when that classification is established, changes or breaks.
//!
//! This is the reference of the rule the kernel side (`augur-os`, `pattern.bpf.c`) implements
//! step for step on its per-(task, file) map entries, so user space hears only of changes; it is
//! pure (accesses in, pattern changes out) and must not decide what to do about a pattern (the
//! engine's `ahead` module does) or touch the kernel.
//!
//! The rule, per access `(start, len)` in pages, against the previous access `(last, last_len)`:
//! - an access inside the previous one (`last <= start` and `start + len <= last + last_len`) is a
//!   continuation of the same request (the kernel reports a long read in batches) or a re-read of
//!   the same pages: it is ignored, and the previous access stays the reference;
//! - `0 < start - last <= last_len` is a *forward* step (contiguous or overlapping);
//! - `start < last` and `start + len >= last` is a *backward* step (the access ends where the
//!   previous one began, or overlaps it);
//! - anything else is a *jump* by `d = start - last`; consecutive jumps by the same `d` are a
//!   *strided* run of stride `d`.
//!
//! A run of [`PatternRule::establish`] consecutive steps of one kind (jumps counting only with
//! equal `d`) establishes forward, backward or strided. A jump back to the first page of a forward
//! run at least that long establishes a *loop* over the range that run covered; later forward
//! steps and jumps back to the same first page keep it. [`PatternRule::random_after`] consecutive
//! steps that fit neither the established pattern nor a new run establish *random*.

/// One access: `len` pages from page `start` (at least one page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// First page index.
    pub start: u64,
    /// Pages accessed (0 is taken as 1).
    pub len: u64,
}

impl Access {
    /// `len` pages from `start`.
    pub fn new(start: u64, len: u64) -> Access {
        Access { start, len: len.max(1) }
    }

    fn end(self) -> u64 {
        self.start.saturating_add(self.len)
    }
}

/// How a stream reads its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Ascending, contiguous (what the kernel's readahead follows).
    Forward,
    /// Descending, contiguous.
    Backward,
    /// Equal jumps of `stride` pages between access starts (negative: descending).
    Strided {
        /// Pages between the starts of consecutive accesses.
        stride: i64,
    },
    /// Forward passes over pages `first..end`, restarting at `first`.
    Loop {
        /// First page of the range.
        first: u64,
        /// One past the last page the passes reached.
        end: u64,
    },
    /// No regular pattern.
    Random,
}

impl Pattern {
    /// A short name for reports (`forward`, `backward`, `strided`, `loop`, `random`).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Forward => "forward",
            Pattern::Backward => "backward",
            Pattern::Strided { .. } => "strided",
            Pattern::Loop { .. } => "loop",
            Pattern::Random => "random",
        }
    }
}

/// The thresholds of the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternRule {
    /// Consecutive steps of one kind that establish forward, backward or strided (at least 1).
    pub establish: u32,
    /// Consecutive steps fitting nothing that establish random (at least 1).
    pub random_after: u32,
}

impl Default for PatternRule {
    fn default() -> Self {
        PatternRule { establish: 4, random_after: 4 }
    }
}

/// One step between two accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Inside the previous access: ignored.
    Within,
    /// Forward, contiguous or overlapping.
    Forward,
    /// Backward, contiguous or overlapping.
    Backward,
    /// Any other move, by this many pages between starts.
    Jump(i64),
}

/// The step from `last` to `next` (see the module's rule).
pub fn step(last: Access, next: Access) -> Step {
    if next.start >= last.start && next.end() <= last.end() {
        return Step::Within;
    }
    if next.start > last.start && next.start - last.start <= last.len {
        return Step::Forward;
    }
    if next.start < last.start && next.end() >= last.start {
        return Step::Backward;
    }
    Step::Jump((next.start as i64).wrapping_sub(last.start as i64))
}

/// A change of a stream's established pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternChange {
    /// The pattern before (`None`: nothing was established yet).
    pub from: Option<Pattern>,
    /// The pattern now.
    pub to: Pattern,
}

/// The rule's state for one stream (one task reading one file).
#[derive(Clone, Debug)]
pub struct PatternTracker {
    rule: PatternRule,
    last: Option<Access>,
    /// The kind of the current run of steps and its length.
    run_step: Option<Step>,
    run: u32,
    /// First page of the current forward run.
    forward_first: u64,
    /// Steps in a row that fit nothing established.
    misses: u32,
    established: Option<Pattern>,
}

impl PatternTracker {
    /// A stream that has seen nothing yet.
    pub fn new(rule: PatternRule) -> PatternTracker {
        let rule = PatternRule { establish: rule.establish.max(1), random_after: rule.random_after.max(1) };
        PatternTracker { rule, last: None, run_step: None, run: 0, forward_first: 0, misses: 0, established: None }
    }

    /// The pattern established now, if any.
    pub fn pattern(&self) -> Option<Pattern> {
        self.established
    }

    /// Consecutive steps of the current run.
    pub fn run(&self) -> u32 {
        self.run
    }

    /// Takes one access; returns the change it caused, if any.
    pub fn observe(&mut self, access: Access) -> Option<PatternChange> {
        let access = Access::new(access.start, access.len);
        let Some(last) = self.last else {
            self.last = Some(access);
            self.forward_first = access.start;
            return None;
        };
        let s = step(last, access);
        if s == Step::Within {
            return None;
        }
        self.last = Some(access);
        // A jump back to the first page of a long enough forward run starts (or keeps) a loop.
        let loops_back =
            matches!(s, Step::Jump(d) if d < 0) && self.run_step == Some(Step::Forward) && access.start == self.forward_first;
        let loop_here = loops_back && (self.run >= self.rule.establish || matches!(self.established, Some(Pattern::Loop { .. })));
        let prior_first = self.forward_first;
        if self.run_step == Some(s) {
            self.run = self.run.saturating_add(1);
        } else {
            self.run_step = Some(s);
            self.run = 1;
            if s == Step::Forward {
                self.forward_first = last.start;
            }
        }
        if loop_here {
            // The next forward run starts at the loop's first page again.
            self.run_step = Some(Step::Forward);
            self.run = 1;
            self.forward_first = prior_first;
            self.misses = 0;
            let end = last.end().max(match self.established {
                Some(Pattern::Loop { first, end }) if first == prior_first => end,
                _ => 0,
            });
            return self.establish(Pattern::Loop { first: prior_first, end });
        }
        if self.fits(s, access) {
            self.misses = 0;
            if let Some(Pattern::Loop { first, end }) = self.established
                && access.end() > end
            {
                // The loop's range grows silently: the pattern is the same loop.
                self.established = Some(Pattern::Loop { first, end: access.end() });
            }
            return None;
        }
        if self.run >= self.rule.establish {
            self.misses = 0;
            let p = match s {
                Step::Forward => Pattern::Forward,
                Step::Backward => Pattern::Backward,
                Step::Jump(d) => Pattern::Strided { stride: d },
                Step::Within => return None,
            };
            return self.establish(p);
        }
        self.misses = self.misses.saturating_add(1);
        if self.misses >= self.rule.random_after {
            return self.establish(Pattern::Random);
        }
        None
    }

    /// Whether step `s` continues the established pattern.
    fn fits(&self, s: Step, access: Access) -> bool {
        match (self.established, s) {
            (Some(Pattern::Forward), Step::Forward) | (Some(Pattern::Backward), Step::Backward) => true,
            (Some(Pattern::Strided { stride }), Step::Jump(d)) => d == stride,
            (Some(Pattern::Loop { .. }), Step::Forward) => true,
            (Some(Pattern::Loop { first, .. }), Step::Jump(_)) => access.start == first,
            _ => false,
        }
    }

    fn establish(&mut self, p: Pattern) -> Option<PatternChange> {
        let from = self.established;
        if from == Some(p) {
            return None;
        }
        self.established = Some(p);
        Some(PatternChange { from, to: p })
    }
}

/// Runs `accesses` through a fresh tracker; returns every change, with the index of the access
/// that caused it.
pub fn classify(rule: PatternRule, accesses: impl IntoIterator<Item = Access>) -> Vec<(usize, PatternChange)> {
    let mut t = PatternTracker::new(rule);
    accesses.into_iter().enumerate().filter_map(|(i, a)| t.observe(a).map(|c| (i, c))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn last_pattern(accesses: &[Access]) -> Option<Pattern> {
        let mut t = PatternTracker::new(PatternRule::default());
        for &a in accesses {
            t.observe(a);
        }
        t.pattern()
    }

    fn blocks(starts: impl IntoIterator<Item = u64>, len: u64) -> Vec<Access> {
        starts.into_iter().map(|s| Access::new(s, len)).collect()
    }

    #[test]
    fn steps_follow_the_rule() {
        let a = Access::new(100, 8);
        assert_eq!(step(a, Access::new(104, 4)), Step::Within);
        assert_eq!(step(a, Access::new(100, 8)), Step::Within);
        assert_eq!(step(a, Access::new(108, 8)), Step::Forward);
        assert_eq!(step(a, Access::new(102, 20)), Step::Forward);
        assert_eq!(step(a, Access::new(92, 8)), Step::Backward);
        assert_eq!(step(a, Access::new(95, 8)), Step::Backward);
        assert_eq!(step(a, Access::new(91, 8)), Step::Jump(-9));
        assert_eq!(step(a, Access::new(116, 1)), Step::Jump(16));
    }

    #[test]
    fn forward_and_backward_readers_in_4k_and_32k_blocks() {
        assert_eq!(last_pattern(&blocks(0..100, 1)), Some(Pattern::Forward));
        assert_eq!(last_pattern(&blocks((0..100).rev(), 1)), Some(Pattern::Backward));
        assert_eq!(last_pattern(&blocks((0..100).map(|i| i * 8), 8)), Some(Pattern::Forward));
        assert_eq!(last_pattern(&blocks((0..100).rev().map(|i| i * 8), 8)), Some(Pattern::Backward));
    }

    #[test]
    fn established_after_the_configured_run_and_reported_once() {
        let changes = classify(PatternRule::default(), blocks((0..50).rev(), 1));
        assert_eq!(changes, vec![(4, PatternChange { from: None, to: Pattern::Backward })]);
    }

    #[test]
    fn strided_either_direction() {
        assert_eq!(last_pattern(&blocks((0..40).map(|i| i * 16), 1)), Some(Pattern::Strided { stride: 16 }));
        assert_eq!(last_pattern(&blocks((0..40).rev().map(|i| 1000 + i * 37), 2)), Some(Pattern::Strided { stride: -37 }));
    }

    #[test]
    fn continuation_batches_of_one_read_are_ignored() {
        // A backward 32 KiB reader whose reads the kernel reports in two batches each.
        let mut accesses = Vec::new();
        for i in (0..40u64).rev() {
            accesses.push(Access::new(i * 8, 8));
            accesses.push(Access::new(i * 8 + 4, 4));
        }
        assert_eq!(last_pattern(&accesses), Some(Pattern::Backward));
    }

    #[test]
    fn loops_over_a_range() {
        let pass: Vec<u64> = (10..60).collect();
        let accesses = blocks(pass.iter().chain(&pass).chain(&pass).copied(), 1);
        let changes = classify(PatternRule::default(), accesses);
        assert_eq!(changes[0].1.to, Pattern::Forward);
        assert_eq!(changes[1].1.to, Pattern::Loop { first: 10, end: 60 });
        assert_eq!(changes.len(), 2, "{changes:?}");
    }

    #[test]
    fn random_reads_are_random_and_a_break_is_reported() {
        let starts = [5u64, 900, 17, 4000, 33, 2, 7777, 123, 64, 3000];
        assert_eq!(last_pattern(&blocks(starts, 1)), Some(Pattern::Random));
        let mut accesses = blocks((100..200).rev(), 1);
        accesses.extend(blocks(starts, 1));
        let changes = classify(PatternRule::default(), accesses);
        assert_eq!(changes.last().map(|c| c.1), Some(PatternChange { from: Some(Pattern::Backward), to: Pattern::Random }));
    }

    #[test]
    fn one_stray_access_does_not_break_a_pattern() {
        let mut accesses = blocks((500..600).rev(), 1);
        accesses.push(Access::new(0, 1)); // a header read
        accesses.extend(blocks((400..500).rev(), 1));
        let changes = classify(PatternRule::default(), accesses);
        assert_eq!(changes.len(), 1, "{changes:?}");
    }

    proptest! {
        #[test]
        fn any_constant_stride_is_recognised(start in 0u64..1_000_000, stride in 1i64..5000, len in 1u64..64, n in 8usize..100, down in any::<bool>()) {
            let stride = if down { -stride } else { stride };
            let base = start as i64 + if down { stride.abs() * n as i64 } else { 0 };
            let accesses: Vec<Access> = (0..n).map(|i| Access::new((base + stride * i as i64) as u64, len)).collect();
            let expected = if stride > 0 && stride as u64 <= len {
                Pattern::Forward
            } else if stride < 0 && (-stride) as u64 <= len {
                Pattern::Backward
            } else {
                Pattern::Strided { stride }
            };
            prop_assert_eq!(last_pattern(&accesses), Some(expected));
        }

        #[test]
        fn changes_always_change_something(starts in proptest::collection::vec((0u64..10_000, 1u64..16), 0..300)) {
            let accesses: Vec<Access> = starts.iter().map(|&(s, l)| Access::new(s, l)).collect();
            let changes = classify(PatternRule::default(), accesses);
            let mut before = None;
            for (_, c) in changes {
                prop_assert_eq!(c.from, before);
                prop_assert_ne!(c.from, Some(c.to));
                before = Some(c.to);
            }
        }

        #[test]
        fn repeating_an_access_changes_nothing(starts in proptest::collection::vec((0u64..10_000, 1u64..16), 1..100)) {
            let mut once = PatternTracker::new(PatternRule::default());
            let mut twice = PatternTracker::new(PatternRule::default());
            for &(s, l) in &starts {
                let a = Access::new(s, l);
                let c1 = once.observe(a);
                let c2 = twice.observe(a);
                prop_assert_eq!(c1, c2);
                prop_assert_eq!(twice.observe(a), None);
            }
        }
    }
}
