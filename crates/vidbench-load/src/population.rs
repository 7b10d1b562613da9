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
//! (docs/run.md, "Settling gate"). Failed sessions end early too, so
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
//!
//! **Population matching** reaches that steady state at once instead of
//! waiting for it. In the steady state at rate r the sessions in play are a
//! Poisson number (mean r E[D]) of sessions drawn with probability
//! proportional to their length, each at an age uniform over its length (the
//! stationary renewal process). So at a change from rate r0 to r, a stepped
//! run can:
//! - add, for a rise, Poisson((r - r0) E[D]) such sessions in progress
//!   ([`Stationary::draw`], [`in_progress`]): each joins at its age, skipping
//!   the requests it would already have made;
//! - resume each session that failed and would still be playing, at the age
//!   it would have now (for a fall, each with probability r/r0, like the
//!   sessions in play);
//! - withdraw, for a fall, each session in play with probability 1 - r/r0
//!   (independent thinning of a Poisson population is a Poisson population).
//!
//! The draw places sessions on their paced schedule only: a session's first
//! requests are unpaced (each as soon as the previous one completes), so the
//! time a session spends fetching them before its pacing begins is not in D,
//! and no session is drawn inside it. New arrivals fill those ages within
//! seconds; at paper 000's scale the matched population lacks about 1-2 %
//! until then.
//!
//! The added sessions join over a few seconds rather than at once, so that
//! their first requests (each a cache miss with no read-ahead behind it) do
//! not arrive as one burst. What matching cannot bring at once is the page
//! cache's own steady state; the step's minimum settling time is for that.

use rand::Rng;
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

    /// A session's paced time: the sum of its requests' `pace_s` after the
    /// first (the first request starts the session, whatever its pace says).
    pub fn length_of(s: &Session) -> f64 {
        s.requests.iter().skip(1).filter_map(|r| r.pace_s).sum()
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

/// Draws sessions of the steady state: an index into the session list with
/// probability proportional to the session's length, and an age uniform over
/// that length.
#[derive(Debug, Clone)]
pub struct Stationary {
    /// cumulative[i] = sum of the lengths of sessions 0..=i.
    cumulative: Vec<f64>,
}

impl Stationary {
    /// From the sessions' lengths ([`Durations::length_of`]).
    pub fn new(lengths: &[f64]) -> Stationary {
        let mut total = 0.0;
        let cumulative = lengths
            .iter()
            .map(|&d| {
                total += if d.is_finite() && d > 0.0 { d } else { 0.0 };
                total
            })
            .collect();
        Stationary { cumulative }
    }

    /// (session index, age in seconds); `None` when no session has a length.
    pub fn draw(&self, rng: &mut impl Rng) -> Option<(usize, f64)> {
        let total = *self.cumulative.last()?;
        if total <= 0.0 {
            return None;
        }
        let x = rng.gen::<f64>() * total;
        let i = self.cumulative.partition_point(|&c| c <= x).min(self.cumulative.len() - 1);
        let before = if i == 0 { 0.0 } else { self.cumulative[i - 1] };
        // x is uniform inside session i's share: its offset there is the age.
        Some((i, (x - before).max(0.0)))
    }
}

/// `session` at `age` seconds after it began: the index of the first request
/// not yet made and how long after `age` it is due (requests are due at the
/// running sum of their `pace_s`). `None` when every request is already made.
pub fn in_progress(session: &Session, age: f64) -> Option<(usize, f64)> {
    let mut due = 0.0;
    for (i, r) in session.requests.iter().enumerate() {
        if i > 0 {
            due += r.pace_s.unwrap_or(0.0);
        }
        if due >= age {
            return Some((i, due - age));
        }
    }
    None
}

/// What a population match does at a change of rate from `old` to `new`
/// sessions/s: how many stationary sessions in progress to add (a rise),
/// with what probability to withdraw each session in play (a fall), and
/// with what probability to resume each failed session that would still be
/// playing (1, or r/r0 for a fall: it belongs to the old rate's population).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    pub add: u64,
    pub withdraw_probability: f64,
    pub resume_probability: f64,
}

pub fn plan_match(d: &Durations, old: f64, new: f64, rng: &mut impl Rng) -> Match {
    use rand_distr::{Distribution, Poisson};
    let missing = (new - old).max(0.0) * d.mean();
    let add = if missing > 0.0 { Poisson::new(missing).map_or(0.0, |p| p.sample(rng)) as u64 } else { 0 };
    let (withdraw_probability, resume_probability) = if old > new && old > 0.0 { (1.0 - new / old, new / old) } else { (0.0, 1.0) };
    Match { add, withdraw_probability, resume_probability }
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

    fn session(paces: &[f64]) -> Session {
        use vidbench_library::Request;
        let requests = paces
            .iter()
            .enumerate()
            .map(|(i, &p)| Request { path: format!("/v/{i}"), range: None, pace_s: (i > 0).then_some(p), timeout_s: 10.0, file_id: None })
            .collect();
        Session { id: 0, phase: vidbench_library::Phase::Measure, class: "t".into(), rate_bps: 0, delay_ms: 0, video: 0, requests }
    }

    #[test]
    fn a_session_in_progress_skips_the_requests_already_made() {
        let s = session(&[0.0, 10.0, 10.0, 10.0]); // due at 0, 10, 20, 30
        assert_eq!(in_progress(&s, 0.0), Some((0, 0.0)));
        assert_eq!(in_progress(&s, 4.0), Some((1, 6.0)));
        assert_eq!(in_progress(&s, 10.0), Some((1, 0.0)));
        assert_eq!(in_progress(&s, 29.5), Some((3, 0.5)));
        assert_eq!(in_progress(&s, 30.5), None);
    }

    #[test]
    fn stationary_draws_are_length_biased_with_uniform_ages() {
        use rand::SeedableRng;
        // Lengths 10 and 30: the second is in play three times as often.
        let sessions = [session(&[0.0, 10.0]), session(&[0.0, 10.0, 10.0, 10.0]), session(&[0.0])];
        let st = Stationary::new(&sessions.iter().map(Durations::length_of).collect::<Vec<_>>());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut count = [0u32; 3];
        let mut ages = [0.0f64; 3];
        for _ in 0..40_000 {
            let (i, age) = st.draw(&mut rng).unwrap();
            count[i] += 1;
            ages[i] += age;
            assert!(age < Durations::length_of(&sessions[i]));
        }
        assert_eq!(count[2], 0, "a session of length 0 is never in play");
        let share = count[1] as f64 / 40_000.0;
        assert!((share - 0.75).abs() < 0.01, "{share}");
        let mean_age = ages[1] / count[1] as f64;
        assert!((mean_age - 15.0).abs() < 0.3, "{mean_age}");
        assert!(Stationary::new(&[0.0]).draw(&mut rng).is_none());
    }

    #[test]
    fn a_match_adds_for_a_rise_and_failures_and_thins_for_a_fall() {
        use rand::SeedableRng;
        let d = Durations::new(vec![100.0; 10]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        // From idle to 2/s: Poisson with mean 200.
        let n = 400;
        let mean = (0..n).map(|_| plan_match(&d, 0.0, 2.0, &mut rng).add as f64).sum::<f64>() / n as f64;
        assert!((mean - 200.0).abs() < 3.0, "{mean}");
        let up = plan_match(&d, 2.0, 2.2, &mut rng);
        assert!(up.add > 0 && up.withdraw_probability == 0.0 && up.resume_probability == 1.0, "{up:?}");
        let down = plan_match(&d, 2.0, 1.5, &mut rng);
        assert_eq!(down, Match { add: 0, withdraw_probability: 0.25, resume_probability: 0.75 });
        assert_eq!(plan_match(&d, 2.0, 2.0, &mut rng), Match { add: 0, withdraw_probability: 0.0, resume_probability: 1.0 });
    }

    #[test]
    fn matched_populations_are_the_steady_state_in_simulation() {
        // Sessions of lengths 50 and 250 s (mean 150); 1/s, then a match to
        // 1.5/s, then to 0.6/s: the expected count after each is r E[D].
        use rand::SeedableRng;
        let sessions = [session(&[0.0, 50.0]), session(&[0.0, 250.0])];
        let d = Durations::of_sessions(&sessions);
        let st = Stationary::new(&[50.0, 250.0]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let trials = 300;
        let (mut at_rise, mut at_fall) = (0u64, 0u64);
        for _ in 0..trials {
            let mut in_play: Vec<f64> = Vec::new(); // remaining lengths
            let add = |n: u64, in_play: &mut Vec<f64>, rng: &mut rand_chacha::ChaCha8Rng| {
                for _ in 0..n {
                    let (i, age) = st.draw(rng).unwrap();
                    in_play.push(Durations::length_of(&sessions[i]) - age);
                }
            };
            let m = plan_match(&d, 0.0, 1.5, &mut rng);
            add(m.add, &mut in_play, &mut rng);
            at_rise += in_play.len() as u64;
            let m = plan_match(&d, 1.5, 0.6, &mut rng);
            in_play.retain(|_| rng.gen::<f64>() >= m.withdraw_probability);
            at_fall += in_play.len() as u64;
        }
        let (rise, fall) = (at_rise as f64 / trials as f64, at_fall as f64 / trials as f64);
        assert!((rise - 225.0).abs() < 3.0, "{rise}");
        assert!((fall - 90.0).abs() < 2.0, "{fall}");
    }
}
