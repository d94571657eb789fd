//! The statistics benchmarks report: median, minimum, maximum, quantiles, mean with its 95 %
//! confidence interval (Kroeger and Long's way), and the share of the cold-to-warm gap a
//! condition closes.
//!
//! Pure: numbers in, numbers out; no clocks.

use serde::{Deserialize, Serialize};

/// Summary of a sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; `None` when there are none or any is not a number.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let sorted = sorted(values);
        Some(Summary { n: sorted.len(), median: quantile_sorted(&sorted, 0.5), min: sorted[0], max: sorted[sorted.len() - 1] })
    }
}

/// The arithmetic mean (what AASFP and DEAR report); 0 for no values.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 }
}

/// The sample standard deviation; 0 for fewer than two values.
pub fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
}

/// Student's t quantile 0.975 for 1 to 30 degrees of freedom (beyond: the normal's 1.96 and a
/// little, see [`t_975`]).
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
    2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Student's t quantile 0.975 for `df` degrees of freedom (0: infinite, no interval).
fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        31..=60 => 2.00,
        61..=120 => 1.98,
        _ => 1.96,
    }
}

/// Half the width of the 95 % confidence interval of the mean (Student's t): the mean is
/// `mean ± this`. Infinite for fewer than two values.
pub fn ci95_half_width(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return f64::INFINITY;
    }
    t_975(values.len() - 1) * stddev(values) / (values.len() as f64).sqrt()
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let q = q.clamp(0.0, 1.0);
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The `q` quantile (0..=1) with linear interpolation between closest ranks; `None` when empty
/// or any value is not a number. `quantile(v, 0.5)` is the median.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    Some(quantile_sorted(&sorted(values), q))
}

/// The share of the cold-to-warm gap that `condition` closes: `(cold − condition) / (cold − warm)`.
/// 1 means as fast as warm, 0 as slow as cold; it can leave 0..=1 (faster than warm, slower than
/// cold). `None` when there is no gap to close (warm is not faster than cold).
pub fn gap_closed(cold: f64, warm: f64, condition: f64) -> Option<f64> {
    let gap = cold - warm;
    (gap > 0.0 && gap.is_finite() && condition.is_finite()).then(|| (cold - condition) / gap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn confidence_interval_of_the_mean() {
        // Two values 1 and 3: sd = sqrt(2), t(1) = 12.706, half width = 12.706 * sqrt(2) / sqrt(2).
        assert!((ci95_half_width(&[1.0, 3.0]) - 12.706).abs() < 1e-9);
        assert!(ci95_half_width(&[5.0]).is_infinite());
        assert_eq!(ci95_half_width(&[2.0; 20]), 0.0);
        // 20 values: t(19) = 2.093.
        let v: Vec<f64> = (0..20).map(f64::from).collect();
        assert!((ci95_half_width(&v) - 2.093 * stddev(&v) / 20f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 3.0, 1.0, 5.0));
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[7.0]).unwrap().median, 7.0);
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(quantile(&v, 0.0), Some(10.0));
        assert_eq!(quantile(&v, 1.0), Some(50.0));
        assert_eq!(quantile(&v, 0.9), Some(46.0));
        assert_eq!(quantile(&v, 0.5), Some(30.0));
    }

    #[test]
    fn gap_closed_examples() {
        assert_eq!(gap_closed(200.0, 100.0, 110.0), Some(0.9));
        assert_eq!(gap_closed(200.0, 100.0, 200.0), Some(0.0));
        assert_eq!(gap_closed(200.0, 100.0, 100.0), Some(1.0));
        assert_eq!(gap_closed(200.0, 100.0, 90.0), Some(1.1));
        assert_eq!(gap_closed(100.0, 100.0, 90.0), None);
        assert_eq!(gap_closed(90.0, 100.0, 90.0), None);
    }

    proptest! {
        #[test]
        fn summary_orders_min_median_max(values in proptest::collection::vec(-1e6f64..1e6, 1..50)) {
            let s = Summary::of(&values).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert_eq!(s.n, values.len());
            let below = values.iter().filter(|&&v| v < s.median).count();
            let above = values.iter().filter(|&&v| v > s.median).count();
            prop_assert!(below <= values.len() / 2 && above <= values.len() / 2);
        }
    }
}
