//! roce_fabric's failure handling, with ranks started by hand (`--rank`/`--world-size`, as in a
//! Kubernetes Indexed Job): a rank killed mid-run and a rank that never arrives are named and the rest of
//! the matrix is written (exit 1); ranks that disagree on a parameter or the version exit 2 naming the
//! rank and the parameter.

use crate::common::assert_contains;
use crate::fabric_support::*;
use roceperf::fabric::job::ToWorker;
use roceperf::orchestrate::control::{self, Hello, ToDriver};
use std::process::Child;
use std::time::{Duration, Instant};

#[test]
fn a_rank_killed_mid_run_is_named_and_the_rest_of_the_matrix_written() {
    let job = Job::new(4, "k");
    let args =
        job.args("write_bw write_lat --transport tcp -n 200 --warmup 10 --no-retest --serial");
    let mut ranks: Vec<Option<Child>> = (0..4)
        .map(|r| Some(spawn(rank(r, 4, &args), &job.log(r))))
        .collect();
    // Kill rank 2 once the first pairs are done.
    let spool = job.results.join(".pairs.jsonl");
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&spool).map_or(0, |s| s.lines().count()) < 3 {
        assert!(Instant::now() < deadline, "no pair finished in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut victim = ranks[2].take().unwrap();
    victim.kill().unwrap();
    victim.wait().unwrap();
    let codes: Vec<i32> = ranks.into_iter().flatten().map(|c| wait(c, 240)).collect();
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!(codes, [1, 1, 1], "rank 0:\n{log0}");
    assert!(
        log0.contains("rank 2 (") && log0.contains("was lost"),
        "{log0}"
    );
    let doc = fabric_json(&job.results);
    assert_eq!(doc["hosts"][2]["status"], "lost");
    assert!(
        doc["hosts"][2]["reason"]
            .as_str()
            .unwrap()
            .contains("connection closed")
    );
    let pairs = first_pairs(&doc);
    assert_eq!(
        pairs.len(),
        24,
        "every cell of both tests is written, ok or marked"
    );
    for (c, s, status) in &pairs {
        if *c != 2 && *s != 2 {
            assert_eq!(status, "ok", "{c} -> {s}");
        }
    }
    let missing = pairs.iter().filter(|p| p.2 == "missing").count();
    assert!(
        missing >= 6,
        "the pairs of rank 2 after its death are marked: {pairs:?}"
    );
    assert!(
        log0.contains("lost: rank 2"),
        "the summary names it:\n{log0}"
    );
}

#[test]
fn a_rank_that_never_arrives_is_named_within_the_join_timeout() {
    let job = Job::new(3, "n");
    let args = job.args("send_lat --transport tcp -n 50 --warmup 5 --join-timeout 3");
    let started = Instant::now();
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn(rank(r, 3, &args), &job.log(r)))
        .collect();
    let codes: Vec<i32> = ranks.into_iter().map(|c| wait(c, 120)).collect();
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!(codes, [1, 1], "{log0}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_contains(
        &log0,
        "rank 2 (host unknown) never joined: it did not join within 3 s",
    );
    let doc = fabric_json(&job.results);
    assert_eq!(doc["hosts"][2]["status"], "missing");
    let pairs = first_pairs(&doc);
    assert_eq!(
        pairs.iter().filter(|p| p.2 == "ok").count(),
        2,
        "0 <-> 1 ran: {pairs:?}"
    );
    assert_eq!(pairs.iter().filter(|p| p.2 == "missing").count(), 4);
    let m = &doc["matrices"][0];
    assert_eq!(m["status"][0][2], "missing");
}

#[test]
fn ranks_with_different_parameters_exit_2_naming_the_rank_and_the_parameter() {
    let job = Job::new(2, "p");
    let common = job.args("write_bw --transport tcp");
    let mut a0 = common.clone();
    a0.extend(["-s".into(), "64K".into()]);
    let mut a1 = common;
    a1.extend(["--size".into(), "4096".into()]);
    let r0 = spawn(rank(0, 2, &a0), &job.log(0));
    let r1 = spawn(rank(1, 2, &a1), &job.log(1));
    assert_eq!((wait(r0, 60), wait(r1, 60)), (2, 2));
    for log in [job.log(0), job.log(1)] {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(
            text.contains("rank 1 (host")
                && text.contains("different --size: 4096 there, 64K on rank 0"),
            "{text}"
        );
    }
}

#[test]
fn a_rank_of_another_version_is_refused_with_exit_2() {
    let job = Job::new(2, "v");
    let coord = job.coord;
    let r0 = spawn(
        rank(0, 2, &job.args("send_bw --transport tcp")),
        &job.log(0),
    );
    // Rank 1 speaks the protocol but runs another roceperf.
    let s = roceperf::fabric::connect("127.0.0.1", coord, Duration::from_secs(30)).unwrap();
    let hello = Hello {
        protocol: control::PROTOCOL.into(),
        version: "9.9.9".into(),
        rank: 1,
        size: 2,
        params: Default::default(),
        host: "elsewhere".into(),
        addr: None,
        device: None,
        pid: 1,
        cores: None,
    };
    control::send(
        &mut std::io::BufWriter::new(s.try_clone().unwrap()),
        &ToDriver::Hello(hello),
    )
    .unwrap();
    let reply = control::recv::<ToWorker, _>(&mut std::io::BufReader::new(s)).unwrap();
    match reply {
        Some(ToWorker::Abort { code: 2, reason }) => {
            assert!(
                reason.contains("rank 1 (host elsewhere) runs roceperf 9.9.9"),
                "{reason}"
            )
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    assert_eq!(wait(r0, 60), 2);
    assert!(
        std::fs::read_to_string(job.log(0))
            .unwrap()
            .contains("9.9.9")
    );
}

#[test]
fn an_incast_sends_every_other_rank_into_the_receiver_and_sums_their_shares() {
    let job = Job::new(3, "incast");
    let args = job
        .args("write_bw --transport tcp -n 300 --warmup 10 -s 65536 --pattern incast --no-retest");
    let ranks: Vec<Child> = (0..3)
        .map(|r| spawn(rank(r, 3, &args), &job.log(r)))
        .collect();
    let codes: Vec<i32> = ranks.into_iter().map(|c| wait(c, 240)).collect();
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!(codes, [0, 0, 0], "rank 0:\n{log0}");
    let doc = fabric_json(&job.results);
    assert_eq!(doc["pattern"], "incast all>0");
    let mut pairs = first_pairs(&doc);
    pairs.sort();
    assert_eq!(pairs, [(1, 0, "ok".into()), (2, 0, "ok".into())]);
    // One step: both senders in round 0, not alone, each on its own port (the base plus its rank).
    let recs: Vec<&serde_json::Value> = doc["pairs"].as_array().unwrap().iter().collect();
    let ports: std::collections::BTreeSet<u64> =
        recs.iter().map(|p| p["port"].as_u64().unwrap()).collect();
    assert_eq!(ports.len(), 2, "{recs:?}");
    for p in &recs {
        assert_eq!(
            (p["round"].as_u64(), p["alone"].as_bool()),
            (Some(0), Some(false))
        );
        assert_eq!(
            p["port"].as_u64().unwrap() - p["client"].as_u64().unwrap(),
            ports.iter().min().unwrap() - 1
        );
    }
    // The bandwidth matrix carries the incast's share: the senders' sum and Jain's index.
    let m = doc["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "bw_avg_gbps")
        .unwrap();
    let share = &m["incast"];
    assert_eq!(share["receiver"], 0);
    assert_eq!(share["senders"], serde_json::json!([1, 2]));
    assert_eq!(share["measured"], 2);
    let (a, b) = (
        m["values"][1][0].as_f64().unwrap(),
        m["values"][2][0].as_f64().unwrap(),
    );
    assert!(a > 0.0 && b > 0.0);
    assert!(
        (share["sum"].as_f64().unwrap() - (a + b)).abs() < 1e-5,
        "{share}"
    );
    let jain = share["jain"].as_f64().unwrap();
    let want = (a + b).powi(2) / (2.0 * (a * a + b * b));
    assert!((jain - want).abs() < 1e-6 && jain <= 1.0, "{share}");
    // Latency matrices have none; the summary prints the share.
    assert!(
        doc["matrices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["metric"] == "msg_rate_mpps")
            .all(|m| m["incast"]["senders"] == serde_json::json!([1, 2]))
    );
    assert_contains(&log0, "incast, write_bw");
    assert_contains(&log0, "from 2 of 2 senders, Jain's index");
}

#[test]
fn an_incast_receiver_outside_the_job_is_a_usage_error_naming_the_flag() {
    let job = Job::new(3, "incast-bad");
    let args = job.args("write_bw --transport tcp --pattern incast --incast-receiver 3");
    let log0 = rank0_refuses(&job, 3, &args);
    assert_contains(&log0, "--incast-receiver 3: the job has 3 ranks (0..2)");
}
