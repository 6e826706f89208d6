//! `--tclass`, `-S`, `--flow_label` and ECN as the wire shows them: tcpdump captures a soft pair's
//! packets and each one's TOS / traffic class (ECT(0) on RoCE v2 data), 802.1Q priority tag and flow
//! label is read from the bytes here; a receiver sent CE counts it; the TCP baseline's segments carry
//! `--tclass`. Needs root, tcpdump and tshark; says so and returns when one is missing.

use crate::soft_capture::{Capture, can_run};
use crate::soft_support::NetnsPair;
use crate::soft_support::endpoints::{
    connect, exchange, exchange_across, udp_cfg, veth_packet_cfg,
};
use crate::vectors::read_pcap;

use roceperf::params::{Marks, RoceVersion};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};

/// What a captured frame carries: its 802.1Q tag (PCP, VID), EtherType, and the network header.
struct Seen<'a> {
    tag: Option<(u8, u16)>,
    ethertype: u16,
    net: &'a [u8],
}

fn seen(f: &[u8]) -> Seen<'_> {
    let be16 = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    match be16(12) {
        0x8100 => Seen {
            tag: Some(((f[14] >> 5), be16(14) & 0xfff)),
            ethertype: be16(16),
            net: &f[18..],
        },
        t => Seen {
            tag: None,
            ethertype: t,
            net: &f[14..],
        },
    }
}

/// The TOS (IPv4) or traffic class (IPv6, GRH) byte and the flow label (0 for IPv4).
fn class_and_label(s: &Seen<'_>) -> (u8, u32) {
    let n = s.net;
    match s.ethertype {
        0x0800 => (n[1], 0),
        _ => (
            (n[0] << 4) | (n[1] >> 4),
            u32::from_be_bytes([0, n[1] & 0x0f, n[2], n[3]]),
        ),
    }
}

fn marks(tclass: u8, sl: Option<u8>, labels: &[u32]) -> Marks {
    Marks {
        tclass: Some(tclass),
        sl,
        flow_labels: labels.to_vec(),
    }
}

/// The UDP backend on lo: `--tclass 104` is TOS 0x6a (DSCP 26 with ECT(0)) on every packet of both
/// sides, IPv4 and IPv6 (`-S 3` is the sockets' SO_PRIORITY, which lo's frames do not show); and a side sending `--tclass 3` (CE) makes every packet its peer receives
/// count as CE-marked, while the other direction (ECT(0)) counts none.
#[test]
fn udp_packets_carry_the_tclass_with_ect0_and_a_ce_mark_is_counted() {
    if !can_run() {
        return;
    }
    for (a_ip, b_ip, filter) in [
        ("127.0.9.5", "127.0.9.6", "udp and host 127.0.9.5"),
        ("::1", "::1", "ip6 and udp and host ::1"),
    ] {
        let (pa, pb) = (
            crate::soft_support::endpoints::free_port(a_ip),
            crate::soft_support::endpoints::free_port(b_ip),
        );
        let cap = Capture::start(
            None,
            "lo",
            &format!("{filter} and (port {pa} or port {pb})"),
        );
        let cfg = |ip, port| SoftConfig {
            gso: false,
            marks: marks(104, Some(3), &[]),
            ..udp_cfg(ip, port)
        };
        let mut a = SoftEndpoint::open(cfg(a_ip, pa)).unwrap();
        let mut b = SoftEndpoint::open(cfg(b_ip, pb)).unwrap();
        connect(&mut a, &mut b);
        exchange(&mut a, &mut b);
        let sent = a.counters().tx_packets + b.counters().tx_packets;
        let (path, _dir) = cap.finish();
        let frames = read_pcap(&path);
        assert_eq!(frames.len() as u64, sent, "{a_ip}: every packet captured");
        for (i, f) in frames.iter().enumerate() {
            let s = seen(f);
            assert_eq!(s.tag, None, "the kernel's frames carry no tag on lo");
            // The flow label of a UDP socket's IPv6 datagrams is the kernel's own
            // (net.ipv6.auto_flowlabels): only the class is ours.
            assert_eq!(class_and_label(&s).0, 0x6a, "{a_ip} frame {i}");
        }
        assert_eq!(a.counters().np_ecn_marked_roce_packets, 0);
        assert_eq!(b.counters().np_ecn_marked_roce_packets, 0);
    }
    // CE on every packet from a: b counts each one it received; a counts none.
    let (pa, pb) = (
        crate::soft_support::endpoints::free_port("127.0.9.7"),
        crate::soft_support::endpoints::free_port("127.0.9.8"),
    );
    let mut a = SoftEndpoint::open(SoftConfig {
        marks: marks(3, None, &[]),
        ..udp_cfg("127.0.9.7", pa)
    })
    .unwrap();
    let mut b = SoftEndpoint::open(udp_cfg("127.0.9.8", pb)).unwrap();
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let (ca, cb) = (a.counters(), b.counters());
    assert!(cb.rx_packets > 50, "{cb:?}");
    assert_eq!(cb.np_ecn_marked_roce_packets, cb.rx_packets);
    assert_eq!(ca.np_ecn_marked_roce_packets, 0);
    assert!(format!("{cb}").contains("np_ecn_marked_roce_packets"));
}

/// AF_PACKET across a veth pair that cuts super-frames as a NIC without offload would: RoCE v2/IPv4,
/// v2/IPv6 and v1 frames written by roceperf carry `-S 5` as an 802.1Q priority tag (PCP 5, VLAN 0),
/// `--tclass 104` (v2: 0x6a with ECT(0); v1: 0x68 as given) and `--flow_label` per queue pair (IPv6
/// and the GRH; on v2 the UDP source port follows it as rxe's does). The receivers take the tagged
/// frames (the kernel moves the tag into the packet's metadata) and the super-frames cut from them.
#[test]
fn packet_frames_carry_the_priority_tag_tclass_and_flow_label() {
    if !can_run() {
        return;
    }
    // netns.sh gives the veth fd77::1 and fd77::2 too.
    let pair = NetnsPair::up(&["--mtu", "9000", "--wire-segments"]);
    let cap = Capture::start(
        Some(&pair.ns('a')),
        "veth0",
        "vlan and (ether proto 0x8915 or udp port 4791)",
    );
    const LABEL: u32 = 0x12345;
    let mut sent = 0;
    for (version, ipv6) in [
        (RoceVersion::V2, false),
        (RoceVersion::V2, true),
        (RoceVersion::V1, false),
    ] {
        let open = move |bind: &'static str| {
            move || {
                let mut c = veth_packet_cfg(version);
                c.marks = marks(104, Some(5), &[LABEL]);
                c.bind = (version == RoceVersion::V2).then(|| match ipv6 {
                    true => bind.replace("10.77.0.", "fd77::").parse().unwrap(),
                    false => bind.parse().unwrap(),
                });
                SoftEndpoint::open(c).unwrap()
            }
        };
        let (a, b) = exchange_across(&pair, open);
        sent += a.counters().tx_packets + b.counters().tx_packets;
    }
    let (path, _dir) = cap.finish();
    let frames = read_pcap(&path);
    assert_eq!(
        frames.len() as u64,
        sent,
        "every packet, cut apart, was captured"
    );
    let mut kinds = [0usize; 3];
    let sport = 0xc000 | ((LABEL & 0x3fff) ^ (LABEL >> 14)) as u16;
    for (i, f) in frames.iter().enumerate() {
        let s = seen(f);
        assert_eq!(s.tag, Some((5, 0)), "frame {i}: priority tag PCP 5, VLAN 0");
        let (class, label) = class_and_label(&s);
        match s.ethertype {
            0x0800 => {
                kinds[0] += 1;
                assert_eq!(class, 0x6a, "frame {i}");
                assert_eq!(u16::from_be_bytes([s.net[20], s.net[21]]), sport);
            }
            0x86dd => {
                kinds[1] += 1;
                assert_eq!((class, label), (0x6a, LABEL), "frame {i}");
                assert_eq!(u16::from_be_bytes([s.net[40], s.net[41]]), sport);
            }
            0x8915 => {
                kinds[2] += 1;
                assert_eq!(
                    (class, label),
                    (0x68, LABEL),
                    "frame {i}: v1 has no ECN field"
                );
            }
            t => panic!("frame {i}: ethertype {t:#06x}"),
        }
    }
    assert!(
        kinds.iter().all(|&k| k > 50),
        "v2/IPv4, v2/IPv6, v1: {kinds:?}"
    );
}

/// The TCP baseline between two namespaces: `--tclass 104` is the DSCP 26 of every data segment
/// (the kernel keeps TCP's own ECN bits: 0x68, not ECT), `-S` is accepted, the header and `--json`
/// say both, and two sides that disagree on `--tclass` are told so by name.
#[test]
fn tcp_segments_carry_the_tclass_and_the_sides_must_agree() {
    if !can_run() {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("client.json");
    let cap = Capture::start(Some(&pair.ns('a')), "veth0", "tcp and greater 200");
    let args = [
        "--transport",
        "tcp",
        "--tclass",
        "104",
        "-S",
        "3",
        "-n",
        "200",
    ];
    let mut client = args.to_vec();
    client.extend(["--json", json.to_str().unwrap()]);
    let (s, c) = pair.run_pair("write_bw", args.to_vec(), client);
    crate::common::assert_both_ok("tcp with --tclass", &s, &c);
    let (path, _dir) = cap.finish();
    // The data connection is the one that carried the most segments (the out-of-band channel, a
    // connection of its own, is not marked).
    let frames = read_pcap(&path);
    let ports = |f: &[u8]| {
        let n = seen(f).net;
        let (a, b) = (
            u16::from_be_bytes([n[20], n[21]]),
            u16::from_be_bytes([n[22], n[23]]),
        );
        (a.min(b), a.max(b))
    };
    let mut by_conn = std::collections::HashMap::<(u16, u16), Vec<u8>>::new();
    for f in &frames {
        by_conn.entry(ports(f)).or_default().push(seen(f).net[1]);
    }
    let data = by_conn.values().max_by_key(|t| t.len()).unwrap();
    assert!(data.len() > 10, "{} data segments", data.len());
    assert!(
        data.iter().all(|&tos| tos == 0x68),
        "TOS of the data segments: {data:x?}"
    );
    crate::common::assert_contains(
        &c.stdout,
        "IP_TOS / IPV6_TCLASS 0x68 on the data connections",
    );
    let doc = crate::common::json_file(&json);
    assert_eq!(
        doc["test"]["marks"],
        serde_json::json!({"tclass": 104, "sl": 3, "so_priority": 3})
    );
    // The sides must agree.
    let (s, c) = pair.run_pair(
        "write_bw",
        vec!["--transport", "tcp", "--tclass", "104"],
        vec!["--transport", "tcp"],
    );
    crate::common::assert_both_refused(&s, &c, &["tclass", "--tclass"]);
}
