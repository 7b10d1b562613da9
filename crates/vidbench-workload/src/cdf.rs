//! Empirical distributions given as CDF tables, as paper 003 gives its video
//! durations (Figure 2) and watched fractions (Figure 3).
//!
//! A table is a list of points `(x, F(x))` with `x` strictly increasing and `F`
//! non-decreasing up to exactly 1. Between points the CDF is linear (the
//! distribution is uniform on each segment); a first point with `F > 0` is an
//! atom: that much probability sits exactly on its `x`. Sampling inverts the
//! CDF, so one uniform draw gives one value and a seed reproduces a workload.

use rand::Rng;

/// Largest error tolerated on the final `F = 1`.
const END_TOLERANCE: f64 = 1e-9;

/// A validated piecewise-linear CDF.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    points: Vec<(f64, f64)>,
}

impl Cdf {
    /// Checks a table; the error says which point is wrong and why (the
    /// caller adds the key).
    pub fn new(points: &[[f64; 2]]) -> Result<Cdf, String> {
        if points.is_empty() {
            return Err("the table is empty: give at least one [x, F(x)] point ending with F = 1".into());
        }
        for (i, &[x, f]) in points.iter().enumerate() {
            if !x.is_finite() || !f.is_finite() {
                return Err(format!("point {i} [{x}, {f}] is not finite"));
            }
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("point {i} [{x}, {f}]: F must be between 0 and 1"));
            }
            if i > 0 {
                let [px, pf] = points[i - 1];
                if x <= px {
                    return Err(format!("point {i} [{x}, {f}]: x must be greater than the previous point's {px}"));
                }
                if f < pf {
                    return Err(format!(
                        "point {i} [{x}, {f}]: F decreases from {pf}: a CDF must be monotone (non-decreasing)"
                    ));
                }
            }
        }
        let [_, last] = points[points.len() - 1];
        if (last - 1.0).abs() > END_TOLERANCE {
            return Err(format!("the last point has F = {last}: a CDF must end at 1"));
        }
        let mut points: Vec<(f64, f64)> = points.iter().map(|&[x, f]| (x, f)).collect();
        points.last_mut().unwrap().1 = 1.0;
        Ok(Cdf { points })
    }

    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// Smallest value the distribution can produce.
    pub fn min(&self) -> f64 {
        self.points[0].0
    }

    /// Largest value the distribution can produce.
    pub fn max(&self) -> f64 {
        self.points[self.points.len() - 1].0
    }

    /// The inverse CDF at `u` in (0, 1].
    pub fn quantile(&self, u: f64) -> f64 {
        let i = self.points.partition_point(|&(_, f)| f < u);
        if i == 0 {
            return self.points[0].0;
        }
        let i = i.min(self.points.len() - 1);
        let (x0, f0) = self.points[i - 1];
        let (x1, f1) = self.points[i];
        if f1 <= f0 {
            return x1;
        }
        x0 + (x1 - x0) * ((u - f0) / (f1 - f0)).clamp(0.0, 1.0)
    }

    /// F(x): probability that a draw is <= x.
    pub fn cdf(&self, x: f64) -> f64 {
        let i = self.points.partition_point(|&(px, _)| px <= x);
        if i == 0 {
            return 0.0;
        }
        if i == self.points.len() {
            return 1.0;
        }
        let (x0, f0) = self.points[i - 1];
        let (x1, f1) = self.points[i];
        f0 + (f1 - f0) * (x - x0) / (x1 - x0)
    }

    /// The mean of the distribution.
    pub fn mean(&self) -> f64 {
        let (x0, f0) = self.points[0];
        x0 * f0 + self.points.windows(2).map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0).sum::<f64>()
    }

    /// One draw.
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        // gen() is in [0, 1); 1 - gen() is in (0, 1], so u = 0 (below every atom) never occurs.
        self.quantile(1.0 - rng.gen::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_and_cdf_invert_each_other() {
        let cdf = Cdf::new(&[[0.0, 0.0], [10.0, 0.5], [20.0, 0.5], [30.0, 1.0]]).unwrap();
        assert_eq!(cdf.quantile(0.25), 5.0);
        assert_eq!(cdf.quantile(0.5), 10.0);
        assert_eq!(cdf.quantile(0.75), 25.0);
        assert_eq!(cdf.quantile(1.0), 30.0);
        assert_eq!(cdf.cdf(5.0), 0.25);
        assert_eq!(cdf.cdf(15.0), 0.5);
        assert_eq!(cdf.cdf(-1.0), 0.0);
        assert_eq!(cdf.cdf(31.0), 1.0);
        assert_eq!(cdf.mean(), 0.5 * 5.0 + 0.5 * 25.0);
    }

    #[test]
    fn a_first_point_above_zero_is_an_atom() {
        let cdf = Cdf::new(&[[1.0, 0.4], [2.0, 1.0]]).unwrap();
        assert_eq!(cdf.quantile(0.3), 1.0);
        assert_eq!(cdf.quantile(0.7), 1.5);
        assert!((cdf.mean() - (0.4 + 0.6 * 1.5)).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_tables() {
        let cases: &[(&[[f64; 2]], &str)] = &[
            (&[], "empty"),
            (&[[1.0, 0.5], [2.0, 0.4], [3.0, 1.0]], "monotone"),
            (&[[1.0, 0.5], [1.0, 1.0]], "greater than"),
            (&[[1.0, 0.5], [2.0, 0.9]], "end at 1"),
            (&[[1.0, -0.1], [2.0, 1.0]], "between 0 and 1"),
            (&[[1.0, 0.0], [f64::NAN, 1.0]], "not finite"),
        ];
        for (points, want) in cases {
            let err = Cdf::new(points).unwrap_err();
            assert!(err.contains(want), "{points:?}: {err}");
        }
    }
}
