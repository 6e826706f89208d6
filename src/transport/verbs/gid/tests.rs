//! The GID choice on recorded tables: a ConnectX-5 port and rxe, every policy and every error.

use super::*;
use crate::wire::Gid;

fn v4(index: u32, a: [u8; 4], kind: GidType, dev: &str) -> GidEntry {
    GidEntry {
        index,
        gid: Gid::from_ip(std::net::Ipv4Addr::from(a).into()),
        kind,
        netdev: Some(dev.to_string()),
    }
}

fn v6(index: u32, addr: &str, kind: GidType, dev: &str) -> GidEntry {
    GidEntry {
        index,
        gid: addr.parse().unwrap(),
        kind,
        netdev: Some(dev.to_string()),
    }
}

fn zero(index: u32) -> GidEntry {
    GidEntry {
        index,
        gid: Gid::ZERO,
        kind: GidType::RoceV1,
        netdev: None,
    }
}

/// A ConnectX-5 port as `show_gids` prints it: every address twice (v1 then v2), link-local first,
/// an IPv4 address, a global IPv6 address, and an unused slot at the end.
fn connectx() -> Vec<GidEntry> {
    vec![
        v6(0, "fe80::268a:7ff:fe55:4660", GidType::RoceV1, "ens1f0np0"),
        v6(1, "fe80::268a:7ff:fe55:4660", GidType::RoceV2, "ens1f0np0"),
        v4(2, [192, 168, 10, 11], GidType::RoceV1, "ens1f0np0"),
        v4(3, [192, 168, 10, 11], GidType::RoceV2, "ens1f0np0"),
        v6(4, "2001:db8:10::11", GidType::RoceV1, "ens1f0np0"),
        v6(5, "2001:db8:10::11", GidType::RoceV2, "ens1f0np0"),
        zero(6),
    ]
}

/// rxe as the lab shows it: v2 only, fe80:: link-local at 0 and the IPv4 address at 1.
fn rxe() -> Vec<GidEntry> {
    vec![
        v6(0, "fe80::c8d1:2ff:fe3a:9b01", GidType::RoceV2, "veth0"),
        v4(1, [10, 0, 0, 1], GidType::RoceV2, "veth0"),
        zero(2),
    ]
}

fn pick(table: &[GidEntry], policy: GidPolicy) -> u32 {
    select(table, &policy).unwrap().entry.index
}

#[test]
fn connectx_default_is_ipv4_roce_v2() {
    let c = select(&connectx(), &GidPolicy::default()).unwrap();
    assert_eq!(c.entry.index, 3);
    assert_eq!(c.entry.kind, GidType::RoceV2);
    assert_eq!(c.entry.address(), "::ffff:192.168.10.11");
    assert_eq!(
        c.why,
        "auto-selected, best of 6 entries: score 112 = IPv4-mapped +100, not link-local +10, RoCE v2 +2; -x N overrides"
    );
}

#[test]
fn connectx_roce_v1_picks_the_ipv4_v1_twin() {
    let p = GidPolicy {
        roce: Some(RoceVersion::V1),
        ..Default::default()
    };
    assert_eq!(pick(&connectx(), p), 2);
    assert!(
        select(&connectx(), &p)
            .unwrap()
            .why
            .contains("only RoCE v1 entries by --roce v1")
    );
}

#[test]
fn connectx_ipv6_prefers_global_v2_over_link_local() {
    let p = GidPolicy {
        ipv6: true,
        ..Default::default()
    };
    assert_eq!(pick(&connectx(), p), 5);
    let p1 = GidPolicy {
        ipv6: true,
        roce: Some(RoceVersion::V1),
        ..Default::default()
    };
    assert_eq!(pick(&connectx(), p1), 4);
}

#[test]
fn ipv6_only_port_never_picks_link_local_when_global_exists() {
    // The pre-2026 perftest algorithm could choose index 1 here; the scoring must not.
    let t: Vec<GidEntry> = connectx()
        .into_iter()
        .filter(|e| !e.is_ipv4_mapped())
        .collect();
    assert_eq!(pick(&t, GidPolicy::default()), 5);
}

#[test]
fn rxe_default_is_index_1_and_v1_is_refused_with_a_hint() {
    assert_eq!(pick(&rxe(), GidPolicy::default()), 1);
    let err = select(
        &rxe(),
        &GidPolicy {
            roce: Some(RoceVersion::V1),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, GidError::NoMatchingType { wanted: "v1", .. }));
    let msg = err.to_string();
    assert!(msg.contains("v2 only"), "{msg}");
    assert!(
        msg.contains("gid[1] ::ffff:10.0.0.1 RoCE v2 (veth0)"),
        "{msg}"
    );
}

#[test]
fn rxe_ipv6_falls_back_to_link_local_and_says_so() {
    let c = select(
        &rxe(),
        &GidPolicy {
            ipv6: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.entry.index, 0);
    assert!(
        c.why
            .contains("= IPv6 +100, link-local +0, RoCE v2 +2; IPv6 preferred by --ipv6"),
        "{}",
        c.why
    );
}

#[test]
fn link_local_ipv4_loses_to_routable_ipv4() {
    let t = vec![
        v4(0, [169, 254, 3, 4], GidType::RoceV2, "eth0"),
        v4(1, [10, 1, 2, 3], GidType::RoceV1, "eth0"),
    ];
    assert!(t[0].is_link_local());
    // 100 + 2 for the link-local v2 against 100 + 10 + 1 for the routable v1.
    assert_eq!(pick(&t, GidPolicy::default()), 1);
}

#[test]
fn ties_go_to_the_lowest_index() {
    let t = vec![
        zero(0),
        v4(1, [10, 0, 0, 1], GidType::RoceV2, "a"),
        v4(2, [10, 0, 0, 2], GidType::RoceV2, "b"),
    ];
    assert_eq!(pick(&t, GidPolicy::default()), 1);
}

#[test]
fn given_index_is_used_as_given_and_validated() {
    let p = |i| GidPolicy {
        index: Some(i),
        ..Default::default()
    };
    let c = select(&connectx(), &p(0)).unwrap();
    assert_eq!(c.entry.index, 0);
    assert_eq!(c.why, "given with -x 0");
    assert!(matches!(
        select(&connectx(), &p(6)).unwrap_err(),
        GidError::EmptyIndex { index: 6, .. }
    ));
    let err = select(&connectx(), &p(40)).unwrap_err();
    assert!(matches!(
        err,
        GidError::NoSuchIndex {
            index: 40,
            len: 7,
            ..
        }
    ));
    assert!(
        err.to_string()
            .contains("gid[3] ::ffff:192.168.10.11 RoCE v2")
    );
    let mismatch = select(
        &connectx(),
        &GidPolicy {
            index: Some(3),
            roce: Some(RoceVersion::V1),
            ipv6: false,
        },
    )
    .unwrap_err();
    assert!(matches!(
        mismatch,
        GidError::TypeMismatch {
            index: 3,
            found: GidType::RoceV2,
            wanted: "v1",
            ..
        }
    ));
}

#[test]
fn empty_table_is_its_own_error() {
    assert_eq!(
        select(&[zero(0), zero(1)], &GidPolicy::default()).unwrap_err(),
        GidError::EmptyTable
    );
}

#[test]
fn sysfs_type_strings_parse() {
    assert_eq!(GidType::from_sysfs("IB/RoCE v1\n"), Some(GidType::RoceV1));
    assert_eq!(GidType::from_sysfs("RoCE v2\n"), Some(GidType::RoceV2));
    assert_eq!(GidType::from_sysfs("bogus"), None);
}

#[test]
fn index_errors_read_as_before() {
    let t = rxe();
    let given = |index: u32, roce: Option<RoceVersion>| {
        select(
            &t,
            &GidPolicy {
                index: Some(index),
                roce,
                ipv6: false,
            },
        )
        .unwrap_err()
        .to_string()
    };
    let table = "  gid[0] fe80::c8d1:2ff:fe3a:9b01 RoCE v2 (veth0)\n  gid[1] ::ffff:10.0.0.1 RoCE v2 (veth0)";
    assert_eq!(
        given(7, None),
        format!("-x 7: no such GID index (the table has 3 entries); valid entries:\n{table}")
    );
    assert_eq!(
        given(2, None),
        format!("-x 2: GID index 2 is empty (all zero); valid entries:\n{table}")
    );
    assert_eq!(
        given(1, Some(RoceVersion::V1)),
        format!(
            "-x 1 is a RoCE v2 GID but --roce v1 was given; drop one of the two, or pick a v1 entry:\n{table}"
        )
    );
}
