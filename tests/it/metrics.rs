//! `--metrics FILE` end to end: every test binary (the six and the atomics), `roce_compare` and
//! `roce_fabric` write Prometheus' text format that `promtool check metrics` accepts, parsed here
//! family by family, whose values are the JSON's figures in base units, with their labels, and whose
//! file is replaced whole.

use crate::common::{self, pair_on_lo, pair_plus};
use crate::fabric_support::{Job, fabric_json, spawn_ranks};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// One sample: its family, labels and value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the text exposition format as Prometheus does, strictly: every sample under its family's
/// `# HELP` and `# TYPE gauge|counter`, a family's samples together, no series twice, label values
/// quoted with `\\`, `\"` and `\n` escapes.
pub fn parse(text: &str) -> Vec<Sample> {
    let mut families: Vec<String> = Vec::new();
    let mut help: Option<String> = None;
    let mut out: Vec<Sample> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(!families.iter().any(|f| f == name), "{name} declared twice");
            help = Some(name.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(help.as_deref(), Some(name), "TYPE without its HELP: {line}");
            assert!(matches!(kind, "gauge" | "counter"), "{line}");
            assert_eq!(name.ends_with("_total"), kind == "counter", "{line}");
            families.push(name.to_owned());
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, mut rest) = series.split_once('{').unwrap_or((series, ""));
        assert_eq!(families.last().map(String::as_str), Some(name), "{line}");
        let mut labels = BTreeMap::new();
        while let Some((key, after)) = rest.split_once("=\"") {
            let mut v = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().unwrap() {
                    (_, '\\') => match chars.next().unwrap().1 {
                        'n' => v.push('\n'),
                        c => v.push(c),
                    },
                    (i, '"') => break i,
                    (_, c) => v.push(c),
                }
            };
            labels.insert(key.trim_start_matches(',').to_owned(), v);
            rest = &after[end + 1..];
        }
        assert!(rest.is_empty() || rest == "}", "{line}");
        let s = Sample {
            name: name.to_owned(),
            labels,
            value: value.parse().unwrap(),
        };
        assert!(
            !out.iter().any(|o| o.name == s.name && o.labels == s.labels),
            "series twice: {line}"
        );
        out.push(s);
    }
    out
}

/// Whether promtool is installed (scripts/deps.sh test installs Debian's prometheus package).
pub fn have_promtool() -> bool {
    Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `promtool check metrics < text`: passes, lint included.
pub fn promtool_accepts(text: &str, what: &str) {
    use std::io::Write;
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics refuses {what}: {}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The samples of `name` whose labels include every one of `with`.
pub fn find<'a>(s: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| {
            x.name == name
                && with
                    .iter()
                    .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn one(s: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    match find(s, name, with)[..] {
        [x] => x.value,
        ref v => panic!("{name} {with:?}: {} samples", v.len()),
    }
}

/// `a` and `b` equal to a relative 1e-12 (a product's rounding).
fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * b.abs().max(1e-300),
        "{what}: {a} vs {b}"
    );
}

/// Checks a run's exposition against its JSON result: every size's figures, the held percentiles
/// only, the counters, the labels.
fn matches_the_json(s: &[Sample], doc: &Value, what: &str) {
    let kind = &doc["test"]["test"];
    let metric = if kind["metric"] == "bandwidth" {
        "bw"
    } else {
        "lat"
    };
    let test = format!("{}_{metric}", kind["verb"].as_str().unwrap());
    let test = test.as_str();
    let transport = doc["test"]["transport"].as_str().unwrap();
    for r in doc["results"].as_array().unwrap() {
        let size = r["size_bytes"].as_u64().unwrap().to_string();
        let at = [
            ("test", test),
            ("transport", transport),
            ("role", "client"),
            ("peer", "127.0.0.1"),
            ("size_bytes", size.as_str()),
        ];
        if let Some(b) = r.get("bandwidth") {
            let bw = one(s, "roceperf_bandwidth_bytes_per_second", &at);
            close(bw, b["avg_gbps"].as_f64().unwrap() * 1e9 / 8.0, what);
            let mps = one(s, "roceperf_messages_per_second", &at);
            close(mps, b["msg_rate_mpps"].as_f64().unwrap() * 1e6, what);
        } else {
            let l = &r["latency"];
            close(
                one(
                    s,
                    "roceperf_latency_seconds",
                    &[at[0], at[4], ("percentile", "50")],
                ),
                l["median_us"].as_f64().unwrap() / 1e6,
                what,
            );
            let mut held = 1;
            for (key, v) in l["percentiles"].as_object().unwrap() {
                let pct = key.trim_start_matches('p');
                let got = find(s, "roceperf_latency_seconds", &[at[4], ("percentile", pct)]);
                match v.as_f64() {
                    Some(us) => {
                        held += 1;
                        close(got[0].value, us / 1e6, what);
                    }
                    None => assert!(got.is_empty(), "{what}: withheld {key} written"),
                }
            }
            assert_eq!(
                find(s, "roceperf_latency_seconds", &[]).len(),
                held,
                "{what}"
            );
            let samples = one(s, "roceperf_latency_samples", &at);
            assert_eq!(samples, l["samples"].as_f64().unwrap(), "{what}");
            close(
                one(s, "roceperf_latency_max_seconds", &at),
                l["max_us"].as_f64().unwrap() / 1e6,
                what,
            );
        }
    }
    let c = &doc["test"]["counters"];
    let retrans = one(s, "roceperf_retransmitted_packets", &[("test", test)]);
    assert_eq!(
        retrans,
        c["retransmitted_packets"].as_f64().unwrap(),
        "{what}"
    );
    for qp in c["per_qp"].as_array().unwrap() {
        let index = qp["qp"].to_string();
        let got = one(s, "roceperf_qp_retransmitted_bytes", &[("qp", &index)]);
        assert_eq!(got, qp["retransmitted_bytes"].as_f64().unwrap(), "{what}");
    }
}

/// Leaves `path` holding more bytes than any exposition, so that a file not replaced whole shows.
fn stale(path: &Path) {
    std::fs::write(path, "stale line that is not a metric\n".repeat(4096)).unwrap();
}

#[test]
fn every_test_binary_writes_metrics_promtool_accepts_with_the_json_figures() {
    if common::skip_unless(have_promtool(), "needs promtool (scripts/deps.sh test)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for test in common::SIX.into_iter().chain(["atomic_bw", "atomic_lat"]) {
        let metrics = tmp.path().join(format!("{test}.prom"));
        let json = tmp.path().join(format!("{test}.json"));
        stale(&metrics);
        let (m, j) = (metrics.to_str().unwrap(), json.to_str().unwrap());
        let sizes = if test.ends_with("_bw") && !test.starts_with("atomic") {
            &["-s", "4096", "-n", "300"][..]
        } else {
            &["-n", "300"][..]
        };
        let (s, c) = pair_plus(test, sizes, &["--metrics", m, "--json", j]);
        common::assert_both_ok(test, &s, &c);
        let text = std::fs::read_to_string(&metrics).unwrap();
        promtool_accepts(&text, test);
        let samples = parse(&text);
        matches_the_json(&samples, &common::json_file(&json), test);
    }
    // Replaced whole, through a temporary file renamed over it: nothing else left in the directory.
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".prom") && !n.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_soft_run_adds_its_drops_naks_and_congestion_counts() {
    if common::skip_unless(have_promtool(), "needs promtool (scripts/deps.sh test)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (metrics, json) = (tmp.path().join("soft.prom"), tmp.path().join("soft.json"));
    let (m, j) = (metrics.to_str().unwrap(), json.to_str().unwrap());
    let args = ["-d", "lo", "--transport", "soft", "-s", "4096", "-n", "500"];
    let client = [&args[..], &["--metrics", m, "--json", j]].concat();
    let (s, c) = pair_on_lo("write_bw", args.to_vec(), client);
    common::assert_both_ok("soft write_bw", &s, &c);
    let text = std::fs::read_to_string(&metrics).unwrap();
    promtool_accepts(&text, "soft write_bw");
    let samples = parse(&text);
    let doc = common::json_file(&json);
    matches_the_json(&samples, &doc, "soft write_bw");
    let c = &doc["test"]["counters"];
    let at = [("transport", "soft"), ("roce", "v2"), ("device", "lo")];
    for (reason, n) in c["drops"].as_object().unwrap() {
        let with = [at[0], ("reason", reason.as_str())];
        assert_eq!(
            one(&samples, "roceperf_dropped_packets", &with),
            n.as_f64().unwrap()
        );
    }
    let naks = c["naks_received"]["psn_sequence"].as_f64().unwrap();
    let with = [at[1], ("kind", "psn_sequence")];
    assert_eq!(one(&samples, "roceperf_naks_received", &with), naks);
    let cnps = c
        .get("cc")
        .map_or(0.0, |cc| cc["np_cnp_sent"].as_f64().unwrap());
    assert_eq!(one(&samples, "roceperf_cnps_sent", &at), cnps);
    let ce = c["np_ecn_marked_roce_packets"].as_f64().unwrap();
    assert_eq!(one(&samples, "roceperf_ce_marked_packets", &at), ce);
}

#[test]
fn a_comparison_from_files_writes_each_row_with_its_figures() {
    if common::skip_unless(have_promtool(), "needs promtool (scripts/deps.sh test)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for test in ["write_bw", "write_lat"] {
        let json = tmp.path().join(format!("{test}.json"));
        let (s, c) = pair_plus(test, &["-n", "300"], &["--json", json.to_str().unwrap()]);
        common::assert_both_ok(test, &s, &c);
        files.push(json);
    }
    let metrics = tmp.path().join("compare.prom");
    stale(&metrics);
    let out = Command::new(env!("CARGO_BIN_EXE_roce_compare"))
        .arg("--from")
        .args(&files)
        .args(["--no-files", "--metrics", metrics.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&metrics).unwrap();
    promtool_accepts(&text, "roce_compare");
    let samples = parse(&text);
    let bw = common::json_file(&files[0]);
    let want = bw["results"][0]["bandwidth"]["avg_gbps"].as_f64().unwrap() * 1e9 / 8.0;
    let with = [("test", "write_bw"), ("transport", "tcp"), ("label", "TCP")];
    close(
        one(&samples, "roceperf_bandwidth_bytes_per_second", &with),
        want,
        "compare bw",
    );
    let lat = common::json_file(&files[1]);
    let want = lat["results"][0]["latency"]["median_us"].as_f64().unwrap() / 1e6;
    let with = [
        ("test", "write_lat"),
        ("percentile", "50"),
        ("size_bytes", "2"),
    ];
    close(
        one(&samples, "roceperf_latency_seconds", &with),
        want,
        "compare lat",
    );
}

#[test]
fn a_fabric_writes_each_pairs_cell_with_its_ranks_and_hosts() {
    if common::skip_unless(have_promtool(), "needs promtool (scripts/deps.sh test)") {
        return;
    }
    let job = Job::new(2, "met");
    let metrics = job.dir.path().join("fabric.prom");
    let words = format!(
        "write_bw write_lat --transport tcp -n 300 --no-retest --metrics {}",
        metrics.display()
    );
    let args = job.args(&words);
    let ranks = spawn_ranks(&job, 2, &args);
    for (r, c) in ranks.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let log = std::fs::read_to_string(job.log(r)).unwrap();
        assert!(out.status.success(), "rank {r}:\n{log}");
    }
    let text = std::fs::read_to_string(&metrics).unwrap();
    promtool_accepts(&text, "roce_fabric");
    let samples = parse(&text);
    let doc = fabric_json(&job.results);
    let host = |r: usize| doc["hosts"][r]["host"].as_str().unwrap().to_owned();
    for m in doc["matrices"].as_array().unwrap() {
        let (family, pct, scale) = match m["metric"].as_str().unwrap() {
            "bw_avg_gbps" => (
                "roceperf_fabric_bandwidth_bytes_per_second",
                None,
                1e9 / 8.0,
            ),
            "msg_rate_mpps" => ("roceperf_fabric_messages_per_second", None, 1e6),
            "lat_median_us" => ("roceperf_fabric_latency_seconds", Some("50"), 1e-6),
            _ => ("roceperf_fabric_latency_seconds", Some("99"), 1e-6),
        };
        for (c, s) in [(0usize, 1usize), (1, 0)] {
            let (cs, ss, ch, sh) = (c.to_string(), s.to_string(), host(c), host(s));
            let mut with = vec![
                ("test", m["test"].as_str().unwrap()),
                ("transport", "tcp"),
                ("client", cs.as_str()),
                ("server", ss.as_str()),
                ("client_host", ch.as_str()),
                ("server_host", sh.as_str()),
            ];
            with.extend(pct.map(|p| ("percentile", p)));
            let got = find(&samples, family, &with);
            match m["values"][c][s].as_f64() {
                // fabric.json keeps 6 decimals of the unit it shows.
                Some(v) => assert!((got[0].value - v * scale).abs() <= 1e-6 * scale, "{with:?}"),
                None => assert!(got.is_empty(), "{with:?}: a withheld figure written"),
            }
            assert_eq!(one(&samples, "roceperf_fabric_pair_ok", &with[..6]), 1.0);
        }
    }
    assert_eq!(
        one(&samples, "roceperf_fabric_pair_tests", &[("status", "ok")]),
        4.0
    );
    assert_eq!(
        one(&samples, "roceperf_fabric_ranks", &[("status", "present")]),
        2.0
    );
}

#[test]
fn a_run_without_end_replaces_its_metrics_at_each_interval_then_with_the_summary() {
    if common::skip_unless(have_promtool(), "needs promtool (scripts/deps.sh test)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (metrics, json) = (tmp.path().join("inf.prom"), tmp.path().join("inf.json"));
    let (m, j) = (metrics.to_str().unwrap(), json.to_str().unwrap());
    let port = common::free_port().to_string();
    let both = ["--transport", "tcp", "-p", &port, "--run_infinitely"];
    let server = common::spawn("write_bw", &both);
    assert!(server.wait_stdout("Waiting for client", 20));
    let mut args = both.to_vec();
    args.extend(["--report-interval", "0.3", "--metrics", m, "--json", j]);
    args.push("127.0.0.1");
    let client = common::spawn("write_bw", &args);
    // The first interval's figures, before the run ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !metrics.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no interval's metrics"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let interval = std::fs::read_to_string(&metrics).unwrap();
    promtool_accepts(&interval, "an interval");
    assert_eq!(
        find(
            &parse(&interval),
            "roceperf_bandwidth_bytes_per_second",
            &[]
        )
        .len(),
        1
    );
    client.signal(libc::SIGTERM);
    let c = client.wait(30, "client");
    let s = server.wait(30, "server");
    common::assert_both_ok("run without end", &s, &c);
    let text = std::fs::read_to_string(&metrics).unwrap();
    promtool_accepts(&text, "the summary");
    matches_the_json(&parse(&text), &common::json_file(&json), "the summary");
}
