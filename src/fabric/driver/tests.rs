use super::*;
use crate::fabric::plan::Impair;
use crate::fabric::rules::Rules;
use crate::fabric::schedule::Pattern;
use crate::params::TestKind;

fn plan(n: usize, serial: bool) -> Plan {
    Plan {
        n,
        legs: vec![Leg::AsGiven],
        tests: vec![TestKind::from_name("write_bw").unwrap()],
        steps: Pattern::AllPairs.steps(n).unwrap(),
        serial,
        retest: true,
        rules: Rules::default(),
        base_port: 20000,
        timeouts: vec![Duration::from_secs(10)],
        grace: Duration::from_secs(5),
        impair: vec![Impair {
            a: 0,
            b: Some(1),
            spec: "loss=5%".into(),
        }],
        victim: None,
    }
}

fn members(n: usize) -> Vec<Member> {
    (0..n)
        .map(|rank| Member {
            rank,
            host: format!("h{rank}"),
            addr: format!("10.0.0.{rank}"),
            device: None,
            cores: None,
            state: MemberState::Present,
        })
        .collect()
}

fn ok(gbps: f64) -> Outcome {
    Outcome {
        exit_code: Some(0),
        error: None,
        result: Some(
            serde_json::json!({"results": [{"size_bytes": 65536, "bandwidth": {"avg_gbps": gbps}}]}),
        ),
        elapsed_ms: 5,
    }
}

/// Runs the driver answering every job at once (`answer` gives each side's outcome, given the rank
/// that runs it); returns the records and the jobs seen.
fn run(
    d: &mut Driver,
    answer: impl Fn(usize, &Job) -> Outcome,
) -> (Vec<PairRecord>, Vec<(usize, Job)>) {
    let mut records = Vec::new();
    let mut seen = Vec::new();
    d.start(Duration::ZERO);
    loop {
        let mut jobs = Vec::new();
        while let Some(o) = d.poll_output() {
            match o {
                Output::Send(r, ToWorker::Job(j)) => jobs.push((r, j)),
                Output::Record(rec) => records.push(*rec),
                _ => {}
            }
        }
        if d.is_finished() || jobs.is_empty() {
            break;
        }
        for (r, j) in jobs {
            seen.push((r, j.clone()));
            d.on_done(Duration::ZERO, r, j.id, answer(r, &j));
        }
    }
    (records, seen)
}

#[test]
fn every_pair_runs_with_its_port_address_and_impairment() {
    let mut d = Driver::new(plan(4, false), members(4));
    let (records, jobs) = run(&mut d, |_, _| ok(10.0));
    assert_eq!(records.len(), 12);
    assert!(records.iter().all(|r| r.status == Status::Ok));
    let client = jobs
        .iter()
        .find(|(_, j)| j.side == Side::Client && j.peer == 2)
        .unwrap();
    assert_eq!(client.1.server_addr.as_deref(), Some("10.0.0.2"));
    assert_eq!(client.1.port, Some(20002));
    let impaired = jobs.iter().filter(|(_, j)| j.impair.is_some()).count();
    assert_eq!(impaired, 4, "both sides of 0->1 and of 1->0");
    assert!(d.is_finished());
    assert!(crate::fabric::summary::all_ok(d.members(), d.phases()));
}

#[test]
fn a_slow_pair_is_flagged_and_retested_alone() {
    let mut d = Driver::new(plan(4, false), members(4));
    // Client 0 with server 1 is slow.
    let (records, _) = run(&mut d, |r, j| {
        ok(if r == 0 && j.peer == 1 { 2.0 } else { 10.0 })
    });
    let phase = &d.phases()[0];
    assert_eq!(phase.flagged, vec![(0, 1)]);
    assert_eq!(phase.diagnosis.bad_pairs, vec![(0, 1)]);
    let retests: Vec<_> = records.iter().filter(|r| r.attempt == 2).collect();
    assert_eq!(retests.len(), 1);
    assert!(retests[0].alone);
    assert!(phase.grid.retests.contains_key(&(0, 1)));
}

#[test]
fn a_missing_rank_leaves_its_cells_missing_and_a_failure_stays_in_its_cell() {
    let mut m = members(4);
    m[3].state = MemberState::Missing("it did not join within 60 s".into());
    let mut d = Driver::new(plan(4, true), m);
    let (records, _) = run(&mut d, |_, j| {
        if j.peer == 2 && j.side == Side::Client {
            Outcome {
                exit_code: Some(1),
                error: Some("boom".into()),
                result: None,
                elapsed_ms: 1,
            }
        } else {
            ok(10.0)
        }
    });
    assert_eq!(
        records
            .iter()
            .filter(|r| r.status == Status::Missing)
            .count(),
        6
    );
    let failed: Vec<_> = records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(failed[0].error.as_deref().unwrap().contains("boom"));
    assert!(
        records.iter().all(|r| r.alone),
        "--serial runs one pair at a time"
    );
}

#[test]
fn a_lost_rank_is_named_its_peer_cancelled_and_the_run_goes_on() {
    let mut d = Driver::new(plan(4, false), members(4));
    d.start(Duration::ZERO);
    let mut jobs = Vec::new();
    while let Some(o) = d.poll_output() {
        if let Output::Send(r, ToWorker::Job(j)) = o {
            jobs.push((r, j));
        }
    }
    // Rank 2 dies mid-round; the other pair of the round finishes.
    for (r, j) in &jobs {
        if *r != 2 && j.peer != 2 {
            d.on_done(Duration::ZERO, *r, j.id, ok(10.0));
        }
    }
    d.on_lost(Duration::from_secs(1), 2, "its connection closed");
    let mut lost = None;
    let mut cancels = 0;
    let mut next = Vec::new();
    while let Some(o) = d.poll_output() {
        match o {
            Output::Lost(text) => lost = Some(text),
            Output::Send(_, ToWorker::Cancel { .. }) => cancels += 1,
            Output::Send(r, ToWorker::Job(j)) => next.push((r, j)),
            _ => {}
        }
    }
    for (r, j) in next {
        d.on_done(Duration::ZERO, r, j.id, ok(10.0));
    }
    let text = lost.unwrap();
    assert!(
        text.contains("rank 2 (h2, 10.0.0.2)") && text.contains("round 1"),
        "{text}"
    );
    assert_eq!(cancels, 1);
    run(&mut d, |_, _| ok(10.0));
    assert!(d.is_finished());
    let grid = &d.phases()[0].grid;
    assert_eq!(
        grid.iter().count(),
        12,
        "every cell is filled, ok or marked"
    );
    let with_2: Vec<_> = grid
        .iter()
        .filter(|((c, s), _)| *c == 2 || *s == 2)
        .collect();
    assert!(with_2.iter().all(|(_, c)| c.status != Status::Ok));
    assert_eq!(
        with_2
            .iter()
            .filter(|(_, c)| c.status == Status::Failed)
            .count(),
        1,
        "the pair that was running"
    );
}

#[test]
fn a_silent_rank_times_out() {
    let mut d = Driver::new(plan(2, false), members(2));
    d.start(Duration::ZERO);
    while d.poll_output().is_some() {}
    assert_eq!(d.next_deadline(), Some(Duration::from_secs(15)));
    d.on_tick(Duration::from_secs(16));
    let lost = d
        .members()
        .iter()
        .filter(|m| matches!(m.state, MemberState::Lost(_)))
        .count();
    assert!(lost >= 1);
}

#[test]
fn impairment_specs() {
    let i = parse_impair("0-1:loss=5%,seed=3; 2:loss=1%").unwrap();
    assert_eq!(
        i[0],
        Impair {
            a: 0,
            b: Some(1),
            spec: "loss=5%,seed=3".into()
        }
    );
    assert_eq!(
        i[1],
        Impair {
            a: 2,
            b: None,
            spec: "loss=1%".into()
        }
    );
    assert!(parse_impair("x").is_err());
}

#[test]
fn an_incast_starts_every_sender_at_once_each_on_its_own_port() {
    let mut p = plan(4, false);
    p.steps = Pattern::Incast {
        receiver: 0,
        senders: None,
    }
    .steps(4)
    .unwrap();
    p.impair.clear();
    let mut d = Driver::new(p, members(4));
    d.start(Duration::ZERO);
    let mut jobs = Vec::new();
    while let Some(o) = d.poll_output() {
        if let Output::Send(r, ToWorker::Job(j)) = o {
            jobs.push((r, j));
        }
    }
    // Three servers on rank 0 and three clients, before any answer; the port follows the client.
    let on = |side: Side| -> Vec<(usize, Option<u16>)> {
        jobs.iter()
            .filter(|(_, j)| j.side == side)
            .map(|(r, j)| (*r, j.port))
            .collect()
    };
    assert_eq!(
        on(Side::Server),
        [(0, Some(20001)), (0, Some(20002)), (0, Some(20003))]
    );
    assert_eq!(
        on(Side::Client),
        [(1, Some(20001)), (2, Some(20002)), (3, Some(20003))]
    );
    let mut records = Vec::new();
    for (r, j) in jobs {
        // Unequal shares: an incast is not judged by the outlier rules, so nothing is retested.
        d.on_done(Duration::ZERO, r, j.id, ok(if r == 2 { 1.0 } else { 3.0 }));
        while let Some(o) = d.poll_output() {
            if let Output::Record(rec) = o {
                records.push(*rec);
            }
        }
    }
    assert!(d.is_finished());
    let got: Vec<(usize, usize, u16, bool)> = records
        .iter()
        .map(|r| (r.client, r.server, r.port, r.alone))
        .collect();
    assert_eq!(
        got,
        [
            (1, 0, 20001, false),
            (2, 0, 20002, false),
            (3, 0, 20003, false)
        ]
    );
    assert!(d.phases()[0].limit.is_none() && d.phases()[0].flagged.is_empty());
}

#[test]
fn an_incast_victim_probes_the_receiver_while_the_senders_send_and_is_kept_apart() {
    let mut p = plan(4, false);
    p.steps = Pattern::Incast {
        receiver: 0,
        senders: Some(2),
    }
    .steps(4)
    .unwrap();
    p.impair.clear();
    p.victim = Some(Pair {
        client: 3,
        server: 0,
    });
    let mut d = Driver::new(p, members(4));
    let (records, seen) = run(&mut d, |_, j| {
        if j.run.test == "write_lat" {
            Outcome {
                exit_code: Some(0),
                error: None,
                result: Some(serde_json::json!({"results": [{"size_bytes": 2,
                    "latency": {"median_us": 7.5, "percentiles": {"p99": 20.0}, "max_us": 31.0}}]})),
                elapsed_ms: 5,
            }
        } else {
            ok(2.0)
        }
    });
    assert!(d.is_finished());
    // Both senders and the victim start in the one step, before any answer; the victim on its own
    // port (the base plus its client's rank), running write_lat.
    let victim: Vec<(usize, Side, Option<u16>)> = seen
        .iter()
        .filter(|(_, j)| j.run.test == "write_lat")
        .map(|(r, j)| (*r, j.side, j.port))
        .collect();
    assert_eq!(
        victim,
        [
            (0, Side::Server, Some(20003)),
            (3, Side::Client, Some(20003))
        ]
    );
    assert_eq!(seen.len(), 6, "two senders and the victim, two sides each");
    // The victim is not a cell of the bandwidth matrix: its figures are the phase's victim.
    let phase = &d.phases()[0];
    assert!(phase.grid.get(3, 0).is_none());
    let (pair, cell) = phase.victim.as_ref().expect("the victim's outcome");
    assert_eq!((pair.client, pair.server), (3, 0));
    assert_eq!(cell.status, Status::Ok);
    assert_eq!(cell.figures.lat_median_us, 7.5);
    assert_eq!(cell.figures.lat_p99_us, 20.0);
    let rec = records.iter().find(|r| r.victim).expect("a victim record");
    assert_eq!((rec.test, rec.client, rec.server), ("write_lat", 3, 0));
    assert_eq!(records.len(), 3);
    assert_eq!(d.progress().0, 2, "progress counts the matrix's pairs only");
}
