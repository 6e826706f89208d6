use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::rej::{REJ_ARI_LEN, REJ_PRIVATE_LEN};
use super::req::REQ_PRIVATE_LEN;
use super::sidr::SIDR_REP_INFO_LEN;
use super::*;
use crate::wire::Gid;
use crate::wire::mad::{MAD_DATA_LEN, MAD_HEADER_LEN, MAD_LEN};

fn gid(a: u8) -> Gid {
    Gid::from_ip(IpAddr::V4(Ipv4Addr::new(10, 9, 0, a)))
}

/// A REQ with every field distinct, as rdma_cm would send it over RoCE v2.
pub(crate) fn sample_req() -> ReqRepr {
    let mut private_data = [0u8; REQ_PRIVATE_LEN];
    CmaHeader {
        src: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1)), 40001),
        dst: IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)),
    }
    .emit(&mut private_data);
    private_data[CMA_HEADER_LEN] = 0x77;
    ReqRepr {
        local_comm_id: 0x1122_3344,
        service_id: service_id(RDMA_PS_TCP, 18515),
        local_ca_guid: 0x0202_03ff_fe04_0506,
        local_qkey: 0,
        local_qpn: 0x00_0123,
        responder_resources: 16,
        local_eecn: 0,
        initiator_depth: 15,
        remote_eecn: 0,
        remote_cm_response_timeout: 20,
        transport_service_type: service_type::RC,
        end_to_end_flow_control: true,
        starting_psn: 0xab_cdef,
        local_cm_response_timeout: 19,
        retry_count: 7,
        partition_key: 0xffff,
        path_mtu: 3,
        rdc_exists: false,
        rnr_retry_count: 6,
        max_cm_retries: 15,
        srq: false,
        extended_transport_type: 0,
        primary: CmPath {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: gid(1),
            remote_gid: gid(2),
            flow_label: 0xf_1234,
            packet_rate: 0x2a,
            traffic_class: 0x68,
            hop_limit: 64,
            sl: 3,
            subnet_local: false,
            local_ack_timeout: 18,
        },
        alternate: CmPath::default(),
        sap_supported: false,
        private_data,
    }
}

fn mad(m: &CmMessage, tid: u64) -> Vec<u8> {
    let mut buf = vec![0xa5u8; MAD_LEN];
    assert_eq!(m.emit(tid, &mut buf), MAD_LEN);
    buf
}

#[test]
fn req_fields_sit_where_the_kernel_reads_them() {
    let m = CmMessage::Req(Box::new(sample_req()));
    let b = mad(&m, 7);
    let d = &b[MAD_HEADER_LEN..];
    assert_eq!(&b[16..18], &[0x00, 0x10], "attribute ID");
    assert_eq!(&d[0..4], &[0x11, 0x22, 0x33, 0x44]);
    assert_eq!(&d[8..16], &0x0000_0000_0106_4853u64.to_be_bytes());
    assert_eq!(
        &d[32..36],
        &[0x00, 0x01, 0x23, 16],
        "QPN then responder resources"
    );
    assert_eq!(d[39], 15, "initiator depth");
    // RemoteCMResponseTimeout 20 (10100), RC (00), flow control 1.
    assert_eq!(d[43], 0b1010_0001);
    assert_eq!(&d[44..47], &[0xab, 0xcd, 0xef]);
    // LocalCMResponseTimeout 19 (10011), retry count 7 (111).
    assert_eq!(d[47], 0b1001_1111);
    assert_eq!(&d[48..50], &[0xff, 0xff]);
    // MTU 3, RDC 0, RNR retry 6.
    assert_eq!(d[50], 0b0011_0110);
    // Max CM retries 15, SRQ 0, extended type 0.
    assert_eq!(d[51], 0b1111_0000);
    assert_eq!(&d[56 + 12..56 + 16], &[10, 9, 0, 1], "primary local GID");
    assert_eq!(&d[72 + 12..72 + 16], &[10, 9, 0, 2], "primary remote GID");
    assert_eq!(
        &d[88..92],
        &[0xf1, 0x23, 0x40, 0x2a],
        "flow label, packet rate"
    );
    assert_eq!((d[92], d[93]), (0x68, 64));
    assert_eq!(d[94], 3 << 4, "SL 3, not subnet local");
    assert_eq!(d[95], 18 << 3, "local ACK timeout");
    assert_eq!(&d[140..142], &[0, 0x40], "CMA header: version 0, IPv4");
    assert_eq!(&d[142..144], &40001u16.to_be_bytes());
    assert_eq!(
        &d[144..160],
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 9, 0, 1]
    );
    assert_eq!(d[176], 0x77, "user private data after the CMA header");
}

#[test]
fn every_message_round_trips() {
    let req = sample_req();
    let mut rep = RepRepr {
        local_comm_id: 0xaabb_ccdd,
        remote_comm_id: req.local_comm_id,
        local_qkey: 0,
        local_qpn: 0x42_1111,
        local_eecn: 0,
        starting_psn: 0x12_3456,
        responder_resources: 4,
        initiator_depth: 5,
        target_ack_delay: 15,
        failover_accepted: 2,
        end_to_end_flow_control: true,
        rnr_retry_count: 7,
        srq: true,
        local_ca_guid: 9,
        private_data: [0; 196],
    };
    rep.private_data[195] = 1;
    let mut rej = RejRepr::new(0, 5, Answered::Req, RejectReason::InvalidServiceId);
    rej.rejected_info_length = 16;
    rej.ari[..16].copy_from_slice(&<[u8; 16]>::from(gid(2)));
    rej.private_data[REJ_PRIVATE_LEN - 1] = 3;
    let messages = [
        CmMessage::Req(Box::new(req)),
        CmMessage::Rep(Box::new(rep)),
        CmMessage::Rtu(RtuRepr::new(1, 2)),
        CmMessage::Rej(Box::new(rej)),
        CmMessage::Mra(MraRepr {
            local_comm_id: 3,
            remote_comm_id: 4,
            message_mraed: Answered::Rep,
            service_timeout: 21,
            private_data: [9; 222],
        }),
        CmMessage::Dreq(DreqRepr::new(5, 6, 0x77_7777)),
        CmMessage::Drep(DrepRepr::new(7, 8)),
    ];
    for (i, m) in messages.iter().enumerate() {
        let b = mad(m, 0x1_0000_0000 + i as u64);
        let (tid, back) = CmMessage::parse(&b).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
        assert_eq!(tid, 0x1_0000_0000 + i as u64);
        assert_eq!(&back, m, "{}", m.name());
        assert_eq!(back.local_comm_id(), m.local_comm_id());
    }
    assert_eq!(REJ_ARI_LEN, 72);
}

#[test]
fn rej_layout_and_reasons() {
    let rej = RejRepr::new(0, 0x0102_0304, Answered::Req, RejectReason::ConsumerDefined);
    let b = mad(&CmMessage::Rej(Box::new(rej)), 1);
    let d = &b[MAD_HEADER_LEN..];
    assert_eq!(&d[4..8], &[1, 2, 3, 4]);
    assert_eq!(d[8], 0, "message rejected: REQ");
    assert_eq!(&d[10..12], &[0, 28]);
    assert_eq!(RejectReason::from_code(8), RejectReason::InvalidServiceId);
    assert_eq!(RejectReason::from_code(99), RejectReason::Other(99));
    assert_eq!(
        RejectReason::ConsumerDefined.to_string(),
        "\"consumer reject\" (reason 28)"
    );
}

#[test]
fn foreign_mads_are_refused() {
    let mut b = mad(&CmMessage::Rtu(RtuRepr::new(1, 2)), 1);
    assert!(CmMessage::parse(&b[..200]).is_err());
    b[1] = 0x81; // a vendor class
    assert!(CmMessage::parse(&b).is_err());
    b[1] = 0x07;
    b[17] = 0x19; // LAP: not parsed here
    assert!(CmMessage::parse(&b).is_err());
}

#[test]
fn cma_header_and_service_ids() {
    let h = CmaHeader {
        src: "[fd00::1]:5000".parse().unwrap(),
        dst: "fd00::2".parse().unwrap(),
    };
    let mut b = [0u8; CMA_HEADER_LEN];
    h.emit(&mut b);
    assert_eq!(b[1], 0x60);
    assert_eq!(CmaHeader::parse(&b).unwrap(), h);
    b[1] = 0x50;
    assert!(CmaHeader::parse(&b).is_err());
    assert_eq!(service_id(RDMA_PS_TCP, 18515), 0x0106_4853);
    assert_eq!(service_port(RDMA_PS_TCP, 0x0106_4853), Some(18515));
    assert_eq!(service_port(RDMA_PS_TCP, 0x0111_4853), None);
}

#[test]
fn sidr_req_bytes_as_table_119_lays_them_out() {
    let mut private_data = [0u8; SIDR_REQ_PRIVATE_LEN];
    CmaHeader {
        src: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1)), 40001),
        dst: IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)),
    }
    .emit(&mut private_data);
    private_data[SIDR_REQ_PRIVATE_LEN - 1] = 0x5a;
    let req = SidrReqRepr {
        request_id: 0xdead_beef,
        partition_key: 0xffff,
        service_id: service_id(RDMA_PS_UDP, 18515),
        private_data,
    };
    let mut want = vec![0u8; MAD_DATA_LEN];
    want[0..4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    want[4..6].copy_from_slice(&[0xff, 0xff]);
    want[8..16].copy_from_slice(&[0, 0, 0, 0, 0x01, 0x11, 0x48, 0x53]);
    want[16..18].copy_from_slice(&[0, 0x40]); // CMA header: version 0, IPv4
    want[18..20].copy_from_slice(&40001u16.to_be_bytes());
    want[32..36].copy_from_slice(&[10, 9, 0, 1]);
    want[48..52].copy_from_slice(&[10, 9, 0, 2]);
    want[231] = 0x5a;
    let m = CmMessage::SidrReq(Box::new(req));
    let b = mad(&m, 3);
    assert_eq!(&b[16..18], &[0x00, 0x17], "attribute ID");
    assert_eq!(&b[MAD_HEADER_LEN..], &want[..]);
    let (tid, back) = CmMessage::parse(&b).unwrap();
    assert_eq!((tid, &back), (3, &m));
    assert_eq!(back.local_comm_id(), 0xdead_beef);
    let CmMessage::SidrReq(r) = back else {
        unreachable!()
    };
    let cma = CmaHeader::parse(&r.private_data).unwrap();
    assert_eq!(cma.src.port(), 40001);
    assert_eq!(service_port(RDMA_PS_UDP, r.service_id), Some(18515));
    assert_eq!(service_port(RDMA_PS_TCP, r.service_id), None);
}

#[test]
fn sidr_rep_bytes_as_table_120_lays_them_out() {
    let req = SidrReqRepr {
        request_id: 0x0102_0304,
        partition_key: 0xffff,
        service_id: service_id(RDMA_PS_UDP, 18515),
        private_data: [0; SIDR_REQ_PRIVATE_LEN],
    };
    let mut rep = SidrRepRepr::answer(&req, SidrStatus::Success, 0x00ab_cdef, RDMA_UDP_QKEY);
    rep.info_length = 2;
    rep.info[0] = 0x11;
    rep.info[SIDR_REP_INFO_LEN - 1] = 0x22;
    rep.private_data[0] = 0x33;
    rep.private_data[SIDR_REP_PRIVATE_LEN - 1] = 0x44;
    let mut want = vec![0u8; MAD_DATA_LEN];
    want[0..4].copy_from_slice(&[1, 2, 3, 4]);
    want[4] = 0; // status: success
    want[5] = 2;
    want[8..11].copy_from_slice(&[0xab, 0xcd, 0xef]);
    want[12..20].copy_from_slice(&[0, 0, 0, 0, 0x01, 0x11, 0x48, 0x53]);
    want[20..24].copy_from_slice(&[0x01, 0x23, 0x45, 0x67]);
    want[24] = 0x11;
    want[95] = 0x22;
    want[96] = 0x33;
    want[231] = 0x44;
    let m = CmMessage::SidrRep(Box::new(rep));
    let b = mad(&m, 4);
    assert_eq!(&b[16..18], &[0x00, 0x18], "attribute ID");
    assert_eq!(&b[MAD_HEADER_LEN..], &want[..]);
    assert_eq!(CmMessage::parse(&b).unwrap(), (4, m));
    for code in 0..=6u8 {
        assert_eq!(SidrStatus::from_code(code).code(), code);
    }
    assert_eq!(SidrStatus::from_code(1), SidrStatus::Unsupported);
    assert_eq!(SidrStatus::from_code(2), SidrStatus::Reject);
    assert_eq!(SidrStatus::Reject.to_string(), "\"rejected\" (status 2)");
}
