//! The maximum failure-free rate search (paper 003 section 7, paper 000 section 4).
//!
//! A rate passes when the mean session-failure percentage of its runs is below
//! the threshold (0.3 % by default). The search is independent of how a run is
//! made: it asks a [`Prober`] for the outcome of (rate, repetition), so the same
//! code drives real servers and the simulated server of the tests, and a resumed
//! experiment replays finished runs from disk and takes the same decisions.
//!
//! 1. Coarse sweep: `coarse_points` rates evenly spaced from `low` to `high`,
//!    ascending, stopping at the first failing rate (higher ones fail too, and
//!    each run costs minutes).
//! 2. Bisection between the last passing and the first failing rate until they
//!    are `resolution` apart.
//! 3. Repetitions: the best passing rate is run until it has `repetitions` runs,
//!    for a 95 % confidence interval. If the mean of the repetitions fails, the
//!    next lower passing rate is taken and repeated the same way.
//!
//! [`bracket_max_failure_free`] is the search of the steady-state protocol,
//! made for probes that are steps of one long run (each change of rate is
//! small, so each step settles quickly) and for claims of a relative
//! resolution ("tells apart 5 %"):
//!
//! 1. Bracketing from `start`: up (or down) by `step_pct` per probe until the
//!    outcome flips, giving a passing rate and a failing one.
//! 2. Refinement: geometric bisection until the failing rate is at most
//!    `resolution_pct` above the passing one.
//! 3. Confirmation: each of the two is probed until it has `repetitions`
//!    outcomes, in blocks: first the rate probed last (steps of one run at an
//!    unchanged rate need no settling, so a block costs its windows only),
//!    then the other; a passing rate whose mean fails moves the pair one
//!    resolution step down, a failing rate whose mean passes moves it one
//!    step up. The answer is a passing rate with its repetitions next to a
//!    failing rate at most `resolution_pct` above it with as many.
//!
//! `max_probes` bounds the whole search; a search cut by it says so
//! (`complete: false`) and reports the best rate confirmed so far.

use crate::experiment::{BracketSection, SearchSection};
use vidbench_stats as stats;
use serde::{Deserialize, Serialize};

/// What one run at one rate gave.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Failed sessions among the measured ones, in percent.
    pub failure_pct: f64,
    /// MB/s delivered to clients by completed requests.
    pub throughput_mbs: f64,
}

/// Something that can run the system at a rate: a real server, or a simulation.
pub trait Prober {
    /// Runs (or recalls) repetition `repetition` (from 0) at `rate` sessions/s.
    fn probe(&mut self, rate: f64, repetition: u32) -> anyhow::Result<Outcome>;
}

/// Answers a search's first probes from outcomes played before, in order
/// (the finished steps of an interrupted stepped run), then hands the rest
/// to `live`. The search is deterministic, so it asks again for the rates
/// it asked for then; a different rate means the search or its settings
/// changed, and the recorded outcomes cannot stand for it. Without `live`,
/// a probe past the record fails with [`ReplayExhausted`]: whether the
/// record alone finishes the search is then known without running anything.
pub struct Replay<'a> {
    recorded: &'a [(f64, Outcome)],
    next: usize,
    live: Option<&'a mut dyn Prober>,
}

/// The record ran out before the search ended (a [`Replay`] without `live`).
#[derive(Debug)]
pub struct ReplayExhausted {
    pub next_rate: f64,
}

impl std::fmt::Display for ReplayExhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the recorded steps end before the search does (next rate {:.2} sessions/s)", self.next_rate)
    }
}

impl std::error::Error for ReplayExhausted {}

impl<'a> Replay<'a> {
    pub fn new(recorded: &'a [(f64, Outcome)], live: Option<&'a mut dyn Prober>) -> Replay<'a> {
        Replay { recorded, next: 0, live }
    }

    /// How many recorded outcomes the search has taken so far.
    pub fn replayed(&self) -> usize {
        self.next
    }

    /// Runs `search` on the record alone: its result when the record
    /// finishes it and every recorded outcome was asked for, a
    /// [`ReplayExhausted`] error when the search goes on past the record,
    /// and an error when it asks for other rates or ends before the record
    /// does (its settings changed).
    pub fn replay_all(
        recorded: &'a [(f64, Outcome)],
        search: impl FnOnce(&mut dyn Prober) -> anyhow::Result<SearchResult>,
    ) -> anyhow::Result<SearchResult> {
        let mut replay = Replay::new(recorded, None);
        let r = search(&mut replay)?;
        if replay.replayed() < recorded.len() {
            anyhow::bail!(
                "the search ends after {} of the {} recorded steps: the search or its settings changed since those steps ran",
                replay.replayed(),
                recorded.len()
            );
        }
        Ok(r)
    }
}

impl Prober for Replay<'_> {
    fn probe(&mut self, rate: f64, repetition: u32) -> anyhow::Result<Outcome> {
        if let Some(&(played, outcome)) = self.recorded.get(self.next) {
            if !same(played, rate) {
                anyhow::bail!(
                    "the search asks for {rate:.2} sessions/s as its probe {} where the recorded step played {played:.2}: \
                     the search or its settings changed since those steps ran",
                    self.next + 1
                );
            }
            self.next += 1;
            return Ok(outcome);
        }
        match self.live.as_mut() {
            Some(live) => live.probe(rate, repetition),
            None => Err(ReplayExhausted { next_rate: rate }.into()),
        }
    }
}

/// One probe the search made, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub phase: Phase,
    pub rate: f64,
    pub repetition: u32,
    pub outcome: Outcome,
}

/// Which part of the search a probe belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Coarse,
    Bisect,
    Repeat,
    /// The bracketing search's confirmation of the rate above the result.
    Above,
}

/// The search's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The maximum failure-free rate; `None` when even `low` fails.
    pub max_rate: Option<f64>,
    /// The lowest rate seen failing above `max_rate`; `None` when `high` passed
    /// (the true maximum may be higher than the searched range).
    pub first_failing_rate: Option<f64>,
    /// Mean and 95 % CI half-width of throughput at `max_rate`.
    pub throughput_mbs: Option<(f64, f64)>,
    /// Mean and 95 % CI half-width of failure % at `max_rate`.
    pub failure_pct: Option<(f64, f64)>,
    pub steps: Vec<Step>,
    /// False when a bracketing search hit `max_probes` before confirming.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub complete: bool,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// Rounds rates to 1/100 session/s so that run directories have stable names.
pub fn round_rate(r: f64) -> f64 {
    (r * 100.0).round() / 100.0
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

struct History {
    steps: Vec<Step>,
    threshold: f64,
    /// At most this many probes (the bracketing search's `max_probes`).
    budget: Option<usize>,
}

impl History {
    fn outcomes(&self, rate: f64) -> Vec<Outcome> {
        self.steps.iter().filter(|s| same(s.rate, rate)).map(|s| s.outcome).collect()
    }
    fn passes(&self, rate: f64) -> bool {
        let o = self.outcomes(rate);
        !o.is_empty() && stats::mean(&o.iter().map(|o| o.failure_pct).collect::<Vec<_>>()) < self.threshold
    }
    fn run(&mut self, prober: &mut dyn Prober, phase: Phase, rate: f64) -> anyhow::Result<bool> {
        let repetition = self.outcomes(rate).len() as u32;
        let outcome = prober.probe(rate, repetition)?;
        self.steps.push(Step { phase, rate, repetition, outcome });
        Ok(self.passes(rate))
    }
}

/// Finds the maximum failure-free rate with `prober`.
pub fn find_max_failure_free(
    search: &SearchSection,
    threshold_pct: f64,
    prober: &mut dyn Prober,
) -> anyhow::Result<SearchResult> {
    let mut h = History { steps: Vec::new(), threshold: threshold_pct, budget: None };
    let n = search.coarse_points.max(2);
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    for i in 0..n {
        let rate = round_rate(search.low + (search.high - search.low) * i as f64 / (n - 1) as f64);
        if h.run(prober, Phase::Coarse, rate)? {
            lo = Some(rate);
        } else {
            hi = Some(rate);
            break;
        }
    }
    if let (Some(mut l), Some(mut u)) = (lo, hi) {
        (l, u) = h.bisect(prober, l, u, |l, u| u - l > search.resolution, |l, u| (l + u) / 2.0)?;
        lo = Some(l);
        hi = Some(u);
    }
    // Repetitions at the candidate; fall back to lower passing rates if its mean fails.
    while let Some(candidate) = lo {
        while (h.outcomes(candidate).len() as u32) < search.repetitions {
            h.run(prober, Phase::Repeat, candidate)?;
        }
        if h.passes(candidate) {
            break;
        }
        hi = Some(hi.map_or(candidate, |u| u.min(candidate)));
        lo = h
            .steps
            .iter()
            .map(|s| s.rate)
            .filter(|r| *r < candidate && h.passes(*r))
            .fold(None, |best: Option<f64>, r| Some(best.map_or(r, |b| b.max(r))));
    }
    Ok(h.result(lo, hi, true))
}

impl History {
    /// Bisection between a passing `l` and a failing `u` while `wide(l, u)`
    /// and the probe budget (if any) allow, at `mid(l, u)` rounded.
    fn bisect(
        &mut self,
        prober: &mut dyn Prober,
        mut l: f64,
        mut u: f64,
        wide: impl Fn(f64, f64) -> bool,
        mid: impl Fn(f64, f64) -> f64,
    ) -> anyhow::Result<(f64, f64)> {
        while wide(l, u) && self.budget_left() {
            let m = round_rate(mid(l, u));
            if same(m, l) || same(m, u) {
                break;
            }
            if self.run(prober, Phase::Bisect, m)? {
                l = m;
            } else {
                u = m;
            }
        }
        Ok((l, u))
    }

    fn budget_left(&self) -> bool {
        self.budget.is_none_or(|b| self.steps.len() < b)
    }

    fn count(&self, rate: f64) -> u32 {
        self.outcomes(rate).len() as u32
    }

    fn result(self, lo: Option<f64>, hi: Option<f64>, complete: bool) -> SearchResult {
        let summary = |f: fn(&Outcome) -> f64| {
            lo.map(|r| {
                let v: Vec<f64> = self.outcomes(r).iter().map(f).collect();
                (stats::mean(&v), stats::ci95_half_width(&v))
            })
        };
        SearchResult {
            max_rate: lo,
            first_failing_rate: hi,
            throughput_mbs: summary(|o| o.throughput_mbs),
            failure_pct: summary(|o| o.failure_pct),
            steps: self.steps,
            complete,
        }
    }
}

/// The bracketing search of the steady-state protocol (see the module comment).
pub fn bracket_max_failure_free(b: &BracketSection, threshold_pct: f64, prober: &mut dyn Prober) -> anyhow::Result<SearchResult> {
    let mut h = History { steps: Vec::new(), threshold: threshold_pct, budget: Some(b.max_probes as usize) };
    let step = 1.0 + b.step_pct / 100.0;
    let res = 1.0 + b.resolution_pct / 100.0;
    // Rates below this are not worth a probe: nothing passes.
    let floor = b.start / 1000.0;

    // 1. Bracketing.
    let (mut lo, mut hi): (Option<f64>, Option<f64>);
    let mut rate = round_rate(b.start);
    if h.run(prober, Phase::Coarse, rate)? {
        lo = Some(rate);
        hi = None;
        while hi.is_none() && h.budget_left() {
            rate = round_rate(rate * step);
            if h.run(prober, Phase::Coarse, rate)? {
                lo = Some(rate);
            } else {
                hi = Some(rate);
            }
        }
    } else {
        hi = Some(rate);
        lo = None;
        while lo.is_none() && h.budget_left() {
            let lower = round_rate(rate / step);
            if lower < floor || same(lower, rate) {
                return Ok(h.result(None, hi, true));
            }
            rate = lower;
            if h.run(prober, Phase::Coarse, rate)? {
                lo = Some(rate);
            } else {
                hi = Some(rate);
            }
        }
    }
    let (Some(mut l), Some(mut u)) = (lo, hi) else {
        return Ok(h.result(lo, hi, false));
    };

    // 2. Refinement.
    (l, u) = h.bisect(prober, l, u, |l, u| u > l * res + 1e-9, |l, u| (l * u).sqrt())?;

    // 3. Confirmation: a block of repetitions at each of the pair.
    loop {
        if h.count(l) > 0 && !h.passes(l) {
            // The passing rate's mean failed: the pair moves one step down
            // (a rate the pair moved to is probed before it is judged).
            u = l;
            l = round_rate(l / res);
            if l < floor || same(l, u) {
                return Ok(h.result(None, Some(u), true));
            }
        } else if h.passes(u) {
            // The failing rate's mean passed: the pair moves one step up.
            l = u;
            u = round_rate(u * res);
        }
        let (nl, nu) = (h.count(l), h.count(u));
        if nl >= b.repetitions && nu >= b.repetitions && h.passes(l) && !h.passes(u) {
            return Ok(h.result(Some(l), Some(u), true));
        }
        if !h.budget_left() {
            let confirmed = h.passes(l) && h.count(l) > 0;
            return Ok(h.result(confirmed.then_some(l), Some(u), false));
        }
        // The rate probed last while it lacks repetitions (its next window
        // follows at once, with no settling), then the other: each rate's
        // repetitions are one block of consecutive windows.
        let last = h.steps.last().map(|s| s.rate);
        let (need_l, need_u) = (nl < b.repetitions, nu < b.repetitions);
        let stay_u = need_u && last.is_some_and(|r| same(r, u));
        if need_l && !stay_u || !need_u {
            h.run(prober, Phase::Repeat, l)?;
        } else {
            h.run(prober, Phase::Above, u)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A server whose failure % grows linearly past `knee` sessions/s, with noise.
    struct SimulatedServer {
        knee: f64,
        slope: f64,
        noise: f64,
        rng: rand_chacha::ChaCha8Rng,
        calls: Vec<(f64, u32)>,
    }

    impl SimulatedServer {
        fn new(knee: f64, noise: f64, seed: u64) -> Self {
            SimulatedServer { knee, slope: 2.0, noise, rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed), calls: vec![] }
        }
        /// The rate at which the expected failure % reaches the threshold.
        fn true_max(&self, threshold: f64) -> f64 {
            self.knee + threshold / self.slope
        }
    }

    impl Prober for SimulatedServer {
        fn probe(&mut self, rate: f64, repetition: u32) -> anyhow::Result<Outcome> {
            self.calls.push((rate, repetition));
            let expected = ((rate - self.knee) * self.slope).max(0.0);
            let noisy = (expected + self.rng.gen_range(-self.noise..=self.noise)).max(0.0);
            Ok(Outcome { failure_pct: noisy, throughput_mbs: rate.min(self.knee) * 0.5 })
        }
    }

    fn section() -> SearchSection {
        SearchSection { low: 10.0, high: 100.0, coarse_points: 5, resolution: 1.0, repetitions: 3 }
    }

    #[test]
    fn finds_the_knee_of_a_noisy_server() {
        for seed in 0..50 {
            let mut server = SimulatedServer::new(47.3, 0.25, seed);
            let r = find_max_failure_free(&section(), 0.3, &mut server).unwrap();
            let max = r.max_rate.unwrap();
            let truth = server.true_max(0.3);
            // The noise (+-0.25 %) blurs the crossing by about 0.25/slope = 0.125 on each side.
            assert!(max <= truth + 0.13, "seed {seed}: {max} is above the true maximum {truth}");
            assert!(max >= truth - 1.0 - 0.13, "seed {seed}: {max} is more than one resolution step below {truth}");
            let fail = r.first_failing_rate.unwrap();
            assert!(fail > max && fail - max <= 1.0 + 1e-9 || r.steps.iter().any(|s| s.phase == Phase::Repeat && s.rate > max));
            // Repetitions at the result, and the CI comes from them.
            let reps: Vec<_> = r.steps.iter().filter(|s| s.rate == max).collect();
            assert!(reps.len() >= 3, "seed {seed}: {} runs at the result", reps.len());
            let (tput, _ci) = r.throughput_mbs.unwrap();
            assert!((tput - max.min(47.3) * 0.5).abs() < 1e-9);
            // Coarse 10, 32.5, 55 -> stops at 55; bisection of 22.5 to 1 takes 5 steps; 2 more repetitions.
            assert!(r.steps.len() <= 3 + 5 + 2 + 6, "seed {seed}: {} runs is too many", r.steps.len());
        }
    }

    #[test]
    fn coarse_sweep_stops_at_the_first_failure() {
        let mut server = SimulatedServer::new(20.0, 0.0, 1);
        let r = find_max_failure_free(&section(), 0.3, &mut server).unwrap();
        let coarse: Vec<f64> = r.steps.iter().filter(|s| s.phase == Phase::Coarse).map(|s| s.rate).collect();
        assert_eq!(coarse, [10.0, 32.5]);
        assert!((r.max_rate.unwrap() - 20.0).abs() <= 1.0);
        assert_eq!(r.failure_pct.unwrap().0, 0.0);
    }

    #[test]
    fn reports_none_when_even_the_lowest_rate_fails() {
        let mut server = SimulatedServer::new(2.0, 0.0, 1);
        let r = find_max_failure_free(&section(), 0.3, &mut server).unwrap();
        assert_eq!(r.max_rate, None);
        assert_eq!(r.first_failing_rate, Some(10.0));
        assert_eq!(r.steps.len(), 1);
        assert_eq!(r.throughput_mbs, None);
    }

    #[test]
    fn reports_an_open_bound_when_the_highest_rate_passes() {
        let mut server = SimulatedServer::new(500.0, 0.0, 1);
        let r = find_max_failure_free(&section(), 0.3, &mut server).unwrap();
        assert_eq!(r.max_rate, Some(100.0));
        assert_eq!(r.first_failing_rate, None);
        assert_eq!(r.steps.iter().filter(|s| s.rate == 100.0).count(), 3);
    }

    #[test]
    fn falls_back_when_repetitions_fail() {
        // Fails at 40 only sometimes: first run passes, repetitions fail on average.
        struct Flaky(u32);
        impl Prober for Flaky {
            fn probe(&mut self, rate: f64, rep: u32) -> anyhow::Result<Outcome> {
                self.0 += 1;
                let f = if rate >= 41.0 { 5.0 } else if rate >= 39.0 && rep > 0 { 1.0 } else { 0.0 };
                Ok(Outcome { failure_pct: f, throughput_mbs: 1.0 })
            }
        }
        let s = SearchSection { low: 10.0, high: 50.0, coarse_points: 5, resolution: 1.0, repetitions: 3 };
        let r = find_max_failure_free(&s, 0.3, &mut Flaky(0)).unwrap();
        let max = r.max_rate.unwrap();
        assert!(max < 39.0, "{max} should have fallen below the flaky rates");
        assert_eq!(r.steps.iter().filter(|st| st.rate == max).count(), 3);
    }

    #[test]
    fn replaying_recorded_outcomes_takes_the_same_decisions() {
        let mut server = SimulatedServer::new(47.3, 0.25, 7);
        let first = find_max_failure_free(&section(), 0.3, &mut server).unwrap();
        struct Replay(Vec<Step>);
        impl Prober for Replay {
            fn probe(&mut self, rate: f64, rep: u32) -> anyhow::Result<Outcome> {
                let s = self.0.iter().find(|s| s.rate == rate && s.repetition == rep).expect("asked for a run that was not made");
                Ok(s.outcome)
            }
        }
        let second = find_max_failure_free(&section(), 0.3, &mut Replay(first.steps.clone())).unwrap();
        assert_eq!(first, second);
    }

    fn bracket() -> BracketSection {
        BracketSection { start: 30.0, step_pct: 20.0, resolution_pct: 5.0, repetitions: 3, max_probes: 30 }
    }

    #[test]
    fn the_bracketing_search_resolves_5_percent_with_repetitions_on_both_sides() {
        for (knee, start) in [(47.3, 30.0), (47.3, 80.0), (10.0, 30.0), (100.0, 30.0)] {
            for seed in 0..30 {
                let mut server = SimulatedServer::new(knee, 0.1, seed);
                let b = BracketSection { start, ..bracket() };
                let r = bracket_max_failure_free(&b, 0.3, &mut server).unwrap();
                assert!(r.complete, "knee {knee} start {start} seed {seed}: {:?}", r.steps);
                let (max, fail) = (r.max_rate.unwrap(), r.first_failing_rate.unwrap());
                let truth = server.true_max(0.3);
                // 0.1 % noise blurs the crossing by 0.05 sessions/s each side.
                assert!(max <= truth + 0.06, "seed {seed}: {max} above the true maximum {truth}");
                assert!(fail >= truth - 0.06, "seed {seed}: {fail} fails below the true maximum {truth}");
                assert!(fail <= max * 1.05 + 0.011, "seed {seed}: {max} and {fail} are more than 5 % apart");
                let at = |rate: f64| r.steps.iter().filter(|s| same(s.rate, rate)).count();
                assert!(at(max) >= 3 && at(fail) >= 3, "seed {seed}: {} and {} runs", at(max), at(fail));
                assert!(r.steps.len() <= 16, "knee {knee} start {start} seed {seed}: {} probes", r.steps.len());
            }
        }
    }

    #[test]
    fn the_bracketing_search_confirms_in_blocks_starting_where_it_is() {
        for seed in 0..10 {
            let mut server = SimulatedServer::new(47.3, 0.0, seed);
            let r = bracket_max_failure_free(&bracket(), 0.3, &mut server).unwrap();
            let rates: Vec<f64> = r.steps.iter().map(|s| s.rate).collect();
            let first_confirm = r.steps.iter().position(|s| matches!(s.phase, Phase::Repeat | Phase::Above)).unwrap();
            // The first confirmation continues at the rate probed last, and
            // the rate changes once more at most: two blocks.
            assert_eq!(rates[first_confirm], rates[first_confirm - 1], "{rates:?}");
            let changes = rates[first_confirm..].windows(2).filter(|w| w[0] != w[1]).count();
            assert!(changes <= 1, "{rates:?}");
            assert!(r.complete);
        }
    }

    #[test]
    fn a_rate_the_pair_moved_down_to_is_probed_before_it_is_judged() {
        // Seen on nginx at paper scale: 2.74 passes, 2.87 fails, then one of
        // 2.74's repetitions fails after an overloaded step, so its mean
        // fails and the pair moves down to (2.61, 2.74) while the block at
        // 2.74 is still open. 2.61 must then be probed, not skipped.
        struct Recorded;
        impl Prober for Recorded {
            fn probe(&mut self, rate: f64, rep: u32) -> anyhow::Result<Outcome> {
                let fails = rate >= 2.8 || (same(rate, 2.74) && rep == 1);
                Ok(Outcome { failure_pct: if fails { 5.0 } else { 0.0 }, throughput_mbs: 20.0 })
            }
        }
        let b = BracketSection { start: 3.0, ..bracket() };
        let r = bracket_max_failure_free(&b, 0.3, &mut Recorded).unwrap();
        let rates: Vec<f64> = r.steps.iter().map(|s| s.rate).collect();
        assert_eq!(r.max_rate, Some(2.61), "{rates:?}");
        assert_eq!(r.first_failing_rate, Some(2.74), "{rates:?}");
        assert!(!rates.contains(&2.49), "2.61 was skipped: {rates:?}");
    }

    #[test]
    fn the_bracketing_search_moves_down_when_repetitions_fail_and_stops_at_its_budget() {
        struct Flaky;
        impl Prober for Flaky {
            fn probe(&mut self, rate: f64, rep: u32) -> anyhow::Result<Outcome> {
                let f = if rate >= 41.0 { 5.0 } else if rate >= 38.0 && rep > 0 { 1.0 } else { 0.0 };
                Ok(Outcome { failure_pct: f, throughput_mbs: 1.0 })
            }
        }
        let r = bracket_max_failure_free(&bracket(), 0.3, &mut Flaky).unwrap();
        let max = r.max_rate.unwrap();
        assert!(max < 38.0 && r.complete, "{max}");
        let short = BracketSection { max_probes: 4, ..bracket() };
        let r = bracket_max_failure_free(&short, 0.3, &mut Flaky).unwrap();
        assert!(!r.complete);
        assert_eq!(r.steps.len(), 4);
    }

    #[test]
    fn the_bracketing_search_reports_none_when_nothing_passes() {
        let mut server = SimulatedServer::new(0.0, 0.0, 1);
        server.slope = 1000.0;
        let r = bracket_max_failure_free(&BracketSection { max_probes: 60, ..bracket() }, 0.3, &mut server).unwrap();
        assert_eq!(r.max_rate, None);
        assert!(r.complete, "{} probes", r.steps.len());
        // Down to a thousandth of the start, then it gives up.
        assert!(r.steps.iter().all(|s| s.rate >= 0.03));
    }

    #[test]
    fn prober_errors_stop_the_search() {
        struct Broken;
        impl Prober for Broken {
            fn probe(&mut self, _: f64, _: u32) -> anyhow::Result<Outcome> {
                anyhow::bail!("server did not start")
            }
        }
        let err = find_max_failure_free(&section(), 0.3, &mut Broken).unwrap_err();
        assert!(err.to_string().contains("did not start"));
    }

    #[test]
    fn a_search_resumed_from_recorded_steps_takes_the_same_decisions() {
        let whole = bracket_max_failure_free(&bracket(), 0.3, &mut SimulatedServer::new(30.0, 0.1, 7)).unwrap();
        assert!(whole.steps.len() > 4);
        // Interrupted after its first four probes: those are the record.
        let recorded: Vec<(f64, Outcome)> = whole.steps[..4].iter().map(|s| (s.rate, s.outcome)).collect();
        // The record alone does not finish the search, and says where it goes next.
        let err = Replay::replay_all(&recorded, |p| bracket_max_failure_free(&bracket(), 0.3, p)).unwrap_err();
        let exhausted = err.downcast_ref::<ReplayExhausted>().expect("the record ran out");
        assert_eq!(exhausted.next_rate, whole.steps[4].rate);
        // The rest runs live, on a server that gives the same outcomes for
        // the probes after the record (same seed, its first four draws spent).
        let mut live = SimulatedServer::new(30.0, 0.1, 7);
        for s in &whole.steps[..4] {
            live.probe(s.rate, s.repetition).unwrap();
        }
        live.calls.clear();
        let resumed = {
            let mut replay = Replay::new(&recorded, Some(&mut live));
            let r = bracket_max_failure_free(&bracket(), 0.3, &mut replay).unwrap();
            assert_eq!(replay.replayed(), 4);
            r
        };
        assert_eq!(resumed, whole);
        assert_eq!(live.calls.len(), whole.steps.len() - 4, "the recorded probes were not run again");
        // A whole record finishes the search without a live prober.
        let all: Vec<(f64, Outcome)> = whole.steps.iter().map(|s| (s.rate, s.outcome)).collect();
        assert_eq!(Replay::replay_all(&all, |p| bracket_max_failure_free(&bracket(), 0.3, p)).unwrap(), whole);
        // A record longer than the search (its max_probes lowered since) is refused.
        let fewer = BracketSection { max_probes: 3, ..bracket() };
        let err = Replay::replay_all(&all, |p| bracket_max_failure_free(&fewer, 0.3, p)).unwrap_err();
        assert!(err.to_string().contains("ends after 3 of the"), "{err}");
    }

    #[test]
    fn a_record_from_another_search_is_refused() {
        let whole = bracket_max_failure_free(&bracket(), 0.3, &mut SimulatedServer::new(30.0, 0.1, 7)).unwrap();
        let recorded: Vec<(f64, Outcome)> = whole.steps.iter().map(|s| (s.rate, s.outcome)).collect();
        let moved = BracketSection { start: bracket().start * 1.5, ..bracket() };
        let err = bracket_max_failure_free(&moved, 0.3, &mut Replay::new(&recorded, None)).unwrap_err();
        assert!(err.downcast_ref::<ReplayExhausted>().is_none());
        assert!(err.to_string().contains("changed since those steps ran"), "{err}");
    }
}
