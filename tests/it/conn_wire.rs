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

/// The RoCE frames of one rxe capture (the out-of-band TCP ones left out), with an ICRC we verify.
fn rxe_frames(file: &str) -> Vec<(IbRepr, Vec<u8>, Vec<u8>)> {
    let path = crate::vectors::rxe_pcap(file);
    crate::vectors::read_pcap(&path)
        .iter()
        .filter_map(|f| {
            let (r, payload) = RoceFrameRepr::parse(f).ok()?;
            let view = roceperf::wire::RoceFrame::new_checked(&f[..]).unwrap();
            Some((r.ib, payload.to_vec(), view.ib().to_vec()))
        })
        .collect()
}

#[test]
fn rxe_uc_and_ud_frames_are_what_our_engines_send_and_take_whole() {
    // ib_send_bw -c UD -s 64 -n 5: five datagrams; ours, sent with the same QPNs, PSN, Q_Key and
    // payload, are the same bytes from the BTH to the pad.
    let ud = rxe_frames("ud_send_bw_64B_x5.pcap");
    assert_eq!(ud.len(), 5);
    let (first, payload, _) = &ud[0];
    let deth = first.deth.expect("a DETH");
    assert_eq!(deth.qkey, DEFAULT_QKEY, "perftest's Q_Key");
    let (m, lkey) = mem_with(payload);
    let mut ours = UdQp::new(
        cfg(deth.src_qp, first.bth.dest_qp, first.bth.psn, lkey),
        m,
        DEFAULT_QKEY,
        deth.qkey,
    )
    .unwrap();
    let (mm, rl) = mem_with(&[]);
    let mut rc = cfg(first.bth.dest_qp, deth.src_qp, 0, rl);
    rc.rq_depth = 8;
    let mut receiver = UdQp::new(rc, mm, DEFAULT_QKEY, DEFAULT_QKEY).unwrap();
    for (k, (_, payload, ib)) in ud.iter().enumerate() {
        ours.memory_mut().region_bytes_mut(lkey).unwrap()[..payload.len()].copy_from_slice(payload);
        ours.post_send(&wr(SendOp::Send, payload.len() as u32, None))
            .unwrap();
        let sent = out(|b| ours.poll_transmit(Instant::ZERO, b));
        assert_eq!(sent, std::slice::from_ref(ib), "datagram {k}");
        receiver
            .post_recv(&RecvRequest {
                wr_id: k as u64,
                offset: 0,
                len: 40 + 64,
            })
            .unwrap();
        receiver.handle_packet(ib, || Grh([0; 40]));
        let c = receiver.poll_completion().expect("rxe's datagram taken");
        assert_eq!((c.wr_id, c.byte_len), (k as u64, 40 + 64));
    }
    assert_eq!(receiver.counters().psn_gaps, 0);

    // ib_write_bw / ib_send_bw -c UC -s 3000 -n 5 at MTU 1024: FIRST, MIDDLE, LAST five times.
    for (file, write) in [
        ("uc_write_bw_3000B_x5.pcap", true),
        ("uc_send_bw_3000B_x5.pcap", false),
    ] {
        let frames = rxe_frames(file);
        assert_eq!(frames.len(), 15, "{file}");
        let (first, _, _) = &frames[0];
        let reth = first.reth;
        assert_eq!(reth.is_some(), write, "{file}");
        // Our requester, told the same QPN, PSN, remote address and payload, sends the same packets.
        let data: Vec<u8> = frames[..3].iter().flat_map(|f| f.1.clone()).collect();
        assert_eq!(data.len(), 3000);
        let (m, lkey) = mem_with(&data);
        let mut ours = UcQp::new(cfg(0x99, first.bth.dest_qp, first.bth.psn, lkey), m).unwrap();
        let (op, remote) = match reth {
            Some(r) => (
                SendOp::Write,
                Some(RemoteAddr {
                    addr: r.va,
                    rkey: r.rkey,
                }),
            ),
            None => (SendOp::Send, None),
        };
        ours.post_send(&wr(op, 3000, remote)).unwrap();
        let sent = out(|b| ours.poll_transmit(Instant::ZERO, b));
        let theirs: Vec<Vec<u8>> = frames[..3].iter().map(|f| f.2.clone()).collect();
        assert_eq!(sent, theirs, "{file}: the first message");
        if !write {
            // Our responder takes rxe's five SENDs whole.
            let (mm, rl) = mem_with(&[]);
            let mut rc = cfg(first.bth.dest_qp, 0x99, 0, rl);
            rc.recv_psn = first.bth.psn;
            let mut r = UcQp::new(rc, mm).unwrap();
            for k in 0..5 {
                r.post_recv(&RecvRequest {
                    wr_id: k,
                    offset: 0,
                    len: 3000,
                })
                .unwrap();
            }
            for (_, _, ib) in &frames {
                r.handle_packet(ib);
            }
            let lens: Vec<u32> = std::iter::from_fn(|| r.poll_completion())
                .map(|c| c.byte_len)
                .collect();
            assert_eq!(lens, [3000; 5], "{file}");
            assert_eq!(r.counters().messages_dropped, 0);
        }
    }
}
