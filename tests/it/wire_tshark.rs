//! Independent decoding: frames of every opcode family, emitted as RoCE v1, v2/IPv4 and v2/IPv6, are
//! written to a pcap and decoded by tshark, which must see RoCE (v1) / RRoCE (v2) with the opcode, QPN,
//! PSN, RETH, AETH and ImmDt we wrote. tshark does not check the ICRC (the vector tests do).
//!
//! Needs tshark: `apt-get install -y tshark` (the project's test script installs it). Without it this
//! test fails rather than skips, so a missing decoder is never mistaken for a pass.

use crate::vectors;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

use roceperf::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, EthernetRepr, GrhRepr, IbRepr,
    Ipv4Repr, Ipv6Repr, NetRepr, Opcode, RethRepr, RoceFrameRepr, UdpRepr, VlanTag, pad_len,
};

/// Opcodes whose packets carry no payload.
fn has_payload(op: Opcode) -> bool {
    ![
        Opcode::RC_RDMA_READ_REQUEST,
        Opcode::RC_ACKNOWLEDGE,
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        Opcode::RC_COMPARE_SWAP,
        Opcode::RC_FETCH_ADD,
        Opcode::CNP,
    ]
    .contains(&op)
}

/// One packet of opcode `op`, numbered `i` so that its QPN, PSN and RETH are distinct.
fn ib_for(op: Opcode, i: u32) -> (IbRepr, Vec<u8>) {
    let payload: Vec<u8> = if has_payload(op) {
        (0..(i as usize % 9) + 1).map(|k| 0x40 + k as u8).collect()
    } else {
        Vec::new()
    };
    let mut bth = BthRepr::new(op, 0x10000 + i * 7, 0x800000 + i * 13);
    bth.pad_count = pad_len(payload.len()) as u8;
    bth.ack_req = i.is_multiple_of(2);
    let mut ib = IbRepr::new(bth);
    ib.reth = op.has_reth().then_some(RethRepr {
        va: 0x7f00_0000_0000 + u64::from(i) * 0x1000,
        rkey: 0x1000 + i,
        dma_len: 100 + i,
    });
    ib.aeth = op.has_aeth().then_some(AethRepr::ack(i + 1));
    ib.atomic_eth = op.has_atomic_eth().then_some(AtomicEthRepr {
        va: 0x7f00_0000_0008 + u64::from(i) * 0x1000,
        rkey: 0x2000 + i,
        swap_add: 5,
        compare: 6,
    });
    ib.atomic_ack_eth = op
        .has_atomic_ack_eth()
        .then_some(AtomicAckEthRepr { orig: 42 });
    ib.imm = op.has_immdt().then_some(0xdead_0000 + i);
    ib.ieth = op.has_ieth().then_some(0x3000 + i);
    ib.deth = op.has_deth().then_some(DethRepr {
        qkey: DethRepr::GSI_QKEY,
        src_qp: 1,
    });
    if op == Opcode::CNP {
        ib.bth.becn = true;
        ib.bth.psn = 0;
    }
    (ib, payload)
}

fn nets() -> [(NetRepr, Option<VlanTag>, &'static str); 4] {
    let udp = UdpRepr::roce(0xc132);
    [
        (
            NetRepr::V1(GrhRepr {
                tclass: 0,
                flow_label: 0,
                hop_limit: 64,
                sgid: Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().into(),
                dgid: Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped().into(),
            }),
            None,
            "RoCE",
        ),
        (
            NetRepr::V2v4(
                Ipv4Repr {
                    ident: 0x1234,
                    ..Ipv4Repr::roce(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
                },
                udp,
            ),
            None,
            "RRoCE",
        ),
        (
            NetRepr::V2v6(
                Ipv6Repr {
                    src: "fd00::1".parse::<Ipv6Addr>().unwrap(),
                    dst: "fd00::2".parse::<Ipv6Addr>().unwrap(),
                    traffic_class: 0,
                    flow_label: 0,
                    hop_limit: 64,
                },
                udp,
            ),
            None,
            "RRoCE",
        ),
        (
            NetRepr::V2v4(
                Ipv4Repr {
                    ttl: 1,
                    ..Ipv4Repr::roce(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
                },
                udp,
            ),
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 100,
            }),
            "RRoCE",
        ),
    ]
}

const FIELDS: &[&str] = &[
    "_ws.col.Protocol",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.immdt",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.ieth",
    "_ws.col.Info",
];

/// Runs tshark on `pcap` and returns one line per frame with `fields` separated by `|`. Fails (does
/// not skip) when tshark is missing.
pub(crate) fn tshark_fields(pcap: &Path, fields: &[&str]) -> String {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(pcap)
        .args(["--disable-heuristic", "rpcrdma_infiniband", "-T", "fields"])
        .args(["-E", "separator=|", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "tshark is not installed; run `apt-get install -y tshark` (scripts/test.sh does) and re-run"
        ),
        Err(e) => panic!("cannot run tshark: {e}"),
    };
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn tshark_agrees_on_the_reference_vectors_and_rxe_captures() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = dir.path().join("vectors.pcap");
    let names = vectors::vector_names();
    let frames: Vec<Vec<u8>> = names.iter().map(|n| vectors::vector(n)).collect();
    vectors::write_pcap(&vectors, &frames);
    let mut captures = vec![(vectors, frames)];
    for f in [
        "rc_write_bw_3000B_x5",
        "rc_read_bw_3000B_x5",
        "rc_send_bw_3000B_x5",
    ] {
        let path = vectors::rxe_pcap(&format!("{f}.pcap"));
        let frames = vectors::read_pcap(&path);
        captures.push((path, frames));
    }
    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.bth.padcnt",
        "infiniband.invariant.crc",
    ];
    let mut roce = 0;
    for (pcap, frames) in captures {
        let text = tshark_fields(&pcap, &fields);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), frames.len(), "{}", pcap.display());
        for (frame, line) in frames.iter().zip(lines) {
            let Ok((r, _)) = RoceFrameRepr::parse(frame) else {
                assert_eq!(line, "||||", "tshark saw IB where we saw none: {line}");
                continue;
            };
            roce += 1;
            let icrc = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
            // tshark reads the ICRC's wire bytes big-endian (roce-wire.md §5.3); it knows no CNP
            // layout ("Unknown OpCode": the BTH only), so shows no ICRC for one.
            let icrc = if r.ib.bth.opcode == Opcode::CNP {
                String::new()
            } else {
                format!("{:#010x}", icrc.swap_bytes())
            };
            let want = format!(
                "{}|{:#08x}|{}|{}|{icrc}",
                r.ib.bth.opcode.0, r.ib.bth.dest_qp, r.ib.bth.psn, r.ib.bth.pad_count,
            );
            assert_eq!(line, want, "{}", pcap.display());
        }
    }
    assert_eq!(roce, names.len() + 3 * 20);
}

#[test]
fn tshark_decodes_every_opcode_family() {
    let known: Vec<Opcode> = (0..=255u8).map(Opcode).filter(|o| o.is_known()).collect();
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    for (net, vlan, proto) in nets() {
        for &op in &known {
            let i = expected.len() as u32;
            let (ib, payload) = ib_for(op, i);
            let repr = RoceFrameRepr {
                eth: EthernetRepr {
                    dst: [0x02, 0, 0, 0, 0, 0x02].into(),
                    src: [0x02, 0, 0, 0, 0, 0x01].into(),
                    vlan,
                    ethertype: net.ethertype(),
                },
                net,
                ib,
            };
            let mut buf = vec![0xa5u8; repr.frame_len(payload.len())];
            repr.emit(&mut buf, &payload);
            frames.push(buf);
            expected.push((proto, ib));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("every_opcode.pcap");
    vectors::write_pcap(&pcap, &frames);

    let text = tshark_fields(&pcap, FIELDS);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), expected.len(), "tshark output:\n{text}");
    for (line, (proto, ib)) in lines.iter().zip(&expected) {
        let f: Vec<&str> = line.split('|').collect();
        assert_eq!(f.len(), FIELDS.len(), "{line}");
        let op = ib.bth.opcode;
        let ctx = format!("{op} frame `{line}`");
        assert_eq!(f[0], *proto, "{ctx}");
        assert_eq!(f[1], op.0.to_string(), "{ctx}");
        assert_eq!(f[2], format!("{:#08x}", ib.bth.dest_qp), "{ctx}");
        assert_eq!(f[3], ib.bth.psn.to_string(), "{ctx}");
        assert!(!f[18].contains("Malformed"), "{ctx}");
        if op == Opcode::CNP {
            continue; // tshark 4.0 knows no CNP layout: "Unknown OpCode", BTH only.
        }
        assert_eq!(f[4], if ib.bth.ack_req { "1" } else { "0" }, "{ctx}");
        assert_eq!(f[5], ib.bth.pad_count.to_string(), "{ctx}");
        // tshark shows the AtomicETH address and key under the RETH field names.
        let va_key = ib
            .reth
            .map(|r| (r.va, r.rkey))
            .or(ib.atomic_eth.map(|a| (a.va, a.rkey)));
        match va_key {
            Some((va, rkey)) => {
                assert_eq!(f[6], format!("{va:#018x}"), "{ctx}");
                assert_eq!(f[7], format!("{rkey:#010x}"), "{ctx}");
            }
            None => assert_eq!((f[6], f[7]), ("", ""), "{ctx}"),
        }
        match ib.reth {
            Some(r) => assert_eq!(f[8], r.dma_len.to_string(), "{ctx}"),
            None => assert_eq!(f[8], "", "{ctx}"),
        }
        match ib.aeth {
            Some(a) => {
                assert_eq!(f[9], a.syndrome.to_string(), "{ctx}");
                assert_eq!(f[10], a.msn.to_string(), "{ctx}");
            }
            None => assert_eq!((f[9], f[10]), ("", ""), "{ctx}"),
        }
        let hex32 = |v: u32| format!("{v:08x}");
        assert_eq!(f[11], ib.imm.map(hex32).unwrap_or_default(), "{ctx}");
        match ib.atomic_eth {
            Some(a) => {
                assert_eq!(f[12], a.swap_add.to_string(), "{ctx}");
                assert_eq!(f[13], a.compare.to_string(), "{ctx}");
            }
            None => assert_eq!((f[12], f[13]), ("", ""), "{ctx}"),
        }
        let orig = ib.atomic_ack_eth.map(|a| a.orig.to_string());
        assert_eq!(f[14], orig.unwrap_or_default(), "{ctx}");
        match ib.deth {
            Some(d) => {
                assert_eq!(f[15], format!("{:#018x}", d.qkey), "{ctx}");
                assert_eq!(f[16], format!("{:#010x}", d.src_qp), "{ctx}");
            }
            None => assert_eq!((f[15], f[16]), ("", ""), "{ctx}"),
        }
        assert_eq!(f[17], ib.ieth.map(hex32).unwrap_or_default(), "{ctx}");
    }
}
