//! The setup plan against made-up interfaces: no socket is opened.

use super::*;
use crate::params::IoKind;
use crate::transport::soft::netdev::AddrFamily;
use crate::wire::MacAddr;

const MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x07]);

fn veth() -> NetDev {
    NetDev {
        name: "veth0".into(),
        index: 7,
        mac: Some(MAC),
        link_mtu: 1500,
        up: true,
        running: true,
        loopback: false,
        ipv4: vec!["10.77.0.1".parse().unwrap()],
        ipv6: vec![
            "fe80::ff:fe00:7".parse().unwrap(),
            "fd77::1".parse().unwrap(),
        ],
    }
}

fn lo() -> NetDev {
    NetDev {
        name: "lo".into(),
        index: 1,
        mac: None,
        link_mtu: 65536,
        loopback: true,
        ipv4: vec!["127.0.0.1".parse().unwrap()],
        ipv6: vec!["::1".parse().unwrap()],
        ..veth()
    }
}

fn v2(dev: &str) -> SoftConfig {
    SoftConfig::new(dev, RoceVersion::V2)
}

fn err(cfg: &SoftConfig, dev: &NetDev) -> String {
    plan(cfg, dev, None, 0).unwrap_err().to_string()
}

#[test]
fn what_needs_no_interface_is_checked_first() {
    let mut cfg = SoftConfig::new("lo", RoceVersion::V1);
    cfg.io = IoKind::Udp;
    let e = check_config(&cfg).unwrap_err().to_string();
    assert!(e.contains("--io packet") && e.contains("--roce v2"), "{e}");
    let mut cfg = v2("lo");
    cfg.qps = 0;
    assert_eq!(
        check_config(&cfg).unwrap_err().to_string(),
        "-q 0: the soft transport supports 1..65535 queue pairs"
    );
    cfg.qps = 0xffff;
    assert!(check_config(&cfg).is_ok());
}

#[test]
fn rocev2_takes_the_first_address_of_the_family_and_the_active_mtu() {
    let p = plan(&v2("veth0"), &veth(), None, 0).unwrap();
    assert_eq!(p.encap, Encapsulation::V2v4);
    assert_eq!(p.local_ip, Some("10.77.0.1".parse().unwrap()));
    assert_eq!(p.gid.to_string(), "::ffff:10.77.0.1");
    assert_eq!(p.mtu.bytes(), 1024);
    assert!(p.gso && p.notes.is_empty());
    let BackendPlan::Udp(udp) = &p.backend else {
        panic!("{:?}", p.backend)
    };
    assert_eq!((udp.cfg.slot_len, udp.may_move), (65_536, false));
    let mut cfg = v2("veth0");
    cfg.family = AddrFamily::Ipv6;
    let p = plan(&cfg, &veth(), None, 0).unwrap();
    assert_eq!(p.encap, Encapsulation::V2v6);
    assert_eq!(
        p.local_ip,
        Some("fd77::1".parse().unwrap()),
        "global before link-local"
    );
}

#[test]
fn mtu_above_the_link_is_capped_with_a_note_and_a_non_roce_mtu_refused() {
    let mut cfg = v2("veth0");
    cfg.mtu = Some(4096);
    let p = plan(&cfg, &veth(), None, 0).unwrap();
    assert_eq!(p.mtu.bytes(), 1024);
    assert_eq!(
        p.notes.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        ["-m 4096 exceeds the active MTU 1024 of veth0 (link MTU 1500); using 1024"]
    );
    cfg.mtu = Some(512);
    assert_eq!(plan(&cfg, &veth(), None, 0).unwrap().mtu.bytes(), 512);
    cfg.mtu = Some(1000);
    assert!(err(&cfg, &veth()).contains("path MTU 1000"));
}

#[test]
fn gid_index_selects_the_address_and_names_the_table_when_out_of_range() {
    let mut cfg = v2("veth0");
    // -x indexes the whole table, as -v prints it: fe80 v1/v2 at 0/1, 10.77.0.1 at 2/3, fd77::1 at 4/5.
    let x = veth()
        .gids()
        .iter()
        .position(|e| e.ip == Some("fd77::1".parse().unwrap()) && e.kind == GidKind::V2)
        .unwrap();
    assert_eq!(x, 5);
    cfg.gid_index = Some(x as u32);
    let p = plan(&cfg, &veth(), None, 0).unwrap();
    assert_eq!(p.local_ip, Some("fd77::1".parse().unwrap()));
    cfg.bind = Some("10.77.0.1".parse().unwrap());
    assert_eq!(
        err(&cfg, &veth()),
        "-x 5 selects GID fd77::1 of address fd77::1, but the address 10.77.0.1 was also asked for; give one of them"
    );
    cfg.bind = None;
    cfg.gid_index = Some(99);
    let e = err(&cfg, &veth());
    assert!(
        e.starts_with("-x 99: interface veth0 has 6 GIDs (0: fe80::ff:fe00:7 (v1, fe80::ff:fe00:7); 1: fe80::ff:fe00:7 (v2, fe80::ff:fe00:7); 2: ::ffff:10.77.0.1 (v1, 10.77.0.1)"),
        "{e}"
    );
    assert!(e.ends_with("; pick a RoCE v2 one"), "{e}");
    let empty = NetDev {
        mac: None,
        ipv4: vec![],
        ipv6: vec![],
        ..veth()
    };
    assert!(err(&cfg, &empty).contains("has 0 GIDs (none)"));
}

/// Issue 18: on lo, -v prints GID[0] 127.0.0.1 v1, GID[1] its v2, GID[2] ::1 v1, GID[3] its v2; -x N
/// picks entry N of that list, and an entry of the other version is refused naming the usable ones.
#[test]
fn gid_index_is_the_index_v_prints() {
    let printed: Vec<String> = lo().gids().iter().map(ToString::to_string).collect();
    assert_eq!(
        printed,
        [
            "::ffff:127.0.0.1 (v1, 127.0.0.1)",
            "::ffff:127.0.0.1 (v2, 127.0.0.1)",
            "::1 (v1, ::1)",
            "::1 (v2, ::1)"
        ]
    );
    let mut cfg = v2("lo");
    for (x, ip) in [(1, "127.0.0.1"), (3, "::1")] {
        cfg.gid_index = Some(x);
        let p = plan(&cfg, &lo(), None, 0).unwrap();
        assert_eq!(p.local_ip, Some(ip.parse().unwrap()), "-x {x}");
    }
    cfg.gid_index = Some(2);
    assert_eq!(
        err(&cfg, &lo()),
        "-x 2 is GID ::1 (v1, ::1), which RoCE v2 cannot use; pick a RoCE v2 entry: 1: ::ffff:127.0.0.1 (v2, 127.0.0.1); 3: ::1 (v2, ::1)"
    );
    let mut v1 = SoftConfig::new("lo", RoceVersion::V1);
    v1.gid_index = Some(2);
    assert_eq!(
        plan(&v1, &lo(), None, 0).unwrap().gid,
        Gid::from_ip("::1".parse().unwrap())
    );
    v1.gid_index = Some(1);
    assert!(err(&v1, &lo()).contains("which RoCE v1 cannot use; pick a RoCE v1 entry: 0: "));
}

#[test]
fn rocev1_uses_the_eui64_gid_and_needs_a_mac_off_loopback() {
    let cfg = SoftConfig::new("veth0", RoceVersion::V1);
    let p = plan(&cfg, &veth(), None, 0).unwrap();
    assert_eq!(p.encap, Encapsulation::V1);
    assert_eq!((p.local_ip, p.gid), (None, Gid::link_local_eui64(MAC)));
    assert!(!p.gso);
    assert!(matches!(p.backend, BackendPlan::Packet(ref c) if c.rx_ring_frames == 1024));
    let no_mac = NetDev {
        mac: None,
        ..veth()
    };
    assert!(err(&cfg, &no_mac).contains("has no Ethernet address"));
    // lo has no MAC: its v1 GID is its first address's.
    let p = plan(&SoftConfig::new("lo", RoceVersion::V1), &lo(), None, 0).unwrap();
    assert_eq!(p.gid.to_string(), "::ffff:127.0.0.1");
}

#[test]
fn an_address_elsewhere_is_refused_and_lo_may_move_only_its_default() {
    let mut cfg = v2("veth0");
    cfg.bind = Some("192.0.2.9".parse().unwrap());
    let e = err(&cfg, &veth());
    assert!(
        e.contains("192.0.2.9") && e.contains("10.77.0.1, fe80::ff:fe00:7, fd77::1"),
        "{e}"
    );
    let p = plan(&v2("lo"), &lo(), None, 0).unwrap();
    assert!(matches!(p.backend, BackendPlan::Udp(ref u) if u.may_move));
    let mut cfg = v2("lo");
    cfg.bind = Some("127.0.0.1".parse().unwrap());
    let p = plan(&cfg, &lo(), None, 0).unwrap();
    assert!(matches!(p.backend, BackendPlan::Udp(ref u) if !u.may_move));
    let mut p = plan(&v2("lo"), &lo(), None, 0).unwrap();
    p.moved_to("127.0.0.2".parse().unwrap(), 4791);
    assert_eq!(p.gid.to_string(), "::ffff:127.0.0.2");
    assert_eq!(
        p.notes[0].to_string(),
        "127.0.0.1:4791 is in use on this host (by a loopback pair's other side, as a rule); this side takes 127.0.0.2:4791"
    );
}

#[test]
fn impairment_keeps_gso_on() {
    let loss = ImpairConfig {
        loss: 0.01,
        ..ImpairConfig::default()
    };
    let p = plan(&v2("veth0"), &veth(), Some(loss), 0).unwrap();
    // The impairer works per RoCE packet inside super-datagrams: the fast path stays on.
    assert!(p.gso && p.impair == Some(loss));
    assert!(matches!(p.backend, BackendPlan::Udp(ref u) if u.cfg.slot_len > u.tx_slot));
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    // An impairment that does nothing is none at all.
    let p = plan(&v2("veth0"), &veth(), Some(ImpairConfig::default()), 0).unwrap();
    assert!(p.gso && p.impair.is_none());
}

#[test]
fn queue_pairs_are_numbered_consecutively_with_24_bit_psns() {
    let mut cfg = v2("veth0");
    cfg.qps = 3;
    let p = plan(&cfg, &veth(), None, 0x1234_5678_9abc_def0).unwrap();
    let qpns: Vec<u32> = p.qps.iter().map(|q| q.qpn).collect();
    assert_eq!(qpns[0] & 0xff, 0x11);
    assert_eq!(qpns, [qpns[0], qpns[0] + 1, qpns[0] + 2]);
    assert!(
        p.qps
            .iter()
            .all(|q| q.qpn <= 0xff_ffff && q.psn <= 0xff_ffff)
    );
    assert_ne!(p.qps[0].psn, p.qps[1].psn);
    // Deterministic in the seed.
    assert_eq!(
        plan(&cfg, &veth(), None, 0x1234_5678_9abc_def0)
            .unwrap()
            .qps,
        p.qps
    );
}

#[test]
fn the_peer_note_names_the_flag_as_typed() {
    assert_eq!(
        SoftNote::GsoOffForPeer.to_string(),
        "UDP GSO off for sending: the peer receives with AF_PACKET (--io packet), which would see super-datagrams whole"
    );
}
