use super::*;
use crate::results::fabric::{FabricDoc, PairRow, PairRows};
use crate::results::testdata::{bw_info, bw_result, lat_info, lat_result, set};
use crate::results::{csv as results_csv, json as results_json, results_paths};

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn every_file_of_a_comparison_is_written_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let set = set();
    let dir = crate::results::compare_dir(tmp.path(), &set.started_at);
    assert!(dir.ends_with("20261129-102425"));
    let files = write_compare_files(&dir, &set).unwrap();
    let file = |name: &str| files.iter().find(|p| p.ends_with(name)).unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file("compare.json")).unwrap()).unwrap();
    assert_eq!(
        crate::results::read::parse_json(doc).unwrap(),
        crate::results::read::Document::Compare(Box::new(set.clone()))
    );
    assert_eq!(
        std::fs::read_to_string(file("compare.csv")).unwrap(),
        results_csv::compare_csv(&set).unwrap()
    );
    let hlogs: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "hlog"))
        .collect();
    assert_eq!(hlogs.len(), 3);
    assert!(
        hlogs[1].ends_with("write_lat-roce-v2-soft-2B.hlog"),
        "{hlogs:?}"
    );
    let svg = std::fs::read_to_string(file("latency.svg")).unwrap();
    roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("write_lat, 2 B"));
    let svg = std::fs::read_to_string(file("bandwidth.svg")).unwrap();
    assert!(svg.contains("RoCE v1 (soft)") && svg.contains("64 KiB"));
    let names = names(&dir);
    assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
    assert_eq!(names.len(), 2 + 3 + 2, "{names:?}");
    // In the order written: the CSV, the JSON, the logs, the plots.
    let order: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(order[..2], ["compare.csv", "compare.json"]);
    assert_eq!(order[5..], ["latency.svg", "bandwidth.svg"]);
}

#[test]
fn a_manager_writes_only_its_formats() {
    let tmp = tempfile::tempdir().unwrap();
    let files = ExportManager::new()
        .with(JsonExporter, Place::Dir(tmp.path().to_owned()))
        .write(&Document::Compare(&set()))
        .result()
        .unwrap();
    assert_eq!(files, [tmp.path().join("compare.json")]);
    assert_eq!(names(tmp.path()), ["compare.json"]);
}

/// A single run's file flags as clap parses them.
fn run_flags(args: &[&str]) -> (RunFiles, ReportingFiles) {
    use clap::{Args, FromArgMatches};
    let cmd = ReportingFiles::augment_args(RunFiles::augment_args(clap::Command::new("run")));
    let m = cmd.try_get_matches_from(std::iter::once("run").chain(args.iter().copied()));
    let m = m.unwrap();
    (
        RunFiles::from_arg_matches(&m).unwrap(),
        ReportingFiles::from_arg_matches(&m).unwrap(),
    )
}

#[test]
fn perftest_document_goes_to_out_json_file_or_its_default() {
    assert_eq!(run_flags(&[]).1.out_json(), None);
    assert_eq!(
        run_flags(&["--out_json"]).1.out_json(),
        Some(PathBuf::from(DEFAULT_OUT_JSON))
    );
    assert_eq!(
        run_flags(&["--out_json_file", "p.json"]).1.out_json(),
        Some(PathBuf::from("p.json"))
    );
    let none = ExportManager::for_run(&RunFiles::default(), &ReportingFiles::default(), None);
    assert!(none.exporters.is_empty());
}

#[test]
fn a_run_probes_each_place_as_its_format_writes_it_and_names_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |name: &str| tmp.path().join(name).to_str().unwrap().to_owned();
    let other = t("other.csv");
    std::fs::write(&other, "a,b\n").unwrap();
    let ours = t("ours.csv");
    std::fs::write(&ours, format!("{}\n", crate::results::csv::header_line())).unwrap();
    let usable = run_flags(&[
        "--csv",
        &ours,
        "--json",
        &t("r.json"),
        "--results",
        &t("results/deep"),
        "--out_json_file",
        &t("p.json"),
        "--json-stream",
        &t("s.jsonl"),
    ]);
    ExportManager::for_run(&usable.0, &usable.1, None)
        .probe()
        .unwrap();
    assert_eq!(names(tmp.path()), ["other.csv", "ours.csv"], "nothing left");
    let missing = t("no/dir/f");
    for (flag, path, found) in [
        ("--csv", &other, "its header does not match"),
        ("--json", &missing, "No such file"),
        ("--results", &format!("{other}/sub"), "Not a directory"),
        ("--out_json_file", &missing, "No such file"),
        ("--json-stream", &missing, "No such file"),
    ] {
        let (files, reporting) = run_flags(&[flag, path]);
        let err = ExportManager::for_run(&files, &reporting, None)
            .probe()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{flag}: ")) && err.contains(path) && err.contains(found),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "a,b\n");
}

#[test]
fn a_run_is_written_as_the_results_schema_writes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (info, results) = (bw_info(), [bw_result()]);
    let csv = tmp.path().join("runs.csv");
    let json = tmp.path().join("run.json");
    let perftest = tmp.path().join("perftest.json");
    let dir = tmp.path().join("results");
    // Built as a run builds it, from its flags, given out of order: the manager keeps its own.
    let (files, reporting) = run_flags(&[
        "--out_json_file",
        perftest.to_str().unwrap(),
        "--results",
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let mut m = ExportManager::for_run(&files, &reporting, None);
    let doc = Document::Run {
        info: &info,
        results: &results,
        both: None,
    };
    let (dir_csv, dir_json) = results_paths(&dir, &info);
    let written = m.write(&doc).result().unwrap();
    assert_eq!(
        written,
        [
            csv.clone(),
            json.clone(),
            dir_csv.clone(),
            dir_json,
            perftest.clone()
        ]
    );
    m.write(&doc).result().unwrap();
    // The CSVs are appended under one header, as append_csv appends; the JSONs replaced.
    let direct = tmp.path().join("direct.csv");
    results_csv::append_csv(&direct, &info, &results).unwrap();
    results_csv::append_csv(&direct, &info, &results).unwrap();
    let direct = std::fs::read(&direct).unwrap();
    assert_eq!(std::fs::read(&csv).unwrap(), direct);
    assert_eq!(std::fs::read(&dir_csv).unwrap(), direct);
    let want = results_json::pretty(&json, &crate::results::to_json(&info, &results)).unwrap();
    assert_eq!(std::fs::read(&json).unwrap(), want);
    let text = std::fs::read_to_string(&perftest).unwrap();
    assert!(text.contains("\"BW_average\""), "{text}");
}

#[test]
fn a_run_without_results_writes_no_perftest_document_and_a_header_only_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("runs.csv");
    let info = lat_info();
    let written = ExportManager::new()
        .with(CsvExporter, Place::File(csv.clone()))
        .with(
            PerftestJsonExporter { single: None },
            Place::File(tmp.path().join("p.json")),
        )
        .write(&Document::Run {
            info: &info,
            results: &[],
            both: None,
        })
        .result()
        .unwrap();
    assert_eq!(written, [csv.as_path()]);
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        format!("{}\n", results_csv::header_line())
    );
}

#[test]
fn a_run_without_end_streams_lines_and_appends_interval_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("runs.csv");
    let stream = tmp.path().join("s.jsonl");
    let json = tmp.path().join("run.json");
    let mut m = ExportManager::new()
        .with(CsvExporter, Place::File(csv.clone()))
        .with(JsonExporter, Place::File(json.clone()))
        .with(JsonStreamExporter, Place::File(stream.clone()));
    let info = bw_info();
    let r = bw_result();
    assert_eq!(
        m.write(&Document::Start(&info)).result().unwrap(),
        [stream.as_path()]
    );
    for index in 0..2 {
        let doc = Document::Interval {
            info: &info,
            result: &r,
            index,
            span: (index as f64, index as f64 + 1.0),
        };
        assert_eq!(
            m.write(&doc).result().unwrap(),
            [csv.clone(), stream.clone()]
        );
    }
    assert!(!json.exists(), "a run's document waits for its end");
    let results = [r.clone()];
    let end = Document::Run {
        info: &info,
        results: &results,
        both: None,
    };
    m.write(&end).result().unwrap();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&stream)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["start", "interval", "interval", "end"]);
    assert_eq!(lines[0]["schema"], "roceperf.stream");
    assert_eq!(lines[2]["index"], 1);
    assert_eq!(lines[2]["start_s"], 1.0);
    assert_eq!(
        lines[3]["document"],
        crate::results::to_json(&info, &results)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 1 + 2 + 1, "{text}");
    // The span's two cells, then the queue pair, counter and interrupted columns (empty: one queue
    // pair, no counters in this run's description, not interrupted), the asked percentiles and the
    // provenance (none in a run described by hand).
    let tail = ",".repeat(19);
    assert!(
        rows[2].ends_with(&format!(",1.000,2.000{tail}")),
        "{}",
        rows[2]
    );
    assert!(
        rows[3].ends_with(&format!(",,{tail}")),
        "the whole run's row has no span: {}",
        rows[3]
    );
}

#[test]
fn write_stops_at_the_first_error_and_write_each_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("no/such/dir/run.json");
    let good = tmp.path().join("run.json");
    let manager = || {
        ExportManager::new()
            .with(JsonExporter, Place::File(bad.clone()))
            .with(JsonExporter, Place::File(good.clone()))
    };
    let (info, results) = (lat_info(), [lat_result()]);
    let doc = Document::Run {
        info: &info,
        results: &results,
        both: None,
    };
    let written = manager().write(&doc);
    assert!(written.paths.is_empty() && !good.exists());
    let err = written.result().unwrap_err();
    assert_eq!(err.path(), bad);
    assert!(err.to_string().contains("no/such/dir/run.json"), "{err}");
    let mut errors = Vec::new();
    let paths = manager().write_each(&doc, |e| {
        errors.push(e);
        true
    });
    assert_eq!(paths, [good.as_path()]);
    assert_eq!(errors.len(), 1);
    assert!(names(tmp.path()).iter().all(|n| !n.ends_with(".partial")));
}

struct NoPairs;

impl PairRows for NoPairs {
    fn rows(&self) -> Box<dyn Iterator<Item = PairRow<'_>> + '_> {
        Box::new(std::iter::empty())
    }
}

#[test]
fn a_fabric_run_gets_its_tables_and_a_heatmap_per_matrix() {
    use crate::results::fabric::{Leg, Matrix, MatrixMetric};
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join(".pairs.jsonl");
    std::fs::write(&spool, "{\"round\":0}\n").unwrap();
    let matrix = |leg, metric| Matrix {
        leg,
        label: "tcp".into(),
        test: "write_bw".into(),
        metric,
        unit: "Gb/s".into(),
        size_bytes: None,
        judged: false,
        values: vec![vec![None]],
        status: vec![vec![None]],
        flagged: None,
        limit: None,
        incast: None,
    };
    let run = FabricRun {
        doc: FabricDoc {
            ranks: 1,
            matrices: vec![
                matrix(Leg::AsGiven, MatrixMetric::BwAvg),
                matrix(Leg::Tcp, MatrixMetric::MsgRate),
            ],
            ..FabricDoc::default()
        },
        pairs: &NoPairs,
        spool: &spool,
    };
    let doc = Document::Fabric(&run);
    let tables = ExportManager::fabric_tables(tmp.path())
        .write(&doc)
        .result()
        .unwrap();
    assert_eq!(
        tables,
        [
            tmp.path().join("fabric.json"),
            tmp.path().join("fabric.csv")
        ]
    );
    let all = ExportManager::fabric(tmp.path())
        .write(&doc)
        .result()
        .unwrap();
    let names: Vec<_> = all[2..]
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "heatmap-write_bw-bw_avg_gbps.svg",
            "heatmap-tcp-write_bw-msg_rate_mpps.svg"
        ]
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&all[0]).unwrap()).unwrap();
    assert_eq!(json["pairs"], serde_json::json!([{"round": 0}]));
    assert_eq!(
        std::fs::read_to_string(&all[1]).unwrap().lines().count(),
        1,
        "fabric.csv: its header"
    );
    // The formats that do not apply to a document make nothing for it.
    let none = ExportManager::new()
        .with(HdrLogExporter, Place::Dir(tmp.path().to_owned()))
        .with(LossExporter, Place::Dir(tmp.path().to_owned()))
        .with(
            PerftestJsonExporter { single: None },
            Place::File(tmp.path().join("p.json")),
        )
        .with(JsonStreamExporter, Place::File(tmp.path().join("s.jsonl")))
        .write(&doc)
        .result()
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn a_congestion_study_is_written_as_json_csv_and_plots_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let study = crate::results::congestion::testdata::doc();
    let doc = Document::Congestion(&study);
    let written = ExportManager::congestion(tmp.path())
        .write(&doc)
        .result()
        .unwrap();
    let names: Vec<_> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "congestion.json",
            "congestion.csv",
            "rate-lossy-gbn.svg",
            "rate-ecn-dcqcn.svg",
            "victim.svg"
        ]
    );
    let back = crate::results::read::read_json(&written[0]).unwrap();
    assert_eq!(
        back,
        crate::results::read::Document::Congestion(Box::new(study.clone()))
    );
    assert_eq!(
        std::fs::read_to_string(&written[1]).unwrap(),
        crate::results::congestion::csv::congestion_csv(&study).unwrap()
    );
    let victim = std::fs::read_to_string(&written[4]).unwrap();
    crate::report::svg::tests::assert_texts(
        &victim,
        &[
            "idle bottleneck (reference): 2,000 samples, to p99.5",
            "lossy-gbn: 2,000 samples, to p99.5",
            "ecn-dcqcn: 2,000 samples, to p99.5",
        ],
    );
    // The formats that do not apply to it make nothing.
    let none = ExportManager::new()
        .with(HdrLogExporter, Place::Dir(tmp.path().join("n")))
        .with(LossExporter, Place::Dir(tmp.path().join("n")))
        .with(JsonStreamExporter, Place::File(tmp.path().join("s.jsonl")))
        .write(&doc)
        .result()
        .unwrap();
    assert!(none.is_empty());
}
