//! Unit tests of interface discovery: `lo` as the kernel reports it, GID tables and active MTUs of
//! a made-up Ethernet interface, and the errors' hints.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::params::RoceVersion;
use crate::wire::Gid;

#[test]
fn loopback_is_found_with_its_addresses() {
    let lo = NetDev::by_name("lo").expect("lo exists in every namespace");
    assert!(lo.loopback);
    assert!(lo.index >= 1);
    assert_eq!(lo.mac, None, "lo's all-zero MAC is reported as none");
    assert!(lo.link_mtu >= 1500);
    if lo.up {
        assert!(lo.ipv4.contains(&Ipv4Addr::LOCALHOST));
        assert_eq!(
            lo.address(AddrFamily::Ipv4).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert!(
            lo.has_address("127.0.0.2".parse().unwrap()),
            "all of 127/8 is usable on lo"
        );
    }
}

#[test]
fn unknown_interface_lists_the_existing_ones() {
    let err = NetDev::by_name("nosuchif0").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("nosuchif0"), "{msg}");
    assert!(msg.contains("lo"), "the list names lo: {msg}");
    assert!(msg.contains("-d"), "{msg}");
}

#[test]
fn loopback_gids_are_ipv4_mapped_and_ipv6() {
    let lo = NetDev::by_name("lo").unwrap();
    let v2 = lo.gids_for(RoceVersion::V2);
    if lo.ipv4.contains(&Ipv4Addr::LOCALHOST) {
        let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
        assert!(v2.iter().any(|e| e.gid == Gid(mapped)), "{v2:?}");
    }
    if lo.ipv6.contains(&Ipv6Addr::LOCALHOST) {
        assert!(v2.iter().any(|e| e.gid == Gid::from(Ipv6Addr::LOCALHOST)));
    }
    // No MAC on lo, so no EUI-64 default GID.
    assert!(lo.gids().iter().all(|e| e.gid.0[0] != 0xfe));
}

#[test]
fn active_mtu_follows_rxe_for_common_links() {
    // rxe: link MTU - 80 rounded down to an IB MTU (roce-wire.md §4).
    for (link, want) in [
        (1500, 1024),
        (9000, 4096),
        (65536, 4096),
        (2200, 2048),
        (1200, 1024),
        (700, 512),
    ] {
        for encap in [Encapsulation::V1, Encapsulation::V2v4, Encapsulation::V2v6] {
            assert_eq!(
                RoceMtu::fitting(link, encap.mtu_overhead()).map(RoceMtu::bytes),
                Some(want)
            );
        }
    }
    // Exactly at the edge: 1024 + 64 fits v2/IPv4, not v2/IPv6 (84 bytes of headers).
    assert_eq!(
        RoceMtu::fitting(1088, Encapsulation::V2v4.mtu_overhead())
            .unwrap()
            .bytes(),
        1024
    );
    assert_eq!(
        RoceMtu::fitting(1088, Encapsulation::V2v6.mtu_overhead())
            .unwrap()
            .bytes(),
        512
    );
    assert_eq!(
        RoceMtu::fitting(300, Encapsulation::V2v6.mtu_overhead()),
        None
    );
    // 576 (the IPv4 minimum): 512 + 64 fits exactly, where rxe's flat 80 would say 256.
    assert_eq!(
        RoceMtu::fitting(576, Encapsulation::V2v4.mtu_overhead())
            .unwrap()
            .bytes(),
        512
    );
    assert_eq!(RoceMtu::from_bytes(4096).unwrap().ib_enum(), 5);
    assert_eq!(RoceMtu::from_bytes(256).unwrap().ib_enum(), 1);
    assert_eq!(RoceMtu::from_bytes(1000), None);
}

#[test]
fn gid_table_of_an_ethernet_interface() {
    let mac = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x07]);
    let ll = Ipv6Addr::from(Gid::link_local_eui64(mac));
    let dev = NetDev {
        name: "veth-test".into(),
        index: 7,
        mac: Some(mac),
        link_mtu: 1500,
        up: true,
        running: true,
        loopback: false,
        ipv4: vec!["10.77.0.1".parse().unwrap()],
        ipv6: vec![ll, "fd77::1".parse().unwrap()],
    };
    let v1 = dev.gids_for(RoceVersion::V1);
    assert_eq!(v1[0].gid, Gid::from(ll), "default GID first");
    assert_eq!(v1[0].ip, Some(IpAddr::V6(ll)));
    assert_eq!(v1.len(), 3, "{v1:?}");
    let v2 = dev.gids_for(RoceVersion::V2);
    assert_eq!(v2.len(), 3);
    assert!(
        v2.iter()
            .any(|e| e.gid == Gid::from_ip("10.77.0.1".parse().unwrap()))
    );
    assert_eq!(
        dev.address(AddrFamily::Ipv6).unwrap(),
        "fd77::1".parse::<IpAddr>().unwrap()
    );
    assert!(dev.describe().contains("active MTU RoCE v2/IPv4: 1024"));
    let none = NetDev {
        ipv4: vec![],
        ..dev.clone()
    };
    let msg = none.address(AddrFamily::Ipv4).unwrap_err().to_string();
    assert!(
        msg.contains("no IPv4 address") && msg.contains("ip addr add"),
        "{msg}"
    );
    let down = NetDev { up: false, ..dev };
    assert!(
        down.require_up()
            .unwrap_err()
            .to_string()
            .contains("ip link set veth-test up")
    );
}

#[test]
fn messages_name_the_flags_as_typed() {
    let missing = NetdevError::NotFound {
        name: "eth9".into(),
        available: vec!["lo".into(), "veth0".into()],
    };
    assert_eq!(
        missing.to_string(),
        "no network interface named 'eth9' in this network namespace; interfaces here: lo, veth0; pass one of them with -d"
    );
    let no_v6 = NetdevError::NoAddress {
        name: "veth0".into(),
        family: AddrFamily::Ipv6,
        example: "fd77::1/64",
    };
    assert_eq!(
        no_v6.to_string(),
        "interface 'veth0' has no IPv6 address; add one (e.g. `ip addr add fd77::1/64 dev veth0`) or pick another interface with -d"
    );
    let no_mac = NetdevError::NoMac {
        name: "tun0".into(),
    };
    assert_eq!(
        no_mac.to_string(),
        "interface 'tun0' has no Ethernet address; RoCE v1 and --io packet need an Ethernet interface (veth, eth0)"
    );
}
