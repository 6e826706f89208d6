//! roce_fabric on one host, ranks started by hand: the console coloured only on a terminal and never
//! with NO_COLOR (rank 0 on a pseudo-terminal from `script`), the shared-host warning and the bad-host
//! verdicts it holds back, fabric.csv's verdict columns agreeing with the console, and an incast with a
//! victim latency pair.

use crate::common::assert_contains;
use crate::common::schema::{assert_csv_header, assert_valid_file};
use crate::fabric_support::*;
use std::process::{Child, Command, Stdio};

/// SGR sequences (`ESC [ ... m`): colour and style, not a progress bar's cursor movements.
fn sgr(text: &str) -> usize {
    text.match_indices("\x1b[")
        .filter(|(at, _)| {
            text[at + 2..]
                .chars()
                .find(|c| !(c.is_ascii_digit() || *c == ';'))
                == Some('m')
        })
        .count()
}

/// Runs 3 ranks of `args`, rank 1's pairs at 5 % loss (so that some pair is flagged), rank 0 on a
/// pseudo-terminal with `env`; what rank 0's terminal showed.
fn on_a_terminal(job: &Job, args: &[String], env: &[(&str, &str)]) -> String {
    let others: Vec<Child> = (1..3)
        .map(|r| spawn(rank(r, 3, args), &job.log(r)))
        .collect();
    let mut line = format!("{FABRIC} --rank 0 --world-size 3");
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    let mut c = Command::new("script");
    c.args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm")
        .env("ROCEPERF_FABRIC_IMPAIR", "1:loss=5%")
        .env_remove("NO_COLOR")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run(&mut c, 300);
    let codes: Vec<i32> = others.into_iter().map(|o| wait(o, 60)).collect();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(codes, [0, 0], "{text}");
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn colour_on_a_terminal_only_and_never_with_no_color_and_shared_host_verdicts_held_back() {
    if crate::common::skip_unless(
        Command::new("script").arg("--version").output().is_ok(),
        "needs script (util-linux) for a pseudo-terminal",
    ) {
        return;
    }
    // On a terminal the flagged cells are red (the job, and the fabric tests' lock, dropped after).
    {
        let job = Job::new(3, "tty");
        let args = job
            .args("write_bw --transport soft -d lo -n 200 --warmup 10 --loopback-base 127.0.7.10");
        let coloured = on_a_terminal(&job, &args, &[]);
        assert!(coloured.contains("\x1b[1;31m"), "{coloured:?}");
    }
    // NO_COLOR: none, though the terminal is the same.
    let job2 = Job::new(3, "tty-no-color");
    let args2 =
        job2.args("write_bw --transport soft -d lo -n 200 --warmup 10 --loopback-base 127.0.7.20");
    let plain = on_a_terminal(&job2, &args2, &[("NO_COLOR", "1")]);
    assert_eq!(sgr(&plain), 0, "{plain:?}");
    assert_contains(&plain, "write_bw over soft v2");

    // Three ranks on this host: the warning, and no bad-host verdict however slow rank 1 is.
    assert_contains(&plain, "warning: ranks 0, 1, 2 share host");
    assert!(!plain.contains("bad host:"), "{plain}");
    let doc = assert_valid_file("fabric", &job2.results.join("fabric.json"));
    assert_csv_header("fabric", &job2.results.join("fabric.csv"));
    let shared = &doc["shared_hosts"][0];
    assert_eq!(shared["ranks"], serde_json::json!([0, 1, 2]));
    assert_eq!(
        shared["busy_sides"], 2,
        "one pair at a time among three ranks"
    );
    assert!(shared["cores"].as_u64().unwrap() >= 1);
    assert_eq!(
        doc["warnings"].as_array().unwrap().len(),
        1 + usize::from(shared["oversubscribed"] == true)
    );
    assert_eq!(doc["summary"]["bad_hosts"], serde_json::json!([]));
    let flagged = doc["summary"]["flagged"].as_array().unwrap();
    assert!(!flagged.is_empty(), "rank 1 at 5 % loss is flagged: {doc}");
    for f in flagged {
        assert!(
            ["held_back", "load_only", "bad_pair", "unjudged"]
                .contains(&f["verdict"].as_str().unwrap()),
            "{f}"
        );
    }
    for h in doc["summary"]["held_back"].as_array().unwrap() {
        assert!(h["reason"].as_str().unwrap().contains("share host"), "{h}");
    }

    // fabric.csv says what the console says: a flag's verdict on its matrix row, the retest's
    // "confirmed" or "cleared" on its own row.
    let mut csv = csv::Reader::from_path(job2.results.join("fabric.csv")).unwrap();
    let head = csv.headers().unwrap().clone();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    for r in &rows {
        assert_eq!(&r[col("compare_leg")], "none");
        let (run, within, verdict) = (&r[col("run")], &r[col("within_limit")], &r[col("verdict")]);
        let key = format!("{} -> {}", &r[col("client")], &r[col("server")]);
        let f = flagged
            .iter()
            .find(|f| format!("{} -> {}", f["client"], f["server"]) == key);
        match run {
            "matrix" => {
                assert_eq!(within == "false", f.is_some(), "{r:?}");
                let want = f.map_or("ok", |f| f["verdict"].as_str().unwrap());
                assert_eq!(verdict, want, "{r:?}");
            }
            "retest" => {
                let f = f.expect("a retest is of a flagged pair");
                let confirmed = f["confirmed"] == true || f["retest_value"].is_null();
                assert_eq!(
                    verdict,
                    if confirmed { "confirmed" } else { "cleared" },
                    "{r:?}"
                );
                let says = if confirmed { "(confirmed)" } else { "" };
                assert!(
                    plain.contains(&format!("{key} ")) && plain.contains(says),
                    "{plain}"
                );
            }
            other => panic!("run {other}"),
        }
    }
}

#[test]
fn an_incast_with_a_victim_reports_the_victims_latency_beside_the_senders_shares() {
    let job = Job::new(4, "victim");
    let args = job.args(
        "write_bw --transport tcp -n 1000 --warmup 10 -s 4096 --pattern incast --incast-senders 2 \
         --victim 3,0 --no-retest",
    );
    let ranks: Vec<Child> = (0..4)
        .map(|r| spawn(rank(r, 4, &args), &job.log(r)))
        .collect();
    let codes: Vec<i32> = ranks.into_iter().map(|c| wait(c, 240)).collect();
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!(codes, [0, 0, 0, 0], "rank 0:\n{log0}");
    assert!(!log0.contains('\x1b'), "{log0:?}");
    // The console: the senders' shares and the victim's latency, sharing the receiver's port.
    assert_contains(&log0, "from 2 of 2 senders, Jain's index");
    assert_contains(
        &log0,
        "victim, write_bw over tcp: write_lat 3 -> 0 (the receiver) during the incast: median ",
    );
    let doc = assert_valid_file("fabric", &job.results.join("fabric.json"));
    assert_csv_header("fabric", &job.results.join("fabric.csv"));
    let v = &doc["victims"][0];
    assert_eq!(v["probe"], "write_lat");
    assert_eq!(v["test"], "write_bw");
    assert_eq!(
        (v["client"].as_u64(), v["server"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(v["shares_receiver"], true);
    assert_eq!(v["status"], "ok", "{v}");
    let median = v["lat_median_us"].as_f64().unwrap();
    let p99 = v["lat_p99_us"].as_f64().expect("1,000 samples hold a p99");
    assert!(
        median > 0.0 && p99 >= median && v["lat_max_us"].as_f64().unwrap() >= p99,
        "{v}"
    );
    // Its pair record is kept apart from the matrix (no cell 3 -> 0).
    let rec: Vec<&serde_json::Value> = doc["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["victim"] == true)
        .collect();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0]["test"], "write_lat");
    let m = &doc["matrices"][0];
    assert!(m["values"][3][0].is_null(), "{m}");
    // fabric.csv: each sender's share of the sum, and the victim's row with its latency.
    let mut csv = csv::Reader::from_path(job.results.join("fabric.csv")).unwrap();
    let head = csv.headers().unwrap().clone();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let sum = m["incast"]["sum"].as_f64().unwrap();
    let mut shares = 0.0;
    for r in rows.iter().filter(|r| &r[col("incast_role")] == "sender") {
        let bw: f64 = r[col("bw_avg_gbps")].parse().unwrap();
        let share: f64 = r[col("incast_share_pct")].parse().unwrap();
        assert!((share - 100.0 * bw / sum).abs() < 0.01, "{r:?}");
        let csv_sum: f64 = r[col("incast_sum_gbps")].parse().unwrap();
        assert!((csv_sum - sum).abs() < 1e-5, "{r:?}");
        let jain: f64 = r[col("incast_jain")].parse().unwrap();
        assert!((jain - m["incast"]["jain"].as_f64().unwrap()).abs() < 1e-5);
        shares += share;
    }
    assert!((shares - 100.0).abs() < 0.01, "{shares}");
    let victim = rows
        .iter()
        .find(|r| &r[col("run")] == "victim")
        .expect("a victim row");
    assert_eq!(&victim[col("test")], "write_lat");
    assert_eq!(&victim[col("incast_role")], "victim");
    assert_eq!((&victim[col("client")], &victim[col("server")]), ("3", "0"));
    let csv_median: f64 = victim[col("lat_median_us")].parse().unwrap();
    assert!(
        (csv_median - median).abs() < 1e-3 * median.max(1.0),
        "{victim:?}"
    );
}

#[test]
fn a_victim_that_sends_in_the_incast_is_a_usage_error_naming_the_flag() {
    let job = Job::new(3, "victim-bad");
    let args = job.args("write_bw --transport tcp --pattern incast --victim 1,0");
    let log0 = rank0_refuses(&job, 3, &args);
    assert_contains(&log0, "--victim 1,0: rank 1 already sends in the incast");
    let args = job.args("write_bw --transport tcp --victim 1,0");
    let log0 = rank0_refuses(&job, 3, &args);
    assert_contains(&log0, "--victim applies to --pattern incast only");
}
