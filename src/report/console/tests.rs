//! The console report against perftest's own output, line by line.

use super::*;
use crate::params::{Metric, RoceVersion, TestKind};
use crate::results::testdata::*;
use crate::stats::{Percentile, new_latency_histogram};

#[test]
fn result_line_is_87_dashes() {
    assert_eq!(RESULT_LINE.len(), 88);
    assert!(RESULT_LINE[..87].bytes().all(|b| b == b'-'));
    assert_eq!(table_footer(), RESULT_LINE);
}

#[test]
fn bw_row_matches_ib_write_bw() {
    let row = table_row(&bw_info(), &bw_result());
    assert_eq!(
        row,
        " 65536      5000             11030.12            11028.45\t\t     0.176455\n"
    );
}

#[test]
fn bw_row_in_gbits_and_the_slow_link_variant() {
    let mut info = bw_info();
    info.report_gbits = true;
    let row = table_row(&info, &bw_result());
    // 11028.45 MiB/s = 92.51 Gb/s, 11030.12 MiB/s = 92.53 Gb/s.
    assert_eq!(
        row,
        " 65536      5000             92.53              92.51  \t\t     0.176455\n"
    );
    assert_eq!(table_header(&info), format!("{BW_HEADER_GBIT}\n"));
    assert!(table_header(&info).contains("BW average[Gb/sec]"));
    // 64 bytes x 10 messages in 1 s: 5.12e-6 Gb/s, below 0.1 -> six decimals; no peak -> n/a, never a
    // number a parser would read as a zero peak.
    let slow = SizeResult {
        size: 64,
        iterations: 10,
        measured: Measured::Bandwidth(BandwidthStats::compute(64, 10, 1_000_000_000, None)),
        cpu_util: None,
        lost: None,
    };
    assert_eq!(
        table_row(&info, &slow),
        " 64         10           n/a                0.000005            0.000010\n"
    );
    info.report_gbits = false;
    assert_eq!(
        table_row(&info, &slow),
        " 64         10               n/a                0.00   \t\t     0.000010\n"
    );
}

#[test]
fn lat_row_matches_ib_send_lat() {
    // The reference row: 2 bytes, 1000 iterations, 0.95 3.12 1.00 1.01 0.03 1.10 3.12.
    let stats = LatencyStats {
        samples: 999,
        min_us: 0.95,
        max_us: 3.12,
        median_us: 1.0,
        mean_us: 1.01,
        stdev_us: 0.03,
        percentiles: vec![
            Percentile {
                pct: 99.0,
                us: Some(1.10),
            },
            Percentile {
                pct: 99.9,
                us: Some(3.12),
            },
        ],
    };
    let r = SizeResult {
        size: 2,
        iterations: 1000,
        measured: Measured::Latency {
            stats,
            histogram: new_latency_histogram(),
        },
        cpu_util: None,
        lost: None,
    };
    assert_eq!(
        table_row(&lat_info(), &r),
        " 2       1000          0.95           3.12         1.00     \t       1.01        \t0.03   \t\t1.10    \t\t3.12   \n"
    );
    // Wide values overflow the columns exactly as printf does; 300.125 rounds half to even.
    let wide = SizeResult {
        size: 1048576,
        iterations: 100000,
        measured: Measured::Latency {
            stats: LatencyStats {
                samples: 99999,
                min_us: 123.456,
                max_us: 12345.678,
                median_us: 150.0,
                mean_us: 160.25,
                stdev_us: 1234.5,
                percentiles: vec![
                    Percentile {
                        pct: 99.0,
                        us: Some(300.125),
                    },
                    Percentile {
                        pct: 99.9,
                        us: Some(9999.999),
                    },
                ],
            },
            histogram: new_latency_histogram(),
        },
        cpu_util: None,
        lost: None,
    };
    assert_eq!(
        table_row(&lat_info(), &wide),
        " 1048576 100000          123.46         12345.68      150.00   \t       160.25      \t1234.50\t\t300.12  \t\t10000.00\n"
    );
    assert_eq!(table_header(&lat_info()), format!("{LAT_HEADER}\n"));
    assert!(LAT_HEADER.ends_with("99.9% percentile[usec] "));
}

#[test]
fn lat_row_falls_back_to_the_histogram_for_missing_percentiles() {
    let mut r = lat_result();
    let Measured::Latency { stats, histogram } = &mut r.measured else {
        unreachable!()
    };
    *stats = LatencyStats::from_histogram(histogram, &[]);
    let p99 = crate::stats::value_at_percentile(histogram, 99.0) as f64 / 1000.0;
    let row = table_row(&lat_info(), &r);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.len(), 9, "{row:?}");
    assert_eq!(cols[7], format!("{p99:.2}"));
}

#[test]
fn percentiles_without_10_samples_beyond_them_are_withheld_in_row_and_extras() {
    // 500 samples: even p99 has only 5 beyond it. The row keeps its nine columns, "n/a" in both.
    let r = crate::results::testdata::lat(2, 2000, 500);
    let row = table_row(&lat_info(), &r);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.len(), 9, "{row:?}");
    assert_eq!((cols[7], cols[8]), ("n/a", "n/a"), "{row:?}");
    let e = extras(&lat_info(), &r);
    assert!(e.contains("  p90 "), "{e}");
    assert!(!e.contains("p90 n/a"), "p90 has 50 samples beyond it: {e}");
    for (label, needs) in [("p99", "1,000"), ("p99.9", "10,000"), ("p99.99", "100,000")] {
        let want = format!("  {label} n/a (needs {needs} samples)");
        assert!(e.contains(&want), "{want:?} missing from {e}");
    }
    // 1,000 samples: p99 holds (exactly 10 beyond it), p99.9 does not.
    let row = table_row(&lat_info(), &lat_result());
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols[7].parse::<f64>().is_ok(), "{row:?}");
    assert_eq!(cols[8], "n/a", "{row:?}");
    let e = extras(&lat_info(), &lat_result());
    assert!(e.contains("  p99.9 n/a (needs 10,000 samples)"), "{e}");
    assert!(!e.contains("p99 n/a"), "{e}");
}

#[test]
fn rdma_cm_shows_in_perftests_two_lines() {
    let mut info = bw_info();
    info.rdma_cm = true;
    let h = header_block(&info);
    let lines: Vec<&str> = h.lines().collect();
    assert_eq!(
        (lines[13], lines[14]),
        (" rdma_cm QPs\t : ON", " Data ex. method : Ethernet")
    );
    info.exchange_rdma_cm = true;
    let h = header_block(&info);
    assert!(h.contains(" Data ex. method : rdma_cm\n"), "{h}");
}

#[test]
fn header_block_keeps_perftest_lines_then_ours() {
    let h = header_block(&bw_info());
    let lines: Vec<&str> = h.lines().collect();
    assert_eq!(lines[0], &RESULT_LINE[..87]);
    assert_eq!(lines[1], "                    RDMA_Write BW Test");
    assert_eq!(lines[2], " Dual-port       : OFF\t\tDevice         : lo");
    assert_eq!(
        lines[3],
        " Number of qps   : 1\t\tTransport type : IB (soft)"
    );
    assert_eq!(lines[4], " Connection type : RC\t\tUsing SRQ      : OFF");
    assert_eq!(lines[7], " TX depth        : 128");
    assert_eq!(lines[8], " CQ Moderation   : 100");
    assert_eq!(lines[9], " Mtu             : 4096[B]");
    assert_eq!(lines[10], " Link type       : Ethernet");
    assert_eq!(lines[11], " GID index       : 3");
    assert_eq!(lines[12], " Max inline data : 0[B]");
    assert_eq!(lines[13], " rdma_cm QPs\t : OFF");
    assert_eq!(lines[14], " Data ex. method : Ethernet");
    assert_eq!(lines[15], " Tool            : roceperf 0.1.0");
    assert_eq!(lines[16], " RoCE version    : v2");
    assert_eq!(lines[17], " Peer            : 127.0.0.1");
    assert_eq!(lines[18], " Pinned core     : 1");
    assert_eq!(lines[19], " Completions     : busy polling");
    assert_eq!(lines[20], " Iterations      : 5000");
    let mut events = bw_info();
    events.events = true;
    assert!(
        header_block(&events)
            .contains("\n Completions     : events (-e: sleeps in poll(2) when idle)\n")
    );
    // One transport line: perftest's, with ours in brackets.
    assert_eq!(h.matches("Transport").count(), 1, "{h}");
    assert!(lines.contains(
        &" Why             : transport soft: -d lo is a network interface, not an RDMA device"
    ));
    assert_eq!(*lines.last().unwrap(), &RESULT_LINE[..87]);
    assert!(h.ends_with('\n'));
    // Every line between the dashes is in " Key : value" form.
    for l in &lines[2..lines.len() - 1] {
        assert!(
            l.starts_with(' ') && l.contains(" : ") || l.contains("\t : "),
            "{l:?}"
        );
    }
}

#[test]
fn header_block_variants() {
    // A SEND latency server: RX depth, no TX depth, no CQ moderation, percentiles listed.
    let h = header_block(&lat_info());
    assert!(h.contains("                    Send Latency Test\n"));
    assert!(h.contains(" RX depth        : 512\n"));
    assert!(!h.contains("TX depth") && !h.contains("CQ Moderation") && !h.contains("GID index"));
    assert!(h.contains("Transport type : TCP\n") && !h.contains("RoCE version"));
    assert!(h.contains(" Percentiles     : p90 p99 p99.9 p99.99\n"));
    // READ prints outstanding reads instead of inline data; bidirectional shows in the title.
    let mut info = bw_info();
    info.test = TestKind::new(Verb::Read, Metric::Bandwidth);
    info.out_reads = Some(16);
    info.bidirectional = true;
    info.duration_s = Some(10);
    info.margin_s = Some(2);
    info.roce = Some(RoceVersion::V1);
    let h = header_block(&info);
    assert!(h.contains("RDMA_Read Bidirectional BW Test\n"));
    assert!(h.contains(" Outstand reads  : 16\n") && !h.contains("Max inline"));
    assert!(h.contains(" Duration        : 10[s], margin 2[s]\n"));
    assert!(h.contains(" RoCE version    : v1\n"));
}

#[test]
fn address_lines_match_perftest() {
    let a = address_block(&bw_info());
    assert_eq!(
        a,
        " local address: LID 0000 QPN 0x0108 PSN 0x63ad7d RKey 0x17eedf VAddr 0x007f760c947000\n \
         GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:05\n \
         remote address: LID 0000 QPN 0x0076 PSN 0xf3810c RKey 0x201600 VAddr 0x007fbb4c981000\n \
         GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:04\n"
            .to_owned()
            + RESULT_LINE
    );
    // SEND has no RKey/VAddr; READ adds OUT; zero prints as all zeros (C's %#x).
    let mut info = lat_info();
    info.local = vec![AddressLine {
        lid: 0,
        qpn: 0x11,
        psn: 0,
        out_reads: Some(16),
        rkey: Some(1),
        vaddr: Some(0),
        gid: None,
    }];
    assert_eq!(
        address_block(&info),
        format!(" local address: LID 0000 QPN 0x0011 PSN 000000\n{RESULT_LINE}")
    );
    info.test = TestKind::new(Verb::Read, Metric::Latency);
    assert_eq!(
        address_block(&info),
        format!(
            " local address: LID 0000 QPN 0x0011 PSN 000000 OUT 0x10 RKey 0x000001 VAddr 0000000000000000\n{RESULT_LINE}"
        )
    );
    info.test = TestKind::new(Verb::Send, Metric::Latency);
    info.local = vec![];
    info.remote = vec![AddressLine {
        lid: 0x1234,
        qpn: 0xffffff,
        psn: 1,
        out_reads: None,
        rkey: None,
        vaddr: None,
        gid: None,
    }];
    assert_eq!(
        address_block(&info),
        format!(" remote address: LID 0x1234 QPN 0xffffff PSN 0x0001\n{RESULT_LINE}")
    );
    assert_eq!(address_block(&lat_info()), "");
}

#[test]
fn extras_give_both_units_and_the_tail() {
    let e = extras(&bw_info(), &bw_result());
    assert!(e.lines().all(|l| l.len() <= 100), "{e}");
    let e = e.split_whitespace().collect::<Vec<_>>().join(" ") + "\n";
    assert!(e.starts_with("Size 65536[B] : BW average 92.513 Gb/s = 11028.45 MiB/s, peak 92.527 Gb/s = 11030.12 MiB/s, 0.176455 Mpps, 5000 msgs in 28.336 ms"), "{e}");
    assert!(e.ends_with(" ms\n") && e.lines().count() == 1);
    let e = extras(&lat_info(), &lat_result());
    for word in [
        " min ",
        " median ",
        " p90 ",
        " p99 ",
        " p99.9 ",
        " p99.99 ",
        " max ",
        " avg ",
        " stdev ",
        "CPU 12.50%",
    ] {
        assert!(e.contains(word), "{word:?} missing from {e}");
    }
    // Never looks like a result row.
    assert!(!e.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    // Only the requested percentiles.
    let mut info = lat_info();
    info.percentiles = vec![99.0];
    let e = extras(&info, &lat_result());
    assert!(
        e.contains(" p99 ") && !e.contains(" p90 ") && !e.contains(" p99.9 "),
        "{e}"
    );
}

#[test]
fn single_values_use_perftest_format() {
    let bw = bw_result();
    // The test data's elapsed time is rounded to whole ns, hence ...450084 rather than ...450000.
    for (select, gbits, want) in [
        (OutputSelect::Bandwidth, false, "11028.450084\n"),
        (OutputSelect::MessageRate, false, "0.176455\n"),
        (OutputSelect::Bandwidth, true, "92.513345\n"),
        (OutputSelect::Latency, false, "5.667161\n"),
    ] {
        let got = single_value_in(select, &bw, gbits);
        assert_eq!(got, want, "{select:?}, report_gbits {gbits}");
    }
    let lat = lat_result();
    let Measured::Latency { stats, .. } = &lat.measured else {
        unreachable!()
    };
    assert_eq!(
        single_value_in(OutputSelect::Latency, &lat, false),
        format!("{:.6}\n", stats.mean_us)
    );
}

#[test]
fn the_per_qp_line_names_each_share_and_their_fairness() {
    let mut r = bw_result();
    assert_eq!(qp_shares(&r), None, "no shares, no line");
    let shares = |r: &mut SizeResult, size, counts: &[u64], ns| {
        if let Measured::Bandwidth(b) = &mut r.measured {
            b.qps = crate::stats::flows::QpShare::from_counts(size, counts, ns);
        }
    };
    shares(&mut r, 1000, &[3000, 1000], 1_000_000);
    let line = qp_shares(&r).unwrap();
    assert_eq!(
        line,
        " per QP [Gb/s]: 0: 24.000 1: 8.000; min 8.000 max 24.000, Jain's index 0.8000\n"
    );
    shares(&mut r, 1, &[1; 20], 8);
    let line = qp_shares(&r).unwrap();
    assert!(line.lines().all(|l| l.len() <= 100), "{line}");
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ") + "\n";
    assert!(
        line.contains(" 15: 1.000 ... 4 more (all in --json)"),
        "{line}"
    );
    assert!(line.ends_with("Jain's index 1.0000\n"), "{line}");
}
