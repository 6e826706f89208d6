//! A gate's verdicts as a terminal table, JUnit XML and GitHub Actions workflow commands.

use super::{CheckResult, GateReport, Verdict};
use std::fmt::Write;

/// Display width of a cell: characters, not bytes (`µs`, `≥`).
fn width(s: &str) -> usize {
    s.chars().count()
}

impl GateReport {
    /// The pass/fail table, a summary line first, then one line per check and the failure messages.
    pub(crate) fn table(&self) -> String {
        let headers = ["result", "check", "limit", "measured", "verdict"];
        let cells: Vec<[&str; 5]> = self
            .checks
            .iter()
            .map(|c| {
                [
                    c.subject.as_str(),
                    &c.what,
                    &c.limit,
                    &c.measured,
                    c.verdict.word(),
                ]
            })
            .collect();
        let mut widths = headers.map(width);
        for row in &cells {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.summary());
        let line = |out: &mut String, row: &[&str; 5]| {
            let mut text = String::from(" ");
            for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
                text.push(' ');
                text.push_str(cell);
                if i + 1 < row.len() {
                    text.push_str(&" ".repeat(w - width(cell) + 1));
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(&mut out, &headers);
        for row in &cells {
            line(&mut out, row);
        }
        let notes: Vec<&CheckResult> = self
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Pass && !c.message.is_empty())
            .collect();
        if !notes.is_empty() || !self.warnings.is_empty() {
            out.push('\n');
            for c in notes {
                let _ = writeln!(out, "{}: {}", c.verdict.word(), c.message);
            }
            for w in &self.warnings {
                let _ = writeln!(out, "WARNING: {w}");
            }
        }
        out
    }

    /// `roce_gate: PASS, 6 checks: 6 passed` or `roce_gate: FAIL, 6 checks: 5 passed, 1 failed`.
    pub(crate) fn summary(&self) -> String {
        let (p, f, s) = (
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Skip),
        );
        let mut text = format!(
            "roce_gate: {}, {} checks: {p} passed",
            if self.passed() { "PASS" } else { "FAIL" },
            self.checks.len()
        );
        if f > 0 {
            let _ = write!(text, ", {f} failed");
        }
        if s > 0 {
            let _ = write!(text, ", {s} skipped");
        }
        text
    }

    /// A JUnit XML document: one `<testsuite name="roce_gate">`, one `<testcase>` per check, a
    /// `<failure>` per failed check and a `<skipped>` per skipped one.
    pub(crate) fn junit_xml(&self) -> String {
        let (f, s) = (self.count(Verdict::Fail), self.count(Verdict::Skip));
        let n = self.checks.len();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        // time="0": a check takes no measurable time, and some JUnit readers insist on the attribute.
        let _ = writeln!(
            out,
            "<testsuites name=\"roce_gate\" tests=\"{n}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\">"
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"roce_gate\" tests=\"{n}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\" time=\"0\">"
        );
        for c in &self.checks {
            let name = format!("{}: {} {}", c.subject, c.what, c.limit);
            let file = c
                .source
                .as_ref()
                .map(|p| format!(" file=\"{}\"", xml_escape(&p.display().to_string())))
                .unwrap_or_default();
            let _ = write!(
                out,
                "    <testcase classname=\"roceperf.gate\" name=\"{}\" time=\"0\"{file}",
                xml_escape(&name)
            );
            match c.verdict {
                Verdict::Pass => {
                    let _ = writeln!(out, ">");
                    let _ = writeln!(
                        out,
                        "      <system-out>{}</system-out>",
                        xml_escape(&format!("measured {}", c.measured))
                    );
                }
                Verdict::Fail => {
                    let _ = writeln!(out, ">");
                    let _ = writeln!(
                        out,
                        "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                        xml_escape(c.flag),
                        xml_escape(&c.message),
                        xml_escape(&format!("measured {}, limit {}", c.measured, c.limit))
                    );
                }
                Verdict::Skip => {
                    let _ = writeln!(out, ">");
                    let _ = writeln!(
                        out,
                        "      <skipped message=\"{}\"/>",
                        xml_escape(&c.message)
                    );
                }
            }
            let _ = writeln!(out, "    </testcase>");
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }

    /// Writes [`GateReport::junit_xml`] to `path`, replaced whole as every result file is; the error is
    /// the OS's, for the caller to say with the file's name.
    pub(crate) fn write_junit(&self, path: &std::path::Path) -> std::io::Result<()> {
        crate::results::write_atomic(path, self.junit_xml().as_bytes())
            .map_err(crate::results::WriteError::into_io)
    }

    /// GitHub Actions workflow commands: `::error file=…,line=…,title=…::message` per failure and
    /// `::warning` per skip, one per line.
    pub(crate) fn github_annotations(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let level = match c.verdict {
                Verdict::Pass => continue,
                Verdict::Fail => "error",
                Verdict::Skip => "warning",
            };
            let mut props = Vec::new();
            if let Some(p) = &c.source {
                props.push(format!("file={}", gh_property(&p.display().to_string())));
            }
            if let Some(l) = c.line {
                props.push(format!("line={l}"));
            }
            props.push(format!(
                "title={}",
                gh_property(&format!("roce_gate {}", c.flag))
            ));
            let _ = writeln!(
                out,
                "::{level} {}::{}",
                props.join(","),
                gh_data(&c.message)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(
                out,
                "::warning title={}::{}",
                gh_property("roce_gate single run"),
                gh_data(w)
            );
        }
        out
    }
}

impl GateReport {
    /// A Markdown summary (a heading and a table) for GitHub's job summary page (`$GITHUB_STEP_SUMMARY`).
    pub(crate) fn markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = format!("### {}\n\n", self.summary());
        out.push_str("| result | check | limit | measured | verdict |\n|---|---|---|---|---|\n");
        for c in &self.checks {
            let verdict = match c.verdict {
                Verdict::Pass => "pass",
                Verdict::Fail => "**FAIL**",
                Verdict::Skip => "skip",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {verdict} |",
                cell(&c.subject),
                cell(&c.what),
                cell(&c.limit),
                cell(&c.measured)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(out, "\n**Warning:** {}", cell(w));
        }
        out
    }
}

/// Escapes text for an XML attribute or element.
pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped; a message never needs them.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Escapes a workflow command's message (GitHub's `escapeData`).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value (GitHub's `escapeProperty`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(verdict: Verdict, message: &str) -> CheckResult {
        CheckResult {
            subject: "write_bw soft v2 65536 B".into(),
            what: "bandwidth".into(),
            flag: "--min-bw",
            limit: ">= 90Gb/s".into(),
            measured: "45.00 Gb/s".into(),
            verdict,
            message: message.into(),
            source: Some("res/a,b:c.json".into()),
            line: Some(3),
        }
    }

    #[test]
    fn junit_is_well_formed_with_one_testcase_per_check() {
        let report = GateReport {
            checks: vec![
                check(Verdict::Pass, ""),
                check(Verdict::Fail, "45 < 90 & \"quoted\" <tag>"),
                check(Verdict::Skip, "no baseline"),
            ],
            ..GateReport::default()
        };
        let xml = report.junit_xml();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let suite = doc
            .descendants()
            .find(|n| n.has_tag_name("testsuite"))
            .unwrap();
        assert_eq!(suite.attribute("tests"), Some("3"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("skipped"), Some("1"));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 3);
        let failure = cases[1]
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        assert_eq!(
            failure.attribute("message"),
            Some("45 < 90 & \"quoted\" <tag>")
        );
        assert_eq!(failure.attribute("type"), Some("--min-bw"));
        assert!(cases[2].children().any(|n| n.has_tag_name("skipped")));
        assert_eq!(cases[0].attribute("file"), Some("res/a,b:c.json"));
    }

    #[test]
    fn github_annotations_escape_properties_and_data() {
        let report = GateReport {
            checks: vec![
                check(Verdict::Pass, ""),
                check(Verdict::Fail, "50% lower\nsecond line"),
            ],
            ..GateReport::default()
        };
        let text = report.github_annotations();
        assert_eq!(
            text,
            "::error file=res/a%2Cb%3Ac.json,line=3,title=roce_gate --min-bw::50%25 lower%0Asecond line\n"
        );
    }

    #[test]
    fn markdown_summary_has_a_row_per_check() {
        let mut failed = check(Verdict::Fail, "too slow");
        failed.what = "a|b".into();
        let report = GateReport {
            checks: vec![check(Verdict::Pass, ""), failed],
            ..GateReport::default()
        };
        let md = report.markdown();
        assert!(md.starts_with("### roce_gate: FAIL, 2 checks: 1 passed, 1 failed\n\n| result |"));
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| write_bw")).count(),
            2
        );
        assert!(
            md.contains("| a\\|b |") && md.contains("| **FAIL** |"),
            "{md}"
        );
    }

    #[test]
    fn table_aligns_columns_and_lists_failures() {
        let report = GateReport {
            checks: vec![check(Verdict::Pass, ""), check(Verdict::Fail, "too slow")],
            ..GateReport::default()
        };
        let t = report.table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "roce_gate: FAIL, 2 checks: 1 passed, 1 failed");
        let col = lines[1].find("verdict").unwrap();
        assert_eq!(lines[2].find("pass"), Some(col));
        assert_eq!(lines[3].find("FAIL"), Some(col));
        assert!(t.ends_with("FAIL: too slow\n"), "{t}");
    }
}
