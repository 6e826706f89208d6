//! The CM messages of `-R` (REQ, REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REQ, SIDR_REP), framed as
//! the soft transport sends them (RoCE v2/IPv4, UD SEND ONLY from QP1 to QP1, DETH with the GSI
//! Q_Key, a 256-byte MAD): every field survives a parse, and tshark, an independent decoder, reads
//! them as CM messages with the values we wrote. Needs tshark (fails without it, like `wire_tshark`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use proptest::prelude::*;
use roceperf::wire::cm::{
    Answered, CmMessage, CmPath, CmaHeader, DrepRepr, DreqRepr, MraRepr, RDMA_PS_TCP, RDMA_PS_UDP,
    RDMA_UDP_QKEY, RejRepr, RejectReason, RepRepr, ReqRepr, RtuRepr, SidrRepRepr, SidrReqRepr,
    SidrStatus, service_id,
};
use roceperf::wire::mad::MAD_LEN;
use roceperf::wire::{
    BthRepr, DethRepr, EthernetRepr, Gid, IbRepr, Ipv4Repr, NetRepr, Opcode, RoceFrameRepr, UdpRepr,
};

use crate::vectors;
use crate::wire_tshark::tshark_fields;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);

/// `N` bytes of private data that start with rdma_cm's header for `CLIENT`:`src_port` → `SERVER`.
fn cma_private_data<const N: usize>(src_port: u16) -> [u8; N] {
    let mut private_data = [0u8; N];
    CmaHeader {
        src: SocketAddr::new(IpAddr::V4(CLIENT), src_port),
        dst: IpAddr::V4(SERVER),
    }
    .emit(&mut private_data);
    private_data
}

fn req() -> ReqRepr {
    let private_data = cma_private_data(40123);
    ReqRepr {
        local_comm_id: 0x1234_5678,
        service_id: service_id(RDMA_PS_TCP, 18515),
        local_ca_guid: 0x5054_00ff_fe00_0901,
        local_qkey: 0,
        local_qpn: 0x11,
        responder_resources: 16,
        local_eecn: 0,
        initiator_depth: 16,
        remote_eecn: 0,
        remote_cm_response_timeout: 20,
        transport_service_type: 0,
        end_to_end_flow_control: false,
        starting_psn: 0xabcdef,
        local_cm_response_timeout: 20,
        retry_count: 7,
        partition_key: 0xffff,
        path_mtu: 3,
        rdc_exists: false,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: false,
        extended_transport_type: 0,
        primary: CmPath {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: Gid::from_ip(IpAddr::V4(CLIENT)),
            remote_gid: Gid::from_ip(IpAddr::V4(SERVER)),
            hop_limit: 64,
            local_ack_timeout: 14,
            ..CmPath::default()
        },
        alternate: CmPath::default(),
        sap_supported: false,
        private_data,
    }
}

fn messages() -> Vec<CmMessage> {
    let rep = RepRepr {
        local_comm_id: 0x9abc_def0,
        remote_comm_id: 0x1234_5678,
        local_qkey: 0,
        local_qpn: 0x22,
        local_eecn: 0,
        starting_psn: 0x123456,
        responder_resources: 16,
        initiator_depth: 16,
        target_ack_delay: 0,
        failover_accepted: 0,
        end_to_end_flow_control: false,
        rnr_retry_count: 7,
        srq: false,
        local_ca_guid: 0x5054_00ff_fe00_0902,
        private_data: [0; 196],
    };
    vec![
        CmMessage::Req(Box::new(req())),
        CmMessage::Rep(Box::new(rep)),
        CmMessage::Rtu(RtuRepr::new(0x1234_5678, 0x9abc_def0)),
        CmMessage::Rej(Box::new(RejRepr::new(
            0,
            0x1234_5678,
            Answered::Req,
            RejectReason::InvalidServiceId,
        ))),
        CmMessage::Mra(MraRepr {
            local_comm_id: 0x9abc_def0,
            remote_comm_id: 0x1234_5678,
            message_mraed: Answered::Req,
            service_timeout: 18,
            private_data: [0; 222],
        }),
        CmMessage::Dreq(DreqRepr::new(0x9abc_def0, 0x1234_5678, 0x11)),
        CmMessage::Drep(DrepRepr::new(0x1234_5678, 0x9abc_def0)),
        CmMessage::SidrReq(Box::new(sidr_req())),
        CmMessage::SidrRep(Box::new(SidrRepRepr::answer(
            &sidr_req(),
            SidrStatus::Success,
            0x33,
            RDMA_UDP_QKEY,
        ))),
    ]
}

/// A SIDR_REQ as rdma_cm sends it for a UD service (`RDMA_PS_UDP`).
fn sidr_req() -> SidrReqRepr {
    SidrReqRepr {
        request_id: 0x0bad_cafe,
        partition_key: 0xffff,
        service_id: service_id(RDMA_PS_UDP, 18515),
        private_data: cma_private_data(40124),
    }
}

/// One CM message as a whole Ethernet frame, as the soft transport puts it on the wire.
fn frame(m: &CmMessage, psn: u32) -> Vec<u8> {
    let mut mad = [0u8; MAD_LEN];
    m.emit(u64::from(psn) << 32 | 7, &mut mad);
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, 1, psn);
    bth.pkey = 0xffff;
    let mut ib = IbRepr::new(bth);
    ib.deth = Some(DethRepr {
        qkey: DethRepr::GSI_QKEY,
        src_qp: 1,
    });
    let ip = Ipv4Repr {
        src: CLIENT,
        dst: SERVER,
        tos: 0,
        ident: 0,
        dont_frag: true,
        ttl: 64,
    };
    let net = NetRepr::V2v4(ip, UdpRepr::roce(4791));
    let repr = RoceFrameRepr {
        eth: EthernetRepr {
            dst: [0x52, 0x54, 0, 0, 9, 2].into(),
            src: [0x52, 0x54, 0, 0, 9, 1].into(),
            vlan: None,
            ethertype: net.ethertype(),
        },
        net,
        ib,
    };
    let mut buf = vec![0u8; repr.frame_len(MAD_LEN)];
    repr.emit(&mut buf, &mad);
    buf
}

const FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.deth.q_key",
    "infiniband.mad.mgmtclass",
    "infiniband.mad.attributeid",
    "infiniband.cm.req",
    "infiniband.cm.req.serviceid.dport",
    "infiniband.cm.req.localqpn",
    "infiniband.cm.req.startpsn",
    "infiniband.cm.req.pppmtu",
    "infiniband.cm.req.ip_cm.sip4",
    "infiniband.cm.req.ip_cm.dip4",
    "infiniband.cm.rep.localqpn",
    "infiniband.cm.rep.startpsn",
    "infiniband.cm.rtu.remotecommid",
    "infiniband.cm.rej.reason",
    "infiniband.cm.dreq.remotecommid",
    "_ws.col.Info",
    "infiniband.mad.data",
];

#[test]
fn tshark_reads_every_cm_message_as_we_wrote_it() {
    let msgs = messages();
    let frames: Vec<Vec<u8>> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| frame(m, i as u32))
        .collect();
    for (f, m) in frames.iter().zip(&msgs) {
        let (repr, mad) = RoceFrameRepr::parse(f).expect("a valid frame with its ICRC");
        assert_eq!(repr.ib.bth.dest_qp, 1);
        assert_eq!(&CmMessage::parse(mad).unwrap().1, m);
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("cm.pcap");
    vectors::write_pcap(&pcap, &frames);
    let text = tshark_fields(&pcap, FIELDS);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(lines.len(), msgs.len(), "{text}");
    for (f, m) in lines.iter().zip(&msgs) {
        let ctx = format!("{}: {f:?}", m.name());
        assert_eq!(f[0], "100", "UD SEND ONLY, {ctx}");
        assert_eq!(f[1], "0x000001", "{ctx}");
        assert_eq!(f[2], "0x0000000080010000", "{ctx}");
        assert_eq!(f[3], "0x07", "CM class, {ctx}");
        assert!(f[17].starts_with("CM: "), "{ctx}");
        assert_eq!(f[4], format!("{:#06x}", m.attr_id()), "{ctx}");
        assert!(!f[17].contains("Malformed"), "{ctx}");
    }
    let req = &lines[0];
    assert_eq!(req[5], "0x12345678");
    assert_eq!(req[6], "0x4853", "service ID port 18515");
    assert_eq!(req[7], "0x000011");
    assert_eq!(req[8], "0xabcdef");
    assert_eq!(req[9], "0x03", "path MTU 1024");
    assert_eq!((req[10], req[11]), ("10.9.0.1", "10.9.0.2"), "CMA header");
    assert!(req[17].contains("ConnectRequest"), "{}", req[17]);
    assert_eq!((lines[1][12], lines[1][13]), ("0x000022", "0x123456"));
    assert!(lines[1][17].contains("ConnectReply"), "{}", lines[1][17]);
    assert_eq!(lines[2][14], "0x9abcdef0");
    assert!(lines[2][17].contains("ReadyToUse"), "{}", lines[2][17]);
    assert_eq!(lines[3][15], "0x0008", "REJ reason: invalid service ID");
    assert!(lines[3][17].contains("ConnectReject"), "{}", lines[3][17]);
    assert_eq!(lines[5][16], "0x12345678");
    assert!(lines[4][17].contains("MsgRcptAck"), "{}", lines[4][17]);
    assert!(
        lines[5][17].contains("DisconnectRequest"),
        "{}",
        lines[5][17]
    );
    assert!(lines[6][17].contains("DisconnectReply"), "{}", lines[6][17]);
    // Wireshark names the SIDR messages but decodes none of their fields: its MAD data field shows
    // the class data, which must read as tables 119 and 120 lay it out.
    assert!(lines[7][17].contains("ServiceIDResReq"), "{}", lines[7][17]);
    let sidr_req = concat!(
        "0badcafe",         // RequestID
        "ffff0000",         // P_Key, reserved
        "0000000001114853", // ServiceID: RDMA_PS_UDP, port 18515
        "0040",             // CMA header: version 0, IPv4
        "9cbc",             // source port 40124
    );
    assert!(lines[7][18].starts_with(sidr_req), "{}", lines[7][18]);
    assert!(lines[7][18].contains("0a0900010000"), "CMA source address");
    assert!(
        lines[8][17].contains("ServiceIDResReqResp"),
        "{}",
        lines[8][17]
    );
    let sidr_rep = concat!(
        "0badcafe",         // RequestID
        "00000000",         // status success, no additional information, reserved
        "00003300",         // QPN 0x33, reserved
        "0000000001114853", // ServiceID
        "01234567",         // Q_Key: RDMA_UDP_QKEY
    );
    assert!(lines[8][18].starts_with(sidr_rep), "{}", lines[8][18]);
}

proptest! {
    #[test]
    fn any_req_round_trips(
        comm in any::<u32>(), qpn in 0u32..1 << 24, psn in 0u32..1 << 24, port in any::<u16>(),
        rr in any::<u8>(), depth in any::<u8>(), retry in 0u8..8, rnr in 0u8..8, mtu in 1u8..6,
        timeout in 0u8..32, flow in 0u32..1 << 20, tc in any::<u8>(), sl in 0u8..16,
        private in proptest::collection::vec(any::<u8>(), 56),
    ) {
        let mut r = req();
        r.local_comm_id = comm;
        r.local_qpn = qpn;
        r.starting_psn = psn;
        r.service_id = service_id(RDMA_PS_TCP, port);
        r.responder_resources = rr;
        r.initiator_depth = depth;
        r.retry_count = retry;
        r.rnr_retry_count = rnr;
        r.path_mtu = mtu;
        r.local_cm_response_timeout = timeout;
        r.primary.flow_label = flow;
        r.primary.traffic_class = tc;
        r.primary.sl = sl;
        r.primary.local_ack_timeout = timeout;
        r.private_data[36..].copy_from_slice(&private);
        let m = CmMessage::Req(Box::new(r));
        let mut mad = [0u8; MAD_LEN];
        m.emit(9, &mut mad);
        prop_assert_eq!(CmMessage::parse(&mad).unwrap(), (9, m));
    }
}
