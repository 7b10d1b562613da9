//! The generated workload follows its spec: each distribution is checked with a
//! fixed seed by a chi-square or Kolmogorov-Smirnov test at a 1e-4 (chi-square)
//! or 1e-3 (KS) significance level, and each test is also shown to reject a
//! slightly different distribution, so none of them can pass vacuously.

use statrs::distribution::{ChiSquared, ContinuousCDF};
use std::path::Path;
use vidbench_library::Phase;
use vidbench_workload::{generate, zipf_weights, Cdf, Spec, Validated};

fn spec(text: &str) -> Validated {
    Spec::parse(text, Path::new("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

/// Pearson's statistic; bins with expected count below 5 are merged into their neighbour.
fn chi_square(observed: &[f64], expected: &[f64]) -> (f64, usize) {
    let (mut stat, mut bins, mut o_acc, mut e_acc) = (0.0, 0usize, 0.0, 0.0);
    for (o, e) in observed.iter().zip(expected) {
        o_acc += o;
        e_acc += e;
        if e_acc >= 5.0 {
            stat += (o_acc - e_acc).powi(2) / e_acc;
            bins += 1;
            o_acc = 0.0;
            e_acc = 0.0;
        }
    }
    if e_acc > 0.0 {
        stat += (o_acc - e_acc).powi(2) / e_acc;
        bins += 1;
    }
    (stat, bins - 1)
}

fn chi_square_passes(observed: &[f64], expected: &[f64]) -> bool {
    let (stat, df) = chi_square(observed, expected);
    let critical = ChiSquared::new(df as f64).unwrap().inverse_cdf(1.0 - 1e-4);
    stat <= critical
}

/// Largest distance between the empirical CDF of `sample` and `cdf`.
fn ks_distance(sample: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    sample.sort_by(f64::total_cmp);
    let n = sample.len() as f64;
    sample
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
        })
        .fold(0.0, f64::max)
}

/// KS critical value at significance 1e-3.
fn ks_critical(n: usize) -> f64 {
    1.95 / (n as f64).sqrt()
}

#[test]
fn video_choice_follows_zipf() {
    let v = spec("seed = 11\n[library]\nvideos = 300\n[sessions]\ncount = 30000\nramp_up = 0\nramp_down = 0\n[warming]\nchunks = 0\n");
    let w = generate(&v);
    let mut by_rank = vec![0.0; 300];
    for s in &w.sessions {
        by_rank[w.videos[s.video as usize].rank as usize - 1] += 1.0;
    }
    let expected_for = |alpha: f64| -> Vec<f64> {
        let weights = zipf_weights(300, alpha);
        let total: f64 = weights.iter().sum();
        weights.iter().map(|p| p / total * 30000.0).collect()
    };
    assert!(chi_square_passes(&by_rank, &expected_for(0.8)), "{:?}", chi_square(&by_rank, &expected_for(0.8)));
    // The test tells alpha 0.8 from 0.7 and 0.9.
    assert!(!chi_square_passes(&by_rank, &expected_for(0.7)));
    assert!(!chi_square_passes(&by_rank, &expected_for(0.9)));
}

#[test]
fn durations_follow_the_cdf() {
    let v = spec("seed = 5\n[library]\nvideos = 20000\nmedian_duration_top = 0\n[sessions]\ncount = 10\nramp_up = 0\nramp_down = 0\n");
    let w = generate(&v);
    let mut durations: Vec<f64> = w.videos.iter().map(|x| x.duration_s).collect();
    let d = ks_distance(&mut durations, |x| v.durations.cdf(x));
    assert!(d < ks_critical(durations.len()), "KS distance {d}");
    // Rejects the same shape stretched by 5 %.
    let d = ks_distance(&mut durations, |x| v.durations.cdf(x / 1.05));
    assert!(d > ks_critical(durations.len()), "KS distance {d} should reject a 5 % stretch");
    // Sizes are duration x bitrate.
    for x in &w.videos {
        assert_eq!(x.size, (x.duration_s * 419_000.0 / 8.0).round() as u64);
    }
}

#[test]
fn most_popular_videos_get_the_median_duration() {
    let v = spec("[library]\nvideos = 1000\nmedian_duration_top = 3\n[sessions]\ncount = 10\nramp_up = 0\nramp_down = 0\n");
    let w = generate(&v);
    let median = v.durations.quantile(0.5);
    for r in 0..3 {
        assert_eq!(w.videos[w.by_rank[r] as usize].duration_s, median);
    }
    assert_ne!(w.videos[w.by_rank[3] as usize].duration_s, median);
}

/// Every video lasts 600 s = 60 chunks, so the chunk count of a session is the
/// watched fraction rounded up to 1/60: P(n <= m) = F(m / 60) for m < 60.
fn chunk_count_expectation(cdf: &Cdf, sessions: f64) -> Vec<f64> {
    (1..=60)
        .map(|m| {
            let upper = if m == 60 { 1.0 } else { cdf.cdf(m as f64 / 60.0) };
            let lower = if m == 1 { 0.0 } else { cdf.cdf((m - 1) as f64 / 60.0) };
            (upper - lower) * sessions
        })
        .collect()
}

#[test]
fn watched_fraction_follows_the_cdf() {
    let v = spec(
        "seed = 3\n[library]\nvideos = 50\nduration_cdf = [[600, 1.0]]\n[sessions]\ncount = 20000\nramp_up = 0\nramp_down = 0\n[warming]\nchunks = 0\n",
    );
    let w = generate(&v);
    assert!(w.videos.iter().all(|x| x.chunks() == 60));
    let mut observed = vec![0.0; 60];
    for s in &w.sessions {
        observed[s.requests.len() - 1] += 1.0;
    }
    let expected = chunk_count_expectation(&v.watched_fraction, 20000.0);
    assert!(chi_square_passes(&observed, &expected), "{:?}", chi_square(&observed, &expected));
    // Rejects a CDF with 5 points less of complete downloads.
    let mut other: Vec<[f64; 2]> = v.spec.sessions.watched_fraction_cdf.clone();
    for p in other.iter_mut().skip(1) {
        if p[0] < 1.0 {
            p[1] = (p[1] + 0.05 * p[0]).min(1.0);
        }
    }
    let other = Cdf::new(&other).unwrap();
    assert!(!chi_square_passes(&observed, &chunk_count_expectation(&other, 20000.0)));
}

#[test]
fn client_classes_follow_their_shares() {
    let v = spec(
        "seed = 9\n[library]\nvideos = 100\n[sessions]\ncount = 20000\nramp_up = 0\nramp_down = 0\n\
         classes = [ { name = \"cable\", rate_mbps = 10, share = 0.5 }, { name = \"dsl\", rate_mbps = 3.5, delay_ms = 20, share = 0.3 }, { name = \"mobile\", rate_mbps = 1, share = 0.2 } ]\n",
    );
    let w = generate(&v);
    let names = ["cable", "dsl", "mobile"];
    let mut observed = [0.0; 3];
    for s in &w.sessions {
        let i = names.iter().position(|n| *n == s.class).unwrap();
        observed[i] += 1.0;
        let (rate, delay) = [(10_000_000, 50), (3_500_000, 20), (1_000_000, 50)][i];
        assert_eq!((s.rate_bps, s.delay_ms), (rate, delay));
    }
    assert!(chi_square_passes(&observed, &[10000.0, 6000.0, 4000.0]), "{observed:?}");
    assert!(!chi_square_passes(&observed, &[9400.0, 6300.0, 4300.0]));
}

#[test]
fn bitrate_mix_is_split_exactly_and_chunks_follow_the_bitrate() {
    let v = spec(
        "[library]\nvideos = 1001\nbitrate_mix = [ { kbps = 419, share = 0.5 }, { kbps = 2095, share = 0.5 } ]\n[sessions]\ncount = 2000\nramp_up = 10\nramp_down = 10\nclasses = [ { name = \"high\", rate_mbps = 10, share = 1 } ]\n",
    );
    let w = generate(&v);
    let sd = w.videos.iter().filter(|x| x.bitrate_kbps == 419).count();
    let hd = w.videos.iter().filter(|x| x.bitrate_kbps == 2095).count();
    assert_eq!(sd + hd, 1001);
    assert!(sd.abs_diff(hd) == 1, "{sd} SD, {hd} HD");
    for x in &w.videos {
        // 10 s of video: 523,750 bytes at 419 kbit/s (paper 003's 0.5 MB), 2,618,750 at 2095.
        assert_eq!(x.chunk_bytes, if x.bitrate_kbps == 419 { 523_750 } else { 2_618_750 });
    }
}

#[test]
fn sessions_have_the_papers_shape() {
    let v = spec("[library]\nvideos = 500\n[sessions]\ncount = 1000\nramp_up = 300\nramp_down = 100\n");
    let w = generate(&v);
    for (i, s) in w.sessions.iter().enumerate() {
        assert_eq!(s.id, i as u64);
        let phase = if i < 300 { Phase::RampUp } else if i >= 900 { Phase::RampDown } else { Phase::Measure };
        assert_eq!(s.phase, phase);
        let info = &w.videos[s.video as usize];
        let mut next = 0;
        for (k, r) in s.requests.iter().enumerate() {
            // Three back-to-back requests fill the buffer, then one per 10 s, start to start.
            assert_eq!(r.pace_s, if k < 3 { None } else { Some(10.0) });
            assert_eq!(r.timeout_s, 10.0);
            assert_eq!(r.path, format!("/v/{:05}.mp4", s.video));
            assert_eq!(r.file_id, Some(s.video));
            let (a, b) = r.range.unwrap();
            assert_eq!(a, next);
            assert!(b - a < info.chunk_bytes && b < info.size);
            next = b + 1;
        }
    }
}

#[test]
fn warming_set_is_the_most_popular_chunks() {
    let v = spec("[library]\nvideos = 2000\n[sessions]\ncount = 20000\nramp_up = 0\nramp_down = 0\n[warming]\nchunks = 500\n");
    let w = generate(&v);
    assert_eq!(w.warm.len(), 500);
    let top = w.by_rank[0] as usize;
    assert_eq!(w.warm[0].path, format!("/v/{top:05}.mp4"));
    assert_eq!(w.warm[0].range.0, 0);
    let mut seen = std::collections::HashSet::new();
    assert!(w.warm.iter().all(|r| seen.insert((r.path.clone(), r.range.0))));
    // The warmed chunks take a far larger share of the requests than of the chunks.
    let total: usize = w.sessions.iter().map(|s| s.requests.len()).sum();
    let warmed = w
        .sessions
        .iter()
        .flat_map(|s| &s.requests)
        .filter(|r| seen.contains(&(r.path.clone(), r.range.unwrap().0)))
        .count();
    let all_chunks: u64 = w.videos.iter().map(|x| x.chunks()).sum();
    let request_share = warmed as f64 / total as f64;
    let chunk_share = 500.0 / all_chunks as f64;
    assert!(request_share > 10.0 * chunk_share, "warm chunks get {request_share} of requests, are {chunk_share} of chunks");
}

#[test]
fn file_per_chunk_storage_requests_whole_files() {
    let v = spec("[library]\nvideos = 40\nstorage = \"file-per-chunk\"\n[sessions]\ncount = 200\nramp_up = 0\nramp_down = 0\npacing = false\n[warming]\nchunks = 20\n");
    let w = generate(&v);
    w.library.validate().unwrap();
    let chunks: u64 = w.videos.iter().map(|x| x.chunks()).sum();
    assert_eq!(w.library.files.len() as u64, chunks);
    for s in &w.sessions {
        for (k, r) in s.requests.iter().enumerate() {
            assert_eq!(r.range, None);
            assert_eq!(r.pace_s, None, "pacing = false");
            let file = w.library.by_path(&r.path).unwrap();
            assert_eq!((file.id, file.video, file.chunk), (r.file_id.unwrap(), s.video, Some(k as u32)));
        }
    }
    for r in &w.warm {
        let file = w.library.by_path(&r.path).unwrap();
        assert_eq!(r.range, (0, file.size - 1));
    }
}
