//! Scale on paper: rank 0's real scheduler over simulated ranks that answer at once (rounds, disjoint
//! steps, messages, bytes, rank 0's memory) checks the arithmetic that then sizes a 1,024-rank run; and
//! the real TCP rendezvous of up to 64 ranks in threads, timed (printed, not asserted: tests assert
//! behaviour, benchmarks time).

use roceperf::fabric::scale;

/// A write_bw result JSON is about 3.7 KB (see results/README.md).
const RESULT_BYTES: u64 = 3_800;

#[test]
fn the_scheduler_matches_the_arithmetic_and_1024_ranks_fit() {
    // Simulated for real at 64 ranks: rank 7 is slow with every peer, so its 2 x 63 pairs are retested.
    let sim = scale::simulate(64, Some(7), RESULT_BYTES);
    let est = scale::estimate(64, 2 * 63, RESULT_BYTES);
    assert!(sim.disjoint && est.disjoint);
    assert_eq!((sim.rounds, sim.steps, sim.max_concurrent), (63, 126, 32));
    assert_eq!(
        (sim.rounds, sim.steps, sim.max_concurrent, sim.pair_tests),
        (est.rounds, est.steps, est.max_concurrent, est.pair_tests)
    );
    assert_eq!(
        (sim.messages_out, sim.messages_in),
        (est.messages_out, est.messages_in)
    );
    for (what, s, e) in [
        ("bytes out", sim.bytes_out, est.bytes_out),
        ("bytes in", sim.bytes_in, est.bytes_in),
        ("spool", sim.spool_bytes, est.spool_bytes),
    ] {
        assert!(
            s <= e && e - s < e / 20,
            "{what}: simulated {s}, estimated {e} (the estimate takes the widest fields)"
        );
    }
    assert_eq!(sim.cell_bytes, est.cell_bytes);

    // 1,024 ranks: the schedule itself is built and checked; the rest follows from the arithmetic above.
    let r = scale::estimate(1024, 0, RESULT_BYTES);
    eprintln!("{r:#?}");
    assert_eq!(r.rounds, 1023, "n - 1 rounds");
    assert_eq!(r.steps, 2046, "each round in both directions");
    assert_eq!(r.max_concurrent, 512, "n / 2 pairs at once");
    assert!(r.disjoint, "no rank in two pairs of a step");
    assert_eq!(r.pair_tests, 1024 * 1023);
    assert_eq!(r.messages_out, 2 * 1024 * 1023 + 2 * 1024);
    assert_eq!(r.messages_in, 2 * 1024 * 1023 + 1024);
    // Rank 0 holds compact cells and per-rank connections, never the results (they go to disk).
    assert!(r.rank0_bytes < 256 << 20, "{} bytes", r.rank0_bytes);
}

#[test]
fn rendezvous_time_up_to_64_local_ranks() {
    for n in [4, 16, 64] {
        let t = scale::measure_rendezvous(n).unwrap();
        eprintln!(
            "rendezvous of {n} ranks on loopback: {:.1} ms",
            t.as_secs_f64() * 1e3
        );
    }
}
