//! Issue 17 on the wire: the UC and UD engines put exactly the bytes the IBA prescribes in their
//! packets (BTH without AckReq, UC opcodes 0x20 + the RC operation, UD SEND ONLY with a DETH carrying
//! the destination's Q_Key and our QPN), written out by hand below; framed as RoCE v2 and v1, tshark
//! decodes them as the same packets; and each engine takes the other's packets back whole.

use crate::wire_tshark::tshark_fields;

use roceperf::params::DEFAULT_QKEY;
use roceperf::transport::soft::rc::{Instant, MemoryTable, QpConfig};
use roceperf::transport::soft::unreliable::{Grh, UcQp, UdQp};
use roceperf::transport::{Access, RecvRequest, RemoteAddr, SendOp, SendRequest};
use roceperf::wire::{EthernetRepr, GrhRepr, IbRepr, Ipv4Repr, NetRepr, RoceFrameRepr, UdpRepr};
use std::net::Ipv4Addr;

const ALL: Access = Access(1 | 2 | 4 | 8);

fn cfg(qpn: u32, peer: u32, psn: u32, lkey: u32) -> QpConfig {
    let mut c = QpConfig::new(qpn, peer, psn, 0x200, lkey);
    c.pmtu = 1024;
    c
}

fn mem_with(data: &[u8]) -> (MemoryTable, u32) {
    let mut m = MemoryTable::new(3);
    let k = m.add_registered(4096, ALL);
    m.region_bytes_mut(k.lkey).unwrap()[..data.len()].copy_from_slice(data);
    (m, k.lkey)
}

fn wr(op: SendOp, len: u32, remote: Option<RemoteAddr>) -> SendRequest {
    SendRequest {
        wr_id: 1,
        op,
        offset: 0,
        len,
        remote,
        signaled: true,
        inline: false,
    }
}

/// Every packet the engine has to send.
fn out(mut next: impl FnMut(&mut [u8]) -> Option<usize>) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(n) = next(&mut buf) {
        v.push(buf[..n].to_vec());
    }
    v
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The three packets: UC SEND ONLY, UC RDMA WRITE ONLY (RETH), UD SEND ONLY (DETH), of "hello".
fn packets() -> Vec<Vec<u8>> {
    let (m, lkey) = mem_with(b"hello");
    let mut uc = UcQp::new(cfg(0x11, 0x12, 0x100, lkey), m).unwrap();
    uc.post_send(&wr(SendOp::Send, 5, None)).unwrap();
    let remote = RemoteAddr {
        addr: 0x7f00_0000_1000,
        rkey: 0x1234,
    };
    uc.post_send(&wr(SendOp::Write, 5, Some(remote))).unwrap();
    let mut p = out(|b| uc.poll_transmit(Instant::ZERO, b));
    let (m, lkey) = mem_with(b"hello");
    let mut ud = UdQp::new(cfg(0x11, 0x12, 0x100, lkey), m, DEFAULT_QKEY, DEFAULT_QKEY).unwrap();
    ud.post_send(&wr(SendOp::Send, 5, None)).unwrap();
    p.extend(out(|b| ud.poll_transmit(Instant::ZERO, b)));
    p
}

#[test]
fn uc_and_ud_packets_are_the_bytes_the_iba_prescribes() {
    let p = packets();
    let hello = "68656c6c6f 000000";
    // BTH: opcode, SE/M/PadCnt 3/TVer, P_Key ffff, resv, DestQP 0x12, AckReq 0, PSN.
    assert_eq!(
        p[0],
        hex(&format!("24 30 ffff 00 000012 00 000100 {hello}")),
        "UC SEND ONLY"
    );
    assert_eq!(
        p[1],
        hex(&format!(
            "2a 30 ffff 00 000012 00 000101 00007f0000001000 00001234 00000005 {hello}"
        )),
        "UC RDMA WRITE ONLY: RETH va, rkey, length"
    );
    assert_eq!(
        p[2],
        hex(&format!(
            "64 30 ffff 00 000012 00 000100 11111111 00 000011 {hello}"
        )),
        "UD SEND ONLY: DETH Q_Key 0x11111111, source QP 0x11"
    );
}

#[test]
fn tshark_decodes_uc_and_ud_as_sent_and_each_engine_takes_them_back() {
    let p = packets();
    let eth = EthernetRepr {
        dst: [0x02, 0, 0, 0, 0, 0x02].into(),
        src: [0x02, 0, 0, 0, 0, 0x01].into(),
        vlan: None,
        ethertype: 0,
    };
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let nets = [
        NetRepr::V2v4(
            Ipv4Repr {
                src: a,
                dst: b,
                tos: 0,
                ident: 0,
                dont_frag: true,
                ttl: 64,
            },
            UdpRepr::roce(0xc123),
        ),
        NetRepr::V1(GrhRepr {
            tclass: 0,
            flow_label: 0,
            hop_limit: 64,
            sgid: a.to_ipv6_mapped().into(),
            dgid: b.to_ipv6_mapped().into(),
        }),
    ];
    let mut frames = Vec::new();
    for net in nets {
        for ib in &p {
            let (repr, payload) = IbRepr::parse(ib).unwrap();
            let f = RoceFrameRepr { eth, net, ib: repr };
            let mut buf = vec![0u8; f.frame_len(payload.len())];
            f.emit(&mut buf, payload);
            // Our own parser: whole frame, ICRC verified, the same IB bytes back.
            let (back, pl) = RoceFrameRepr::parse(&buf).expect("a valid RoCE frame");
            assert_eq!((back.ib, pl), (repr, payload));
            frames.push(buf);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("uc_ud.pcap");
    crate::vectors::write_pcap(&pcap, &frames);
    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.a",
        "infiniband.bth.psn",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
        "infiniband.deth.q_key",
        "infiniband.deth.srcqp",
    ];
    let text = tshark_fields(&pcap, &fields);
    let want = [
        "36|0x000012|0|256||||",
        "42|0x000012|0|257|0x00001234|5||",
        "100|0x000012|0|256|||0x0000000011111111|0x00000011",
    ];
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(
            *line,
            want[i % 3],
            "frame {i} ({} encapsulation)",
            ["v2", "v1"][i / 3]
        );
    }

    // Each engine takes the other side's packets: a UC responder the SEND and WRITE, a UD one the
    // datagram with the GRH in front.
    let mut c = cfg(0x12, 0x11, 0x200, 0);
    c.recv_psn = 0x100;
    let mut mm = MemoryTable::new(4);
    let k = mm.add_registered(4096, ALL);
    c.local_lkey = k.lkey;
    let mut uc = UcQp::new(c.clone(), mm).unwrap();
    uc.post_recv(&RecvRequest {
        wr_id: 9,
        offset: 0,
        len: 64,
    })
    .unwrap();
    uc.handle_packet(&p[0]);
    let got = uc.poll_completion().expect("the UC SEND arrived");
    assert_eq!((got.wr_id, got.byte_len), (9, 5));
    assert_eq!(&uc.memory().region_bytes(k.lkey).unwrap()[..5], b"hello");
    let mut mm = MemoryTable::new(5);
    let k = mm.add_registered(4096, ALL);
    c.local_lkey = k.lkey;
    let mut ud = UdQp::new(c, mm, DEFAULT_QKEY, DEFAULT_QKEY).unwrap();
    ud.post_recv(&RecvRequest {
        wr_id: 4,
        offset: 0,
        len: 64,
    })
    .unwrap();
    ud.handle_packet(&p[2], || Grh([7; 40]));
    let got = ud.poll_completion().expect("the datagram arrived");
    assert_eq!((got.wr_id, got.byte_len), (4, 45));
    assert_eq!(&ud.memory().region_bytes(k.lkey).unwrap()[40..45], b"hello");
}
