//! One configuration's result as a headline (paper 000 Table 3's cell): its
//! maximum failure-free rate and MB/s, from fixed rates or a search.

use crate::experiment::{Config, RunKind};
use crate::search::{Outcome, SearchResult};
use serde::{Deserialize, Serialize};
use vidbench_stats as stats;

/// One configuration's headline, as in paper 000 Table 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub config: String,
    pub label: String,
    pub kind: RunKind,
    /// The highest rate whose mean failure % is below the threshold.
    pub max_failure_free_rate: Option<f64>,
    pub throughput_mbs: Option<f64>,
    pub throughput_ci95_mbs: Option<f64>,
    pub failure_pct: Option<f64>,
    pub threshold_pct: f64,
    /// Whether a rate above the maximum was seen failing.
    pub bounded: bool,
    /// A bracketing search stopped by its `max_probes` before it confirmed
    /// a rate: the probes it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_after_probes: Option<usize>,
}

impl ConfigSummary {
    pub(crate) fn from_points(cfg: &Config, threshold_pct: f64, points: &[(f64, Vec<Outcome>)]) -> ConfigSummary {
        let mut best: Option<(f64, &Vec<Outcome>)> = None;
        let mut bounded = false;
        for (rate, outcomes) in points {
            let fail = stats::mean(&outcomes.iter().map(|o| o.failure_pct).collect::<Vec<_>>());
            if fail < threshold_pct {
                if best.is_none_or(|(r, _)| *rate > r) {
                    best = Some((*rate, outcomes));
                }
            } else {
                bounded = true;
            }
        }
        let tp = |o: &Vec<Outcome>| o.iter().map(|o| o.throughput_mbs).collect::<Vec<_>>();
        ConfigSummary {
            config: cfg.name.clone(),
            label: cfg.label.clone(),
            kind: cfg.kind,
            max_failure_free_rate: best.map(|(r, _)| r).filter(|_| cfg.kind == RunKind::Server),
            throughput_mbs: best.map(|(_, o)| stats::mean(&tp(o))),
            throughput_ci95_mbs: best.map(|(_, o)| stats::ci95_half_width(&tp(o))),
            failure_pct: best.map(|(_, o)| stats::mean(&o.iter().map(|o| o.failure_pct).collect::<Vec<_>>())),
            threshold_pct,
            bounded,
            cut_after_probes: None,
        }
    }

    pub(crate) fn from_search(cfg: &Config, threshold_pct: f64, r: &SearchResult) -> ConfigSummary {
        ConfigSummary {
            config: cfg.name.clone(),
            label: cfg.label.clone(),
            kind: cfg.kind,
            max_failure_free_rate: r.max_rate,
            throughput_mbs: r.throughput_mbs.map(|t| t.0),
            throughput_ci95_mbs: r.throughput_mbs.map(|t| t.1),
            failure_pct: r.failure_pct.map(|t| t.0),
            threshold_pct,
            bounded: r.first_failing_rate.is_some(),
            cut_after_probes: (!r.complete).then_some(r.steps.len()),
        }
    }

    pub fn headline(&self) -> String {
        match (self.kind, self.max_failure_free_rate, self.throughput_mbs) {
            (RunKind::Wc, _, Some(t)) => format!("wc reads {t:.2} MB/s"),
            (_, Some(r), Some(t)) => format!(
                "maximum failure-free rate {}{r:.2} sessions/s, {t:.2} +- {:.2} MB/s{}",
                if self.bounded { "" } else { ">= " },
                self.throughput_ci95_mbs.unwrap_or(0.0),
                match self.cut_after_probes {
                    Some(n) => format!(" (the best passing, not confirmed, when the search stopped at its max_probes of {n} probes: raise max_probes and --resume to go on)"),
                    None => String::new(),
                }
            ),
            _ => match self.cut_after_probes {
                Some(n) => format!(
                    "no rate confirmed: the search stopped at its max_probes ({n} probes) before a rate had its repetitions; raise max_probes and --resume to go on"
                ),
                None => format!("no rate was failure-free (all >= {} % failed sessions)", self.threshold_pct),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_headline_says_when_the_search_ran_out_of_probes() {
        let summary = |rate: Option<f64>, cut: Option<usize>| ConfigSummary {
            config: "a".into(),
            label: "a".into(),
            kind: RunKind::Server,
            max_failure_free_rate: rate,
            throughput_mbs: rate.map(|r| r * 8.0),
            throughput_ci95_mbs: Some(0.5),
            failure_pct: Some(0.0),
            threshold_pct: 0.3,
            bounded: true,
            cut_after_probes: cut,
        };
        assert_eq!(summary(Some(4.7), None).headline(), "maximum failure-free rate 4.70 sessions/s, 37.60 +- 0.50 MB/s");
        let cut = summary(Some(4.7), Some(14)).headline();
        assert!(cut.starts_with("maximum failure-free rate 4.70") && cut.contains("not confirmed") && cut.contains("raise max_probes and --resume"), "{cut}");
        let none = summary(None, Some(14)).headline();
        assert!(none.contains("no rate confirmed") && none.contains("14 probes") && none.contains("raise max_probes and --resume"), "{none}");
        assert!(summary(None, None).headline().starts_with("no rate was failure-free"));
    }
}
