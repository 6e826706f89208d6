//! --csv, --json and --results from real runs: the CSV imports, the JSON parses, files append.

use crate::common;
use common::pair_with;

#[test]
fn csv_appends_one_row_per_size_with_one_header() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("runs.csv");
    let csv_s = csv.to_str().unwrap();
    for _ in 0..2 {
        let (s, c) = pair_with(
            "write_bw",
            &["-n", "20", "-a"],
            &["-n", "20", "-a", "--csv", csv_s],
        );
        common::assert_both_ok("csv_appends_one_row_per_size_with_one_header", &s, &c);
    }
    let mut rdr = csv::Reader::from_path(&csv).unwrap();
    let headers = rdr.headers().unwrap().clone();
    assert!(headers.iter().any(|h| h.contains("size")), "{headers:?}");
    let records: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    assert_eq!(records.len(), 46, "23 sizes × 2 runs, header once");
    assert!(records.iter().all(|r| r.len() == headers.len()));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| *l == text.lines().next().unwrap())
            .count(),
        1
    );
}

#[test]
fn json_parses_with_schema_parameters_results_and_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let json_s = json.to_str().unwrap();
    let (s, c) = pair_with("send_lat", &["-n", "100"], &["-n", "100", "--json", json_s]);
    common::assert_both_ok(
        "json_parses_with_schema_parameters_results_and_histogram",
        &s,
        &c,
    );
    let v = common::json_file(&json);
    assert_eq!(v["schema_version"], 1, "{v}");
    assert_eq!(v["test"]["test"]["verb"], "send", "{v}");
    assert_eq!(v["test"]["role"], "client", "{v}");
    let results = v["results"].as_array().expect("results array");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["size_bytes"], 2);
    assert!(
        results[0]["latency"]["median_us"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert!(
        !results[0]["histogram"]["data"].as_str().unwrap().is_empty(),
        "{v}"
    );
}

#[test]
fn results_dir_gets_both_files_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("results");
    let d_s = d.to_str().unwrap();
    let (s, c) = pair_with(
        "read_lat",
        &["-n", "20", "--results", d_s],
        &["-n", "20", "--results", d_s],
    );
    common::assert_both_ok("results_dir_gets_both_files_on_both_sides", &s, &c);
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for want in ["client.csv", "client.json", "server.csv", "server.json"] {
        assert!(
            names.iter().any(|n| n.ends_with(want)),
            "{want} in {names:?}"
        );
    }
}

/// `--tcp-congestion`: what the kernel ran on the data connections, read back from them
/// (TCP_CONGESTION), in the client's `--json` and `-v`; cubic as root even when it is not in
/// net.ipv4.tcp_allowed_congestion_control (why roce_compare --congestion sets it per socket).
#[test]
fn tcp_congestion_sets_each_connection_and_the_json_says_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    let mut algos = vec!["reno"];
    if crate::soft_support::is_root() && available.split_whitespace().any(|a| a == "cubic") {
        algos.push("cubic");
    } else {
        eprintln!("cubic part skipped: needs root and cubic available (here: {available:?})");
    }
    for algo in algos {
        let json = dir.path().join(format!("{algo}.json"));
        let args = ["-q", "2", "-n", "200", "--tcp-congestion", algo, "-v"];
        let mut client = args.to_vec();
        client.extend(["--json", json.to_str().unwrap()]);
        let (s, c) = pair_with("write_bw", &args, &client);
        common::assert_both_ok(algo, &s, &c);
        let v = crate::common::schema::assert_valid_file("result", &json);
        assert_eq!(v["test"]["counters"]["congestion_control"], algo, "{v}");
        let said = format!("{}{}", c.stdout, c.stderr);
        common::assert_contains(&said, &format!("congestion control {algo},"));
    }
}

#[test]
fn tcp_congestion_names_what_the_kernel_offers_when_it_has_no_such_algorithm() {
    let args = ["-n", "20", "--tcp-congestion", "nosuchcc"];
    let (s, c) = pair_with("write_bw", &args, &args);
    c.assert_ended(
        2,
        &[
            "setting TCP_CONGESTION to nosuchcc (--tcp-congestion)",
            "tcp_available_congestion_control",
            "modprobe tcp_nosuchcc",
        ],
        "client",
    );
    assert_ne!(s.code(), 0, "{}{}", s.stdout, s.stderr);
    common::assert_refused(
        "write_bw",
        &["--transport", "soft", "--tcp-congestion", "cubic"],
        &["--tcp-congestion", "--cc"],
    );
    common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "--tcp-congestion", "no/such"],
        &["not a TCP congestion control's name"],
    );
}
