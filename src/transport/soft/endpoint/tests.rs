//! The endpoint opened on `lo`: GID index, a second endpoint moving to the next free address, and
//! usage errors.

use super::*;
use crate::params::RoceVersion;
use crate::transport::soft::config::IoKind;

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
        second.describe().contains("is taken"),
        "{}",
        second.describe()
    );
    // An explicit address is never moved: the user gets the error that explains why.
    cfg.bind = Some("127.0.0.1".parse().unwrap());
    let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
    assert!(e.contains("is taken") && e.contains("netns.sh"), "{e}");
}

#[test]
fn v1_over_udp_is_a_usage_error() {
    let mut cfg = SoftConfig::new("lo", RoceVersion::V1);
    cfg.io = IoKind::Udp;
    let e = SoftEndpoint::open(cfg).err().unwrap().to_string();
    assert!(e.contains("--io packet") && e.contains("--roce v2"), "{e}");
}
