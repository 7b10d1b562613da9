//! What `vidbench run --resume` may continue: the results directory's
//! recorded experiment against the one given now (testbed unchanged, finished
//! configurations unchanged but for a search's raised `max_probes`).

use crate::driver::DONE;
use crate::parts;
use anyhow::bail;
use serde_json::Value;
use std::path::Path;

/// Whether configuration `name` has a finished run (one with `DONE`) in `out`.
pub fn has_finished_runs(out: &Path, name: &str) -> bool {
    std::fs::read_dir(out.join("runs").join(name)).map(|d| d.flatten().any(|e| e.path().join(DONE).exists())).unwrap_or(false)
}

/// Whether the results in `out`, recorded as `old` (their experiment.json),
/// may be continued by the experiment recorded as `new`: the testbed (disk,
/// run protocol, memory, workload) unchanged, and every configuration with
/// finished runs still there with its settings (a search's `max_probes` may
/// be raised, not lowered). Configurations without finished runs may change,
/// come or go.
pub fn check_resumable(old: &Value, new: &Value, out: &Path) -> anyhow::Result<()> {
    for key in ["disk", "run", "memory_limit_bytes", "workload"] {
        if old.get(key) != new.get(key) {
            bail!("cannot resume {}: the experiment's `{key}` changed since these results were started (use a new --out)", out.display());
        }
    }
    let configs = |v: &Value| v.get("configs").and_then(Value::as_array).cloned().unwrap_or_default();
    let new_configs = configs(new);
    for config in configs(old) {
        let Some(name) = config.get("name").and_then(Value::as_str) else { continue };
        let runs = out.join("runs").join(name);
        if !has_finished_runs(out, name) {
            continue;
        }
        match new_configs.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(name)) {
            // A search's max_probes may be raised: that continues a search it cut.
            Some(c) if parts::same_settings(c, &config) => {
                let probes = |v: &Value| v.pointer("/rates/bracket/max_probes").and_then(Value::as_u64);
                if let (Some(was), Some(now)) = (probes(&config), probes(c)) {
                    if now < was {
                        bail!(
                            "cannot resume {}: configuration `{name}` lowers max_probes from {was} to {now}, below what its finished search in {} may have used: give at least {was}",
                            out.display(),
                            runs.display()
                        );
                    }
                }
            }
            Some(_) => bail!(
                "cannot resume {}: configuration `{name}` changed since its finished runs in {} (undo the change, or use a new --out)",
                out.display(),
                runs.display()
            ),
            None => bail!(
                "cannot resume {}: configuration `{name}` has finished runs in {} but is no longer in the experiment file",
                out.display(),
                runs.display()
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_keeps_finished_configurations_and_may_change_or_add_the_others() {
        let out = tempfile::tempdir().unwrap();
        let done = out.path().join("runs/a/steps-rep0");
        std::fs::create_dir_all(&done).unwrap();
        std::fs::write(done.join(DONE), "1\n").unwrap();
        std::fs::create_dir_all(out.path().join("runs/b/steps-rep0")).unwrap(); // interrupted: no DONE
        let exp = |configs: serde_json::Value| serde_json::json!({ "disk": {"preset": "x"}, "run": {}, "memory_limit_bytes": 1, "workload": {}, "configs": configs });
        let a = serde_json::json!({"name": "a", "prefetch": 2048});
        let b = serde_json::json!({"name": "b", "prefetch": 2048});
        let old = exp(serde_json::json!([a, b]));
        // Unchanged, b changed (it finished nothing), c added, b removed: all fine.
        for new in [
            old.clone(),
            exp(serde_json::json!([a, {"name": "b", "prefetch": 1024}])),
            exp(serde_json::json!([a, b, {"name": "c"}])),
            exp(serde_json::json!([a])),
        ] {
            check_resumable(&old, &new, out.path()).unwrap();
        }
        let err = check_resumable(&old, &exp(serde_json::json!([{"name": "a", "prefetch": 1024}, b])), out.path()).unwrap_err().to_string();
        assert!(err.contains("configuration `a` changed"), "{err}");
        let err = check_resumable(&old, &exp(serde_json::json!([b])), out.path()).unwrap_err().to_string();
        assert!(err.contains("`a` has finished runs") && err.contains("no longer"), "{err}");
        let mut other_disk = old.clone();
        other_disk["disk"] = serde_json::json!({"preset": "y"});
        let err = check_resumable(&old, &other_disk, out.path()).unwrap_err().to_string();
        assert!(err.contains("`disk` changed"), "{err}");
        // A finished search may get more probes (to go on if its budget cut
        // it), not other bracket settings.
        let searched = |probes: u32, step: f64| serde_json::json!({"name": "a", "rates": {"plan": "bracket", "bracket": {"start": 4.7, "step_pct": step, "max_probes": probes}}});
        let old = exp(serde_json::json!([searched(14, 20.0)]));
        check_resumable(&old, &exp(serde_json::json!([searched(20, 20.0)])), out.path()).unwrap();
        let err = check_resumable(&old, &exp(serde_json::json!([searched(10, 20.0)])), out.path()).unwrap_err().to_string();
        assert!(err.contains("lowers max_probes from 14 to 10") && err.contains("at least 14"), "{err}");
        let err = check_resumable(&old, &exp(serde_json::json!([searched(20, 10.0)])), out.path()).unwrap_err().to_string();
        assert!(err.contains("configuration `a` changed"), "{err}");
    }
}
