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
        failure(ev::RDMA_CM_EVENT_REJECTED, 8),
        Some(Ok(RejectReason::InvalidServiceId))
    );
    let Some(Err(m)) = failure(ev::RDMA_CM_EVENT_UNREACHABLE, -110) else {
        panic!()
    };
    assert!(m.starts_with("peer unreachable"), "{m}");
    assert_eq!(failure(ev::RDMA_CM_EVENT_ESTABLISHED, 0), None);
}
