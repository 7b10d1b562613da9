//! `extends = "base.toml"`: a TOML file (an experiment or a workload spec)
//! that starts from another one.
//!
//! A family of experiments on one testbed (paper 001's figures at 2, 4 and
//! 8 GiB, on two drives) or of workloads (one library under three Zipf
//! alphas) differs in a key or a section; each member names the shared file
//! and gives only what differs. The rule has one level: a top-level table the
//! file gives (`[disk]`, `[library]`) merges into the base's key by key, and
//! every other value replaces the base's whole: a scalar, an inline table
//! (`steady = {...}`, `bracket = {...}`) and an array, `[[config]]` included
//! (entries here are the whole list). What a run uses thus reads off two
//! files without deeper merge rules. Keys that exclude each other (a
//! workload's `spec` and `dir`, the rate plans) cannot be switched this way:
//! the merged table would hold both, which the file's own checks refuse. The
//! base is in
//! the same directory, so its relative paths mean the same from either file;
//! it may extend another (at most [`MAX_DEPTH`] files, no cycles). `name`
//! must be given by every file that extends: two experiments (or workloads)
//! never share a name.
//!
//! What is recorded beside results (`experiment.toml`, a workload's
//! `spec.toml`) is the merged table, headed by a comment naming the files it
//! came from, so it parses on its own without the base.

use std::path::{Path, PathBuf};
use toml::Table;

/// A file of the chain that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ExtendsError {
    #[error("cannot read {path}, which `extends` in {by} names: {error}")]
    Io { path: PathBuf, by: PathBuf, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// How many files one chain of `extends` may hold.
pub const MAX_DEPTH: usize = 4;

const KEY: &str = "extends";

/// A parsed file with any base merged in.
pub struct Resolved {
    pub table: Table,
    /// The files merged, the given one first; one entry when it extends nothing.
    pub chain: Vec<PathBuf>,
}

impl Resolved {
    /// Whether a base was merged in.
    pub fn merged(&self) -> bool {
        self.chain.len() > 1
    }

    /// The file as `T`, from `text` (its own text, so that a type error names
    /// its line) when nothing was merged, else from the merged table (a type
    /// error then names the key and the files merged in).
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self, text: &str) -> Result<T, String> {
        if !self.merged() {
            return toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string());
        }
        self.table.clone().try_into().map_err(|e: toml::de::Error| {
            let bases: Vec<String> = self.chain[1..].iter().map(|p| p.display().to_string()).collect();
            format!("{} (in the keys merged from {})", e.to_string().trim_end(), bases.join(", "))
        })
    }

    /// The text to record as the file: `text` itself when nothing was
    /// merged, else the merged table under a header naming the chain.
    pub fn record_text(&self, text: &str) -> String {
        if !self.merged() {
            return text.to_string();
        }
        let names: Vec<String> = self.chain.iter().map(|p| p.display().to_string()).collect();
        format!(
            "# Resolved from {} (each file's sections merge key by key into those of the file it extends).\n{}",
            names.join(" extending "),
            toml::to_string(&self.table).unwrap_or_default()
        )
    }
}

/// Parses `text` (read from `path`) and merges the files it extends.
pub fn resolve(text: &str, path: &Path) -> Result<Resolved, ExtendsError> {
    let mut table = parse(text, path)?;
    let mut chain = vec![path.to_owned()];
    let mut current = path.to_owned();
    while let Some(value) = table.remove(KEY) {
        let parse_error = |message: String| ExtendsError::Parse { path: current.clone(), message };
        let Some(name) = value.as_str() else {
            return Err(parse_error(format!("`{KEY}` must be a file name (a string), not {}", value.type_str())));
        };
        if Path::new(name).components().count() != 1 || name == "." || name == ".." {
            return Err(parse_error(format!("`{KEY} = {name:?}`: name a file in the same directory (its relative paths must mean the same from both files)")));
        }
        if chain.len() == 1 && !table.contains_key("name") {
            return Err(parse_error(format!("a file with `{KEY}` must give its own `name` (two experiments never share one)")));
        }
        let base_path = current.parent().unwrap_or(Path::new(".")).join(name);
        if chain.iter().any(|p| same_file(p, &base_path)) {
            return Err(parse_error(format!("`{KEY} = {name:?}` makes a cycle ({})", chain_text(&chain, &base_path))));
        }
        if chain.len() >= MAX_DEPTH {
            return Err(parse_error(format!("`{KEY}` chains more than {MAX_DEPTH} files ({})", chain_text(&chain, &base_path))));
        }
        let base_text = std::fs::read_to_string(&base_path).map_err(|error| ExtendsError::Io { path: base_path.clone(), by: current.clone(), error })?;
        let mut base = parse(&base_text, &base_path)?;
        // A key of the base's own base comes through `base` on the next turn.
        for (k, v) in std::mem::take(&mut table) {
            merge_key(&mut base, k, v);
        }
        table = base;
        chain.push(base_path.clone());
        current = base_path;
    }
    Ok(Resolved { table, chain })
}

/// Sets `key` of `base` to `value`; a table written as a section merges
/// into the base's section key by key (one level).
fn merge_key(base: &mut Table, key: String, value: toml::Value) {
    match (base.get_mut(&key), value) {
        (Some(toml::Value::Table(old)), toml::Value::Table(new)) => {
            for (k, v) in new {
                old.insert(k, v);
            }
        }
        (_, value) => {
            base.insert(key, value);
        }
    }
}

fn parse(text: &str, path: &Path) -> Result<Table, ExtendsError> {
    text.parse::<Table>().map_err(|e| ExtendsError::Parse { path: path.to_owned(), message: e.to_string().trim_end().to_string() })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn chain_text(chain: &[PathBuf], next: &Path) -> String {
    chain.iter().map(|p| p.display().to_string()).chain(std::iter::once(next.display().to_string())).collect::<Vec<_>>().join(" -> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in list {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn resolve_in(dir: &tempfile::TempDir, name: &str) -> Result<Resolved, ExtendsError> {
        let path = dir.path().join(name);
        resolve(&std::fs::read_to_string(&path).unwrap(), &path)
    }

    #[test]
    fn sections_merge_one_level_other_values_replace_and_chains_merge_in_order() {
        let dir = files(&[
            (
                "a.toml",
                "name = \"a\"\ndescription = \"from a\"\n[disk]\npreset = \"wd-red-1tb\"\ntrace = true\n[memory]\nlimit_mb = 4096\n\
                 [run]\nsteady = { ramp_s = 450, lru_pct = 2 }\n[[config]]\nname = \"x\"\n[[config]]\nname = \"y\"\n",
            ),
            ("b.toml", "extends = \"a.toml\"\nname = \"b\"\n[memory]\nlimit_mb = 2048\n[run]\nsteady = { ramp_s = 900 }\n"),
            ("c.toml", "extends = \"b.toml\"\nname = \"c\"\n[disk]\npreset = \"st1000dm003\"\n[[config]]\nname = \"z\"\n"),
        ]);
        let r = resolve_in(&dir, "c.toml").unwrap();
        assert_eq!(r.chain.len(), 3);
        assert_eq!(r.table["name"].as_str(), Some("c"));
        assert_eq!(r.table["description"].as_str(), Some("from a"));
        assert_eq!(r.table["memory"]["limit_mb"].as_integer(), Some(2048));
        // A section merges key by key: c's preset, a's trace.
        assert_eq!(r.table["disk"]["preset"].as_str(), Some("st1000dm003"));
        assert_eq!(r.table["disk"]["trace"].as_bool(), Some(true));
        // An inline table and an array replace whole: b's steady has no lru_pct, c has one config.
        assert_eq!(r.table["run"]["steady"].as_table().unwrap().len(), 1, "{:?}", r.table["run"]);
        assert_eq!(r.table["config"].as_array().unwrap().len(), 1);
        assert!(!r.table.contains_key(KEY));
        let recorded = r.record_text("ignored");
        assert!(recorded.starts_with("# Resolved") && recorded.contains("c.toml extending"), "{recorded}");
        let again: Table = recorded.parse().unwrap();
        assert_eq!(again, r.table);
    }

    #[test]
    fn a_file_without_extends_is_recorded_as_written() {
        let dir = files(&[("a.toml", "# comment\nname = \"a\"\n")]);
        let r = resolve_in(&dir, "a.toml").unwrap();
        assert_eq!(r.record_text("# comment\nname = \"a\"\n"), "# comment\nname = \"a\"\n");
    }

    #[test]
    fn bad_chains_are_refused_naming_the_file() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("x.toml", "extends = \"x.toml\"\nname = \"x\"\n")], "cycle"),
            (&[("x.toml", "extends = \"y.toml\"\nname = \"x\"\n"), ("y.toml", "extends = \"x.toml\"\n")], "cycle"),
            (&[("x.toml", "extends = \"../y.toml\"\nname = \"x\"\n")], "same directory"),
            (&[("x.toml", "extends = 3\nname = \"x\"\n")], "must be a file name"),
            (&[("x.toml", "extends = \"y.toml\"\n"), ("y.toml", "name = \"y\"\n")], "its own `name`"),
            (&[("x.toml", "extends = \"missing.toml\"\nname = \"x\"\n")], "missing.toml"),
            (&[("x.toml", "extends = \"y.toml\"\nname = \"x\"\n"), ("y.toml", "name = [\n")], "y.toml"),
            (
                &[
                    ("x.toml", "extends = \"y1.toml\"\nname = \"x\"\n"),
                    ("y1.toml", "extends = \"y2.toml\"\n"),
                    ("y2.toml", "extends = \"y3.toml\"\n"),
                    ("y3.toml", "extends = \"y4.toml\"\n"),
                    ("y4.toml", "name = \"y\"\n"),
                ],
                "more than 4",
            ),
        ];
        for (list, want) in cases {
            let dir = files(list);
            let err = resolve_in(&dir, "x.toml").err().expect("refused").to_string();
            assert!(err.contains(want), "{list:?}: {err}");
        }
    }
}
