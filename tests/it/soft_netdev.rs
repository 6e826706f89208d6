//! Interface discovery inside a network namespace with a veth pair (scripts/netns.sh): MAC, MTU,
//! addresses, the derived GID table and active MTU, and the errors for a downed interface and a
//! missing address family. Needs root.

use crate::soft_support;

use std::net::IpAddr;
use std::process::Command;

use roceperf::params::RoceVersion;
use roceperf::transport::soft::netdev::{AddrFamily, GidKind, NetDev, NetdevError};
use roceperf::wire::{Encapsulation, Gid};
use soft_support::{NetnsPair, is_root};

#[test]
fn veth_in_a_namespace_is_described_completely() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces") {
        return;
    }
    let pair = NetnsPair::up(&["--mtu", "2200"]);
    let dev = pair.in_ns('a', || NetDev::by_name("veth0").unwrap());
    assert!(dev.up && !dev.loopback);
    assert_eq!(dev.link_mtu, 2200);
    let mac = dev.mac.expect("a veth has a MAC");
    assert_eq!(
        dev.ipv4,
        vec!["10.77.0.1".parse::<std::net::Ipv4Addr>().unwrap()]
    );
    assert!(dev.ipv6.contains(&"fd77::1".parse().unwrap()));
    assert_eq!(
        dev.address(AddrFamily::Ipv6).unwrap(),
        "fd77::1".parse::<IpAddr>().unwrap()
    );
    // 2200 - 64 (v2/IPv4 headers) holds 2048 but not 4096.
    assert_eq!(dev.active_mtu(Encapsulation::V2v4).unwrap().bytes(), 2048);
    let v1 = dev.gids_for(RoceVersion::V1);
    assert_eq!(
        v1[0].gid,
        Gid::link_local_eui64(mac),
        "the default GID comes first"
    );
    let v2 = dev.gids_for(RoceVersion::V2);
    assert!(v2.iter().all(|e| e.kind == GidKind::V2 && e.ip.is_some()));
    assert!(
        v2.iter()
            .any(|e| e.gid == Gid::from_ip("10.77.0.1".parse().unwrap()))
    );
    assert!(
        v2.iter()
            .any(|e| e.gid == "fd77::1".parse::<Gid>().unwrap())
    );
    // The kernel's own link-local address is the EUI-64 one (addr_gen_mode eui64 is the default).
    if dev
        .ipv6
        .iter()
        .any(|a| Gid::from(*a) == Gid::link_local_eui64(mac))
    {
        assert_eq!(v2[0].gid, Gid::link_local_eui64(mac));
    }
    let text = dev.describe();
    assert!(
        text.contains("veth0") && text.contains("link MTU 2200"),
        "{text}"
    );

    // Downed, and without IPv4: the errors say what to run.
    let ns = pair.ns('a');
    let ip = |args: &[&str]| {
        let ok = Command::new("ip")
            .arg("-n")
            .arg(&ns)
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip {args:?}");
    };
    ip(&[
        "addr",
        "flush",
        "dev",
        "veth0",
        "scope",
        "global",
        "to",
        "10.77.0.0/24",
    ]);
    ip(&["link", "set", "veth0", "down"]);
    let dev = pair.in_ns('a', || NetDev::by_name("veth0").unwrap());
    let down = dev.require_up().unwrap_err();
    assert!(matches!(down, NetdevError::Down { .. }));
    assert!(down.to_string().contains("ip link set veth0 up"));
    let none = dev.address(AddrFamily::Ipv4).unwrap_err().to_string();
    assert!(
        none.contains("no IPv4 address") && none.contains("veth0"),
        "{none}"
    );
    let missing = pair.in_ns('a', || NetDev::by_name("eth0").unwrap_err().to_string());
    assert!(
        missing.contains("lo") && missing.contains("veth0"),
        "lists what exists: {missing}"
    );
}
