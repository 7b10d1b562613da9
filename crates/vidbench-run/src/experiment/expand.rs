//! From an experiment file as written ([`ExperimentFile`]) to a checked
//! [`Experiment`]: the checks serde's types cannot make (ranges, exclusive
//! keys, names used twice), each error naming its key path, and the expansion
//! of list-valued `prefetch_kb` / `read_ahead_kb` into one configuration per
//! value. One step per table of the file, in the file's order; the first error
//! found is the one reported.

use super::schema::{
    ChaosSection, ConfigSection, DiskMode, DiskSection, ExperimentFile, FillOrder, FsSize, MemorySection, PrefetchSize, RatesSection, RunKind,
    RunSection, ServerKind, WorkloadSection,
};
use super::schema::{OneOrMany, PromoteSetting};
use libception_proto::AdaptiveParams;
use super::{Config, Experiment, ExperimentError, Mode, RatePlan, RelativeTo, SteadySection, WorkloadSource, SAMPLE_INTERVAL_S};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

// The longest time any `*_s` key may give: the load client's bound (30
// days), which the run's times pass through to.
use vidbench_load::MAX_SECONDS;

/// The largest `memory.limit_mb` taken: 64 TiB.
const MAX_LIMIT_MB: u64 = 64 << 20;

/// The largest size in KiB any `*_kb` key may give (1 GiB).
const MAX_KB: u32 = 1 << 20;

/// The largest `max_sectors_kb` of a SATA disk (libata's
/// `max_hw_sectors_kb`), the most block mode emulates: above a loop device's
/// cap the emulated drive joins what the loop device split (docs/disk.md
/// "max_sectors_kb and paper 000's Fig 15").
pub const MAX_SECTORS_KB: u32 = 32767;

/// `nr_requests` the block layer accepts with a scheduler (BLKDEV_MIN_RQ to
/// 2048); the device may refuse less, and the mount says so with its limit.
const NR_REQUESTS: std::ops::RangeInclusive<u32> = 4..=2048;

/// `vidbench disk mount` flags the driver writes from keys; `[disk] args`
/// may not give them again (the mount would take the later one silently).
const DRIVER_FLAGS: &[&str] = &[
    "--block", "--fs", "--fs-size", "--fs-slack-pct", "--fill-order", "--image-cache", "--scheduler", "--max-sectors-kb",
    "--nr-requests", "--read-ahead-kb", "--max-request-kb", "--trace", "--library", "--preset",
];

/// FUSE mode's default largest request, KiB.
pub const DEFAULT_MAX_REQUEST_KB: u32 = 128;
/// Paper 003's failure threshold: a rate fails when 0.3 % of its sessions do.
const DEFAULT_THRESHOLD_PCT: f64 = 0.3;

/// Most drives `[disk] count` may mount.
pub const MAX_DISKS: u32 = 8;
/// Why a block-only key is refused in FUSE mode.
const BLOCK_ONLY: &str = "only applies to block mode ([disk] mode = \"block\" or \"auto\"); FUSE mode has no block layer";
/// Why `max_request_kb` is refused in block mode.
const FUSE_ONLY: &str = "only applies to FUSE mode (FUSE max_pages); in block mode the device's max_sectors_kb bounds requests";

/// What a name (of the experiment, of a configuration) may be made of; it
/// becomes a directory name.
const NAME_RULE: &str = "must be non-empty and use only letters, digits, '-', '_' and '.'";

fn name_ok(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

/// The largest fraction of a maximum failure-free rate a relative plan may
/// offer (overload experiments go above the maximum).
const MAX_FRACTION: f64 = 4.0;

/// Checks `file` (read from `path`; relative paths in it are relative to
/// `base`) and expands its sweeps.
pub(super) fn expand(file: ExperimentFile, path: &Path, base: &Path) -> Result<Experiment, ExperimentError> {
    let check = Checker { path, base };
    if !name_ok(&file.name) {
        return Err(check.invalid("name", NAME_RULE));
    }
    let workload = check.workload(&file.workload)?;
    let mut disk = file.disk.clone();
    check.disk(&disk)?;
    if disk.mode == DiskMode::Fuse {
        disk.max_request_kb.get_or_insert(DEFAULT_MAX_REQUEST_KB);
    }
    if let Some(c) = &disk.image_cache {
        disk.image_cache = Some(resolve(base, c));
    }
    check.memory(&file.memory)?;
    check.run(&file.run)?;
    let default_plan = file.rates.as_ref().map(|r| check.rates("rates", r, DEFAULT_THRESHOLD_PCT)).transpose()?;
    if file.configs.is_empty() {
        return Err(check.invalid("config", "the experiment has no [[config]]"));
    }
    let templates = resolve(base, &file.templates);
    let mut configs = Vec::new();
    let mut names = HashSet::new();
    for (i, section) in file.configs.iter().enumerate() {
        let key = format!("config[{i}] ({:?})", section.name);
        if !name_ok(&section.name) {
            return Err(check.invalid(format!("config[{i}].name"), NAME_RULE));
        }
        check.own_ramp(&key, section, file.run.steady.as_ref())?;
        for config in check.config(&key, section, &disk, default_plan.as_ref(), &templates)? {
            check.relative_rates(&key, &config, &configs)?;
            if !names.insert(config.name.clone()) {
                return Err(check.invalid(format!("{key}.name"), format!("configuration name {:?} is used twice", config.name)));
            }
            configs.push(config);
        }
    }
    Ok(Experiment {
        name: file.name,
        description: file.description,
        source: resolve(&std::env::current_dir().unwrap_or_default(), path),
        file_text: String::new(),
        templates,
        workload,
        disk,
        memory_limit_bytes: file.memory.limit_mb * 1024 * 1024,
        run: file.run,
        paths: file.paths,
        configs,
        omitted: Vec::new(),
        file_order: Vec::new(),
    })
}

/// Replaces each configuration by one per value of a key; when there is more
/// than one value, `set` also returns the suffix that names it.
fn sweep<T>(configs: &mut Vec<Config>, values: &[T], set: impl Fn(&mut Config, &T) -> String) {
    let many = values.len() > 1;
    *configs = configs
        .drain(..)
        .flat_map(|c| {
            values.iter().map(move |v| (c.clone(), v))
        })
        .map(|(mut c, v)| {
            let suffix = set(&mut c, v);
            if many {
                c.name.push_str(&suffix);
            }
            c
        })
        .collect();
}

/// The file being checked, for error messages and relative paths.
struct Checker<'a> {
    path: &'a Path,
    base: &'a Path,
}

impl Checker<'_> {
    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ExperimentError {
        ExperimentError::Invalid { path: self.path.to_owned(), key: key.into(), message: message.into() }
    }

    fn kb(&self, key: &str, v: u32) -> Result<(), ExperimentError> {
        if v == 0 || v > MAX_KB {
            return Err(self.invalid(key, format!("{v} KiB is out of range (1..={MAX_KB})")));
        }
        Ok(())
    }

    fn positive_seconds(&self, key: &str, v: f64) -> Result<(), ExperimentError> {
        if !(v.is_finite() && v > 0.0 && v <= MAX_SECONDS) {
            return Err(self.invalid(key, format!("must be a positive number of seconds, at most {MAX_SECONDS} (30 days)")));
        }
        Ok(())
    }

    /// `[workload]`: exactly one of `spec` and `dir`.
    fn workload(&self, w: &WorkloadSection) -> Result<WorkloadSource, ExperimentError> {
        match (&w.spec, &w.dir) {
            (Some(s), None) => Ok(WorkloadSource::Spec(resolve(self.base, s))),
            (None, Some(d)) => Ok(WorkloadSource::Dir(resolve(self.base, d))),
            _ => Err(self.invalid("workload", "give exactly one of `spec` (a spec to generate) or `dir` (a generated workload)")),
        }
    }

    /// `max_sectors_kb` at `key`: a page to a SATA disk's cap.
    fn max_sectors(&self, key: &str, v: u32) -> Result<(), ExperimentError> {
        if v > MAX_SECTORS_KB {
            return Err(self.invalid(
                key,
                format!("{v} KiB is above {MAX_SECTORS_KB} KiB, the largest max_hw_sectors_kb of a SATA disk (paper 000's 16 MB setting is 16384)"),
            ));
        }
        if v < 4 {
            return Err(self.invalid(key, format!("{v} KiB is below one page (4 KiB)")));
        }
        Ok(())
    }

    fn nr_requests(&self, key: &str, v: u32) -> Result<(), ExperimentError> {
        if !NR_REQUESTS.contains(&v) {
            return Err(self.invalid(key, format!("{v} is out of range ({}..={})", NR_REQUESTS.start(), NR_REQUESTS.end())));
        }
        Ok(())
    }

    /// `[disk]`: the keys of the other mode are refused.
    fn disk(&self, d: &DiskSection) -> Result<(), ExperimentError> {
        if d.preset.is_empty() {
            return Err(self.invalid("disk.preset", "is empty"));
        }
        self.kb("disk.read_ahead_kb", d.read_ahead_kb)?;
        if let Some(kb) = d.max_request_kb {
            if d.mode == DiskMode::Block {
                return Err(self.invalid("disk.max_request_kb", FUSE_ONLY));
            }
            self.kb("disk.max_request_kb", kb)?;
        }
        if d.mode == DiskMode::Fuse {
            for (k, set) in [
                ("fs", d.fs.is_some()),
                ("fs_size", d.fs_size.is_some()),
                ("fs_slack_pct", d.fs_slack_pct.is_some()),
                ("fill_order", d.fill_order.is_some()),
                ("fill_seed", d.fill_seed.is_some()),
                ("image_cache", d.image_cache.is_some()),
                ("scheduler", d.scheduler.is_some()),
                ("max_sectors_kb", d.max_sectors_kb.is_some()),
                ("nr_requests", d.nr_requests.is_some()),
            ] {
                if set {
                    return Err(self.invalid(format!("disk.{k}"), BLOCK_ONLY));
                }
            }
        }
        if let Some(kb) = d.max_sectors_kb {
            self.max_sectors("disk.max_sectors_kb", kb)?;
        }
        if let Some(n) = d.nr_requests {
            self.nr_requests("disk.nr_requests", n)?;
        }
        if let Some(pct) = d.fs_slack_pct {
            if d.fs_size != Some(FsSize::Packed) {
                return Err(self.invalid("disk.fs_slack_pct", "only applies to fs_size = \"packed\""));
            }
            if pct == 0 || pct > 1000 {
                return Err(self.invalid("disk.fs_slack_pct", format!("{pct} % is out of range (1..=1000)")));
            }
        }
        if d.fill_seed.is_some() && d.fill_order != Some(FillOrder::Shuffled) {
            return Err(self.invalid("disk.fill_seed", "only applies to fill_order = \"shuffled\""));
        }
        if !(1..=MAX_DISKS).contains(&d.count) {
            return Err(self.invalid("disk.count", format!("{} drives: from 1 to {MAX_DISKS}", d.count)));
        }
        if d.count > 1 && d.trace {
            return Err(self.invalid("disk.trace", "a trace is recorded for one drive only (disk.count = 1)"));
        }
        if let Some(bad) = d.args.iter().find(|a| DRIVER_FLAGS.contains(&a.split('=').next().unwrap_or(""))) {
            return Err(self.invalid("disk.args", format!("{bad} is set by the driver from the experiment's keys; use the key instead")));
        }
        Ok(())
    }

    /// `[memory]`.
    fn memory(&self, m: &MemorySection) -> Result<(), ExperimentError> {
        if m.limit_mb < 16 {
            return Err(self.invalid("memory.limit_mb", format!("{} MiB is too small to run a server (at least 16)", m.limit_mb)));
        }
        // Beyond any machine, and far from overflowing as bytes.
        if m.limit_mb > MAX_LIMIT_MB {
            return Err(self.invalid("memory.limit_mb", format!("{} MiB is more than any machine has (at most {MAX_LIMIT_MB})", m.limit_mb)));
        }
        Ok(())
    }

    /// `[run]`.
    fn run(&self, run: &RunSection) -> Result<(), ExperimentError> {
        match (run.duration_s, run.sessions, &run.steady) {
            (Some(d), None, None) => self.positive_seconds("run.duration_s", d)?,
            (None, Some(n), None) if n > 0 => {}
            (None, Some(_), None) => return Err(self.invalid("run.sessions", "must be at least 1")),
            (None, None, Some(steady)) => self.steady(steady)?,
            (_, _, Some(_)) => {
                return Err(self.invalid("run.steady", "replaces `duration_s` and `sessions`: give the steady-state timings alone"))
            }
            _ => return Err(self.invalid("run", "give exactly one of `duration_s`, `sessions` or a `steady` table")),
        }
        if run.steady.is_some() && run.max_session_s.is_some() {
            return Err(self.invalid("run.max_session_s", "the steady-state protocol plays full sessions: remove the cut"));
        }
        if !matches!(run.drop_caches, 0..=3) {
            return Err(self.invalid("run.drop_caches", "must be 0 (do not drop), 1, 2 or 3"));
        }
        if run.port == 0 {
            return Err(self.invalid("run.port", "must be a TCP port above 0"));
        }
        self.worker_count("run.workers", run.workers)?;
        self.thread_count("run.threads_per_worker", run.threads_per_worker)?;
        self.positive_seconds("run.ready_timeout_s", run.ready_timeout_s)?;
        if !(run.settle_s.is_finite() && run.settle_s >= 0.0 && run.settle_s <= MAX_SECONDS) {
            return Err(self.invalid("run.settle_s", format!("must be zero or more seconds, at most {MAX_SECONDS} (30 days)")));
        }
        if let Some(m) = run.max_session_s {
            self.positive_seconds("run.max_session_s", m)?;
        }
        if let Some(p) = run.warm_fill_pct {
            if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                return Err(self.invalid("run.warm_fill_pct", format!("{p} must be a percentage above 0 and at most 100")));
            }
        }
        if run.user.is_empty() {
            return Err(self.invalid("run.user", "is empty"));
        }
        Ok(())
    }

    fn steady(&self, st: &SteadySection) -> Result<(), ExperimentError> {
        for (key, v, zero_ok) in
            [("ramp_s", st.ramp_s, false), ("settle_s", st.settle_s, true), ("measure_s", st.measure_s, false), ("hold_s", st.hold_s, true)]
        {
            let ok = v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= MAX_SECONDS && (v / SAMPLE_INTERVAL_S).fract() == 0.0;
            if !ok {
                let what = if zero_ok { "zero or more" } else { "a positive number of" };
                return Err(self.invalid(
                    format!("run.steady.{key}"),
                    format!("{v} must be {what} seconds (at most {MAX_SECONDS}), a multiple of the {SAMPLE_INTERVAL_S} s sample interval"),
                ));
            }
        }
        match (st.gate_pct, st.max_settle_s) {
            (None, None) => {}
            (Some(g), Some(max)) => {
                if !(g.is_finite() && g > 0.0 && g < 100.0) {
                    return Err(self.invalid("run.steady.gate_pct", format!("{g} must be a percentage above 0 and below 100")));
                }
                if !(max.is_finite() && max >= st.ramp_s && max >= st.settle_s && max <= MAX_SECONDS && (max / SAMPLE_INTERVAL_S).fract() == 0.0) {
                    return Err(self.invalid(
                        "run.steady.max_settle_s",
                        format!("{max} must be at least ramp_s and settle_s, at most {MAX_SECONDS}, a multiple of the {SAMPLE_INTERVAL_S} s sample interval"),
                    ));
                }
            }
            _ => return Err(self.invalid("run.steady", "the settling gate needs both gate_pct and max_settle_s")),
        }
        if let Some(l) = st.lru_pct {
            if st.gate_pct.is_none() {
                return Err(self.invalid("run.steady.lru_pct", "the LRU lists are checked by the settling gate: give gate_pct and max_settle_s too"));
            }
            if !(l.is_finite() && l > 0.0 && l < 100.0) {
                return Err(self.invalid("run.steady.lru_pct", format!("{l} must be a percentage above 0 and below 100")));
            }
        }
        if let Some(j) = st.join_s {
            if !(j.is_finite() && j > 0.0 && j <= st.settle_s && j <= st.ramp_s) {
                return Err(self.invalid("run.steady.join_s", format!("{j} must be more than 0 seconds and at most settle_s and ramp_s")));
            }
        }
        Ok(())
    }

    /// A configuration's own `ramp_s`: the experiment's timings with it in
    /// place of `run.steady.ramp_s` must pass the checks of [`Self::steady`].
    fn own_ramp(&self, key: &str, c: &ConfigSection, steady: Option<&SteadySection>) -> Result<(), ExperimentError> {
        let Some(ramp) = c.ramp_s else { return Ok(()) };
        let k = format!("{key}.ramp_s");
        let Some(st) = steady else {
            return Err(self.invalid(k, "a ramp of its own needs the steady protocol (run.steady)"));
        };
        match self.steady(&SteadySection { ramp_s: ramp, ..*st }) {
            Err(ExperimentError::Invalid { key: theirs, message, .. }) => {
                Err(self.invalid(k, format!("{ramp} s in place of run.steady.ramp_s fails {theirs}: {message}")))
            }
            other => other,
        }
    }

    /// Rates relative to a configuration of this experiment: it must come
    /// earlier (`before`) and search for its maximum failure-free rate.
    fn relative_rates(&self, key: &str, config: &Config, before: &[Config]) -> Result<(), ExperimentError> {
        let RatePlan::Fixed { relative_to: Some(RelativeTo { config: of, results: None }), .. } = &config.rates else { return Ok(()) };
        match before.iter().find(|c| &c.name == of) {
            Some(c) if matches!(c.rates, RatePlan::Search { .. } | RatePlan::Bracket { .. }) => Ok(()),
            Some(_) => Err(self.invalid(format!("{key}.rates.relative_to.config"), format!("`{of}` does not search for a maximum failure-free rate"))),
            None => Err(self.invalid(
                format!("{key}.rates.relative_to.config"),
                format!("`{of}` is not a configuration before `{}` (give `results` for one in another results directory)", config.name),
            )),
        }
    }

    /// A `[rates]` table (top-level or a configuration's) as a rate plan.
    /// `inherited_threshold` applies where the table gives no `threshold_pct`.
    fn rates(&self, key: &str, rates: &RatesSection, inherited_threshold: f64) -> Result<RatePlan, ExperimentError> {
        let threshold_pct = rates.threshold_pct.unwrap_or(inherited_threshold);
        if !(threshold_pct.is_finite() && threshold_pct > 0.0 && threshold_pct < 100.0) {
            return Err(self.invalid(format!("{key}.threshold_pct"), "must be a percentage above 0 and below 100"));
        }
        if rates.repetitions == 0 {
            return Err(self.invalid(format!("{key}.repetitions"), "must be at least 1"));
        }
        if rates.relative_to.is_some() && rates.fixed.is_none() {
            return Err(self.invalid(format!("{key}.relative_to"), "goes with `fixed = [fractions...]`"));
        }
        let given = [rates.fixed.is_some(), rates.search.is_some(), rates.bracket.is_some()].iter().filter(|g| **g).count();
        if given != 1 {
            return Err(self.invalid(key, "give exactly one of `fixed = [rates...]`, a `search` table or a `bracket` table"));
        }
        if let Some(b) = &rates.bracket {
            let k = format!("{key}.bracket");
            if !(b.start.is_finite() && b.start > 0.0) {
                return Err(self.invalid(format!("{k}.start"), "must be a positive rate"));
            }
            if !(b.step_pct.is_finite() && b.step_pct > 0.0 && b.step_pct <= 100.0) {
                return Err(self.invalid(format!("{k}.step_pct"), "must be a percentage above 0 and at most 100"));
            }
            if !(b.resolution_pct.is_finite() && b.resolution_pct > 0.0 && b.resolution_pct <= b.step_pct) {
                return Err(self.invalid(format!("{k}.resolution_pct"), format!("must be above 0 and at most step_pct ({})", b.step_pct)));
            }
            if b.repetitions == 0 {
                return Err(self.invalid(format!("{k}.repetitions"), "must be at least 1"));
            }
            if b.max_probes < 2 * b.repetitions {
                return Err(self.invalid(format!("{k}.max_probes"), format!("must allow the repetitions on both sides (at least {})", 2 * b.repetitions)));
            }
            return Ok(RatePlan::Bracket { bracket: *b, threshold_pct });
        }
        match (&rates.fixed, &rates.search) {
            (Some(_), Some(_)) | (None, None) => unreachable!("exactly one was checked above"),
            (Some(fixed), None) => {
                if fixed.is_empty() {
                    return Err(self.invalid(format!("{key}.fixed"), "is empty"));
                }
                for (i, r) in fixed.iter().enumerate() {
                    if rates.relative_to.is_some() && !(r.is_finite() && *r > 0.0 && *r <= MAX_FRACTION) {
                        return Err(self.invalid(
                            format!("{key}.fixed[{i}]"),
                            format!("{r} must be a fraction of the maximum failure-free rate above 0 and at most {MAX_FRACTION}"),
                        ));
                    }
                    if !(r.is_finite() && *r > 0.0) {
                        return Err(self.invalid(format!("{key}.fixed[{i}]"), format!("rate {r} must be a positive number of sessions per second")));
                    }
                }
                let relative_to = rates.relative_to.as_ref().map(|r| RelativeTo { results: r.results.as_ref().map(|d| resolve(self.base, d)), ..r.clone() });
                if let Some(RelativeTo { config, results: Some(dir) }) = &relative_to {
                    let file = dir.join("runs").join(config).join("search.json");
                    if !file.is_file() {
                        return Err(self.invalid(format!("{key}.relative_to.results"), format!("{} is not there: no finished search of `{config}`", file.display())));
                    }
                }
                Ok(RatePlan::Fixed { rates: fixed.clone(), repetitions: rates.repetitions, threshold_pct, relative_to })
            }
            (None, Some(s)) => {
                let k = format!("{key}.search");
                if !(s.low.is_finite() && s.low > 0.0) {
                    return Err(self.invalid(format!("{k}.low"), "must be a positive rate"));
                }
                if !(s.high.is_finite() && s.high > s.low) {
                    return Err(self.invalid(format!("{k}.high"), format!("must be above low ({})", s.low)));
                }
                if s.coarse_points < 2 {
                    return Err(self.invalid(format!("{k}.coarse_points"), "must be at least 2"));
                }
                if !(s.resolution.is_finite() && s.resolution > 0.0) {
                    return Err(self.invalid(format!("{k}.resolution"), "must be a positive rate"));
                }
                if s.repetitions == 0 {
                    return Err(self.invalid(format!("{k}.repetitions"), "must be at least 1"));
                }
                Ok(RatePlan::Search { search: *s, threshold_pct })
            }
        }
    }

    /// One `[[config]]` (called `key` in errors), expanded into its sweep.
    fn config(
        &self,
        key: &str,
        c: &ConfigSection,
        disk: &DiskSection,
        default_plan: Option<&RatePlan>,
        templates: &Path,
    ) -> Result<Vec<Config>, ExperimentError> {
        let plan = self.config_plan(key, c, default_plan)?;
        let (server, template) = self.server_and_template(key, c, templates)?;
        let prefetches = self.prefetch_sizes(key, c)?;
        let read_aheads = c.read_ahead_kb.as_ref().map(|r| r.values()).unwrap_or_else(|| vec![disk.read_ahead_kb]);
        if prefetches.is_empty() || read_aheads.is_empty() {
            return Err(self.invalid(key, "an empty list in prefetch_kb or read_ahead_kb"));
        }
        for kb in prefetches.iter().flatten().filter_map(|p| match p {
            PrefetchSize::Kb(kb) => Some(*kb),
            PrefetchSize::Adaptive => None,
        }) {
            self.kb(&format!("{key}.prefetch_kb"), kb)?;
        }
        for r in &read_aheads {
            self.kb(&format!("{key}.read_ahead_kb"), *r)?;
        }
        // In `auto` the disk's cap is applied when the mode is resolved, after a
        // configuration's own max_sectors_kb (Experiment::resolve_disk_mode).
        let max_request_kb = match disk.mode {
            DiskMode::Auto => c.max_request_kb,
            _ => c.max_request_kb.or(disk.max_request_kb),
        };
        if let Some(kb) = c.max_request_kb {
            if disk.mode == DiskMode::Block {
                return Err(self.invalid(format!("{key}.max_request_kb"), FUSE_ONLY));
            }
            self.kb(&format!("{key}.max_request_kb"), kb)?;
        }
        let schedulers = self.block_sweep(key, "scheduler", &c.scheduler, disk.scheduler, disk.mode)?;
        let max_sectors = self.block_sweep(key, "max_sectors_kb", &c.max_sectors_kb, disk.max_sectors_kb, disk.mode)?;
        for kb in max_sectors.iter().flatten() {
            self.max_sectors(&format!("{key}.max_sectors_kb"), *kb)?;
        }
        let nr_requests = self.block_sweep(key, "nr_requests", &c.nr_requests, disk.nr_requests, disk.mode)?;
        for n in nr_requests.iter().flatten() {
            self.nr_requests(&format!("{key}.nr_requests"), *n)?;
        }
        for k in c.knobs.keys() {
            if k.is_empty() || !k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                return Err(self.invalid(format!("{key}.knobs.{k}"), "knob names use letters, digits and '_'"));
            }
        }
        // One configuration per combination, in key order; a swept key adds
        // its suffix to the name.
        let mut configs = vec![Config {
            label: String::new(),
            name: c.name.clone(),
            base: c.name.clone(),
            kind: c.kind,
            server,
            template,
            binary: c.binary.as_ref().map(|b| resolve(self.base, b)),
            libception: c.libception,
            prefetch: None,
            read_ahead_kb: 0,
            max_request_kb,
            scheduler: None,
            max_sectors_kb: None,
            nr_requests: None,
            knobs: c.knobs.clone(),
            rates: plan,
            trace: c.trace.unwrap_or(disk.trace),
            chaos: self.chaos(key, c)?,
            per_disk: self.daemon_flag(key, "per_disk", c.per_disk, c)?,
            promote: self.daemon_flag(key, "promote", c.promote.map(|p| p == PromoteSetting::Always(true)), c)?,
            promote_auto: self.promote_auto(key, c)?,
            queue_by_position: self.daemon_flag(key, "queue_by_position", c.queue_by_position, c)?,
            reply_by_range: self.daemon_flag(key, "reply_by_range", c.reply_by_range, c)?,
            prefetch_scale: c.prefetch_scale,
            shim_stats: self.shim_stats(key, c)?,
            patience_ms: self.patience(key, c)?,
            ramp_s: c.ramp_s,
            threads_per_worker: self.threads(key, c)?,
            workers: self.workers(key, c)?,
        }];
        if configs[0].trace && disk.count > 1 {
            return Err(self.invalid(format!("{key}.trace"), "a trace is recorded for one drive only (disk.count = 1)"));
        }
        let adaptive = self.adaptive(key, c, &prefetches)?;
        sweep(&mut configs, &prefetches, |c, p| {
            c.prefetch = p.map(|p| p.to_prefetch(&adaptive));
            p.map(|p| p.name_suffix()).unwrap_or_default()
        });
        sweep(&mut configs, &read_aheads, |c, r| {
            c.read_ahead_kb = *r;
            format!("-ra{r}")
        });
        sweep(&mut configs, &schedulers, |c, s| {
            c.scheduler = *s;
            s.map(|s| format!("-{}", s.name())).unwrap_or_default()
        });
        sweep(&mut configs, &max_sectors, |c, m| {
            c.max_sectors_kb = *m;
            m.map(|m| format!("-ms{m}")).unwrap_or_default()
        });
        sweep(&mut configs, &nr_requests, |c, n| {
            c.nr_requests = *n;
            n.map(|n| format!("-nr{n}")).unwrap_or_default()
        });
        for config in &mut configs {
            config.label = c.label.clone().unwrap_or_else(|| config.name.clone());
            if config.prefetch_scale.is_some() && !matches!(config.daemon_prefetch(), Some(libception_proto::Prefetch::Fixed(n)) if n > 0) {
                return Err(self.invalid(
                    format!("{key}.prefetch_scale"),
                    "needs a fixed prefetch_kb above 0 under libception mode full (the adaptive controller takes adaptive.scale)",
                ));
            }
        }
        Ok(configs)
    }

    /// A daemon option (`per_disk`, `promote`, `queue_by_position`, `reply_by_range`), checked: a daemon it applies to.
    fn daemon_flag(&self, key: &str, name: &str, value: Option<bool>, c: &ConfigSection) -> Result<bool, ExperimentError> {
        match value {
            Some(true) if !matches!(c.libception, Some(Mode::Full | Mode::Serialize)) => {
                Err(self.invalid(format!("{key}.{name}"), "needs the daemon: libception mode full or serialize"))
            }
            v => Ok(v.unwrap_or(false)),
        }
    }

    /// `promote = "auto"`, checked: a daemon.
    fn promote_auto(&self, key: &str, c: &ConfigSection) -> Result<bool, ExperimentError> {
        self.daemon_flag(key, "promote", Some(c.promote == Some(PromoteSetting::Auto)).filter(|&a| a), c)
    }

    /// `threads_per_worker`, checked: Apache, and the range `run` allows.
    fn threads(&self, key: &str, c: &ConfigSection) -> Result<Option<u32>, ExperimentError> {
        match c.threads_per_worker {
            Some(_) if c.server != Some(ServerKind::Apache) => {
                Err(self.invalid(format!("{key}.threads_per_worker"), "applies to Apache only (its threads per child process)"))
            }
            Some(n) => self.thread_count(&format!("{key}.threads_per_worker"), n).map(Some),
            None => Ok(None),
        }
    }

    /// A configuration's own `workers`, checked: a server, and the range `run` allows.
    fn workers(&self, key: &str, c: &ConfigSection) -> Result<Option<u32>, ExperimentError> {
        match c.workers {
            Some(_) if c.server.is_none() => Err(self.invalid(format!("{key}.workers"), "applies to server configurations only")),
            Some(n) => self.worker_count(&format!("{key}.workers"), n).map(Some),
            None => Ok(None),
        }
    }

    /// Server worker processes, run-wide or a configuration's: 1-1024.
    fn worker_count(&self, key: &str, n: u32) -> Result<u32, ExperimentError> {
        self.count_up_to(key, n, 1024)
    }

    /// Apache's threads per child, run-wide or a configuration's: 1-4096.
    fn thread_count(&self, key: &str, n: u32) -> Result<u32, ExperimentError> {
        self.count_up_to(key, n, 4096)
    }

    /// A count of processes or threads: 1 to `max`.
    fn count_up_to(&self, key: &str, n: u32, max: u32) -> Result<u32, ExperimentError> {
        if (1..=max).contains(&n) {
            Ok(n)
        } else {
            Err(self.invalid(key, format!("must be between 1 and {max}")))
        }
    }

    /// `patience_ms`, checked: a shim that waits for a daemon.
    fn patience(&self, key: &str, c: &ConfigSection) -> Result<Option<u32>, ExperimentError> {
        self.daemon_flag(key, "patience_ms", c.patience_ms.map(|_| true), c)?;
        match c.patience_ms {
            Some(ms) if ms > 3_600_000 => Err(self.invalid(format!("{key}.patience_ms"), format!("{ms} is more than an hour (3600000 ms)"))),
            v => Ok(v),
        }
    }

    /// `shim_stats`, checked: a shim to write them.
    fn shim_stats(&self, key: &str, c: &ConfigSection) -> Result<bool, ExperimentError> {
        match c.shim_stats {
            Some(true) if matches!(c.libception, None | Some(Mode::Off)) => {
                Err(self.invalid(format!("{key}.shim_stats"), "needs the shim: a libception mode (track records the calls without changing them)"))
            }
            v => Ok(v.unwrap_or(false)),
        }
    }

    /// `chaos`, checked: a daemon to kill, and a kill period longer than
    /// the restart delay (else the daemon would never run).
    fn chaos(&self, key: &str, c: &ConfigSection) -> Result<Option<ChaosSection>, ExperimentError> {
        let Some(chaos) = c.chaos else { return Ok(None) };
        let k = format!("{key}.chaos");
        if !matches!(c.libception, Some(Mode::Full | Mode::Serialize)) {
            return Err(self.invalid(k, "needs the daemon: libception mode full or serialize"));
        }
        if !(chaos.restart_after_s.is_finite() && chaos.restart_after_s >= 0.0) {
            return Err(self.invalid(format!("{k}.restart_after_s"), "must be a number of seconds >= 0"));
        }
        if !(chaos.kill_every_s.is_finite() && chaos.kill_every_s > chaos.restart_after_s && chaos.kill_every_s <= MAX_SECONDS) {
            return Err(self.invalid(format!("{k}.kill_every_s"), format!("must be longer than restart_after_s and at most {MAX_SECONDS} seconds")));
        }
        Ok(Some(chaos))
    }

    /// The values of a block-only configuration key (`[None]`: unset, the
    /// disk's default): its own list, else the `[disk]` value. Refused in FUSE
    /// mode; in `auto` mode only a single value, since a sweep would collapse
    /// into identical configurations in FUSE mode.
    fn block_sweep<T: Copy>(
        &self,
        key: &str,
        name: &str,
        own: &Option<OneOrMany<T>>,
        disk: Option<T>,
        mode: DiskMode,
    ) -> Result<Vec<Option<T>>, ExperimentError> {
        let Some(own) = own else { return Ok(vec![disk]) };
        let values = own.values();
        match mode {
            DiskMode::Fuse => return Err(self.invalid(format!("{key}.{name}"), BLOCK_ONLY)),
            DiskMode::Auto if values.len() > 1 => {
                return Err(self.invalid(format!("{key}.{name}"), "a sweep of a block-only key needs [disk] mode = \"block\" (in mode \"auto\" it would collapse into identical configurations on a machine that falls back to FUSE mode)"))
            }
            _ => {}
        }
        if values.is_empty() {
            return Err(self.invalid(format!("{key}.{name}"), "is an empty list"));
        }
        Ok(values.into_iter().map(Some).collect())
    }

    /// A configuration's rates: its own, or the top-level ones; a `wc`
    /// configuration only repeats.
    fn config_plan(&self, key: &str, c: &ConfigSection, default_plan: Option<&RatePlan>) -> Result<RatePlan, ExperimentError> {
        match (&c.rates, default_plan, c.kind) {
            (_, _, RunKind::Wc) => {
                let reps = c.rates.as_ref().map(|r| r.repetitions).unwrap_or(1);
                if c.rates.as_ref().is_some_and(|r| r.fixed.is_some() || r.search.is_some()) {
                    return Err(self.invalid(format!("{key}.rates"), "a wc configuration has no rates (only `repetitions`)"));
                }
                if reps == 0 {
                    return Err(self.invalid(format!("{key}.rates.repetitions"), "must be at least 1"));
                }
                Ok(RatePlan::None { repetitions: reps })
            }
            (Some(r), _, _) => self.rates(&format!("{key}.rates"), r, default_plan.and_then(RatePlan::threshold_pct).unwrap_or(DEFAULT_THRESHOLD_PCT)),
            (None, Some(p), _) => Ok(p.clone()),
            (None, None, _) => Err(self.invalid(format!("{key}.rates"), "no rates here and no top-level [rates]")),
        }
    }

    /// The server and its template file; a `wc` configuration has neither, nor
    /// any key about a server.
    fn server_and_template(
        &self,
        key: &str,
        c: &ConfigSection,
        templates: &Path,
    ) -> Result<(Option<ServerKind>, Option<PathBuf>), ExperimentError> {
        match c.kind {
            RunKind::Server => {
                let Some(server) = c.server else {
                    return Err(self.invalid(format!("{key}.server"), "is missing (nginx, apache or lighttpd)"));
                };
                let t = templates.join(c.template.as_deref().unwrap_or(server.default_template()));
                if !t.is_file() {
                    return Err(self.invalid(
                        format!("{key}.template"),
                        format!("template {} does not exist (templates are looked up in the top-level `templates` directory, relative to the experiment file; by default \"../servers\", which is bench/servers for a file in bench/experiments)", t.display()),
                    ));
                }
                if let Err(e) = crate::server::check_template(&t, &c.knobs) {
                    let blamed = if c.knobs.is_empty() { "template" } else { "knobs" };
                    return Err(self.invalid(format!("{key}.{blamed}"), format!("{e:#}")));
                }
                Ok((Some(server), Some(t)))
            }
            RunKind::Wc => {
                for (k, set) in [
                    ("server", c.server.is_some()),
                    ("template", c.template.is_some()),
                    ("binary", c.binary.is_some()),
                    ("libception", c.libception.is_some()),
                    ("prefetch_kb", c.prefetch_kb.is_some()),
                    ("knobs", !c.knobs.is_empty()),
                ] {
                    if set {
                        return Err(self.invalid(format!("{key}.{k}"), "does not apply to a wc configuration"));
                    }
                }
                Ok((None, None))
            }
        }
    }

    /// The prefetch sizes to sweep (`[None]` for modes without one): modes
    /// full and prefetch need a size, the others take none, and only the
    /// daemon (mode full) can size adaptively.
    /// The adaptive controller's parameters of a configuration, checked.
    fn adaptive(&self, key: &str, c: &ConfigSection, sizes: &[Option<PrefetchSize>]) -> Result<AdaptiveParams, ExperimentError> {
        let Some(section) = &c.adaptive else { return Ok(AdaptiveParams::default()) };
        let k = format!("{key}.adaptive");
        if !sizes.contains(&Some(PrefetchSize::Adaptive)) {
            return Err(self.invalid(k, "applies only with prefetch_kb = \"adaptive\""));
        }
        // Seconds first: `params()` turns them into durations,
        // which a negative or infinite number would not survive.
        for (name, v) in [("interval_s", section.interval_s), ("waste_after_s", section.waste_after_s)] {
            if let Some(s) = v.filter(|s| !(s.is_finite() && (1.0..=1e9).contains(s))) {
                return Err(self.invalid(format!("{k}.{name}"), format!("{s} must be from 1 second to 1e9")));
            }
        }
        for (name, v) in [("deflation", section.deflation), ("busy", section.busy), ("evict", section.evict)] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && (0.0..=1.0).contains(v))) {
                return Err(self.invalid(format!("{k}.{name}"), format!("{v} must be a fraction from 0 to 1")));
            }
        }
        let p = section.params();
        if p.min == 0 || p.step == 0 || p.min > p.max || p.start.is_some_and(|s| s < p.min || s > p.max) {
            return Err(self.invalid(
                k,
                format!("needs 0 < min_kb <= start_kb <= max_kb and step_kb > 0 (min {} KiB, max {} KiB)", p.min / 1024, p.max / 1024),
            ));
        }
        // Whatever else the daemon would refuse at its start, refused here,
        // named by the experiment's key.
        if let Err(libception_proto::ParamError::Invalid { name, value, why }) = p.validate() {
            let key = match name {
                "min" | "max" | "start" | "step" | "transaction" => format!("{name}_kb"),
                "ramp-rate" => "ramp_rate_kb".into(),
                "stream-rate" => "stream_rate_kb".into(),
                "interval" => "interval_s".into(),
                "waste-after" => "waste_after_s".into(),
                other => other.replace('-', "_"),
            };
            return Err(self.invalid(format!("{k}.{key}"), format!("{value} (the daemon's value): {why}")));
        }
        Ok(p)
    }

    fn prefetch_sizes(&self, key: &str, c: &ConfigSection) -> Result<Vec<Option<PrefetchSize>>, ExperimentError> {
        match (c.libception, &c.prefetch_kb) {
            (Some(Mode::Full | Mode::Prefetch), None) => {
                return Err(self.invalid(format!("{key}.prefetch_kb"), "is needed by libception modes full and prefetch"))
            }
            (None | Some(Mode::Track | Mode::Off | Mode::Serialize), Some(_)) => {
                return Err(self.invalid(format!("{key}.prefetch_kb"), "only applies to libception modes full and prefetch"))
            }
            _ => {}
        }
        let sizes: Vec<Option<PrefetchSize>> = match &c.prefetch_kb {
            None => vec![None],
            Some(p) => p.values().into_iter().map(Some).collect(),
        };
        if c.libception != Some(Mode::Full) && sizes.contains(&Some(PrefetchSize::Adaptive)) {
            return Err(self.invalid(format!("{key}.prefetch_kb"), "\"adaptive\" needs the daemon: libception mode full"));
        }
        Ok(sizes)
    }
}
