//! The files the binaries write match their documentation: every JSON document validates against its JSON
//! Schema in `results/schema/` (real output of real runs: bandwidth and latency, client and server, TCP
//! and soft with its counters, iterations and duration mode, bidirectional, an atomic test, a comparison), every CSV
//! starts with the golden header of `tests/data/golden/`, and results/README.md lists exactly the keys
//! the schemas define and the columns the golden headers have.

use crate::common::assert_contains;
use crate::common::schema::{
    assert_csv_header, assert_valid, assert_valid_file, golden_csv_header, schema,
};
use crate::common::{self, pair_on_lo};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

#[test]
fn every_result_json_and_csv_the_binaries_write_matches_its_schema_and_golden_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runs = [
        ("tcp_bw", "write_bw", "--transport tcp -n 50"),
        (
            "tcp_lat_sizes",
            "send_lat",
            "--transport tcp -n 50 -s 64 --percentiles 50,99.9",
        ),
        ("tcp_bidir", "write_bw", "--transport tcp -b -n 50 -q 2"),
        (
            "soft_duration",
            "send_bw",
            "--transport soft -d lo -D 1 -s 4096 --cpu_util",
        ),
        ("soft_read_lat", "read_lat", "--transport soft -d lo -n 100"),
        ("soft_ud", "send_bw", "--transport soft -d lo -c UD -n 100"),
        (
            "tcp_atomic",
            "atomic_bw",
            "--transport tcp -n 50 -A CMP_AND_SWAP",
        ),
        (
            "tcp_paced",
            "send_bw",
            "--transport tcp -n 50 --rate_limit 1",
        ),
        (
            "tcp_gap",
            "write_lat",
            "--transport tcp -n 20 --latency_gap 5",
        ),
    ];
    let mut seen = BTreeSet::new();
    for (name, test, args) in runs {
        common::pair_writing_files(d, &format!("{name}-"), test, &common::argv(args));
        for role in ["client", "server"] {
            let doc = assert_valid_file("result", &d.join(format!("{name}-{role}.json")));
            assert_csv_header("result", &d.join(format!("{name}-{role}.csv")));
            let t = &doc["test"];
            seen.insert(format!("role {}", t["role"]));
            seen.insert(format!("transport {}", t["transport"]));
            seen.insert(format!("metric {}", t["test"]["metric"]));
            for (key, what) in [
                ("counters", "counters"),
                ("duration_s", "duration"),
                ("peer", "peer"),
                ("atomic_type", "atomic_type"),
            ] {
                if !t[key].is_null() {
                    seen.insert(what.to_string());
                }
            }
            if doc["results"][0].get("cpu_util_pct").is_some() {
                seen.insert("cpu_util".into());
            }
            if doc["results"][0].get("lost_messages").is_some() {
                seen.insert("lost_messages".into());
            }
            if t["counters"].get("unreliable").is_some() && !t["connection"].is_null() {
                seen.insert("unreliable".into());
            }
            for (key, what) in [
                ("rate_limit", "rate_limit"),
                ("latency_gap_ns", "latency_gap"),
            ] {
                if t.get(key).is_some() {
                    seen.insert(what.to_string());
                }
            }
            if doc["results"][0]["bandwidth"].get("pacing").is_some() {
                seen.insert("pacing".into());
            }
        }
    }
    // The runs above reach every optional part of the schema.
    for want in [
        "role \"client\"",
        "role \"server\"",
        "transport \"tcp\"",
        "transport \"soft\"",
        "metric \"bandwidth\"",
        "metric \"latency\"",
        "counters",
        "duration",
        "peer",
        "cpu_util",
        "lost_messages",
        "unreliable",
        "atomic_type",
        "rate_limit",
        "latency_gap",
        "pacing",
    ] {
        assert!(seen.contains(want), "no run wrote {want}: {seen:?}");
    }

    // A comparison of those runs, with the wire ceilings of a 100 Gb/s port: compare.json and
    // compare.csv.
    let out = Command::new(env!("CARGO_BIN_EXE_roce_compare"))
        .args(["--link-speed", "100G", "--link-mtu", "1500"])
        .arg("--from")
        .args(
            ["tcp_bw", "tcp_lat_sizes", "soft_duration", "soft_read_lat"]
                .map(|n| d.join(format!("{n}-client.json"))),
        )
        .arg("--results")
        .arg(d.join("cmp"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmp = std::fs::read_dir(d.join("cmp"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc = assert_valid_file("compare", &cmp.join("compare.json"));
    assert_eq!(doc["runs"].as_array().unwrap().len(), 4);
    assert_eq!(doc["wire"]["speed_gbps"], 100.0);
    assert_eq!(doc["wire"]["mtu"], 1500);
    let tcp_bw = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["test"]["metric"] == "bandwidth")
        .unwrap();
    let c = &tcp_bw["ceilings"][0];
    assert_eq!(c["protocol"], "TCP/IPv4");
    assert_eq!(c["payload_mtu"], 1448, "MSS at MTU 1500: {c}");
    assert_csv_header("compare", &cmp.join("compare.csv"));
}

/// What `--results DIR` writes (the names the README gives) validates too.
#[test]
fn results_dir_files_match_the_schema_and_golden_header() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--transport",
        "tcp",
        "-n",
        "30",
        "--results",
        dir.path().to_str().unwrap(),
    ];
    let (s, c) = pair_on_lo("read_bw", args.to_vec(), args.to_vec());
    common::assert_both_ok(
        "results_dir_files_match_the_schema_and_golden_header",
        &s,
        &c,
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    for n in &names {
        let path = dir.path().join(n);
        assert_contains(n, "-read_bw-tcp-");
        if n.ends_with(".json") {
            assert_valid_file("result", &path);
        } else {
            assert!(n.ends_with(".csv"), "{n}");
            assert_csv_header("result", &path);
        }
    }
}

/// The schemas reject what they should: a validator that accepted anything would pass the tests above.
#[test]
fn the_schemas_reject_unknown_and_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    common::pair_writing_files(
        dir.path(),
        "neg-",
        "write_lat",
        &common::argv("--transport tcp -n 20"),
    );
    let doc = common::json_file(&dir.path().join("neg-client.json"));
    assert_valid("result", &doc, "the real document");
    let validator = jsonschema::validator_for(&schema("result")).unwrap();
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: [Mutation; 6] = [
        ("an unknown top-level key", |d| d["surprise"] = 1.into()),
        ("an unknown key in test", |d| {
            d["test"]["surprise"] = 1.into()
        }),
        ("a missing median", |d| {
            d["results"][0]["latency"]
                .as_object_mut()
                .unwrap()
                .remove("median_us");
        }),
        ("bandwidth beside latency", |d| {
            d["results"][0]["bandwidth"] = serde_json::json!({});
        }),
        ("another schema_version", |d| d["schema_version"] = 2.into()),
        ("a role that is neither", |d| {
            d["test"]["role"] = "peer".into()
        }),
    ];
    for (what, mutate) in mutations {
        let mut bad = doc.clone();
        mutate(&mut bad);
        assert!(!validator.is_valid(&bad), "the schema accepts {what}");
    }
    nic_counters_match_the_schema(&doc, &validator);
}

/// A verbs run's `nic_counters` (no RDMA NIC here: written by the results model itself into a real
/// document) validates, and the schema refuses a stray key or priority.
fn nic_counters_match_the_schema(doc: &Value, validator: &jsonschema::Validator) {
    use roceperf::results::{NicCounters, SizeCounters};
    let names = [
        ("counters/port_xmit_data".to_string(), true, None),
        ("hw_counters/np_cnp_sent".to_string(), false, None),
        ("ethtool/rx_prio3_pause".to_string(), false, Some(3)),
    ];
    let nic = NicCounters {
        device: "mlx5_0".into(),
        port: 1,
        netdev: Some("ens1f0np0".into()),
        sizes: vec![SizeCounters::new(65536, &names, &[10, 0, 9], &[20, 4, 3])],
    };
    let mut good = doc.clone();
    good["test"]["nic_counters"] = serde_json::to_value(&nic).unwrap();
    assert_valid("result", &good, "a document with nic_counters");
    assert_eq!(
        good["test"]["nic_counters"]["sizes"][0]["counters"][0]["bytes"],
        40
    );
    assert!(good["test"]["nic_counters"]["sizes"][0]["counters"][2]["delta"].is_null());
    let mut stray = good.clone();
    stray["test"]["nic_counters"]["sizes"][0]["counters"][1]["surprise"] = 1.into();
    assert!(
        !validator.is_valid(&stray),
        "the schema accepts a stray counter key"
    );
    let mut prio = good.clone();
    prio["test"]["nic_counters"]["sizes"][0]["counters"][2]["pfc_priority"] = 8.into();
    assert!(!validator.is_valid(&prio), "the schema accepts priority 8");
}

/// `compare.json` repeats the parts it shares with a run's document: they must not drift apart.
#[test]
fn shared_definitions_are_identical_in_both_schemas() {
    let (r, c) = (schema("result"), schema("compare"));
    let mut shared = 0;
    for (name, def) in c["$defs"].as_object().unwrap() {
        if let Some(other) = r["$defs"].get(name) {
            assert_eq!(
                def, other,
                "$defs/{name} differs between result.json and compare.json"
            );
            shared += 1;
        }
    }
    assert!(shared >= 8, "{shared}");
}

/// The backquoted names in the first column of the table that follows `marker` in `text`.
fn table_keys(text: &str, marker: &str) -> BTreeSet<String> {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("results/README.md has no {marker}"));
    let mut keys = BTreeSet::new();
    for line in text[start + marker.len()..].lines().skip(1) {
        if !line.starts_with('|') {
            break;
        }
        let first = line.split('|').nth(1).unwrap_or_default();
        keys.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    assert!(!keys.is_empty(), "empty table after {marker}");
    keys
}

/// The property names an object schema defines itself.
fn property_names(s: &Value) -> Option<BTreeSet<String>> {
    s.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
}

#[test]
fn the_readme_documents_exactly_the_schema_keys_and_csv_columns() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/results/README.md")).unwrap();
    let result = schema("result");
    // What the schemas define: each document's own keys, and each object definition's.
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in ["result", "compare", "stream"] {
        let s = schema(name);
        defined.insert(name.to_string(), property_names(&s).unwrap());
        for (def, body) in s["$defs"].as_object().unwrap() {
            // Copies of result.json's definitions are documented once, under result.
            if name != "result" && result["$defs"].get(def) == Some(body) {
                continue;
            }
            if let Some(keys) = property_names(body) {
                defined.insert(format!("{name} {def}"), keys);
            }
        }
    }
    let documented: BTreeMap<String, BTreeSet<String>> = readme
        .match_indices("<!-- schema: ")
        .map(|(at, m)| {
            let end = readme[at..].find(" -->").unwrap();
            let key = readme[at + m.len()..at + end].to_string();
            let keys = table_keys(&readme, &format!("<!-- schema: {key} -->"));
            (key, keys)
        })
        .collect();
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        defined.keys().collect::<Vec<_>>(),
        "results/README.md's field reference has a table per schema object"
    );
    for (object, keys) in &defined {
        assert_eq!(
            &documented[object], keys,
            "results/README.md, table `{object}`: documented keys differ from the schema's"
        );
    }
    // compare.csv's table documents the linked header, whose last column (`link`) only linked runs have.
    for (csv, golden) in [
        ("result", "result"),
        ("compare", "compare-linked"),
        ("fabric", "fabric"),
    ] {
        let columns: BTreeSet<String> = golden_csv_header(golden)
            .split(',')
            .map(str::to_owned)
            .collect();
        assert_eq!(
            table_keys(&readme, &format!("<!-- csv: {csv} -->")),
            columns,
            "results/README.md's {csv}.csv columns differ from tests/data/golden/{golden}.csv"
        );
    }
}
