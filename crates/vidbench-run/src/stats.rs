//! Small statistics for repeated runs: mean and the half-width of a 95 %
//! confidence interval from Student's t distribution (few repetitions).

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Arithmetic mean; 0 for no values.
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Half-width of the 95 % confidence interval of the mean; 0 for fewer than two values.
pub fn ci95_half_width(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(v);
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    let t = if n - 1 <= T975.len() { T975[n - 2] } else { 1.960 };
    t * (var / n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        assert_eq!(ci95_half_width(&[5.0]), 0.0);
        assert_eq!(ci95_half_width(&[3.0, 3.0, 3.0]), 0.0);
        // mean 2, sd 1, n 3: t(2) = 4.303, half-width 4.303/sqrt(3)
        let w = ci95_half_width(&[1.0, 2.0, 3.0]);
        assert!((w - 4.303 / 3f64.sqrt()).abs() < 1e-9, "{w}");
        assert_eq!(mean(&[1.0, 2.0, 3.0]), 2.0);
    }
}
