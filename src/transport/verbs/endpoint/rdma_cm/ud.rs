//! `-R -c UD` on verbs: a UD queue pair is resolved through librdmacm's UDP port space
//! (`RDMA_PS_UDP`) rather than connected. The client's `rdma_connect` sends a SIDR_REQ whose private
//! data starts with its QPN (roceperf's dialect, [`ud_request_data`], as the soft transport's); the
//! server's `rdma_accept` answers with a SIDR_REP holding its QPN and rdma_cm's Q_Key, and the
//! client's `RDMA_CM_EVENT_ESTABLISHED` brings them with the address handle's attributes
//! (`rdma_ud_param`). Each side takes its queue pair to RTR and RTS and names the peer in every send
//! through an address handle; the server builds its handle from the requester's address (the
//! kernel gives it none), and has no ESTABLISHED of its own: it is resolved once it answered.
//!
//! Every queue pair of the UDP port space takes one Q_Key, `RDMA_UDP_QKEY` (the kernel refuses any
//! other in a SIDR_REP): ours are opened with it, and both sides check it.
//!
//! [`ud_request_data`]: crate::transport::cm::ud_request_data

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::slice;

use super::addr::{gid_ip, ip_of};
use super::{RdmaCm, VerbsEndpoint, os_err};
use crate::transport::cm::{
    CmEvent, CmPeer, CmQpParams, RDMA_UDP_QKEY, SidrStatus, sidr_refused, ud_request_parts,
};
use crate::transport::verbs::qp_attrs::{Datagram, LocalSide, QpPlan, Route, Rts};
use crate::transport::{Error, Gid, Result};
use rdma_mummy_sys as sys;

/// Why a UD queue pair could not be resolved through rdma_cm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UdCmError {
    /// The SIDR_REP names a Q_Key our queue pairs do not take.
    #[error(
        "the SIDR_REP of {peer} gives Q_Key {theirs:#x}, but this side's UD queue pairs take rdma_cm's {ours:#x}; the service at {peer} is not one of rdma_cm's UDP port space: run roceperf with -R -c UD there"
    )]
    QkeyMismatch {
        /// The server asked.
        peer: IpAddr,
        /// The Q_Key in its SIDR_REP.
        theirs: u32,
        /// Ours.
        ours: u32,
    },
    /// Our queue pairs were opened with another Q_Key than rdma_cm's.
    #[error(
        "-R -c UD needs UD queue pairs with rdma_cm's Q_Key {:#x}, but they were opened with {ours:#x}; open the endpoint with VerbsConfig::qkey = RDMA_UDP_QKEY (roceperf's binaries do)",
        RDMA_UDP_QKEY
    )]
    LocalQkey {
        /// The Q_Key they have.
        ours: u32,
    },
    /// A SIDR_REQ without our dialect's QPN: another rdma_cm application, not roceperf.
    #[error(
        "the SIDR_REQ from {peer} carries no queue pair number in its private data (roceperf's requests do, first); run roceperf with -R -c UD at {peer}, or without -R"
    )]
    NoQpn {
        /// The requester.
        peer: IpAddr,
    },
    /// The requester's address is of the other IP family than our GID.
    #[error(
        "the SIDR_REQ came from {peer}, but this side's GID {ours} is of the other IP family; give -x a GID of {peer}'s family (or --ipv6 on both sides)"
    )]
    Family {
        /// The requester.
        peer: IpAddr,
        /// Our GID.
        ours: Gid,
    },
}

impl From<UdCmError> for Error {
    fn from(e: UdCmError) -> Error {
        Error::Connection(e.to_string())
    }
}

/// Checks that our UD queue pairs take rdma_cm's Q_Key, the one every SIDR_REP names.
pub(super) fn check_qkey(ours: u32) -> std::result::Result<(), UdCmError> {
    if ours == RDMA_UDP_QKEY {
        Ok(())
    } else {
        Err(UdCmError::LocalQkey { ours })
    }
}

/// The address handle's route as the kernel resolved it for the client (source GID index, hop
/// limit, traffic class, service level, port).
pub(super) fn route_of(ah: &sys::ibv_ah_attr) -> Route {
    // SAFETY: ibv_gid is a union of byte views of the same 16 bytes.
    let dgid = unsafe { ah.grh.dgid.raw };
    Route {
        dgid: Gid(dgid),
        sgid_index: ah.grh.sgid_index,
        hop_limit: ah.grh.hop_limit,
        traffic_class: ah.grh.traffic_class,
        flow_label: ah.grh.flow_label,
        sl: ah.sl,
        port: ah.port_num,
    }
}

/// What the client's `RDMA_CM_EVENT_ESTABLISHED` resolved, having asked `asked`: where its sends go
/// and the peer, once the SIDR_REP's Q_Key is found to be `qkey`, ours.
pub(super) fn resolved(
    ud: &sys::rdma_ud_param,
    asked: IpAddr,
    qkey: u32,
    mtu: u32,
) -> std::result::Result<(Datagram, CmPeer), UdCmError> {
    if ud.qkey != qkey {
        return Err(UdCmError::QkeyMismatch {
            peer: asked,
            theirs: ud.qkey,
            ours: qkey,
        });
    }
    let route = route_of(&ud.ah_attr);
    let qpn = ud.qp_num & 0x00ff_ffff;
    let dest = Datagram {
        ah: route,
        remote_qpn: qpn,
        remote_qkey: ud.qkey,
    };
    Ok((dest, CmPeer::ud(gid_ip(route.dgid.0), qpn, mtu)))
}

/// Where the server's sends to the requester at `ip` (queue pair `qpn`) go: a GRH to the GID of
/// that address from ours, with rdma_cm's Q_Key `qkey`, which every queue pair of the port space takes.
/// `later`: a SIDR_REQ without a QPN is perftest's (librdmacm's carry none), whose QPN comes in a
/// first datagram ([`VerbsEndpoint::cm_ud_peer`](crate::transport::cm::CmEndpoint::cm_ud_peer)):
/// queue pair 0 until then, which this side does not send to.
pub(super) fn requester(
    local: &LocalSide,
    ip: IpAddr,
    qpn: u32,
    qkey: u32,
    later: bool,
) -> std::result::Result<(Datagram, CmPeer), UdCmError> {
    if qpn == 0 && !later {
        return Err(UdCmError::NoQpn { peer: ip });
    }
    if local.gid.is_ipv4_mapped() != ip.is_ipv4() {
        return Err(UdCmError::Family {
            peer: ip,
            ours: local.gid,
        });
    }
    let qpn = qpn & 0x00ff_ffff;
    let dest = Datagram {
        ah: Route {
            dgid: Gid::from_ip(ip),
            sgid_index: local.gid_index as u8,
            hop_limit: 0xff,
            traffic_class: local.traffic_class,
            flow_label: local.flow_label(0),
            sl: local.sl,
            port: local.port,
        },
        remote_qpn: qpn,
        remote_qkey: qkey,
    };
    Ok((dest, CmPeer::ud(ip, qpn, local.mtu)))
}

/// `RDMA_CM_EVENT_UNREACHABLE` on a UD id: a SIDR_REP that refused (its status, positive), or no
/// SIDR_REP at all (a negative errno: the SIDR_REQ timed out).
pub(super) fn unreachable(qp: usize, status: i32) -> CmEvent {
    match u8::try_from(status) {
        Ok(code) if code > 0 => sidr_refused(qp, SidrStatus::from_code(code)),
        _ => CmEvent::Unanswered {
            qp,
            detail: format!(
                "no SIDR_REP to our SIDR_REQ, status {status} ({})",
                io::Error::from_raw_os_error(status.abs())
            ),
        },
    }
}

impl RdmaCm {
    /// A SIDR_REQ reached our UDP port: the request, with its sender and the QPN its private data
    /// carries, waits for the application.
    pub(super) fn ud_request(&mut self, e: &sys::rdma_cm_event) {
        // SAFETY: a CONNECT_REQUEST on an id of the UDP port space carries rdma_ud_param.
        let ud = unsafe { e.param.ud };
        let data = if ud.private_data.is_null() {
            &[][..]
        } else {
            // SAFETY: librdmacm's copy of the private data, valid until the event is acknowledged.
            unsafe {
                slice::from_raw_parts(
                    ud.private_data.cast::<u8>(),
                    usize::from(ud.private_data_len),
                )
            }
        };
        let (peer_qpn, private) = ud_request_parts(data);
        // SAFETY: the request's new id is live; its route holds the requester's address (what
        // rdma_get_peer_addr reads), in a union as large as sockaddr_storage.
        let peer = unsafe { (*e.id).route.addr.dst_addr_union.dst_storage };
        let from = ip_of(&peer).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let req = self.next_req;
        self.next_req += 1;
        self.requests.push(super::Request {
            handle: req,
            id: e.id,
            from,
            qpn: peer_qpn,
            ud: true,
        });
        self.events.push_back(CmEvent::Request {
            req,
            from,
            peer_qpn,
            private_data: private.to_vec(),
        });
    }
}

impl VerbsEndpoint {
    /// The client's SIDR_REP came (`RDMA_CM_EVENT_ESTABLISHED` with `ud`): queue pair `qp` sends to
    /// the server at `asked` from now on.
    pub(super) fn ud_resolved(
        &mut self,
        qp: usize,
        ud: &sys::rdma_ud_param,
        asked: IpAddr,
    ) -> Result<()> {
        let (dest, peer) = resolved(ud, asked, self.cfg.qkey, self.setup.mtu)?;
        self.ud_point(qp, &dest)?;
        self.cm_mut()
            .events
            .push_back(CmEvent::Established { qp, peer });
        Ok(())
    }

    /// Answers request `id` from `ip` (its queue pair `peer_qpn`) with UD queue pair `qp`, which is
    /// ready to send to the requester before the SIDR_REP leaves (send_lat's server answers the
    /// first datagram at once).
    pub(super) fn ud_accept(
        &mut self,
        qp: usize,
        id: *mut sys::rdma_cm_id,
        ip: IpAddr,
        peer_qpn: u32,
        params: &CmQpParams,
    ) -> Result<()> {
        // perftest's dialect (its RC message queue pair at the end): its requester tells its QPN later.
        let later = self.cfg.rc_tail > 0;
        let (dest, peer) = requester(&self.local_side(), ip, peer_qpn, self.cfg.qkey, later)?;
        self.ud_point(qp, &dest)?;
        let mut cp = self.cm_conn_param(qp, params, &[]);
        // SAFETY: the request's id; `cp` outlives the call. On a UD id this sends the SIDR_REP with
        // `cp.qp_num` and rdma_cm's Q_Key.
        if unsafe { sys::rdma_accept(id, &mut cp) } != 0 {
            return Err(os_err("rdma_accept (SIDR_REP)"));
        }
        self.cm_mut()
            .events
            .push_back(CmEvent::Established { qp, peer });
        Ok(())
    }

    /// Resolved UD queue pair `qp` sends to the peer's queue pair `qpn` from now on (perftest's
    /// requester told it in its first datagram); the address handle, to the requester's address,
    /// stays.
    pub(super) fn ud_repoint(&mut self, qp: usize, qpn: u32) -> Result<()> {
        match self.qps.get_mut(qp).and_then(|q| q.dest.as_mut()) {
            Some(d) => {
                d.remote_qpn = qpn & 0x00ff_ffff;
                Ok(())
            }
            None => Err(Error::InvalidRequest(format!(
                "queue pair {qp} is not a UD queue pair resolved through the CM"
            ))),
        }
    }

    /// UD queue pair `qp` to RTR and RTS, its sends to `dest`.
    fn ud_point(&mut self, qp: usize, dest: &Datagram) -> Result<()> {
        if self.qps[qp].dest.is_some() {
            return Err(Error::InvalidRequest(format!(
                "UD queue pair {qp} was already resolved through the CM"
            )));
        }
        let plan = QpPlan {
            rtr: None,
            rts: Rts {
                sq_psn: self.qps[qp].psn & 0x00ff_ffff,
                retries: None,
            },
            datagram: Some(*dest),
        };
        self.connect_qp(qp, &plan)?;
        self.setup.path_mtu = Some(self.setup.mtu);
        self.connected = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ConnType;

    fn local(gid: Gid) -> LocalSide {
        LocalSide {
            gid,
            gid_index: 1,
            mtu: 1024,
            out_reads: 16,
            psns: vec![0x12],
            port: 1,
            sl: 0,
            traffic_class: 0,
            flow_labels: Vec::new(),
            timeout: 14,
            retry_cnt: 7,
            connection: ConnType::Ud,
        }
    }

    fn sidr_rep(qpn: u32, qkey: u32) -> sys::rdma_ud_param {
        // SAFETY: plain old data; all-zero is a valid start.
        let mut ud: sys::rdma_ud_param = unsafe { std::mem::zeroed() };
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 10, 9, 0, 1]);
        ud.ah_attr.grh.dgid = sys::ibv_gid { raw: gid };
        ud.ah_attr.grh.sgid_index = 1;
        ud.ah_attr.grh.hop_limit = 64;
        ud.ah_attr.is_global = 1;
        ud.ah_attr.port_num = 1;
        ud.qp_num = qpn;
        ud.qkey = qkey;
        ud
    }

    #[test]
    fn a_sidr_rep_becomes_the_address_handle_and_the_peer() {
        let asked: IpAddr = "10.9.0.1".parse().unwrap();
        let (dest, peer) = resolved(&sidr_rep(0x11, RDMA_UDP_QKEY), asked, RDMA_UDP_QKEY, 1024)
            .expect("rdma_cm's Q_Key");
        assert_eq!((dest.remote_qpn, dest.remote_qkey), (0x11, RDMA_UDP_QKEY));
        assert_eq!(dest.ah.dgid, Gid::from_ip(asked));
        assert_eq!(
            (dest.ah.sgid_index, dest.ah.hop_limit, dest.ah.port),
            (1, 64, 1),
            "the kernel's route, as resolved"
        );
        assert_eq!(peer, CmPeer::ud(asked, 0x11, 1024));
    }

    #[test]
    fn a_sidr_rep_with_another_qkey_is_refused_naming_the_peer() {
        let asked: IpAddr = "10.9.0.1".parse().unwrap();
        let e = resolved(&sidr_rep(0x11, 0x1111), asked, RDMA_UDP_QKEY, 1024).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("10.9.0.1") && m.contains("0x1111") && m.contains("0x1234567"),
            "{m}"
        );
        assert!(m.contains("run roceperf with -R -c UD"), "{m}");
        assert!(check_qkey(RDMA_UDP_QKEY).is_ok());
        let m = check_qkey(crate::params::DEFAULT_QKEY)
            .unwrap_err()
            .to_string();
        assert!(m.contains("0x1234567"), "{m}");
    }

    #[test]
    fn the_server_sends_to_the_requester_from_our_gid() {
        let ours = Gid::from_ip("10.9.0.2".parse().unwrap());
        let from: IpAddr = "10.9.0.1".parse().unwrap();
        let (dest, peer) =
            requester(&local(ours), from, 0x0100_0022, RDMA_UDP_QKEY, false).unwrap();
        assert_eq!(dest.ah.dgid, Gid::from_ip(from));
        assert_eq!(
            (
                dest.ah.sgid_index,
                dest.ah.hop_limit,
                dest.remote_qpn,
                dest.remote_qkey
            ),
            (1, 0xff, 0x22, RDMA_UDP_QKEY)
        );
        assert_eq!(
            (peer.ip, peer.qpn, peer.psn, peer.mtu),
            (from, 0x22, 0, 1024)
        );
        let m = requester(&local(ours), from, 0, RDMA_UDP_QKEY, false)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("no queue pair number") && m.contains("10.9.0.1"),
            "{m}"
        );
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(
            requester(&local(ours), v6, 0x22, RDMA_UDP_QKEY, false),
            Err(UdCmError::Family { peer: v6, ours })
        );
    }

    #[test]
    fn perftests_requester_without_a_qpn_is_resolved_to_queue_pair_0_until_it_tells_one() {
        let ours = Gid::from_ip("10.9.0.2".parse().unwrap());
        let from: IpAddr = "10.9.0.1".parse().unwrap();
        let (dest, peer) = requester(&local(ours), from, 0, RDMA_UDP_QKEY, true)
            .expect("perftest's SIDR_REQ names no QPN");
        assert_eq!((dest.ah.dgid, dest.remote_qpn), (Gid::from_ip(from), 0));
        assert_eq!((peer.ip, peer.qpn), (from, 0));
    }

    #[test]
    fn unreachable_tells_a_refusal_from_silence() {
        use crate::transport::cm::RejectReason;
        assert_eq!(
            unreachable(0, 1),
            CmEvent::Rejected {
                qp: 0,
                reason: RejectReason::InvalidServiceId
            },
            "nobody listens yet: the client asks again"
        );
        assert_eq!(
            unreachable(1, 2),
            CmEvent::Rejected {
                qp: 1,
                reason: RejectReason::ConsumerDefined
            }
        );
        let CmEvent::Unanswered { qp: 2, detail } = unreachable(2, -110) else {
            panic!()
        };
        assert!(
            detail.starts_with("no SIDR_REP to our SIDR_REQ"),
            "{detail}"
        );
    }
}
