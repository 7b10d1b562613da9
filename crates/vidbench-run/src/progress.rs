//! The progress of `vidbench run`: "run N of ~M", the time elapsed and an ETA
//! from the mean duration of the runs made so far (runs recalled by
//! `--resume` take no time and do not count towards it).
//!
//! On a terminal the progress is an indicatif bar that stays on the last line
//! while each run's result and the load's samples scroll above it. Anywhere
//! else (a log file, a pipe) there is no bar: each run start is one plain
//! line, so logs stay readable. Everything the driver prints while a bar may
//! be drawn goes through a [`Printer`], which writes above the bar or, without
//! one, to stderr.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Counts runs for the progress line.
pub struct Progress {
    started: Instant,
    done: usize,
    run_seconds: Vec<f64>,
    estimate_total: usize,
    bar: Option<ProgressBar>,
}

/// Prints a line without breaking the progress bar; cheap to clone and send
/// to another thread (the load client's).
#[derive(Clone)]
pub struct Printer(Option<ProgressBar>);

impl Printer {
    pub fn line(&self, line: &str) {
        match &self.0 {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Progress {
    /// Progress over about `estimate_total` runs; a bar when stderr is a terminal.
    pub fn new(estimate_total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(estimate_total as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [run {pos} of ~{len}] {wide_msg} | elapsed {elapsed}")
                    .expect("a valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Progress { started: Instant::now(), done: 0, run_seconds: Vec::new(), estimate_total, bar }
    }

    pub fn printer(&self) -> Printer {
        Printer(self.bar.clone())
    }

    /// Runs finished so far (made or recalled).
    pub fn done(&self) -> usize {
        self.done
    }

    /// A configuration took `actual` runs where `estimated` were counted.
    pub fn correct_estimate(&mut self, estimated: usize, actual: usize) {
        self.estimate_total = self.estimate_total + actual - estimated.min(self.estimate_total);
    }

    /// A run starts: the plain line, or the bar's message.
    pub fn start_run(&mut self, what: &str) {
        let n = self.done + 1;
        let m = self.estimate_total.max(n);
        let eta = if self.run_seconds.is_empty() {
            "?".to_string()
        } else {
            fmt_duration(vidbench_stats::mean(&self.run_seconds) * (m - self.done) as f64)
        };
        match &self.bar {
            Some(bar) => {
                bar.set_length(m as u64);
                bar.set_position(n as u64);
                bar.set_message(format!("{what} | ETA {eta}"));
            }
            None => {
                let elapsed = fmt_duration(self.started.elapsed().as_secs_f64());
                eprintln!("[run {n} of ~{m}] {what} | elapsed {elapsed} | ETA {eta}");
            }
        }
    }

    /// A run recorded by an earlier driver was recalled.
    pub fn recalled_run(&mut self) {
        self.done += 1;
    }

    /// A run took `wall_s` seconds.
    pub fn finished_run(&mut self, wall_s: f64) {
        self.done += 1;
        self.run_seconds.push(wall_s);
    }

    /// Removes the bar (every run is done, or the driver stops).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Seconds as `1h05m` or `3m07s`.
pub fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}
