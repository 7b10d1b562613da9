//! How many runs and how much machine time an experiment's configurations
//! take, for progress output and `vidbench run --check` (a lower estimate:
//! gates that hold a window back are not foreseen).

use crate::experiment::{Config, Experiment, RatePlan, RunKind};

/// Estimated number of runs of a plan (exact for fixed plans).
pub fn estimate_runs(plan: &RatePlan) -> usize {
    match plan {
        RatePlan::Fixed { rates, repetitions, .. } => rates.len() * *repetitions as usize,
        RatePlan::None { repetitions } => *repetitions as usize,
        RatePlan::Bracket { bracket, .. } => 3 + 2 * bracket.repetitions as usize,
        RatePlan::Search { search, .. } => {
            let step = (search.high - search.low) / (search.coarse_points.max(2) - 1) as f64;
            let bisect = (step / search.resolution).log2().ceil().max(0.0) as usize;
            (search.coarse_points as usize).div_ceil(2) + bisect + search.repetitions as usize - 1
        }
    }
}

/// Estimated number of runs of a configuration: one when its rates are steps
/// of one run (the steady protocol's `one_run`), else those of its plan.
pub fn estimate_config_runs(exp: &Experiment, cfg: &Config) -> usize {
    if cfg.steady(exp.run.steady).is_some_and(|t| t.one_run) && cfg.kind == RunKind::Server {
        1
    } else {
        estimate_runs(&cfg.rates)
    }
}

/// What a run costs before its load: mount, warming the cache (about 40 s for
/// Table 3's warming set) and starting the server and daemon.
const RUN_SETUP_S: f64 = 60.0;

/// Estimated machine time of a configuration under the steady protocol, in
/// seconds, for planning (`--check`): a ramp and a window, then per further
/// rate its settling and window, per repetition a window (each window with
/// its hold), as many windows as [`estimate_runs`] counts probes. Gates that
/// keep a window waiting past its settling are not foreseen, so it is a
/// lower estimate; Table 3's recorded searches took 0-15 % longer. `None`
/// where the time is not set by the protocol: `wc` (the drive's speed) and
/// runs without the steady protocol (their sessions' length).
pub fn estimate_config_seconds(exp: &Experiment, cfg: &Config) -> Option<f64> {
    let st = cfg.steady(exp.run.steady).filter(|_| cfg.kind == RunKind::Server)?;
    let windows = estimate_runs(&cfg.rates).max(1);
    let rates = match &cfg.rates {
        RatePlan::Fixed { rates, .. } => rates.len(),
        RatePlan::None { .. } => 1,
        // The bracket's climb, its two bisections and the rate above the result.
        RatePlan::Bracket { .. } => 5,
        RatePlan::Search { search, .. } => windows + 1 - search.repetitions as usize,
    }
    .clamp(1, windows);
    let window = st.measure_s + st.hold_s;
    let first = RUN_SETUP_S + st.ramp_s + window;
    Some(if st.one_run {
        first + (rates - 1) as f64 * (st.settle_s + window) + (windows - rates) as f64 * window
    } else {
        windows as f64 * first
    })
}
