//! Summaries of repeated measurements: median, minimum, maximum and 90th percentile, and the
//! share of the cold-to-warm gap a prefetcher closes. Pure arithmetic, no clocks.

/// A summary of samples (seconds or any unit).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    /// Number of samples.
    pub n: usize,
    /// Median (mean of the two middle samples for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
}

impl Distribution {
    /// Summarises `samples`; `None` when there are none (or any is not finite).
    pub fn of(samples: &[f64]) -> Option<Distribution> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
        Some(Distribution {
            n,
            median,
            min: s[0],
            max: s[n - 1],
            p90: s[rank - 1],
        })
    }
}

/// Share of the cold-to-warm gap closed by a condition whose median is `x`:
/// (cold − x) / (cold − warm). `None` when there is no gap to close (warm is not faster).
pub fn gap_closed(cold: f64, warm: f64, x: f64) -> Option<f64> {
    let gap = cold - warm;
    if gap.is_nan() || gap <= 0.0 || !x.is_finite() {
        return None;
    }
    Some((cold - x) / gap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn odd_and_even_medians() {
        let d = Distribution::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((d.median, d.min, d.max, d.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Distribution::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Distribution::of(&[]).is_none());
        assert!(Distribution::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn p90_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(Distribution::of(&v).unwrap().p90, 9.0);
        assert_eq!(Distribution::of(&[5.0]).unwrap().p90, 5.0);
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(Distribution::of(&v).unwrap().p90, 18.0);
    }

    #[test]
    fn gap() {
        assert_eq!(gap_closed(10.0, 2.0, 2.0), Some(1.0));
        assert_eq!(gap_closed(10.0, 2.0, 6.0), Some(0.5));
        assert_eq!(gap_closed(10.0, 2.0, 12.0), Some(-0.25));
        assert_eq!(gap_closed(2.0, 2.0, 1.0), None);
    }

    proptest! {
        #[test]
        fn summary_is_ordered(v in proptest::collection::vec(0.0f64..1e6, 1..50)) {
            let d = Distribution::of(&v).unwrap();
            prop_assert!(d.min <= d.median && d.median <= d.max);
            prop_assert!(d.min <= d.p90 && d.p90 <= d.max);
            prop_assert_eq!(d.n, v.len());
        }
    }
}
