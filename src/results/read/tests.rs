//! Tests of the one reader: comparison and run files in JSON and CSV, damaged and arbitrary bytes.

use super::*;
use crate::params::TransportKind;
use crate::results::Figures;
use crate::results::testdata;
use proptest::prelude::*;
use serde_json::json;

/// Built once: the proptests below damage copies of these hundreds of times.
static FILES: std::sync::LazyLock<(Vec<u8>, Vec<u8>)> = std::sync::LazyLock::new(|| {
    let set = testdata::set();
    (
        serde_json::to_vec(&set.to_json()).unwrap(),
        crate::results::csv::compare_csv(&set).unwrap().into_bytes(),
    )
});

fn compare_json() -> Vec<u8> {
    FILES.0.clone()
}

fn compare_csv() -> Vec<u8> {
    FILES.1.clone()
}

#[test]
fn both_files_of_a_comparison_say_each_rows_host_path() {
    let mut set = testdata::set();
    for run in &mut set.runs {
        run.path = Some(crate::results::HostPath::AfPacket);
    }
    let json = serde_json::to_vec(&set.to_json()).unwrap();
    let csv = crate::results::csv::compare_csv(&set).unwrap().into_bytes();
    for (name, bytes) in [("c.json", json), ("c.csv", csv)] {
        let rows = parse_rows(Path::new(name), &bytes).unwrap();
        assert!(
            rows.iter()
                .all(|r| r.path == Some(crate::results::HostPath::AfPacket)),
            "{name}"
        );
    }
    let rows = parse_rows(Path::new("c.csv"), &compare_csv()).unwrap();
    assert!(rows.iter().all(|r| r.path.is_none()), "no path recorded");
}

#[test]
fn comparison_files_give_one_row_per_transport_and_size() {
    for (name, bytes) in [("c.json", compare_json()), ("c.csv", compare_csv())] {
        let rows = parse_rows(Path::new(name), &bytes).unwrap();
        assert_eq!(rows.len(), 12, "{name}");
        let tcp_lat = rows
            .iter()
            .find(|r| r.transport == TransportKind::Tcp && r.size == 2)
            .unwrap();
        let Figures::Latency(l) = tcp_lat.figures else {
            panic!("{name}: {tcp_lat:?}");
        };
        assert!(
            l.p999_us.unwrap() > l.median_us && l.median_us > 6.0,
            "{name}: {tcp_lat:?}"
        );
    }
    // JSON and CSV agree to the CSV's 3 decimals.
    let (j, c) = (
        parse_rows(Path::new("c.json"), &compare_json()).unwrap(),
        parse_rows(Path::new("c.csv"), &compare_csv()).unwrap(),
    );
    for (a, b) in j.iter().zip(&c) {
        assert_eq!(a.key(), b.key());
        match (&a.figures, &b.figures) {
            (Figures::Bandwidth(x), Figures::Bandwidth(y)) => {
                assert!((x.gbps - y.gbps).abs() < 1e-5)
            }
            (Figures::Latency(x), Figures::Latency(y)) => {
                assert!((x.p99_us.unwrap() - y.p99_us.unwrap()).abs() < 1e-3)
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_byte_order_mark_is_ignored() {
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(compare_csv());
    assert_eq!(
        parse_rows(Path::new("excel.csv"), &bytes).unwrap().len(),
        12
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        for name in ["x.json", "x.csv", "x"] {
            let _ = parse_rows(Path::new(name), &bytes);
        }
    }

    #[test]
    fn damaged_files_give_errors_not_panics(cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>()) {
        for (name, mut bytes) in [("c.json", compare_json()), ("c.csv", compare_csv())] {
            let n = bytes.len();
            bytes[flip % n] = byte;
            bytes.truncate(cut % (n + 1));
            let _ = parse_rows(Path::new(name), &bytes);
        }
    }
}

/// A result document of the write_bw client, as a run writes it.
fn run_doc() -> Value {
    crate::results::to_json(&testdata::bw_info(), &[testdata::bw_result()])
}

#[test]
fn run_documents_read_back() {
    let Document::Run { info, results } = parse_json(run_doc()).unwrap() else {
        panic!("not read as a run");
    };
    assert_eq!(*info, testdata::bw_info());
    assert_eq!(results, [testdata::bw_result()]);
}

#[test]
fn schema_problems_are_told_apart() {
    let cases: [(Value, &str); 10] = [
        (json!([1]), "not a JSON object"),
        (json!({"schema": 5}), "\"schema\" is 5, not a string"),
        (json!({}), "no \"schema\" key"),
        (json!({"schema": "x"}), "schema \"x\" is unknown"),
        (
            json!({"schema": SCHEMA}),
            "result \"schema_version\" is missing",
        ),
        (
            json!({"schema": SCHEMA, "schema_version": 2}),
            "result schema_version 2 is not supported",
        ),
        (
            json!({"schema": SCHEMA, "schema_version": 1}),
            "it has no \"test\" object",
        ),
        (
            {
                let mut d = run_doc();
                d["results"] = json!({});
                d
            },
            "it has no \"results\" array",
        ),
        (
            {
                let mut d = run_doc();
                d["results"][0]["histogram"] = json!({"encoding": "x"});
                d["results"][0]["latency"] = d["results"][0]["bandwidth"].take();
                d
            },
            "results[0]: ",
        ),
        (
            json!({"schema": COMPARE_SCHEMA, "schema_version": 1}),
            "missing field `started_at`",
        ),
    ];
    for (doc, want) in cases {
        let err = parse_json(doc.clone()).unwrap_err().to_string();
        assert!(err.contains(want), "{doc}: {err}");
    }
    let mut d = run_doc();
    d["results"] = json!([]);
    assert!(matches!(parse_json(d), Ok(Document::Run { results, .. }) if results.is_empty()));
}

#[test]
fn files_are_named_in_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.json");
    let err = read_json(&missing).unwrap_err();
    assert!(matches!(err, ReadError::Read { .. }), "{err:?}");
    let broken = tmp.path().join("broken.json");
    std::fs::write(&broken, "{").unwrap();
    let err = read_rows(&broken).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{} is not valid JSON", broken.display())),
        "{err}"
    );
}

#[test]
fn a_negative_figure_in_a_csv_is_refused_naming_line_and_column() {
    let csv = String::from_utf8(compare_csv()).unwrap();
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "lat_p99_us")
        .expect("a p99 column");
    // The first latency row: its p99 cell is not empty.
    let row = 1 + lines[1..]
        .iter()
        .position(|l| l.split(',').nth(col).is_some_and(|c| !c.is_empty()))
        .expect("a latency row");
    let mut cells: Vec<String> = lines[row].split(',').map(str::to_string).collect();
    cells[col] = "-3.5".into();
    lines[row] = cells.join(",");
    // A spreadsheet's re-save ends its lines with CRLF: the line named is the same.
    for end in ["\n", "\r\n"] {
        let bytes = lines.join(end).into_bytes();
        let e = parse_rows(Path::new("neg.csv"), &bytes)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "neg.csv line {}: lat_p99_us \"-3.5\" is negative",
                row + 1
            )),
            "{end:?}: {e}"
        );
    }
}

#[test]
fn a_run_csv_with_queue_pair_rows_reads_back_as_its_sizes() {
    let mut info = testdata::bw_info();
    info.counters = Some(json!({"retransmitted_packets": 1}));
    let mut r = testdata::bw_result();
    if let crate::results::Measured::Bandwidth(b) = &mut r.measured {
        b.qps = crate::stats::flows::QpShare::from_counts(65536, &[2500, 2500], b.elapsed_ns);
    }
    let mut bytes = crate::results::csv::header_line().into_bytes();
    bytes.push(b'\n');
    bytes.extend(crate::results::csv::run_rows(&info, &[r.clone(), r]).unwrap());
    assert_eq!(
        bytes.iter().filter(|&&b| b == b'\n').count(),
        7,
        "header, 2 × (size + 2 QPs)"
    );
    let rows = parse_rows(Path::new("qps.csv"), &bytes).unwrap();
    assert_eq!(rows.len(), 2, "the queue pairs' rows detail their size's");
    assert!(rows.iter().all(|row| row.size == 65536));
    let Figures::Bandwidth(b) = &rows[0].figures else {
        panic!("{:?}", rows[0].figures)
    };
    assert!(
        (b.gbps - 92.514).abs() < 1e-3,
        "the size's figure, not a share: {}",
        b.gbps
    );
}
