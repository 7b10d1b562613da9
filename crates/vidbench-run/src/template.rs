//! Server configuration templates (`bench/servers/*.conf`).
//!
//! A template is the server's own configuration language with `{{name}}`
//! placeholders. The driver supplies the fixed variables (port, docroot,
//! workers, user, run_dir, ...); a template declares its knobs, with defaults,
//! on comment lines of the form `# knob: aio = off`, and an experiment's
//! `[config].knobs` may set only those. Any placeholder without a value, and any
//! knob the template does not declare, is an error that names it: a typo never
//! silently gives a different server configuration.

use std::collections::BTreeMap;
use std::path::Path;

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    pub text: String,
    /// Declared knobs and their defaults.
    pub knobs: BTreeMap<String, String>,
}

impl Template {
    pub fn load(path: &Path) -> anyhow::Result<Template> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read server template {}: {e}", path.display()))?;
        Template::parse(&text).map_err(|e| anyhow::anyhow!("server template {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Template, String> {
        let mut knobs = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix('#') else { continue };
            let Some(decl) = rest.trim_start().strip_prefix("knob:") else { continue };
            let Some((name, value)) = decl.split_once('=') else {
                return Err(format!("line {}: a knob is declared as `# knob: name = default`", i + 1));
            };
            knobs.insert(name.trim().to_string(), value.trim().to_string());
        }
        Ok(Template { text: text.to_string(), knobs })
    }

    /// Fills the placeholders. `fixed` are the driver's variables, `overrides` the
    /// experiment's knobs. Returns the configuration text and the knob values used.
    pub fn render(
        &self,
        fixed: &BTreeMap<String, String>,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        let mut knobs = self.knobs.clone();
        for (k, v) in overrides {
            if !knobs.contains_key(k) {
                let known: Vec<_> = self.knobs.keys().map(String::as_str).collect();
                return Err(format!("knob {k:?} is not declared by the template (it declares: {})", known.join(", ")));
            }
            if v.contains('\n') || v.contains(';') {
                return Err(format!("knob {k:?}: value {v:?} may not contain a newline or ';'"));
            }
            knobs.insert(k.clone(), v.clone());
        }
        let mut out = String::with_capacity(self.text.len());
        let mut rest = self.text.as_str();
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| "a `{{` is never closed".to_string())?;
            let name = after[..end].trim();
            let value = fixed
                .get(name)
                .or_else(|| knobs.get(name))
                .ok_or_else(|| format!("placeholder {{{{{name}}}}} has no value (not a driver variable nor a declared knob)"))?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok((out, knobs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn renders_fixed_variables_and_knobs() {
        let t = Template::parse("# knob: aio = off\nlisten {{port}};\naio {{ aio }};\n").unwrap();
        let (text, used) = t.render(&map(&[("port", "80")]), &map(&[])).unwrap();
        assert_eq!(text, "# knob: aio = off\nlisten 80;\naio off;\n");
        assert_eq!(used["aio"], "off");
        let (text, _) = t.render(&map(&[("port", "80")]), &map(&[("aio", "threads")])).unwrap();
        assert!(text.contains("aio threads;"));
    }

    #[test]
    fn names_unknown_placeholders_and_knobs() {
        let t = Template::parse("# knob: aio = off\nlisten {{prot}};\n").unwrap();
        let err = t.render(&map(&[("port", "80")]), &map(&[])).unwrap_err();
        assert!(err.contains("prot"), "{err}");
        let t = Template::parse("# knob: aio = off\nlisten {{port}};\n").unwrap();
        let err = t.render(&map(&[("port", "80")]), &map(&[("aoi", "threads")])).unwrap_err();
        assert!(err.contains("aoi") && err.contains("aio"), "{err}");
        let err = t.render(&map(&[("port", "80")]), &map(&[("aio", "on;\nuser root")])).unwrap_err();
        assert!(err.contains("newline"), "{err}");
    }

    #[test]
    fn the_bundled_templates_render_with_the_driver_variables() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/servers");
        let fixed = crate::server::example_variables();
        for name in ["nginx.conf", "apache.conf", "lighttpd.conf", "laio.conf"] {
            let t = Template::load(&dir.join(name)).unwrap();
            let (text, _) = t.render(&fixed, &BTreeMap::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(text.contains("127.0.0.1"), "{name} must listen on 127.0.0.1 only");
            assert!(!text.contains("{{"), "{name}");
        }
    }
}
