use super::*;

#[test]
fn addresses_become_sockaddrs_librdmacm_reads() {
    let ss = sockaddr("10.9.0.2:18515".parse().unwrap());
    // SAFETY: written as a sockaddr_in above.
    let sin: libc::sockaddr_in = unsafe { ptr::read(ptr::from_ref(&ss).cast()) };
    assert_eq!(i32::from(sin.sin_family), libc::AF_INET);
    assert_eq!(u16::from_be(sin.sin_port), 18515);
    assert_eq!(u32::from_be(sin.sin_addr.s_addr), 0x0a09_0002);
    let ss = sockaddr("[fd00::2]:7".parse().unwrap());
    // SAFETY: written as a sockaddr_in6 above.
    let sin6: libc::sockaddr_in6 = unsafe { ptr::read(ptr::from_ref(&ss).cast()) };
    assert_eq!(i32::from(sin6.sin6_family), libc::AF_INET6);
    assert_eq!(sin6.sin6_addr.s6_addr[0], 0xfd);
}

#[test]
fn rtr_attributes_describe_the_peer() {
    // SAFETY: plain old data.
    let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.dest_qp_num = 0x11;
    a.rq_psn = 0xabcdef;
    a.path_mtu = 3;
    let mut gid = [0u8; 16];
    gid[10..].copy_from_slice(&[0xff, 0xff, 10, 9, 0, 2]);
    a.ah_attr.grh.dgid = sys::ibv_gid { raw: gid };
    let p = peer_of(&a, 16);
    assert_eq!(
        (p.ip.to_string().as_str(), p.qpn, p.psn, p.mtu),
        ("10.9.0.2", 0x11, 0xabcdef, 1024)
    );
    assert_eq!(
        gid_ip([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).to_string(),
        "fe80::1"
    );
}

#[test]
fn failed_events_name_their_cause_and_rejections_their_reason() {
    assert_eq!(
        failure(3, ev::RDMA_CM_EVENT_REJECTED, 8, false),
        Some(CmEvent::Rejected {
            qp: 3,
            reason: RejectReason::InvalidServiceId
        })
    );
    let Some(CmEvent::Unanswered { qp: 0, detail }) =
        failure(0, ev::RDMA_CM_EVENT_UNREACHABLE, -110, false)
    else {
        panic!()
    };
    assert!(detail.starts_with("peer unreachable"), "{detail}");
    assert_eq!(failure(0, ev::RDMA_CM_EVENT_ESTABLISHED, 0, false), None);
}

#[test]
fn a_ud_id_unreachable_is_the_sidr_rep_status() {
    // Linux's CM answers a SIDR_REQ for a port nobody listens on with "service ID not supported"
    // (1): the client asks again, as after a REJ "invalid service ID".
    assert_eq!(
        failure(1, ev::RDMA_CM_EVENT_UNREACHABLE, 1, true),
        Some(CmEvent::Rejected {
            qp: 1,
            reason: RejectReason::InvalidServiceId
        })
    );
    let Some(CmEvent::Unanswered { detail, .. }) =
        failure(1, ev::RDMA_CM_EVENT_UNREACHABLE, -110, true)
    else {
        panic!()
    };
    assert!(detail.contains("no SIDR_REP"), "{detail}");
}

#[test]
fn a_peer_sockaddr_reads_back_as_its_ip() {
    for a in ["10.9.0.1:0", "[fd00::2]:7"] {
        let a: SocketAddr = a.parse().unwrap();
        assert_eq!(addr::ip_of(&sockaddr(a)), Some(a.ip()));
    }
}
