//! The statistics of the vidbench toolkit, in one place: the mean and the 95 %
//! confidence interval of a few repetitions or samples (Student's t, exact
//! quantiles from statrs), and the Kolmogorov-Smirnov distance the tests use to
//! check that a schedule follows the distribution it claims.
//!
//! The load client (the CI of its 5-second samples), the experiment driver
//! (the CI over repetitions at the maximum failure-free rate) and the report
//! (per-rate CIs) all call these, so one figure means the same everywhere.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Arithmetic mean; 0 for no values.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The two-sided 95 % quantile of Student's t with `degrees_of_freedom` (at least 1).
pub fn t975(degrees_of_freedom: usize) -> f64 {
    StudentsT::new(0.0, 1.0, degrees_of_freedom as f64).expect("positive degrees of freedom").inverse_cdf(0.975)
}

/// Half-width of the 95 % confidence interval of the mean; 0 for fewer than two values.
pub fn ci95_half_width(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(values);
    let variance = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    t975(n - 1) * (variance / n as f64).sqrt()
}

/// Mean and 95 % confidence half-width, each `None` where it is undefined (no
/// values; a single value has no interval).
pub fn mean_ci95(values: &[f64]) -> (Option<f64>, Option<f64>) {
    match values.len() {
        0 => (None, None),
        1 => (Some(values[0]), None),
        _ => (Some(mean(values)), Some(ci95_half_width(values))),
    }
}

/// The Kolmogorov-Smirnov distance between the sample `sorted` (ascending) and
/// the distribution whose CDF is `cdf`: the largest gap between the empirical
/// and the claimed CDF, on either side of each step.
pub fn ks_distance(sorted: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let f = cdf(*x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// The Kolmogorov-Smirnov critical distance at the 1 % level for `n` values
/// (large-sample approximation 1.63 / sqrt(n)).
pub fn ks_critical_1pct(n: usize) -> f64 {
    1.63 / (n as f64).sqrt()
}

/// The CDF of the exponential distribution with `rate` (the gaps of a Poisson process).
pub fn exponential_cdf(rate: f64) -> impl Fn(f64) -> f64 {
    move |x| 1.0 - (-rate * x).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        assert_eq!(ci95_half_width(&[5.0]), 0.0);
        assert_eq!(ci95_half_width(&[3.0, 3.0, 3.0]), 0.0);
        // mean 2, sd 1, n 3: t(0.975, 2) = 4.302653, half-width t/sqrt(3).
        let w = ci95_half_width(&[1.0, 2.0, 3.0]);
        assert!((w - 4.302653 / 3f64.sqrt()).abs() < 1e-6, "{w}");
        assert_eq!(mean(&[1.0, 2.0, 3.0]), 2.0);
        assert_eq!(mean(&[]), 0.0);
    }

    #[test]
    fn confidence_interval_matches_a_worked_example() {
        // n = 4, mean 10, s = 2 (values 8, 9, 11, 12 have s^2 = 10/3), t(0.975, 3) = 3.182.
        let (m, ci) = mean_ci95(&[8.0, 9.0, 11.0, 12.0]);
        assert_eq!(m, Some(10.0));
        let expect = 3.182446 * (10.0f64 / 3.0 / 4.0).sqrt();
        assert!((ci.unwrap() - expect).abs() < 1e-4, "{ci:?} vs {expect}");
        assert_eq!(mean_ci95(&[]), (None, None));
        assert_eq!(mean_ci95(&[3.0]), (Some(3.0), None));
    }

    #[test]
    fn t_quantiles_agree_with_the_printed_table() {
        // Three-decimal values of the usual table, 1, 2, 10 and 30 degrees of freedom.
        for (df, printed) in [(1, 12.706), (2, 4.303), (10, 2.228), (30, 2.042)] {
            assert!((t975(df) - printed).abs() < 5e-4, "t({df}) = {}", t975(df));
        }
    }

    #[test]
    fn ks_distance_of_a_perfect_and_a_wrong_sample() {
        // Quantiles of Exp(1) at (i + 0.5) / n: the distance is half a step.
        let n = 100;
        let sample: Vec<f64> = (0..n).map(|i| -(1.0 - (i as f64 + 0.5) / n as f64).ln()).collect();
        let d = ks_distance(&sample, exponential_cdf(1.0));
        assert!((d - 0.5 / n as f64).abs() < 1e-9, "{d}");
        assert!(d < ks_critical_1pct(n));
        // The same sample against Exp(3) is far off.
        assert!(ks_distance(&sample, exponential_cdf(3.0)) > ks_critical_1pct(n));
    }
}
