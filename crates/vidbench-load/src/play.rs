//! A whole load run: check the input, open the result files, check that the
//! server answers, then start sessions at Poisson times on a single-threaded
//! event loop until the stop condition, wait for the active ones to end, and
//! write the summary.
//!
//! The dispatcher, the interval sampler and the progress callback run in the
//! loop's main future (so the callback may borrow from the caller); sessions
//! are local tasks. All of the client's work happens on the calling thread,
//! which is why `cpu.thread_*` in the summary is the client's own cost.

use crate::arrivals::PoissonArrivals;
use crate::client::{play_session, wait_until, Origin, Shared, SCRATCH_BYTES};
use crate::config::{LoadConfig, LoadError, Server, Stop, MAX_SECONDS};
use crate::records::Collector;
use crate::population::{in_progress, plan_match, Durations, Stationary};
use crate::steps::{Matched, StepCounters, StepPlan, StepSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use crate::summary::{summarize, CpuUse, LoadSummary, RunFacts, Setup};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};
use vidbench_library::{Library, Phase, Session};

/// What the progress callback is told every sample interval.
#[derive(Debug, Clone)]
pub struct Progress {
    pub elapsed_s: f64,
    pub sessions_started: u64,
    pub sessions_active: u64,
    pub sessions_completed: u64,
    pub sessions_failed: u64,
    /// Body bytes received in the last interval, MB/s.
    pub received_mb_s: f64,
    /// Bytes of requests completed in the last interval, MB/s.
    pub completed_mb_s: f64,
    /// In a stepped run: the current step (from 0) and its rate.
    pub step: Option<(usize, f64)>,
    /// In a stepped run: where the step is (`StepCounters::phase`).
    pub phase: Option<&'static str>,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:7.1} s  active {:5}  started {:6}  completed {:6}  failed {:5}  {:8.2} MB/s",
            self.elapsed_s,
            self.sessions_active,
            self.sessions_started,
            self.sessions_completed,
            self.sessions_failed,
            self.received_mb_s
        )?;
        if let Some((i, rate)) = self.step {
            write!(f, "  step {} at {rate:.2}/s", i + 1)?;
        }
        match self.phase {
            Some(p) => write!(f, " ({p})"),
            None => Ok(()),
        }
    }
}

/// Plays `sessions` (in order) against the configured server; see the crate
/// documentation. Blocks the calling thread, which must not be inside a
/// tokio runtime.
pub fn play(config: LoadConfig, sessions: Vec<Session>, progress: &mut dyn FnMut(&Progress)) -> Result<LoadSummary, LoadError> {
    play_with(config, sessions, None, progress)
}

/// Plays a stepped run (see [`crate::steps`]): the rate and the measured
/// windows come from `plan`, `config.rate` and `config.stop` are not used,
/// and the session list is replayed from its start if the run outlasts it.
/// The per-step results are in the summary's `steps` and in `steps.json`,
/// rewritten as each step ends.
pub fn play_steps(
    config: LoadConfig,
    sessions: Vec<Session>,
    plan: &mut dyn StepPlan,
    progress: &mut dyn FnMut(&Progress),
) -> Result<LoadSummary, LoadError> {
    play_with(config, sessions, Some(plan), progress)
}

fn play_with(
    config: LoadConfig,
    sessions: Vec<Session>,
    plan: Option<&mut dyn StepPlan>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<LoadSummary, LoadError> {
    config.check()?;
    if sessions.is_empty() {
        return Err(LoadError::NoSessions);
    }
    let server = Server::resolve(&config.server)?;
    let file_ids = prepare(&sessions, config.verify.as_ref(), config.timeout_override.is_some())?;
    prepare_out_dir(&config.out_dir)?;
    raise_open_file_limit();

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(LoadError::Runtime)?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run(config, server, sessions, file_ids, plan, progress))
}

/// Seed of step `index`'s arrivals: a distinct stream per step.
fn step_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_add((index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

async fn run(
    config: LoadConfig,
    server: Server,
    sessions: Vec<Session>,
    file_ids: Vec<Vec<Option<u32>>>,
    mut plan: Option<&mut dyn StepPlan>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<LoadSummary, LoadError> {
    let first_step = match plan.as_mut() {
        Some(p) => {
            let spec = p.next(None).ok_or_else(|| LoadError::InvalidConfig("the step plan gave no step to play".into()))?;
            spec.check().map_err(LoadError::InvalidConfig)?;
            Some(spec)
        }
        None => None,
    };
    check_reachable(&config.server, &server).await?;
    let collector = Collector::create(&config.out_dir)?;
    let sessions_available = sessions.len();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let cpu_start = (rusage(libc::RUSAGE_THREAD), rusage(libc::RUSAGE_SELF));
    let run_start = config.epoch.map_or_else(Instant::now, Instant::from_std);
    let shared = Rc::new(Shared {
        server,
        run_start,
        receive_buffer: config.receive_buffer,
        timeout_override: config.timeout_override,
        scratch: RefCell::new(vec![0u8; SCRATCH_BYTES].into_boxed_slice()),
        collector: RefCell::new(collector),
        interrupted: Cell::new(false),
        interrupt: Notify::new(),
        session_done: Notify::new(),
        in_play: RefCell::new(std::collections::BTreeMap::new()),
        next_key: Cell::new(0),
    });

    let stepped = first_step.is_some();
    let offered_rate = first_step.map_or(config.rate, |s| s.rate);
    let mut arrivals = PoissonArrivals::new(offered_rate, config.seed);
    let catalogue = Rc::new(Catalogue::new(sessions, file_ids));
    let mut repair_rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x7265_7061_6972_2121);
    if let Some(spec) = first_step {
        begin_step(&shared, &catalogue, 0, spec, 0.0, config.seed);
    }
    // A stepped run ends when its plan says so: it replays the list if needed.
    let n = catalogue.sessions.len();
    let mut queue = (0..n).cycle().take(if stepped { usize::MAX } else { n }).peekable();
    let mut next_at = arrivals.next().expect("the arrival process never ends");
    let interval = Duration::from_secs_f64(config.interval_s);
    let mut tick = 1u32;
    let mut starting = true;
    let mut stopped_by = "";
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);

    loop {
        if starting && !stepped {
            let stop = match config.stop {
                Stop::Duration(d) if next_at > d => Some("duration"),
                Stop::Sessions(n) if shared.collector.borrow().started >= n => Some("session-count"),
                _ if queue.peek().is_none() => Some("all-sessions-played"),
                _ => None,
            };
            if let Some(why) = stop {
                starting = false;
                stopped_by = why;
            }
        }
        if !starting && shared.collector.borrow().active == 0 {
            break;
        }
        let tick_at = run_start + interval * tick;
        let start_at = run_start + Duration::from_secs_f64(next_at);
        let step_end_s = shared.collector.borrow().step.as_ref().map(StepCounters::end_s);
        let step_end_at = run_start + Duration::from_secs_f64(step_end_s.unwrap_or(0.0));
        let gate_s = shared.collector.borrow().step.as_ref().and_then(StepCounters::gate_check_s);
        let gate_at = run_start + Duration::from_secs_f64(gate_s.unwrap_or(0.0));
        tokio::select! {
            biased;
            _ = &mut ctrl_c, if config.handle_interrupt && !shared.interrupted.get() => {
                shared.interrupted.set(true);
                shared.interrupt.notify_waiters();
                starting = false;
                stopped_by = "interrupted";
            }
            _ = sleep_until(tick_at) => {
                let row = shared.collector.borrow_mut().close_interval((interval * tick).as_secs_f64());
                tick += 1;
                let c = shared.collector.borrow();
                progress(&Progress {
                    elapsed_s: row.end_s,
                    sessions_started: c.started,
                    sessions_active: c.active,
                    sessions_completed: c.ended - c.failed - c.withdrawn,
                    sessions_failed: c.failed,
                    received_mb_s: row.received_mb_s,
                    completed_mb_s: row.completed_mb_s,
                    step: c.step.as_ref().map(|s| (s.index, s.spec.rate)),
                    phase: c.step.as_ref().map(|s| s.phase(row.end_s)),
                });
                drop(c);
                repair_population(&shared, &catalogue, row.end_s, config.interval_s, &mut repair_rng);
            }
            _ = sleep_until(step_end_at), if starting && step_end_s.is_some() => {
                let end_s = step_end_s.expect("guarded");
                let finished = shared.collector.borrow_mut().finish_step(&config.out_dir)?;
                let next = plan.as_mut().expect("stepped runs have a plan").next(Some(&finished));
                match next.map(|spec| spec.check().map(|_| spec)) {
                    Some(Ok(spec)) => {
                        begin_step(&shared, &catalogue, finished.index + 1, spec, end_s, config.seed);
                        arrivals = PoissonArrivals::starting_at(spec.rate, step_seed(config.seed, finished.index + 1), end_s);
                        next_at = arrivals.next().expect("the arrival process never ends");
                    }
                    Some(Err(message)) => return Err(LoadError::InvalidConfig(format!("step {}: {message}", finished.index + 2))),
                    None => {
                        // Censor what is still running: it would be measured under no plan.
                        starting = false;
                        stopped_by = "steps-done";
                        shared.interrupted.set(true);
                        shared.interrupt.notify_waiters();
                    }
                }
            }
            // The settling gate, before any arrival at or after the window's
            // start: open the window, or move it on (steps.rs, population.rs).
            _ = sleep_until(gate_at), if starting && gate_s.is_some() => {
                let t = gate_s.expect("guarded");
                let mut c = shared.collector.borrow_mut();
                // A step's own failures are its result, not a lack of settling
                // (a window that fails while lighter than the steady state
                // fails in it too); those of earlier steps are missing sessions.
                let step_start = c.step.as_ref().map_or(t, |s| s.start_s);
                let failed = c.failed_playing(t, step_start);
                let gap = crate::population::gap(&catalogue.durations, &c.rate_history(), t, failed);
                let cache = plan.as_mut().and_then(|p| p.cache_settled(t));
                c.step.as_mut().expect("a gate belongs to a step").gate(gap, cache);
            }
            // A stepped run's arrivals beyond the step's end are redrawn at the next rate.
            _ = sleep_until(start_at), if starting && step_end_s.is_none_or(|end| next_at < end) => {
                let i = queue.next().expect("peeked above");
                let (mut session, ids) = catalogue.sessions[i].clone();
                let lag = Instant::now().saturating_duration_since(start_at).as_secs_f64();
                if let Some(step) = shared.collector.borrow().step.as_ref() {
                    let (a, b) = step.window();
                    session.phase = if (a..b).contains(&next_at) { Phase::Measure } else { Phase::RampUp };
                }
                start_session(&shared, &catalogue, i, session, ids, next_at, Some(lag));
                next_at = arrivals.next().expect("the arrival process never ends");
            }
            _ = shared.session_done.notified(), if !starting => {}
        }
    }

    let wall_s = run_start.elapsed().as_secs_f64();
    let cpu_end = (rusage(libc::RUSAGE_THREAD), rusage(libc::RUSAGE_SELF));
    let mut collector = shared.collector.borrow_mut();
    let last_tick_s = (interval * (tick - 1)).as_secs_f64();
    if wall_s > last_tick_s + 1e-3 {
        collector.close_interval(wall_s);
    }
    let cpu = CpuUse {
        thread_user_s: cpu_end.0 .0 - cpu_start.0 .0,
        thread_system_s: cpu_end.0 .1 - cpu_start.0 .1,
        process_user_s: cpu_end.1 .0 - cpu_start.1 .0,
        process_system_s: cpu_end.1 .1 - cpu_start.1 .1,
        cores_used: (cpu_end.0 .0 - cpu_start.0 .0 + cpu_end.0 .1 - cpu_start.0 .1) / wall_s.max(1e-9),
    };
    let setup = Setup {
        server: config.server.clone(),
        offered_rate,
        stop: config.stop,
        seed: config.seed,
        sessions_source: config.sessions_source.clone(),
        sessions_available,
        verify: config.verify.is_some(),
        timeout_override_s: config.timeout_override,
        interval_s: config.interval_s,
        receive_buffer: config.receive_buffer,
        client_version: env!("CARGO_PKG_VERSION").to_owned(),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        started_unix_s,
    };
    let summary = summarize(
        &collector,
        RunFacts {
            setup,
            stopped_by: stopped_by.to_owned(),
            wall_s,
            offered_rate,
            verify: config.verify.is_some(),
            cpu,
        },
    );
    collector.finish()?;
    let path = config.out_dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).expect("a summary always serializes");
    std::fs::write(&path, text + "\n").map_err(|source| LoadError::Output { path, error: source })?;
    Ok(summary)
}

/// The session list with, per session, the content ids to verify against
/// and its paced length; the distribution of those lengths (the settling
/// gate's) and the steady state's draws (population matching's).
struct Catalogue {
    sessions: Vec<(Session, Vec<Option<u32>>)>,
    lengths: Vec<f64>,
    durations: Durations,
    stationary: Stationary,
}

impl Catalogue {
    fn new(sessions: Vec<Session>, file_ids: Vec<Vec<Option<u32>>>) -> Catalogue {
        let lengths: Vec<f64> = sessions.iter().map(Durations::length_of).collect();
        Catalogue {
            durations: Durations::new(lengths.clone()),
            stationary: Stationary::new(&lengths),
            lengths,
            sessions: sessions.into_iter().zip(file_ids).collect(),
        }
    }
}

/// Makes step `index` the current one, from `start_s`, matching the
/// population to it when its spec asks (from the previous step's rate, or
/// from idle for the first).
fn begin_step(shared: &Rc<Shared>, catalogue: &Rc<Catalogue>, index: usize, spec: StepSpec, start_s: f64, seed: u64) {
    let old_rate = shared.collector.borrow().steps.last().map_or(0.0, |s| s.spec.rate);
    let mut counters = StepCounters::new(index, spec, start_s);
    counters.steady_sessions = Some(spec.rate * catalogue.durations.mean());
    counters.matched = match_population(shared, catalogue, old_rate, &spec, index, seed, start_s);
    shared.collector.borrow_mut().step = Some(counters);
}

/// Counts a session (`catalogue[index]`, or the part of it still to play)
/// as started and plays it on the event loop. `lag_s` is the dispatch lag
/// of an arrival; `None` for a session joining in progress.
fn start_session(
    shared: &Rc<Shared>,
    catalogue: &Catalogue,
    index: usize,
    session: Session,
    ids: Vec<Option<u32>>,
    scheduled_s: f64,
    lag_s: Option<f64>,
) {
    let key = shared.next_key.get();
    shared.next_key.set(key + 1);
    shared.in_play.borrow_mut().insert(key, false);
    shared.collector.borrow_mut().session_started(session.phase, scheduled_s, lag_s.unwrap_or(0.0), lag_s.is_none());
    let origin = Origin { key, catalogue: index, would_end_s: scheduled_s + catalogue.lengths[index] };
    tokio::task::spawn_local(play_session(shared.clone(), session, ids, scheduled_s, origin));
}

/// Population matching at the start of step `index` (at `t0` s; see
/// `population`): withdraws sessions for a fall of rate from `old_rate`;
/// schedules sessions in progress to join over the step's first `join_s`
/// seconds, stationary draws for a rise and the failed sessions that would
/// still be playing (resumed at their age; for a fall, each with the
/// probability of staying). From then on the settling gate sees the steady
/// state of the step's rate. `None` when the step does not match.
fn match_population(shared: &Rc<Shared>, catalogue: &Rc<Catalogue>, old_rate: f64, spec: &StepSpec, index: usize, seed: u64, t0: f64) -> Option<Matched> {
    if spec.join_s <= 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(step_seed(seed, index) ^ 0x6d61_7463_6865_7321);
    let failed = shared.collector.borrow_mut().take_failed(t0);
    let plan = plan_match(&catalogue.durations, old_rate, spec.rate, &mut rng);
    let mut matched = Matched::default();
    if plan.withdraw_probability > 0.0 {
        for withdrawn in shared.in_play.borrow_mut().values_mut().filter(|w| !**w) {
            if rng.gen::<f64>() < plan.withdraw_probability {
                *withdrawn = true;
                matched.withdrawn += 1;
            }
        }
    }
    // (session, its age at t0): the failed ones resumed, then the draws.
    let mut joins: Vec<(usize, f64)> = Vec::new();
    for f in failed {
        if rng.gen::<f64>() < plan.resume_probability {
            joins.push((f.catalogue, t0 - f.scheduled_s));
            matched.replaced += 1;
        }
    }
    joins.extend((0..plan.add).map_while(|_| catalogue.stationary.draw(&mut rng)));
    let (added, finished, _) = join_in_progress(shared, catalogue, joins, t0, spec.join_s, f64::INFINITY, &mut rng);
    matched.added = added;
    matched.finished = finished;
    Some(matched)
}

/// Until a matched step's window opens, the sessions that fail are resumed
/// at their age (from the request after the one that failed), so that a
/// transient while the population forms (the joins' cold first requests)
/// does not leave the window short of sessions; failures in the window and
/// the hold are the step's result and stay. Called every sample interval.
/// A step that has resumed as many sessions as its steady state holds
/// is overloaded beyond doubt: resuming more would only
/// add cold starts to a window that fails anyway (nginx under Libception at
/// twice its limit resumed 8,590 in a 450 s ramp), so the repair stops.
fn repair_population(shared: &Rc<Shared>, catalogue: &Rc<Catalogue>, t: f64, spread_s: f64, rng: &mut ChaCha8Rng) {
    let window_start = match shared.collector.borrow().step.as_ref() {
        Some(step) if t < step.window().0 && step.matched.is_some_and(|m| (m.repaired as f64) < step.steady_sessions.unwrap_or(0.0)) => {
            step.window().0
        }
        _ => return,
    };
    let failed = shared.collector.borrow_mut().take_failed(t);
    if failed.is_empty() {
        return;
    }
    let joins = failed.iter().map(|f| (f.catalogue, t - f.scheduled_s)).collect();
    // A resume whose first request would come after the window opened is
    // not made: the session stays failed (and lost to the window).
    let (resumed, _, too_late) = join_in_progress(shared, catalogue, joins, t, spread_s.min(window_start - t), window_start, rng);
    let mut collector = shared.collector.borrow_mut();
    collector.failed_sessions.extend(too_late.into_iter().map(|k| failed[k]));
    if let Some(m) = collector.step.as_mut().and_then(|s| s.matched.as_mut()) {
        m.repaired += resumed;
    }
}

/// Schedules sessions in progress to join: `joins` holds (session index,
/// its age at `t0`); each joins at `t0` + U[0, `spread_s`), at its age then,
/// from the first request not yet made, unless that request would come at
/// or after `before`. Returns how many will join, how many had nothing left
/// to play, and the positions in `joins` of those left out for `before`.
fn join_in_progress(
    shared: &Rc<Shared>,
    catalogue: &Rc<Catalogue>,
    joins: Vec<(usize, f64)>,
    t0: f64,
    spread_s: f64,
    before: f64,
    rng: &mut ChaCha8Rng,
) -> (u64, u64, Vec<usize>) {
    let (mut added, mut finished, mut too_late) = (0, 0, Vec::new());
    for (position, (i, age)) in joins.into_iter().enumerate() {
        let join = rng.gen::<f64>() * spread_s.max(0.0);
        let (session, ids) = &catalogue.sessions[i];
        let Some((first, wait)) = in_progress(session, age + join) else {
            finished += 1;
            continue;
        };
        if t0 + join + wait >= before {
            too_late.push(position);
            continue;
        }
        let mut joining = session.clone();
        joining.requests.drain(..first);
        joining.phase = Phase::RampUp;
        let ids = ids[first..].to_vec();
        // Its place in the arrival process: `age` seconds before t0.
        let scheduled_s = t0 - age;
        let at = shared.run_start + Duration::from_secs_f64(t0 + join + wait);
        let (shared, catalogue) = (shared.clone(), catalogue.clone());
        tokio::task::spawn_local(async move {
            if wait_until(&shared, at).await && !shared.interrupted.get() {
                start_session(&shared, &catalogue, i, joining, ids, scheduled_s, None);
            }
        });
        added += 1;
    }
    (added, finished, too_late)
}

/// Checks the sessions before anything is sent and finds, when verifying,
/// the content id of every request (its `file_id`, else the library file with
/// its path, query string ignored).
fn prepare(sessions: &[Session], verify: Option<&Library>, timeout_overridden: bool) -> Result<Vec<Vec<Option<u32>>>, LoadError> {
    let by_path: HashMap<&str, u32> = verify.map_or_else(HashMap::new, |lib| lib.files.iter().map(|f| (f.path.as_str(), f.id)).collect());
    let ids: std::collections::HashSet<u32> = verify.map_or_else(Default::default, |lib| lib.files.iter().map(|f| f.id).collect());
    let mut all = Vec::with_capacity(sessions.len());
    for s in sessions {
        let bad = |request: usize, message: String| LoadError::BadSession { session: s.id, request, message };
        if s.requests.is_empty() {
            return Err(bad(0, "the session has no requests".into()));
        }
        let mut file_ids = Vec::with_capacity(s.requests.len());
        for (i, r) in s.requests.iter().enumerate() {
            if !r.path.starts_with('/') || r.path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
                return Err(bad(i, format!("path {:?} must start with / and hold no spaces or control characters", r.path)));
            }
            if let Some((a, b)) = r.range {
                if a > b {
                    return Err(bad(i, format!("range {a}-{b} is empty")));
                }
            }
            let usable_timeout = timeout_overridden || (r.timeout_s.is_finite() && r.timeout_s > 0.0 && r.timeout_s <= MAX_SECONDS);
            if !usable_timeout {
                return Err(bad(i, format!("timeout_s {} is not a positive number of seconds up to {MAX_SECONDS} (30 days)", r.timeout_s)));
            }
            if let Some(p) = r.pace_s {
                if !(0.0..=MAX_SECONDS).contains(&p) {
                    return Err(bad(i, format!("pace_s {p} is not a non-negative number of seconds up to {MAX_SECONDS} (30 days)")));
                }
            }
            let id = match verify {
                None => None,
                Some(_) => {
                    let path = r.path.split('?').next().unwrap_or("").trim_start_matches('/');
                    let id = r.file_id.or_else(|| by_path.get(path).copied()).ok_or_else(|| {
                        bad(i, format!("cannot verify: {:?} has no file_id and is not a file of the library", r.path))
                    })?;
                    if !ids.contains(&id) {
                        return Err(bad(i, format!("cannot verify: file id {id} is not in the library")));
                    }
                    Some(id)
                }
            };
            file_ids.push(id);
        }
        all.push(file_ids);
    }
    Ok(all)
}

fn prepare_out_dir(dir: &Path) -> Result<(), LoadError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| LoadError::OutputDir { path: dir.to_owned(), message: format!("cannot create it: {e}") })?;
    for name in ["requests.csv", "sessions.csv", "summary.json"] {
        if dir.join(name).exists() {
            return Err(LoadError::OutputDir {
                path: dir.to_owned(),
                message: format!("it already holds results ({name}); choose a new directory or remove them"),
            });
        }
    }
    Ok(())
}

/// One connection before the run, so an unreachable server is one clear error
/// instead of thousands of failed sessions.
async fn check_reachable(url: &str, server: &Server) -> Result<(), LoadError> {
    let unreachable = |error| LoadError::Unreachable { url: url.to_owned(), addr: server.addr, error };
    match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(server.addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(e)),
        Err(_) => Err(unreachable(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 5 s"))),
    }
}

/// Every session holds a socket: lift the soft open-file limit to the hard one.
fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut limit = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// (user, system) CPU seconds of `who`.
fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        if libc::getrusage(who, &mut usage) != 0 {
            return (0.0, 0.0);
        }
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default()
}
