//! The Prometheus text exposition format (0.0.4, which OpenMetrics parsers and node_exporter's textfile
//! collector read): metric families, each with its HELP and TYPE lines and its samples together, label
//! values escaped, only finite values written.

use std::fmt::Write;

/// A family's type: every figure of a result is a gauge (the value of the last run); a count that only
/// grows over the process's life (a watching fabric's rounds) is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `gauge`.
    Gauge,
    /// `counter` (its name ends in `_total`).
    Counter,
}

/// One metric family: its name, help, type and sample lines.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: String,
}

/// The families of one exposition, in the order first added.
#[derive(Default)]
pub(crate) struct Exposition {
    families: Vec<Family>,
}

/// Label names and values, in order.
pub(crate) type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    /// An empty exposition.
    pub(crate) fn new() -> Exposition {
        Exposition::default()
    }

    /// Adds a sample of family `name` (declared with `help` and `kind` on its first sample); a value
    /// that is not finite is left out (the format has no "not measured").
    pub(crate) fn sample(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: Kind,
        labels: &Labels<'_>,
        value: f64,
    ) {
        if !value.is_finite() {
            return;
        }
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    samples: String::new(),
                });
                self.families.len() - 1
            }
        };
        let s = &mut self.families[i].samples;
        s.push_str(name);
        let mut labels = labels.iter().filter(|(_, v)| !v.is_empty()).peekable();
        if labels.peek().is_some() {
            s.push('{');
            for (n, (k, v)) in labels.enumerate() {
                if n > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{k}=\"{}\"", escape(v));
            }
            s.push('}');
        }
        // Rust prints the shortest decimal that reads back as the same f64, as Go's parser takes it.
        let _ = writeln!(s, " {value}");
    }

    /// The text: each family's HELP, TYPE and samples.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let kind = match f.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
            };
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            out.push_str(&f.samples);
        }
        out
    }
}

/// A label value as the format quotes it: backslash, double quote and line feed escaped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_keeps_its_samples_together_under_one_help_and_type() {
        let mut e = Exposition::new();
        e.sample("a_bytes", "A.", Kind::Gauge, &[("x", "1")], 1.5);
        e.sample("b_total", "B.", Kind::Counter, &[], 2.0);
        e.sample("a_bytes", "A.", Kind::Gauge, &[("x", "2"), ("y", "")], 3.0);
        e.sample("a_bytes", "A.", Kind::Gauge, &[("x", "3")], f64::NAN);
        assert_eq!(
            e.text(),
            "# HELP a_bytes A.\n# TYPE a_bytes gauge\na_bytes{x=\"1\"} 1.5\na_bytes{x=\"2\"} 3\n\
             # HELP b_total B.\n# TYPE b_total counter\nb_total 2\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
