//! `scripts/instructions.sh`, the instruction-count gate, judging figures files it did not measure
//! (`--judge`): a figure more than 5 % above its baseline fails naming the mode and both figures, one
//! within the limit passes, a missing or foreign baseline is a set-up error, and a different compiler is
//! reported beside the verdict without changing it. The committed baseline matches its schema.

use crate::common::schema::assert_valid_file;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// True when jq (which the script reads its documents with; `scripts/deps.sh test` installs it) runs.
fn have_jq() -> bool {
    Command::new("jq")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The committed baseline, parsed.
fn baseline() -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join(".ci/instructions.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `doc` with the figure of `mode` and `unit` multiplied by `factor`.
fn scaled(mut doc: Value, mode: &str, unit: &str, factor: f64) -> Value {
    let figure = doc["figures"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|f| f["mode"] == mode && f["unit"] == unit)
        .unwrap_or_else(|| panic!("the baseline has no {mode} per {unit}"));
    let v = figure["instructions"].as_f64().unwrap() * factor;
    figure["instructions"] = ((v * 10.0).round() / 10.0).into();
    doc
}

/// What one `--judge` run printed and how it ended.
struct Judged {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `instructions.sh --judge FIGURES --baseline BASE [extra]` on the two documents.
fn judge(figures: &Value, base: Option<&Value>, extra: &[&str]) -> Judged {
    let dir = tempfile::tempdir().unwrap();
    let fig = dir.path().join("figures.json");
    std::fs::write(&fig, figures.to_string()).unwrap();
    let base_path = dir.path().join("baseline.json");
    if let Some(b) = base {
        std::fs::write(&base_path, b.to_string()).unwrap();
    }
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("scripts/instructions.sh"))
        .arg("--judge")
        .arg(&fig)
        .arg("--baseline")
        .arg(&base_path)
        .args(extra)
        .output()
        .unwrap();
    Judged {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_committed_baseline_matches_its_schema_and_holds_every_mode() {
    let doc = assert_valid_file(
        "instructions",
        &Path::new(ROOT).join(".ci/instructions.json"),
    );
    let mut have: Vec<String> = doc["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{} {}", f["mode"].as_str().unwrap(), f["unit"]))
        .collect();
    have.sort();
    assert_eq!(
        have,
        [
            "bw \"KiB\"",
            "bw \"message\"",
            "read \"round trip\"",
            "send \"round trip\"",
            "write \"round trip\""
        ]
    );
    for key in ["rustc", "valgrind"] {
        assert!(!doc[key].as_str().unwrap().is_empty(), "{key} recorded");
    }
    assert!(!doc["cpu"]["simulated"].as_str().unwrap().is_empty());
}

#[test]
fn a_figure_ten_percent_above_its_baseline_fails_naming_the_mode_and_both_figures() {
    if crate::common::skip_unless(have_jq(), "needs jq (scripts/deps.sh test installs it)") {
        return;
    }
    let base = baseline();
    let worse = scaled(base.clone(), "write", "round trip", 1.10);
    let now = worse["figures"][0]["instructions"].as_f64().unwrap();
    let r = judge(&worse, Some(&base), &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let fail = r
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL: "))
        .unwrap_or_else(|| panic!("no FAIL line:\n{}", r.stdout));
    assert!(fail.starts_with("FAIL: write 2 B: "), "{fail}");
    assert!(fail.contains("10.0% more"), "{fail}");
    // Both figures, as the table prints them (8,611.2 against 7,828.4).
    let group = |v: f64| {
        let s = format!("{v:.1}");
        let (int, frac) = s.split_once('.').unwrap();
        let mut out = String::new();
        for (i, c) in int.chars().enumerate() {
            if i > 0 && (int.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{out}.{frac}")
    };
    let was = base["figures"][0]["instructions"].as_f64().unwrap();
    assert!(
        fail.contains(&group(now)) && fail.contains(&group(was)),
        "{fail}"
    );
    // Only write failed: the other rows pass.
    assert_eq!(r.stdout.matches("FAIL").count(), 2, "{}", r.stdout); // its row and its line
    assert_eq!(r.stdout.matches("  PASS").count(), 4, "{}", r.stdout);

    // A wider limit lets the same 10 % through.
    let r = judge(&worse, Some(&base), &["--max-regression", "15%"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn the_bandwidth_stream_is_judged_per_kib_and_small_moves_pass() {
    if crate::common::skip_unless(have_jq(), "needs jq (scripts/deps.sh test installs it)") {
        return;
    }
    let base = baseline();
    let r = judge(&base, Some(&base), &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.matches("  PASS").count(), 5, "{}", r.stdout);

    let r = judge(&scaled(base.clone(), "bw", "KiB", 1.04), Some(&base), &[]);
    assert_eq!(
        r.code, 0,
        "4 % is within the limit: {}{}",
        r.stdout, r.stderr
    );

    let r = judge(&scaled(base.clone(), "bw", "KiB", 1.06), Some(&base), &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAIL: bw 64 KiB: "), "{}", r.stdout);

    // A gain beyond the limit passes, and says to record it.
    let r = judge(
        &scaled(base.clone(), "read", "round trip", 0.5),
        Some(&base),
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("read 2 B: 50.0% fewer"), "{}", r.stdout);
    assert!(r.stdout.contains("--update"), "{}", r.stdout);
}

#[test]
fn another_compiler_is_reported_beside_the_verdict_without_changing_it() {
    if crate::common::skip_unless(have_jq(), "needs jq (scripts/deps.sh test installs it)") {
        return;
    }
    let base = baseline();
    let mut other = base.clone();
    other["rustc"] = "rustc 9.99.0 (0000000 2099-01-01)".into();
    let r = judge(&other, Some(&base), &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("note: rustc differs: rustc 9.99.0"),
        "{}",
        r.stdout
    );
    let r = judge(&scaled(other, "send", "round trip", 1.2), Some(&base), &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAIL: send 2 B: "), "{}", r.stdout);
    assert!(
        r.stdout.contains("re-record it with --update"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_missing_or_foreign_baseline_is_a_setup_error_that_says_what_to_do() {
    if crate::common::skip_unless(have_jq(), "needs jq (scripts/deps.sh test installs it)") {
        return;
    }
    let base = baseline();
    let r = judge(&base, None, &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no baseline at "), "{}", r.stderr);
    assert!(r.stderr.contains("--update"), "{}", r.stderr);

    let foreign = serde_json::json!({"schema": "roceperf.result", "schema_version": 1});
    let r = judge(&base, Some(&foreign), &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("is not a roceperf.instructions document, version 1"),
        "{}",
        r.stderr
    );

    // A baseline that shares no figure is a wrong baseline, not a pass.
    let mut disjoint = base.clone();
    for f in disjoint["figures"].as_array_mut().unwrap() {
        f["size"] = 3.into();
    }
    let r = judge(&base, Some(&disjoint), &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("shares no figure"), "{}", r.stderr);

    let r = judge(&base, Some(&base), &["--max-regression", "five"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--max-regression"), "{}", r.stderr);
}
