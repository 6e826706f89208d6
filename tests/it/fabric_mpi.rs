//! roce_fabric under Open MPI's mpirun on this machine: 4 ranks, soft RoCE v2 on distinct loopback
//! addresses and TCP; every cell filled and validated; a pair slowed on purpose flagged and named; the
//! matrix judged by roce_gate.

use crate::common::assert_contains;
use crate::fabric_support::*;

#[test]
fn soft_v2_on_four_loopback_addresses_fills_and_validates_every_cell() {
    let job = Job::new(4, "m");
    let results = &job.results;
    let args = job.args(
        "write_bw --transport soft -d lo --roce v2 -n 100 --warmup 10 --validate --no-retest \
         --loopback-base 127.0.5.10",
    );
    let (stdout, _) = expect_code(&run(&mut mpirun(4, &[], &args), 240), 0);
    let doc = crate::common::schema::assert_valid_file("fabric", &results.join("fabric.json"));
    crate::common::schema::assert_csv_header("fabric", &results.join("fabric.csv"));
    assert_eq!(doc["schema"], "roceperf.fabric");
    assert_eq!(doc["launcher"], "openmpi");
    assert_eq!(doc["validate"], true);
    let pairs = first_pairs(&doc);
    assert_eq!(pairs.len(), 12, "4 x 3 directed pairs");
    assert!(pairs.iter().all(|p| p.2 == "ok"), "{pairs:?}");
    // Every off-diagonal cell of the bandwidth matrix has a value.
    let m = &doc["matrices"][0];
    assert_eq!(m["metric"], "bw_avg_gbps");
    for (i, row) in m["values"].as_array().unwrap().iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(v.is_number(), i != j, "cell {i},{j}: {v}");
        }
    }
    // Each rank on its own address, named with its GID; each pair with its full single-run result.
    for (r, h) in doc["hosts"].as_array().unwrap().iter().enumerate() {
        assert_eq!(h["address"], format!("127.0.5.{}", 10 + r));
        assert_eq!(h["gids"]["given"], format!("::ffff:127.0.5.{}", 10 + r));
    }
    let p = &doc["pairs"][0];
    assert_eq!(p["result"]["schema"], "roceperf.result");
    assert_eq!(p["result"]["test"]["transport"], "soft");
    assert_eq!(p["result"]["test"]["roce"], "v2");
    assert_eq!(p["result"]["test"]["role"], "client");
    let csv = std::fs::read_to_string(results.join("fabric.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13, "{csv}");
    assert!(results.join("heatmap-write_bw-bw_avg_gbps.svg").exists());
    assert!(
        stdout.contains("write_bw over soft v2") && stdout.contains("12 pairs ok"),
        "{stdout}"
    );

    // roce_gate reads the matrix: a floor every pair clears passes, one no pair clears fails.
    let json = results.join("fabric.json");
    expect_code(&gate(&json, &["--min-bw", "1Mb/s"]), 0);
    let (gate_out, _) = expect_code(&gate(&json, &["--min-bw", "10Tb/s"]), 1);
    assert!(
        gate_out.contains("FAIL")
            && gate_out.contains("min pair bandwidth")
            && gate_out.contains("12 of 12"),
        "{gate_out}"
    );
}

#[test]
fn tcp_latency_and_bandwidth_matrices() {
    let job = Job::new(4, "t");
    let results = &job.results;
    // 1,000 iterations: the least that hold a pair's p99 (10 samples beyond it).
    let args =
        job.args("write_lat send_bw --transport tcp -n 1000 --warmup 10 --validate --no-retest");
    let (stdout, _) = expect_code(&run(&mut mpirun(4, &[], &args), 240), 0);
    let doc = fabric_json(results);
    let metrics: Vec<String> = doc["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}/{}", m["test"], m["metric"]).replace('"', ""))
        .collect();
    assert_eq!(
        metrics,
        [
            "write_lat/lat_median_us",
            "write_lat/lat_p99_us",
            "send_bw/bw_avg_gbps",
            "send_bw/msg_rate_mpps"
        ]
    );
    assert_eq!(first_pairs(&doc).iter().filter(|p| p.2 == "ok").count(), 24);
    assert!(
        stdout.contains("write_lat over tcp") && stdout.contains("p99 latency"),
        "{stdout}"
    );
    expect_code(&gate(&results.join("fabric.json"), &["--max-p99", "1s"]), 0);
}

#[test]
fn a_pair_slowed_on_purpose_is_flagged_and_named() {
    let job = Job::new(4, "s");
    let results = &job.results;
    // Soft RoCE drops 2 % of what ranks 1 and 2 send each other: that pair crawls through retransmissions.
    let args = job.args(
        "write_bw --transport soft -d lo -n 100 --warmup 10 --serial --bw-fraction 30% \
         --loopback-base 127.0.6.10",
    );
    let impair = [("ROCEPERF_FABRIC_IMPAIR", "1-2:loss=2%")];
    let (stdout, _) = expect_code(&run(&mut mpirun(4, &impair, &args), 300), 0);
    assert!(
        stdout.contains("bad pair: 1 -> 2") && stdout.contains("bad pair: 2 -> 1"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("bad host"),
        "one slow pair is not a bad host:\n{stdout}"
    );
    let doc = fabric_json(results);
    let flagged: Vec<(u64, u64, bool)> = doc["summary"]["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["client"].as_u64().unwrap(),
                f["server"].as_u64().unwrap(),
                f["bad_pair"] == true,
            )
        })
        .collect();
    assert!(
        flagged.contains(&(1, 2, true)) && flagged.contains(&(2, 1, true)),
        "{flagged:?}"
    );
    // Retested alone, and both results kept.
    let retests = doc["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["attempt"] == 2 && p["client"] == 1 && p["server"] == 2)
        .count();
    assert_eq!(retests, 1);
    let (gate_out, _) = expect_code(&gate(&results.join("fabric.json"), &["--no-flagged"]), 1);
    assert_contains(&gate_out, "1 -> 2");
}

#[test]
fn a_rank_killed_under_mpirun_is_named_in_the_matrix_rank_0_leaves() {
    let job = Job::new(4, "k");
    let (dir, results) = (&job.dir, &job.results);
    // Rank 2 is killed (SIGKILL) once two pairs are done; mpirun then takes the whole job down within a
    // second, so what rank 0 leaves is the snapshot it writes the moment it loses a rank.
    let wrapper = dir.path().join("kill-rank-2.sh");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 2 ]; then\n  \
         ( while [ \"$(cat \"$SPOOL\" 2>/dev/null | wc -l)\" -lt 2 ]; do sleep 0.05; done; kill -9 $$ ) &\nfi\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let spool = results.join(".pairs.jsonl");
    let args =
        job.args("write_bw write_lat --transport tcp -n 2000 --warmup 10 --serial --no-retest");
    let mut cmd = mpirun_wrapped(
        4,
        &[("SPOOL", spool.to_str().unwrap())],
        Some(&wrapper),
        &args,
    );
    let out = run(&mut cmd, 240);
    let (stdout, stderr) = text(&out);
    assert_ne!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("rank 2 (") && stderr.contains("was lost"),
        "{stderr}"
    );
    let doc = fabric_json(results);
    assert_eq!(doc["hosts"][2]["status"], "lost", "{doc:#}");
    assert!(doc["summary"]["ok"].as_u64().unwrap() >= 2);
    // mpirun kills rank 0 about a second after the lost rank, so what it leaves may be the snapshot
    // rank 0 wrote the moment it lost the rank: every pair that finished is in it, and the summary
    // also counts those that were missing or not run by then.
    let s = &doc["summary"];
    let pairs = doc["pairs"].as_array().unwrap();
    let ok_pairs = pairs.iter().filter(|p| p["status"] == "ok").count() as u64;
    assert_eq!(ok_pairs, s["ok"].as_u64().unwrap(), "{doc:#}");
    let counted = s["ok"].as_u64().unwrap()
        + s["failed"].as_u64().unwrap()
        + s["missing"].as_u64().unwrap()
        + s["not_run"].as_u64().unwrap();
    assert!(pairs.len() as u64 <= counted, "{doc:#}");
}

#[test]
fn compare_runs_roce_v1_v2_and_tcp_matrices_in_one_job() {
    if crate::common::skip_unless(is_root(), "RoCE v1 over AF_PACKET needs CAP_NET_RAW (root)") {
        return;
    }
    let job = Job::new(3, "c");
    let results = &job.results;
    // Three ranks: an odd count, so each round has one rank out (a bye).
    let args = job.args(
        "write_lat --compare --transport soft -d lo -n 100 --warmup 10 --no-retest \
         --loopback-base 127.0.7.10",
    );
    expect_code(&run(&mut mpirun(3, &[], &args), 240), 0);
    let doc = fabric_json(results);
    let labels: Vec<&str> = doc["legs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["soft v1", "soft v2", "tcp"]);
    assert_eq!(
        first_pairs(&doc).iter().filter(|p| p.2 == "ok").count(),
        18,
        "3 legs x 6 pairs"
    );
    assert_eq!(doc["hosts"][1]["gids"]["v2"], "::ffff:127.0.7.11");
    assert!(
        results
            .join("heatmap-v1-write_lat-lat_median_us.svg")
            .exists()
    );
    assert!(
        results
            .join("heatmap-tcp-write_lat-lat_p99_us.svg")
            .exists()
    );
}
