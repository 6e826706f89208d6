//! The endpoint opened on `lo`: GID index, a second endpoint moving to the next free address, and
//! usage errors.

use super::*;
use crate::params::IoKind;
use crate::params::RoceVersion;

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn gid_index_picks_the_address_and_names_the_table_when_out_of_range() {
    let lo = NetDev::by_name("lo").unwrap();
    // -x indexes the whole table, as -v prints it (issue 18).
    let table = lo.gids();
    let Some(x) = table
        .iter()
        .position(|e| e.ip == Some("127.0.0.1".parse().unwrap()) && e.kind == GidKind::V2)
    else {
        return; // lo without 127.0.0.1: nothing to pick
    };
    let mut cfg = SoftConfig::new("lo", RoceVersion::V2);
    cfg.gid_index = Some(x as u32);
    cfg.udp_port = free_port();
    let ep = SoftEndpoint::open(cfg.clone()).unwrap();
    assert_eq!(ep.gid(), Gid::from_ip("127.0.0.1".parse().unwrap()));
    assert_eq!(ep.local_info().gid_index, Some(x as u32));
    drop(ep);
    cfg.gid_index = Some(99);
    let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
    assert!(e.contains("-x 99") && e.contains("127.0.0.1"), "{e}");
}

#[test]
fn a_second_endpoint_on_lo_moves_to_the_next_free_address() {
    let port = free_port();
    let mut cfg = SoftConfig::new("lo", RoceVersion::V2);
    cfg.udp_port = port;
    let Ok(first) = SoftEndpoint::open(cfg.clone()) else {
        return; // 127.0.0.1 is not on lo here
    };
    let second = SoftEndpoint::open(cfg.clone()).unwrap();
    assert_eq!(first.local_info().addr, Some(format!("127.0.0.1:{port}")));
    let moved = second.local_info().addr.unwrap();
    assert_ne!(moved, format!("127.0.0.1:{port}"));
    assert!(
        second.describe().contains("is in use on this host"),
        "{}",
        second.describe()
    );
    // An explicit address is never moved: the user gets the error that explains why.
    cfg.bind = Some("127.0.0.1".parse().unwrap());
    let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
    assert!(e.contains("is taken") && e.contains("ip netns add"), "{e}");
}

#[test]
fn v1_over_udp_is_a_usage_error() {
    let mut cfg = SoftConfig::new("lo", RoceVersion::V1);
    cfg.io = IoKind::Udp;
    let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
    assert!(e.contains("--io packet") && e.contains("--roce v2"), "{e}");
}

/// `--recovery gbn-rxe` turns off this side's roceperf go-back-N timing (the probe and the
/// loss-reactive window) even though the peer is roceperf; the peer, which asked for gbn, keeps it.
#[test]
fn gbn_rxe_runs_this_sides_queue_pairs_as_rxe_and_leaves_the_peers_alone() {
    let port = free_port();
    let cfg = |bind: &str, recovery: Recovery| {
        let mut c = SoftConfig::new("lo", RoceVersion::V2);
        c.udp_port = port;
        c.bind = Some(bind.parse().unwrap());
        c.recovery = recovery;
        c
    };
    let (Ok(mut a), Ok(mut b)) = (
        SoftEndpoint::open(cfg("127.0.15.9", Recovery::GbnRxe)),
        SoftEndpoint::open(cfg("127.0.15.10", Recovery::Gbn)),
    ) else {
        panic!("two soft endpoints on 127.0.15.9 and .10 (lo holds 127.0.0.0/8)");
    };
    assert_eq!(a.agree_recovery(Recovery::Gbn.asked()), Recovery::GbnRxe);
    assert_eq!(b.agree_recovery(Recovery::GbnRxe.asked()), Recovery::Gbn);
    let (ia, ib) = (a.local_info(), b.local_info());
    a.connect(&ib).unwrap();
    b.connect(&ia).unwrap();
    let timing = |e: &SoftEndpoint| match e.slots[0].qp.as_ref() {
        Some(Engine::Rc(q)) => (q.config().gbn_fast, q.config().gbn_loss_window),
        _ => panic!("an RC queue pair"),
    };
    assert_eq!(timing(&a), (false, false), "gbn-rxe: rxe's timing");
    assert_eq!(timing(&b), (true, true), "gbn between roceperf endpoints");
}
