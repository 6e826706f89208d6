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
