//! Bad specs are rejected with a message naming the key and, where it is
//! written, its line; the bundled specs are all valid.

use std::path::{Path, PathBuf};
use vidbench_workload::Spec;

fn error_of(text: &str) -> String {
    match Spec::parse(text, Path::new("bad.toml")) {
        Ok(_) => panic!("spec should be rejected:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(text: &str, wants: &[&str]) {
    let err = error_of(text);
    for want in wants {
        assert!(err.contains(want), "error for\n{text}\n= {err}\nshould mention {want:?}");
    }
}

#[test]
fn unknown_keys_are_named_with_their_line() {
    assert_mentions("name = \"x\"\nsed = 3\n", &["bad.toml", "line 2", "unknown field `sed`"]);
    assert_mentions("[library]\nvideos = 10\nzipf = 0.8\n", &["line 3", "unknown field `zipf`"]);
    assert_mentions(
        "[sessions]\n[[sessions.classes]]\nname = \"a\"\nrate_mbps = 1\nshare = 1\nlatency_ms = 5\n",
        &["line 6", "unknown field `latency_ms`"],
    );
    assert_mentions("[warm]\nchunks = 1\n", &["line 1", "unknown field `warm`"]);
}

#[test]
fn wrong_types_and_syntax_name_the_line() {
    assert_mentions("[library]\nvideos = -5\n", &["line 2", "videos"]);
    assert_mentions("[sessions]\ncount = \"many\"\n", &["line 2", "count"]);
    assert_mentions("[library]\nstorage = \"tape\"\n", &["line 2", "file-per-video"]);
    assert_mentions("[library\nvideos = 1\n", &["line 1"]);
}

#[test]
fn bad_cdfs_are_named() {
    assert_mentions(
        "[library]\nvideos = 10\nduration_cdf = [\n  [10, 0.0],\n  [20, 0.6],\n  [30, 0.5],\n  [40, 1.0],\n]\n",
        &["bad.toml:3", "library.duration_cdf", "monotone"],
    );
    assert_mentions(
        "[sessions]\nwatched_fraction_cdf = [[0, 0], [0.5, 0.5], [1, 0.9]]\n",
        &["bad.toml:2", "sessions.watched_fraction_cdf", "end at 1"],
    );
    assert_mentions("[sessions]\nwatched_fraction_cdf = [[0, 0], [1.5, 1]]\n", &["sessions.watched_fraction_cdf", "between 0 and 1"]);
    assert_mentions("[library]\nduration_cdf = [[0, 0.5], [10, 1]]\n", &["library.duration_cdf", "positive"]);
    assert_mentions("[library]\nduration_cdf = []\n", &["library.duration_cdf", "empty"]);
}

#[test]
fn negative_or_zero_rates_are_named() {
    assert_mentions(
        "[sessions]\nclasses = [\n  { name = \"a\", rate_mbps = 10, share = 0.5 },\n  { name = \"b\", rate_mbps = -3.5, share = 0.5 },\n]\n",
        &["bad.toml:4", "sessions.classes[1].rate_mbps", ">= 0"],
    );
    assert_mentions("[sessions]\nnominal_rate_per_s = -2\n", &["bad.toml:2", "sessions.nominal_rate_per_s", "positive"]);
    assert_mentions("[sessions]\nchunk_duration_s = 0\n", &["bad.toml:2", "sessions.chunk_duration_s"]);
    assert_mentions("[sessions]\ntimeout_s = -10\n", &["bad.toml:2", "sessions.timeout_s"]);
    assert_mentions("[library]\nbitrate_kbps = 0\n", &["bad.toml:2", "library.bitrate_kbps"]);
    assert_mentions("[library]\nzipf_alpha = -0.8\n", &["bad.toml:2", "library.zipf_alpha"]);
}

#[test]
fn shares_must_sum_to_one() {
    assert_mentions(
        "[sessions]\nclasses = [ { name = \"a\", rate_mbps = 10, share = 0.5 }, { name = \"b\", rate_mbps = 3.5, share = 0.4 } ]\n",
        &["bad.toml:2", "sessions.classes", "sum to 0.9"],
    );
    assert_mentions(
        "[library]\nbitrate_mix = [ { kbps = 419, share = 0.7 }, { kbps = 2095, share = 0.7 } ]\n",
        &["bad.toml:2", "library.bitrate_mix", "sum to 1.4"],
    );
    assert_mentions(
        "[sessions]\nclasses = [ { name = \"a\", rate_mbps = 10, share = 1.5 }, { name = \"b\", rate_mbps = 3.5, share = -0.5 } ]\n",
        &["sessions.classes[0].share", "between 0 and 1"],
    );
    assert_mentions(
        "[sessions]\nclasses = [ { name = \"a\", rate_mbps = 10, share = 0.5 }, { name = \"a\", rate_mbps = 3.5, share = 0.5 } ]\n",
        &["sessions.classes[1].name", "used twice"],
    );
}

#[test]
fn inconsistent_values_are_named() {
    assert_mentions("[library]\nbitrate_kbps = 419\nbitrate_mix = [ { kbps = 419, share = 1 } ]\n", &["library.bitrate_mix", "not both"]);
    assert_mentions("[sessions]\ncount = 100\nramp_up = 60\nramp_down = 40\n", &["sessions.ramp_up", "no measured session"]);
    assert_mentions("[library]\nvideos = 0\n", &["bad.toml:2", "library.videos"]);
    assert_mentions("[library]\nvideos = 1\nmedian_duration_top = 2\n", &["library.median_duration_top"]);
    assert_mentions("[library]\ndirectory = \"../up\"\n", &["library.directory"]);
    assert_mentions("name = \"a/b\"\n", &["bad.toml:1", "name"]);
    // A default that fails with the values around it is not written out: the
    // error names the key and the line of its table.
    let err = error_of("name = \"x\"\n[sessions]\ncount = 3000\n");
    assert!(err.starts_with("workload spec bad.toml:2: sessions.ramp_up:"), "{err}");
}

#[test]
fn unreadable_file_is_named() {
    let err = Spec::load(Path::new("/nonexistent/spec.toml")).unwrap_err().to_string();
    assert!(err.contains("cannot read workload spec /nonexistent/spec.toml"), "{err}");
}

#[test]
fn an_empty_spec_is_paper_003s_workload() {
    let v = Spec::parse("", Path::new("empty.toml")).unwrap();
    let s = &v.spec;
    assert_eq!((s.library.videos, s.library.zipf_alpha, s.sessions.count), (10_000, 0.8, 7_200));
    assert_eq!((s.sessions.chunk_duration_s, s.sessions.timeout_s, s.sessions.unpaced_initial_requests), (10.0, 10.0, 3));
    assert_eq!(v.bitrates, vec![(419, 1.0)]);
    assert_eq!(v.chunk_bytes(419), 523_750);
    assert_eq!(s.warming.chunks, 3_500);
    let rates: Vec<f64> = s.sessions.classes.iter().map(|c| c.rate_mbps).collect();
    assert_eq!(rates, vec![10.0, 3.5, 1.0]);
    assert!(s.sessions.classes.iter().all(|c| c.delay_ms == 50));
    // Paper 003 Table 3: average video duration 258.7 s; the default table's mean is close.
    assert!((v.durations.mean() - 258.7).abs() < 5.0, "{}", v.durations.mean());
}

fn bundled_specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/specs");
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    specs.sort();
    specs
}

#[test]
fn bundled_specs_are_valid_and_state_their_memory_limit() {
    let specs = bundled_specs();
    let names: Vec<String> = specs.iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["sd-paper000", "sd-paper000-full", "sd-paper001", "sd-paper001-full", "hd-paper001", "hd-paper001-full", "mixed-sdhd", "mixed-sdhd-full", "small"] {
        assert!(names.iter().any(|n| n == want), "bench/specs/{want}.toml is missing: {names:?}");
    }
    for path in &specs {
        let v = Spec::load(path).unwrap_or_else(|e| panic!("{e}"));
        assert!(v.spec.scaling.memory_limit_mib > 0, "{}: scaling.memory_limit_mib", path.display());
        assert!(!v.spec.scaling.note.is_empty(), "{}: scaling.note", path.display());
        assert_eq!(v.spec.name, path.file_stem().unwrap().to_string_lossy(), "{}", path.display());
    }
}

/// Regression: hd-paper001.toml and mixed-sdhd.toml had a 1 Mbit/s class,
/// which needs 21 s for a 2,618,750-byte HD chunk against a 10 s deadline:
/// every one of its sessions failed whatever the server did.
#[test]
fn a_class_that_cannot_receive_a_chunk_in_time_is_refused() {
    let hd = "[library]\nbitrate_kbps = 2095\n[sessions]\nclasses = [\n  { name = \"high\", rate_mbps = 10, share = 0.8 },\n  { name = \"medium\", rate_mbps = 1.0, share = 0.2 },\n]\n";
    assert_mentions(
        hd,
        &["bad.toml:6", "sessions.classes[1].rate_mbps", "\"medium\"", "1 Mbit/s", "2618750-byte chunk", "10 s deadline", "raise its rate"],
    );
    // A mix is judged by its largest chunk.
    let mixed = "[library]\nbitrate_mix = [{ kbps = 419, share = 0.5 }, { kbps = 2095, share = 0.5 }]\n[sessions]\nclasses = [{ name = \"slow\", rate_mbps = 1.0, share = 1.0 }]\n";
    assert_mentions(mixed, &["\"slow\"", "2618750-byte chunk"]);
    // The same class is fine for SD (0.5 MB in 4.3 s), and uncapped is always fine.
    let sd = "[library]\nbitrate_kbps = 419\n[sessions]\nclasses = [{ name = \"medium\", rate_mbps = 1.0, share = 0.5 }, { name = \"lan\", rate_mbps = 0, share = 0.5 }]\n";
    assert!(vidbench_workload::Spec::parse(sd, Path::new("sd.toml")).is_ok());
}

/// The first request of a session also opens the connection, inside its own
/// deadline: two one-way delays of handshake before the request's own two.
/// 2,618,750 bytes at 2.2 Mbit/s take 9.52 s; with a 150 ms delay one round
/// trip gives 9.82 s (fits), handshake included 10.12 s (does not). Fails
/// before the handshake was counted (the class was accepted).
#[test]
fn the_first_requests_handshake_counts_against_the_deadline() {
    let class = |rate: f64, delay: u32| {
        format!("[library]\nbitrate_kbps = 2095\n[sessions]\nclasses = [{{ name = \"far\", rate_mbps = {rate}, delay_ms = {delay}, share = 1.0 }}]\n")
    };
    assert_mentions(&class(2.2, 150), &["sessions.classes[0].rate_mbps", "\"far\"", "2.2 Mbit/s", "10.12 s", "600 ms of connection handshake", "10 s deadline"]);
    // The same rate with a 50 ms delay fits (9.72 s), as do the unpaced
    // initial requests: each has its own deadline, not one shared by three.
    let ok = class(2.2, 50);
    assert!(Spec::parse(&ok, Path::new("ok.toml")).is_ok());
    // A delay that alone exceeds the deadline is named as such, even uncapped.
    assert_mentions(&class(0.0, 2600), &["sessions.classes[0].delay_ms", "lower delay_ms"]);
}

/// Paper 001's SD spec extends paper 000's: only the name, the description,
/// the scaling note and memory and the client classes (paper 003's three)
/// differ, so the library is the same files.
#[test]
fn paper_001_s_sd_spec_is_paper_000_s_with_paper_003_s_clients() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/specs");
    let base = Spec::load(&dir.join("sd-paper000-full.toml")).unwrap().spec;
    let mut spec = Spec::load(&dir.join("sd-paper001-full.toml")).unwrap().spec;
    let rates: Vec<(f64, f64)> = spec.sessions.classes.iter().map(|c| (c.rate_mbps, c.share)).collect();
    assert_eq!(rates, [(10.0, 0.4167), (3.5, 0.4167), (1.0, 0.1666)]);
    assert_eq!(spec.scaling.memory_limit_mib, 4096);
    (spec.name, spec.description, spec.scaling.note, spec.scaling.memory_limit_mib, spec.sessions.classes) =
        (base.name.clone(), base.description.clone(), base.scaling.note.clone(), base.scaling.memory_limit_mib, base.sessions.classes.clone());
    assert_eq!(spec, base);
}

/// Paper 001 Fig 7's specs extend the paper-scale SD spec of paper 001 (which
/// extends paper 000's): only the name, the description, the scaling note and
/// Zipf alpha differ, and the text recorded beside a generated workload
/// parses alone to the same spec.
#[test]
fn a_spec_extending_another_changes_only_the_keys_it_gives() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/specs");
    let base = Spec::load(&dir.join("sd-paper001-full.toml")).unwrap().spec;
    for (file, alpha) in [("sd-paper001-full-alpha06.toml", 0.6), ("sd-paper001-full-alpha10.toml", 1.0)] {
        let path = dir.join(file);
        let (v, recorded) = Spec::parse_recorded(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        let mut spec = v.spec.clone();
        assert_eq!(spec.library.zipf_alpha, alpha);
        assert_eq!(spec.scaling.memory_limit_mib, base.scaling.memory_limit_mib, "an unnamed key of [scaling] comes from the base");
        (spec.name, spec.description, spec.scaling.note, spec.library.zipf_alpha) =
            (base.name.clone(), base.description.clone(), base.scaling.note.clone(), base.library.zipf_alpha);
        assert_eq!(spec, base, "{file}");
        assert!(recorded.starts_with("# Resolved from") && !recorded.contains("extends ="), "{recorded}");
        assert_eq!(Spec::parse(&recorded, Path::new("spec.toml")).unwrap().spec, v.spec);
    }
}

/// Values no workload needs are refused by key before generation tries to
/// hold them in memory: these aborted the process ("memory allocation of
/// 96000000024 bytes failed") instead of naming the key.
#[test]
fn absurd_sizes_are_named_before_anything_is_generated() {
    assert_mentions("[library]\nvideos = 4000000000\n", &["library.videos", "from 1 to"]);
    assert_mentions("[sessions]\ncount = 4000000000\nramp_up = 1\nramp_down = 1\n", &["sessions.count", "from 1 to"]);
    assert_mentions("[library]\nduration_cdf = [[1e12, 1.0]]\n", &["library.duration_cdf", "longer than a video may be"]);
    assert_mentions("[sessions]\nchunk_duration_s = 1e-9\n", &["sessions.chunk_duration_s", "chunks"]);
    assert_mentions("[sessions]\ntimeout_s = 1e300\n", &["sessions.timeout_s", "30 days"]);
    // A warming set larger than the library is the library: no allocation for the rest.
    let v = Spec::parse("[library]\nvideos = 20\n[sessions]\ncount = 12\nramp_up = 2\nramp_down = 2\n[warming]\nchunks = 4000000000\n", Path::new("w.toml")).unwrap();
    let w = vidbench_workload::generate(&v);
    assert!(!w.warm.is_empty() && w.warm.len() < 10_000, "{} warm ranges", w.warm.len());
}

/// A CDF point is two numbers; a third used to be dropped without a word.
#[test]
fn cdf_points_with_more_or_fewer_numbers_are_named() {
    assert_mentions("[library]\nduration_cdf = [[10, 0.5, 7], [20, 1.0]]\n", &["duration_cdf", "point 0 has 3 numbers"]);
    assert_mentions("[sessions]\nwatched_fraction_cdf = [[0, 0], [1]]\n", &["watched_fraction_cdf", "point 1 has 1 numbers"]);
}

/// A base that `extends` names but that cannot be read: the error names it
/// and the file naming it, and says why once.
#[test]
fn a_missing_base_is_named_with_the_file_that_extends_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("child.toml");
    std::fs::write(&path, "extends = \"gone.toml\"\nname = \"child\"\n").unwrap();
    let err = format!("{:#}", anyhow::Error::new(Spec::load(&path).unwrap_err()));
    assert!(err.contains("gone.toml") && err.contains("child.toml"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}
