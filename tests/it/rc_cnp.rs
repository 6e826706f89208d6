//! The RC engine as DCQCN's notification and reaction point: a CE mark becomes one CNP per
//! `np_min_time_between_cnps`, the bytes a ConnectX sends; a CNP received cuts the sender's rate.

use roceperf::params::{CcParams, CongestionControl};
use roceperf::transport::Access;
use roceperf::transport::soft::rc::{Instant, MemoryTable, Qp, QpConfig};
use roceperf::wire::CnpRepr;

fn qp(qpn: u32, peer: u32, cc: CongestionControl) -> Qp {
    let mut mem = MemoryTable::new(qpn);
    let keys = mem.add_registered(4096, Access::LOCAL_WRITE);
    let mut cfg = QpConfig::new(qpn, peer, 1, 1, keys.lkey);
    cfg.cc = cc;
    cfg.cc_params = CcParams {
        rp_max_rate: 10_000,
        ..CcParams::default()
    };
    Qp::new(cfg, mem).unwrap()
}

#[test]
fn a_ce_mark_sends_one_cnp_per_interval_and_the_cnp_cuts_the_peer() {
    let (mut a, mut b) = (
        qp(0x11, 0x12, CongestionControl::Dcqcn),
        qp(0x12, 0x11, CongestionControl::Dcqcn),
    );
    let mut buf = vec![0u8; a.max_packet_len()];
    let t = Instant::from_nanos(1_000_000);
    b.on_congestion_experienced(t);
    assert!(b.has_transmit_work(roceperf::transport::soft::rc::LoneAck::Send));
    let n = b.poll_transmit(t, &mut buf).expect("a CNP is queued");
    assert_eq!(
        CnpRepr::parse(&buf[..n]).unwrap(),
        CnpRepr { dest_qp: 0x11 }
    );
    assert_eq!(b.poll_transmit(t, &mut buf), None, "one CNP, nothing else");
    // Within np_min_time_between_cnps (4 µs) of it: none; after: one more.
    b.on_congestion_experienced(Instant::from_nanos(1_003_999));
    assert_eq!(b.poll_transmit(t, &mut buf), None);
    b.on_congestion_experienced(Instant::from_nanos(1_004_000));
    assert!(b.poll_transmit(t, &mut buf).is_some());
    assert_eq!(b.cc_counters().np_cnp_sent, 2);
    // The CNP reaches the requester: handled, and the rate is cut from rp_max_rate by α/2.
    a.handle_packet(t, &buf[..n]);
    let c = a.cc_counters();
    assert_eq!((c.rp_cnp_handled, c.rp_rate_cuts), (1, 1));
    let a0 = 1023.0 / 1024.0;
    assert_eq!(
        c.rp_current_rate_kbps,
        (10e6_f64 * (1.0 - a0 / 2.0)).round() as u64
    );
    assert_eq!(
        a.counters().drops.malformed,
        0,
        "a CNP is not dropped as unknown"
    );
}

#[test]
fn with_cc_none_no_cnp_leaves_and_a_cnp_received_changes_nothing() {
    let (mut a, mut b) = (
        qp(0x11, 0x12, CongestionControl::None),
        qp(0x12, 0x11, CongestionControl::None),
    );
    let mut buf = vec![0u8; a.max_packet_len()];
    let t = Instant::from_nanos(1_000);
    b.on_congestion_experienced(t);
    assert_eq!(b.poll_transmit(t, &mut buf), None);
    let n = CnpRepr { dest_qp: 0x11 }.emit(&mut buf);
    a.handle_packet(t, &buf[..n]);
    assert!(a.cc_counters().is_empty());
    assert_eq!(a.counters().drops.malformed, 0);
}
