//! Session start times: a Poisson process, i.e. independent exponential gaps
//! with mean 1/rate, drawn from a seeded generator so a run's schedule is
//! reproducible. Times are offsets in seconds from the start of the run; the
//! dispatcher sleeps until each absolute time, so late wake-ups never
//! accumulate into a lower rate.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

/// Iterator over the start offsets of a Poisson process.
pub struct PoissonArrivals {
    rng: ChaCha8Rng,
    gap: Exp<f64>,
    now: f64,
}

impl PoissonArrivals {
    /// `rate` sessions per second (positive and finite), seeded with `seed`.
    pub fn new(rate: f64, seed: u64) -> PoissonArrivals {
        PoissonArrivals {
            rng: ChaCha8Rng::seed_from_u64(seed),
            gap: Exp::new(rate).expect("the rate was checked to be positive and finite"),
            now: 0.0,
        }
    }

    /// The same process started at `start` seconds instead of 0: a stepped
    /// run changes rate this way (gaps are memoryless, so nothing carries over).
    pub fn starting_at(rate: f64, seed: u64, start: f64) -> PoissonArrivals {
        PoissonArrivals { now: start, ..PoissonArrivals::new(rate, seed) }
    }
}

impl Iterator for PoissonArrivals {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        self.now += self.gap.sample(&mut self.rng);
        Some(self.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_schedule_other_seed_other_schedule() {
        let a: Vec<f64> = PoissonArrivals::new(3.0, 7).take(50).collect();
        let b: Vec<f64> = PoissonArrivals::new(3.0, 7).take(50).collect();
        let c: Vec<f64> = PoissonArrivals::new(3.0, 8).take(50).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[1] > w[0]));
    }

    #[test]
    fn gaps_are_exponential_with_the_asked_mean() {
        // Kolmogorov-Smirnov against Exp(rate) on 20,000 gaps; the 1 % critical
        // value is 1.63 / sqrt(n). Mean within 3 standard errors.
        let rate = 12.5;
        let n = 20_000;
        let times: Vec<f64> = PoissonArrivals::new(rate, 42).take(n).collect();
        let mut gaps: Vec<f64> = std::iter::once(times[0]).chain(times.windows(2).map(|w| w[1] - w[0])).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let se = (1.0 / rate) / (n as f64).sqrt();
        assert!((mean - 1.0 / rate).abs() < 3.0 * se, "mean gap {mean}");
        gaps.sort_by(f64::total_cmp);
        let d = vidbench_stats::ks_distance(&gaps, vidbench_stats::exponential_cdf(rate));
        assert!(d < vidbench_stats::ks_critical_1pct(n), "KS distance {d}");
        // Counts in disjoint 1-second windows: Poisson, so variance = mean.
        let span = times[n - 1].floor() as usize;
        let mut counts = vec![0f64; span];
        for t in &times {
            if (*t as usize) < span {
                counts[*t as usize] += 1.0;
            }
        }
        let m = counts.iter().sum::<f64>() / span as f64;
        let var = counts.iter().map(|c| (c - m).powi(2)).sum::<f64>() / (span - 1) as f64;
        assert!((var / m - 1.0).abs() < 0.15, "index of dispersion {}", var / m);
    }
}
