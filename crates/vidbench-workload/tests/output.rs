//! The output directory: complete, readable back by the shared readers,
//! deterministic given the seeds, and never half-written.

use std::path::Path;
use vidbench_library::{read_sessions, read_warm_list, Library};
use vidbench_workload::{
    context_of, generate, summarize, write_workload, Spec, Summary, JSONL_FILE, LIBRARY_FILE, RESOLVED_SPEC_FILE, SPEC_FILE,
    SUMMARY_JSON_FILE, WARM_FILE, WSESSLOG_FILE,
};

const SPEC: &str = "name = \"t\"\nseed = 7\n[scaling]\nmemory_limit_mib = 64\nnote = \"test\"\n\
    [library]\nvideos = 300\n[sessions]\ncount = 400\nramp_up = 100\nramp_down = 50\nnominal_rate_per_s = 2\n[warming]\nchunks = 50\n";

fn gen(text: &str, out: &Path, force: bool) -> anyhow::Result<Summary> {
    let v = Spec::parse(text, Path::new("t.toml"))?;
    write_workload(out, text, &v, &generate(&v), force)
}

fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn writes_every_file_and_they_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("w");
    let summary = gen(SPEC, &out, false).unwrap();
    let names: Vec<String> = files_of(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["library.json", "sessions.jsonl", "sessions.wsesslog", "spec.resolved.toml", "spec.toml", "summary.json", "summary.md", "warm.txt"]
    );
    let library = Library::load(&out.join(LIBRARY_FILE)).unwrap();
    assert_eq!(library.files.len(), 300);
    assert_eq!(library.name, "t");
    let jsonl = read_sessions(&out.join(JSONL_FILE)).unwrap();
    let wsesslog = read_sessions(&out.join(WSESSLOG_FILE)).unwrap();
    assert_eq!(jsonl.len(), 400);
    assert_eq!(jsonl, wsesslog, "both formats hold the same sessions");
    let warm = read_warm_list(&out.join(WARM_FILE)).unwrap();
    assert_eq!(warm.len(), 50);
    // The summary file is what the files say.
    let again = summarize(&library, &jsonl, Some(&warm), &context_of(&Spec::parse(SPEC, Path::new("t")).unwrap().spec)).unwrap();
    assert_eq!(again, summary);
    let on_disk: Summary = serde_json::from_slice(&std::fs::read(out.join(SUMMARY_JSON_FILE)).unwrap()).unwrap();
    assert_eq!(on_disk, summary);
    assert_eq!(summary.sessions.count, 400);
    assert_eq!((summary.sessions.ramp_up, summary.sessions.measure, summary.sessions.ramp_down), (100, 250, 50));
    assert_eq!(summary.table3.total_chunks_requested, jsonl.iter().map(|s| s.requests.len() as u64).sum::<u64>());
    assert!(summary.table3.unique_chunks_requested <= summary.table3.total_chunks_requested);
    assert!(summary.table3.chunks_viewed_once <= summary.table3.unique_chunks_requested);
    assert_eq!(summary.warming.as_ref().unwrap().chunks, 50);
    assert_eq!(summary.scaling.as_ref().unwrap().memory_limit_mib, 64);
    // The copies of the spec: verbatim, and resolved (which generates the same workload).
    assert_eq!(std::fs::read_to_string(out.join(SPEC_FILE)).unwrap(), SPEC);
    let resolved = std::fs::read_to_string(out.join(RESOLVED_SPEC_FILE)).unwrap();
    let out2 = tmp.path().join("w2");
    gen(&resolved, &out2, false).unwrap();
    assert_eq!(std::fs::read(out.join("sessions.jsonl")).unwrap(), std::fs::read(out2.join("sessions.jsonl")).unwrap());
    assert_eq!(std::fs::read(out.join("library.json")).unwrap(), std::fs::read(out2.join("library.json")).unwrap());
}

#[test]
fn output_is_deterministic_given_the_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    gen(SPEC, &tmp.path().join("a"), false).unwrap();
    gen(SPEC, &tmp.path().join("b"), false).unwrap();
    let (a, b) = (files_of(&tmp.path().join("a")), files_of(&tmp.path().join("b")));
    assert_eq!(a.len(), b.len());
    for ((name_a, bytes_a), (name_b, bytes_b)) in a.iter().zip(&b) {
        assert_eq!(name_a, name_b);
        assert!(bytes_a == bytes_b, "{name_a} differs between two runs with the same seed");
    }

    // Another top-level seed: another library and other sessions.
    let other = SPEC.replace("seed = 7", "seed = 8");
    gen(&other, &tmp.path().join("c"), false).unwrap();
    let read = |d: &str, f: &str| std::fs::read(tmp.path().join(d).join(f)).unwrap();
    assert_ne!(read("a", "library.json"), read("c", "library.json"));
    assert_ne!(read("a", "sessions.jsonl"), read("c", "sessions.jsonl"));

    // Another session seed only: the same library, other sessions.
    let sessions_only = SPEC.replace("[sessions]\n", "[sessions]\nseed = 99\n");
    gen(&sessions_only, &tmp.path().join("d"), false).unwrap();
    assert_eq!(read("a", "library.json"), read("d", "library.json"));
    assert_ne!(read("a", "sessions.jsonl"), read("d", "sessions.jsonl"));

    // Another placement seed: same durations, ranks moved.
    let placement = SPEC.replace("[library]\n", "[library]\nplacement_seed = 5\n");
    gen(&placement, &tmp.path().join("e"), false).unwrap();
    let lib = |d: &str| Library::load(&tmp.path().join(d).join("library.json")).unwrap();
    let (a, e) = (lib("a"), lib("e"));
    assert_ne!(a.files.iter().map(|f| f.rank).collect::<Vec<_>>(), e.files.iter().map(|f| f.rank).collect::<Vec<_>>());
    // Same durations, except the median-duration videos (ranks 1 and 2) of either placement.
    for (fa, fe) in a.files.iter().zip(&e.files) {
        if fa.rank > 2 && fe.rank > 2 {
            assert_eq!((fa.size, fa.duration_s), (fe.size, fe.duration_s), "{}", fa.path);
        }
    }
}

#[test]
fn nothing_is_written_on_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("w");
    assert!(gen("[sessions]\ncount = -1\n", &out, false).is_err());
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "no temporary directory is left behind");

    // An existing directory is kept unless --force, and --force replaces
    // only a workload: anything else there is somebody's work.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "x").unwrap();
    let err = gen(SPEC, &out, false).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
    let err = gen(SPEC, &out, true).unwrap_err().to_string();
    assert!(err.contains("is not a generated workload"), "{err}");
    assert!(out.join("keep").exists());
    let file = tmp.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let err = gen(SPEC, &file, true).unwrap_err().to_string();
    assert!(err.contains("is not a generated workload"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_dir_all(&out).unwrap();

    // A workload is replaced whole.
    gen(SPEC, &out, false).unwrap();
    std::fs::write(out.join("keep"), "x").unwrap();
    gen(SPEC, &out, true).unwrap();
    assert!(!out.join("keep").exists());
    assert!(out.join("library.json").exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "only the output directory remains");
}

#[test]
fn summary_names_sessions_that_do_not_fit_the_library() {
    let v = Spec::parse(SPEC, Path::new("t.toml")).unwrap();
    let mut w = generate(&v);
    w.sessions[3].requests[0].path = "/v/missing.mp4".into();
    let err = summarize(&w.library, &w.sessions, None, &Default::default()).unwrap_err();
    assert!(err.contains("session 3 request 0: /v/missing.mp4 is not a file"), "{err}");
    let mut w = generate(&v);
    let size = w.library.files[w.sessions[5].video as usize].size;
    w.sessions[5].requests[0].range = Some((0, size));
    let err = summarize(&w.library, &w.sessions, None, &Default::default()).unwrap_err();
    assert!(err.contains("past the end"), "{err}");
}
