//! Turning a validated spec into a library, sessions and a warming list.
//!
//! Randomness comes from independent ChaCha streams, one per concern, so that
//! changing one parameter does not reshuffle the others: the library stream
//! (durations, bitrate assignment) is seeded by `seed`, the placement stream
//! (which file gets which popularity rank) by `library.placement_seed`, and the
//! session streams (video choice, client class, watched fraction) by
//! `sessions.seed`. Same spec and seeds, same bytes out.
//!
//! Videos: video `v` is file `v` (or files of consecutive ids, one per chunk).
//! Ranks are a random permutation, so popular videos are scattered over the
//! disk as in paper 003 ("Server Video Placement: Random"). A video of `d`
//! seconds at `b` kbit/s has `round(d * b * 1000 / 8)` bytes and is cut into
//! chunks of `round(chunk_duration * b * 1000 / 8)` bytes, the last one shorter.
//!
//! Sessions: each picks a rank from Zipf(alpha) over the library, a client class
//! by share, and a watched fraction from its CDF, and requests chunks 0..n where n
//! is the fraction of the video's bytes rounded up to whole chunks (at least one,
//! at most the whole video), as paper 003 section 5.1 does.
//!
//! Warming set: the chunks with the highest expected request count under the
//! spec's distributions, `P(rank) * P(session reaches chunk k)`, not the counts
//! of the sessions drawn: warming must not peek at the future.

use crate::spec::{Storage, Validated};
use rand::distributions::{Distribution, WeightedIndex};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use vidbench_library::{Library, Phase, Request, Session, Video, WarmRange, MANIFEST_VERSION};

/// Stream numbers of the ChaCha generators (fixed forever: changing one changes every workload).
const STREAM_DURATIONS: u64 = 1;
const STREAM_BITRATES: u64 = 2;
const STREAM_PLACEMENT: u64 = 3;
const STREAM_VIDEO_CHOICE: u64 = 4;
const STREAM_CLASS: u64 = 5;
const STREAM_FRACTION: u64 = 6;

fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// One video as the generator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoInfo {
    pub duration_s: f64,
    pub bitrate_kbps: u32,
    pub size: u64,
    pub chunk_bytes: u64,
    /// Popularity rank, 1 = most popular.
    pub rank: u32,
    /// Id of the video's file (file-per-video) or of its chunk 0 (file-per-chunk).
    pub first_file: u32,
}

impl VideoInfo {
    pub fn chunks(&self) -> u64 {
        self.size.div_ceil(self.chunk_bytes)
    }
    /// Inclusive byte range of chunk `k` within the video.
    pub fn chunk_range(&self, k: u64) -> (u64, u64) {
        let first = k * self.chunk_bytes;
        (first, ((k + 1) * self.chunk_bytes).min(self.size) - 1)
    }
}

/// Everything `gen` writes, in memory.
#[derive(Debug, Clone)]
pub struct Workload {
    pub videos: Vec<VideoInfo>,
    /// `by_rank[r]` is the video of rank `r + 1`.
    pub by_rank: Vec<u32>,
    pub library: Library,
    pub sessions: Vec<Session>,
    pub warm: Vec<WarmRange>,
}

/// Generates the whole workload.
pub fn generate(v: &Validated) -> Workload {
    let (videos, by_rank) = make_videos(v);
    let library = make_library(v, &videos);
    let sessions = make_sessions(v, &videos, &by_rank, &library);
    let warm = warming_set(v, &videos, &by_rank, &library);
    Workload { videos, by_rank, library, sessions, warm }
}

fn round_ms(seconds: f64) -> f64 {
    ((seconds * 1000.0).round() / 1000.0).max(0.001)
}

/// Splits `count` items by `shares` into exact counts (largest remainder).
pub fn apportion(count: u32, shares: &[f64]) -> Vec<u32> {
    let exact: Vec<f64> = shares.iter().map(|s| s * count as f64).collect();
    let mut counts: Vec<u32> = exact.iter().map(|e| e.floor() as u32).collect();
    let mut left = count - counts.iter().sum::<u32>();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    for i in order.into_iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

fn make_videos(v: &Validated) -> (Vec<VideoInfo>, Vec<u32>) {
    let spec = &v.spec;
    let n = spec.library.videos;
    let mut durations_rng = rng(v.library_seed(), STREAM_DURATIONS);
    let mut durations: Vec<f64> = (0..n).map(|_| round_ms(v.durations.sample(&mut durations_rng))).collect();

    let shares: Vec<f64> = v.bitrates.iter().map(|&(_, s)| s).collect();
    let mut bitrates: Vec<u32> = Vec::with_capacity(n as usize);
    for (count, &(kbps, _)) in apportion(n, &shares).into_iter().zip(&v.bitrates) {
        bitrates.resize(bitrates.len() + count as usize, kbps);
    }
    bitrates.shuffle(&mut rng(v.library_seed(), STREAM_BITRATES));

    let mut by_rank: Vec<u32> = (0..n).collect();
    by_rank.shuffle(&mut rng(v.placement_seed(), STREAM_PLACEMENT));
    let median = round_ms(v.durations.quantile(0.5));
    for &video in by_rank.iter().take(spec.library.median_duration_top as usize) {
        durations[video as usize] = median;
    }
    let mut rank_of = vec![0u32; n as usize];
    for (r, &video) in by_rank.iter().enumerate() {
        rank_of[video as usize] = r as u32 + 1;
    }

    let mut next_file = 0u32;
    let videos = (0..n as usize)
        .map(|i| {
            let kbps = bitrates[i];
            let size = crate::spec::chunk_bytes(kbps, durations[i]);
            let info = VideoInfo {
                duration_s: durations[i],
                bitrate_kbps: kbps,
                size,
                chunk_bytes: v.chunk_bytes(kbps),
                rank: rank_of[i],
                first_file: next_file,
            };
            next_file += match spec.library.storage {
                Storage::FilePerVideo => 1,
                Storage::FilePerChunk => info.chunks() as u32,
            };
            info
        })
        .collect();
    (videos, by_rank)
}

fn digits(n: u64) -> usize {
    n.max(1).to_string().len()
}

fn make_library(v: &Validated, videos: &[VideoInfo]) -> Library {
    let dir = &v.spec.library.directory;
    let width = digits(videos.len() as u64 - 1).max(5);
    let chunk_width = digits(videos.iter().map(|x| x.chunks()).max().unwrap_or(1) - 1).max(4);
    let mut files = Vec::new();
    for (i, info) in videos.iter().enumerate() {
        let base = Video {
            id: info.first_file,
            content: None,
            path: format!("{dir}/{i:0width$}.mp4"),
            size: info.size,
            video: i as u32,
            chunk: None,
            bitrate_kbps: info.bitrate_kbps,
            duration_s: info.duration_s,
            rank: info.rank,
        };
        match v.spec.library.storage {
            Storage::FilePerVideo => files.push(base),
            Storage::FilePerChunk => {
                for k in 0..info.chunks() {
                    let (a, b) = info.chunk_range(k);
                    files.push(Video {
                        id: info.first_file + k as u32,
                        path: format!("{dir}/{i:0width$}/{k:0chunk_width$}.ts"),
                        size: b - a + 1,
                        chunk: Some(k as u32),
                        ..base.clone()
                    });
                }
            }
        }
    }
    Library { version: MANIFEST_VERSION, name: v.spec.name.clone(), placement_seed: v.placement_seed(), files }
}

/// Index in `library.files` of video `video`'s chunk `k` file (or whole file).
fn file_index(v: &Validated, videos: &[VideoInfo], video: usize, k: u64) -> usize {
    match v.spec.library.storage {
        Storage::FilePerVideo => video,
        // Ids are assigned in file order, so the id is the index.
        Storage::FilePerChunk => (videos[video].first_file as u64 + k) as usize,
    }
}

/// The request for chunk `k` of `video`, without timing.
fn chunk_request(v: &Validated, videos: &[VideoInfo], library: &Library, video: usize, k: u64) -> (String, Option<(u64, u64)>, u32) {
    let file = &library.files[file_index(v, videos, video, k)];
    let range = match v.spec.library.storage {
        Storage::FilePerVideo => Some(videos[video].chunk_range(k)),
        Storage::FilePerChunk => None,
    };
    (format!("/{}", file.path), range, file.id)
}

/// Zipf weights over ranks 1..=n.
pub fn zipf_weights(n: u32, alpha: f64) -> Vec<f64> {
    (1..=n).map(|r| (r as f64).powf(-alpha)).collect()
}

/// Number of chunks a session watching `fraction` of `info` requests.
pub fn chunks_watched(info: &VideoInfo, fraction: f64) -> u64 {
    let wanted = (fraction * info.size as f64 / info.chunk_bytes as f64).ceil() as u64;
    wanted.clamp(1, info.chunks())
}

fn make_sessions(v: &Validated, videos: &[VideoInfo], by_rank: &[u32], library: &Library) -> Vec<Session> {
    let spec = &v.spec;
    let ses = &spec.sessions;
    let zipf = WeightedIndex::new(zipf_weights(spec.library.videos, spec.library.zipf_alpha))
        .expect("Zipf weights are positive and finite");
    let classes = WeightedIndex::new(ses.classes.iter().map(|c| c.share)).expect("shares were validated");
    let seed = v.session_seed();
    let (mut video_rng, mut class_rng, mut fraction_rng) =
        (rng(seed, STREAM_VIDEO_CHOICE), rng(seed, STREAM_CLASS), rng(seed, STREAM_FRACTION));
    (0..ses.count)
        .map(|i| {
            let video = by_rank[zipf.sample(&mut video_rng)] as usize;
            let class = &ses.classes[classes.sample(&mut class_rng)];
            let fraction = v.watched_fraction.sample(&mut fraction_rng);
            let n = chunks_watched(&videos[video], fraction);
            let requests = (0..n)
                .map(|k| {
                    let (path, range, file_id) = chunk_request(v, videos, library, video, k);
                    let paced = ses.pacing && k >= ses.unpaced_initial_requests as u64;
                    Request {
                        path,
                        range,
                        file_id: Some(file_id),
                        pace_s: paced.then_some(ses.chunk_duration_s),
                        timeout_s: ses.timeout_s,
                    }
                })
                .collect();
            let phase = if i < ses.ramp_up {
                Phase::RampUp
            } else if i >= ses.count - ses.ramp_down {
                Phase::RampDown
            } else {
                Phase::Measure
            };
            Session {
                id: i as u64,
                phase,
                class: class.name.clone(),
                rate_bps: (class.rate_mbps * 1e6).round() as u64,
                delay_ms: class.delay_ms,
                video: video as u32,
                requests,
            }
        })
        .collect()
}

/// A candidate for the warming set, ordered by expected demand, then rank and
/// chunk (so ties break the same way every time).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    demand: f64,
    rank: u32,
    chunk: u64,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// Greater = more worth warming.
    fn cmp(&self, other: &Self) -> Ordering {
        self.demand
            .total_cmp(&other.demand)
            .then(other.rank.cmp(&self.rank))
            .then(other.chunk.cmp(&self.chunk))
    }
}

fn warming_set(v: &Validated, videos: &[VideoInfo], by_rank: &[u32], library: &Library) -> Vec<WarmRange> {
    let want = v.spec.warming.chunks as usize;
    if want == 0 {
        return Vec::new();
    }
    let weights = zipf_weights(v.spec.library.videos, v.spec.library.zipf_alpha);
    let total: f64 = weights.iter().sum();
    // Min-heap of the best `want` candidates so far (Reverse ordering).
    // `want` may exceed the library's chunks: the heap holds at most those.
    let chunks: usize = videos.iter().map(|v| v.chunks() as usize).sum();
    let mut best: BinaryHeap<std::cmp::Reverse<Candidate>> = BinaryHeap::with_capacity(want.min(chunks) + 1);
    for (r, &video) in by_rank.iter().enumerate() {
        let p = weights[r] / total;
        let full = best.len() == want;
        // No chunk of this or any less popular video can beat the weakest kept one.
        if full && p <= best.peek().unwrap().0.demand {
            break;
        }
        let info = &videos[video as usize];
        for k in 0..info.chunks() {
            // A session reaches chunk k (k >= 1) when its fraction exceeds k chunks' worth of the video.
            let reach = if k == 0 { 1.0 } else { 1.0 - v.watched_fraction.cdf((k * info.chunk_bytes) as f64 / info.size as f64) };
            let candidate = Candidate { demand: p * reach, rank: r as u32 + 1, chunk: k };
            if best.len() < want {
                best.push(std::cmp::Reverse(candidate));
            } else if candidate > best.peek().unwrap().0 {
                best.pop();
                best.push(std::cmp::Reverse(candidate));
            } else {
                break; // demand falls with k
            }
        }
    }
    let mut chosen: Vec<Candidate> = best.into_iter().map(|c| c.0).collect();
    chosen.sort_by(|a, b| b.cmp(a));
    chosen
        .into_iter()
        .map(|c| {
            let video = by_rank[c.rank as usize - 1] as usize;
            let (path, range, _) = chunk_request(v, videos, library, video, c.chunk);
            let file_size = library.files[file_index(v, videos, video, c.chunk)].size;
            WarmRange { path, range: range.unwrap_or((0, file_size - 1)) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, &[0.5, 0.5]), vec![5, 5]);
        assert_eq!(apportion(7, &[0.5, 0.5]), vec![4, 3]);
        assert_eq!(apportion(12, &[5.0 / 12.0, 5.0 / 12.0, 2.0 / 12.0]), vec![5, 5, 2]);
        assert_eq!(apportion(3, &[0.2, 0.2, 0.6]).iter().sum::<u32>(), 3);
        assert_eq!(apportion(0, &[1.0]), vec![0]);
    }

    #[test]
    fn chunk_ranges_tile_the_video() {
        let info = VideoInfo { duration_s: 25.0, bitrate_kbps: 400, size: 1_250_000, chunk_bytes: 500_000, rank: 1, first_file: 0 };
        assert_eq!(info.chunks(), 3);
        assert_eq!(info.chunk_range(0), (0, 499_999));
        assert_eq!(info.chunk_range(2), (1_000_000, 1_249_999));
        assert_eq!(chunks_watched(&info, 0.0), 1);
        assert_eq!(chunks_watched(&info, 0.4), 1);
        assert_eq!(chunks_watched(&info, 0.41), 2);
        assert_eq!(chunks_watched(&info, 1.0), 3);
    }
}
