//! How far the sessions in play are from the steady state of the current
//! rate, for the settling gate of stepped runs ([`crate::steps`]).
//!
//! With arrivals at rate r and session lengths D, the expected number of
//! active sessions t seconds after arrivals began is r E[min(D, t)], and r
//! E[D] in steady state. After a change of rate the population moves from the
//! old steady state to the new one as the sessions of the old rate end, which
//! on a heavy-tailed D takes several mean session lengths: on paper 000's SD
//! workload (E[D] 132 s) a window 60 s after a 5 % rise found about 5 % of
//! the new population missing, and windows after rises of 10-20 % up to 13 %
//! (docs/run.md, "Measured bias of steps"). Failed sessions end early too, so
//! after an overloaded step the sessions that failed and would still be
//! playing are missing as well.
//!
//! [`Durations`] is the distribution of D (a session's paced time) over the
//! session list, [`expected_population`] the expected active sessions under
//! a history of rates, and [`gap`] the share of the steady-state population
//! at the current rate that is missing (negative: in excess) once the
//! sessions that failed and would still be playing are taken away. It is a
//! function of the schedule, not of the sessions counted, so Poisson noise in
//! the arrivals (about 5 % of a few hundred sessions) does not move it.

use vidbench_library::Session;

/// The distribution of session lengths (paced time: the sum of the
/// requests' pacing), for E[min(D, x)] in O(log n).
#[derive(Debug, Clone)]
pub struct Durations {
    /// Lengths, ascending.
    sorted: Vec<f64>,
    /// prefix[i] = sum of sorted[..i].
    prefix: Vec<f64>,
}

impl Durations {
    pub fn new(mut lengths: Vec<f64>) -> Durations {
        lengths.retain(|d| d.is_finite());
        lengths.iter_mut().for_each(|d| *d = d.max(0.0));
        lengths.sort_by(f64::total_cmp);
        let mut prefix = Vec::with_capacity(lengths.len() + 1);
        prefix.push(0.0);
        for d in &lengths {
            prefix.push(prefix.last().expect("starts with 0") + d);
        }
        Durations { sorted: lengths, prefix }
    }

    /// A session's paced time: the sum of its requests' `pace_s`.
    pub fn length_of(s: &Session) -> f64 {
        s.requests.iter().filter_map(|r| r.pace_s).sum()
    }

    pub fn of_sessions(sessions: &[Session]) -> Durations {
        Durations::new(sessions.iter().map(Durations::length_of).collect())
    }

    pub fn mean(&self) -> f64 {
        self.expected_min(f64::INFINITY)
    }

    /// E[min(D, x)]; 0 for x <= 0 or no sessions.
    pub fn expected_min(&self, x: f64) -> f64 {
        let n = self.sorted.len();
        if n == 0 || x <= 0.0 {
            return 0.0;
        }
        let below = self.sorted.partition_point(|&d| d < x);
        // The lengths at or above x count as x.
        let clipped = if below < n { x * (n - below) as f64 } else { 0.0 };
        (self.prefix[below] + clipped) / n as f64
    }
}

/// Expected active sessions at `t` when arrivals ran at `rates[k].1` from
/// `rates[k].0` until the next entry's start (the last until `t`).
pub fn expected_population(d: &Durations, rates: &[(f64, f64)], t: f64) -> f64 {
    rates
        .iter()
        .enumerate()
        .map(|(k, &(from, rate))| {
            let until = rates.get(k + 1).map_or(t, |next| next.0.min(t));
            if until <= from {
                return 0.0;
            }
            rate * (d.expected_min(t - from) - d.expected_min(t - until))
        })
        .sum()
}

/// The share of the steady-state population at the current rate (the last
/// of `rates`) missing at `t`, with `failed_playing` sessions that failed and
/// would still be playing taken away; negative when there are more.
pub fn gap(d: &Durations, rates: &[(f64, f64)], t: f64, failed_playing: usize) -> f64 {
    let Some(&(_, rate)) = rates.last() else { return 0.0 };
    let steady = rate * d.mean();
    if steady <= 0.0 {
        return 0.0;
    }
    (steady - (expected_population(d, rates, t) - failed_playing as f64)) / steady
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_min_is_the_mean_of_the_clipped_lengths() {
        let d = Durations::new(vec![10.0, 20.0, 30.0, 100.0]);
        assert_eq!(d.mean(), 40.0);
        assert_eq!(d.expected_min(0.0), 0.0);
        assert_eq!(d.expected_min(15.0), (10.0 + 15.0 * 3.0) / 4.0);
        assert_eq!(d.expected_min(30.0), (10.0 + 20.0 + 30.0 + 30.0) / 4.0);
        assert_eq!(d.expected_min(1e9), 40.0);
        assert_eq!(Durations::new(vec![]).mean(), 0.0);
    }

    #[test]
    fn one_rate_approaches_its_steady_state_and_a_change_moves_it() {
        // Exponential-like spread of lengths with mean 100 s.
        let d = Durations::new((0..1000).map(|i| -100.0 * (1.0 - (i as f64 + 0.5) / 1000.0).ln()).collect());
        let m = d.mean();
        assert!((m - 100.0).abs() < 1.0, "{m}");
        let one = [(0.0, 2.0)];
        assert!((expected_population(&d, &one, 1e6) - 2.0 * m).abs() < 1e-6);
        let early = gap(&d, &one, 100.0, 0);
        assert!((0.35..0.40).contains(&early), "a third of the population still missing after one mean length: {early}");
        assert!(gap(&d, &one, 600.0, 0) < 0.01);
        // Up 10 % at 1000 s: right after, the new rate's population is 10 %/1.1 short.
        let up = [(0.0, 2.0), (1000.0, 2.2)];
        assert!((gap(&d, &up, 1000.0, 0) - 0.1 / 1.1).abs() < 1e-3);
        assert!(gap(&d, &up, 1060.0, 0) > gap(&d, &up, 1200.0, 0));
        // Down: an excess, shown as a negative gap.
        let down = [(0.0, 2.0), (1000.0, 1.8)];
        assert!(gap(&d, &down, 1030.0, 0) < -0.05);
        // Failed sessions still scheduled count as missing.
        assert!((gap(&d, &one, 1e6, 20) - 0.1).abs() < 1e-3);
    }
}
